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


def _flood_variant(factor: float, replicas: int):
    from faults.effects import Effect
    from faults.model import Realisation, RepairOption

    f = next(x for x in load_catalogue("astronomy-shop") if x.id == "as-load-frontend-proxy-all-flood")
    return f.model_copy(update={
        "realisation": Realisation(kind="effects", effects=[Effect(kind="load_factor", path=None, factor=factor)]),
        "repairs": [RepairOption(tool="scale", args={"service": "frontend", "replicas": replicas})]})


def test_validation_repairs_saturation_faults_at_peak_base_load():
    """The catalogue before the capacity fix (45x flood, `scale frontend 6`) healed at validation's quiet
    load but not at a marathon's diurnal crest; validation now repairs at that peak and must reject it,
    while the same flood with enough replicas passes."""
    outs, _ = validate("astronomy-shop", [_flood_variant(45.0, 6), _flood_variant(45.0, 10)])
    assert not outs[0].ok and "peak base load" in outs[0].detail
    assert outs[1].ok, outs[1].detail


def test_load_fault_repairs_keep_the_bottleneck_under_threshold_with_headroom_at_peak_load():
    """Every load-surge/flood repair, in a twin at the marathon's peak base load (constant, no jitter),
    brings the bottleneck's cpu_util under the probe threshold times the catalogue's headroom."""
    from apps import APP_NAMES, load_app
    from faults.catalogue import _templates, peak_load_factor
    from faults.effects import Effect
    from faults.realise import apply_repair

    headroom = {t["id"]: t["params"]["headroom"] for t in _templates() if t["id"] in ("load-surge", "flood")}
    loads = [f for a in APP_NAMES for f in load_catalogue(a) if f.template in headroom]
    assert {f.app for f in loads} == set(APP_NAMES)
    for f in loads:
        b = sim.SimBackend(f.app, 0, metrics=False, noise_load=False)
        b.advance_to(8 * b.tick_s)
        b.apply_effect(Effect(kind="load_factor", path=None, factor=peak_load_factor(load_app(f.app))))
        inject(f, b)
        b.advance_to(b.now + 2 * b.tick_s)
        assert not probe_ok(f, b, {}), f.id   # the surge does saturate its tier
        assert apply_repair(f.repairs[0], f, b).ok
        b.advance_to(b.now + 16 * b.tick_s)
        util = b.service_health(f.probe.service)["cpu_util"]
        assert util <= f.probe.threshold * headroom[f.template], (f.id, util)
