"""Validation in the twin: every fault shows, reverts and is repairable; revert restores state exactly."""

import pytest

from faults.catalogue import load_catalogue
from faults.realise import inject, probe_ok, revert
from faults.validate import summary, twin_factory, validate

sim = pytest.importorskip("sremarathon_env.backends.sim")


@pytest.mark.slow
def test_sremarathon_faults_validate_passes_for_the_whole_catalogue(capsys):
    """`sremarathon faults validate` over all three apps, as CI runs it: every fault shows, reverts and
    is repairable, and the run stays in seconds (CPU budget: a regression to minutes fails here)."""
    import time

    from apps import APP_NAMES
    from sremarathon_env.cli import main

    t0 = time.process_time()
    rc = main(["faults", "validate"])
    cpu = time.process_time() - t0
    out = capsys.readouterr().out
    assert rc == 0, out[-3000:]
    n = sum(len(load_catalogue(a)) for a in APP_NAMES)
    assert f"{n}/{n} passed" in out
    assert cpu < 150, f"whole-catalogue validation took {cpu:.0f} s CPU"


def test_validation_reports_a_broken_fault():
    f = next(f for f in load_catalogue("online-boutique") if f.template == "edge-partition")
    # a partition of 0 % shows nothing: the validator must say so
    weak = f.model_copy(update={"realisation": f.realisation.model_copy(update={"effects": [
        f.realisation.effects[0].model_copy(update={"rate": 0.0})]})})
    outs, _ = validate("online-boutique", [weak])
    assert not outs[0].ok and "no symptom" in outs[0].detail


SAMPLE = [
    "ob-config-frontend-wrong-address-cart-service-addr",
    "ob-code-cart-deadline-sign",
    "ob-config-checkoutservice-timeout-paymentservice",
    "ob-deployment-cartservice-scale-zero",
    "ob-resource-frontend-low-memory-limit",
    "ob-node-node-b1-down",
    "ob-network-frontend-currencyservice-partition",
    "ob-deployment-productcatalogservice-bad-image",
]


@pytest.mark.parametrize("fault_id", SAMPLE)
def test_revert_restores_the_twin_state_exactly(fault_id):
    f = next(x for x in load_catalogue("online-boutique") if x.id == fault_id)
    fresh = twin_factory("online-boutique", 0)
    faulted, clean = fresh(), fresh()
    h = inject(f, faulted)
    assert h.ok, h.message
    memo: dict = {}
    seen_bad = False
    for _ in range(f.probe.within_ticks):
        faulted.advance_to(faulted.now + faulted.tick_s)
        seen_bad |= not probe_ok(f, faulted, memo, h)
    assert seen_bad
    assert faulted.state_digest() != clean.state_digest() or f.realisation.kind == "effects"
    revert(h, faulted)
    settle = faulted.now + 40 * faulted.tick_s
    faulted.advance_to(settle)
    clean.advance_to(settle)
    assert faulted.state_digest() == clean.state_digest()


def test_validation_checks_every_repair_option_not_just_one():
    """A restart does not outlive a memory hog that outgrows the limit: declared after the working
    set_resources option it must still fail validation (options are alternatives, each must heal)."""
    from faults.model import RepairOption

    f = next(f for f in load_catalogue("online-boutique") if f.id == "ob-resource-cartservice-memory-oom")
    assert [o.tool for o in f.repairs] == ["set_resources"]
    outs, _ = validate("online-boutique", [f])
    assert outs[0].ok, outs[0].detail
    both = f.model_copy(update={"repairs": [*f.repairs, RepairOption(tool="restart", args={"service": "cartservice"})]})
    outs, _ = validate("online-boutique", [both])
    assert not outs[0].ok and "restart: did not heal" in outs[0].detail and outs[0].repaired_by == "set_resources"


def test_load_faults_have_one_sufficient_repair():
    from apps import APP_NAMES

    loads = [f for a in APP_NAMES for f in load_catalogue(a) if f.category == "load" and f.template != "flag"]
    assert loads and all(len(f.repairs) == 1 and f.repairs[0].tool == "scale" for f in loads)
    assert "ob-load-frontend-all-flood" in {f.id for f in loads}
