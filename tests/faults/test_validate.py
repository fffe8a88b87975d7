"""Validation in the twin: every fault shows, reverts and is repairable; revert restores state exactly."""

import copy

import pytest

from faults.catalogue import load_catalogue
from faults.effects import Effect
from faults.realise import inject, probe_ok, revert
from faults.validate import summary, twin_factory, validate

sim = pytest.importorskip("sremarathon_env.backends.sim")


def _twin_ends_in_container_chaos_on_restart() -> bool:
    b = sim.SimBackend("online-boutique", 0)
    b.advance_to(60)
    base = b.service_health("productcatalogservice")["p95_ms"]
    b.apply_effect(Effect(kind="latency", service="productcatalogservice", ms=900, until_restart=True))
    b.restart("productcatalogservice")
    b.advance_to(240)
    return b.service_health("productcatalogservice")["p95_ms"] < base + 300


@pytest.mark.slow
def test_whole_online_boutique_catalogue_validates():
    outs, secs = validate("online-boutique")
    failed = [(o.fault_id, o.detail) for o in outs if not o.ok]
    restart_only = [f for f in failed if "restart: did not heal" in f[1]]
    if failed and len(restart_only) == len(failed) and not _twin_ends_in_container_chaos_on_restart():
        pytest.xfail(f"{len(failed)} direct faults wait for the twin to honour Effect.until_restart")
    assert not failed, failed[:20]
    assert secs < 60
    assert sum(n for _, n in summary(outs).values()) == len(load_catalogue("online-boutique"))


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
