"""Deferred traffic (`SimBackend.begin_deferred` / `end_deferred`): the ticks run between the two
calls get the same evidence, health history and cluster states as ticks run block by block, through
interventions between runs (rollouts, OOM kills, a crash loop, a leak, a drained node, scaling), and
the no-action reference run's driver uses it without changing a number."""

import pytest

from sremarathon_env import marathon as M
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim import backend as backend_mod
from tests.backends.sim.test_twin_blocks import OPS
from tests.backends.sim.test_twin_tape import EVENTS, _reference
from tests.backends.sim.twins import assert_same_twins

HIST = ("node", "edge", "path", "svc", "ready", "reason", "epoch_of")


def _history(sim):
    h = sim.history
    return {name: (getattr(h, name)[:, :h.n] if getattr(h, name).ndim == 3 else getattr(h, name)[:h.n]).tobytes()
            for name in HIST}, h.n, len(h.epochs)


def _run(deferred: bool, metrics: bool = False):
    sim = SimBackend("online-boutique", seed=7, metrics=metrics)
    evidence, k = [], 0
    if deferred:
        sim.begin_deferred()
    for stop in sorted(OPS) + [140]:
        got = sim.advance_to(stop * 15.0)
        assert len(got) == stop - k
        if deferred:
            assert got == [None] * (stop - k)
            # a live read between runs sees the live state (what fault injection reads)
            assert sim.service_health("frontend")["desired"] >= 1.0
        evidence += got
        k = stop
        if stop in OPS:
            OPS[stop](sim)
    if deferred:
        evidence = sim.end_deferred()
    return sim, evidence


def test_deferred_ticks_are_bit_identical():
    a, ev_a = _run(False)
    b, ev_b = _run(True)
    assert len(ev_a) == 140
    assert ev_a == ev_b
    assert sum(b.pod_ooms.values()) > 0            # the OOM path ran inside deferred runs
    assert _history(a) == _history(b)
    assert a.state_digest() == b.state_digest()
    # reads after the deferred runs answer from the computed history
    assert a.service_health("cartservice", at=600.0) == b.service_health("cartservice", at=600.0)
    assert a.serving_revisions("frontend", at=300.0) == b.serving_revisions("frontend", at=300.0)


def test_an_evidence_only_span_needs_a_metricless_twin():
    sim = SimBackend("online-boutique", seed=1)
    with pytest.raises(ValueError, match="without metrics"):
        sim.begin_deferred(evidence_only=True)


def test_a_twin_with_metrics_defers_to_the_same_numbers_and_store():
    backend_mod._TAPES.clear()
    a, ev_a = _run(False, metrics=True)
    b, ev_b = _run(True, metrics=True)
    assert not backend_mod._TAPES   # (a twin with metrics records no tape)
    assert ev_a == ev_b and len(ev_a) == 140
    assert sum(b.pod_ooms.values()) > 0
    assert_same_twins(a, b)
    assert a.state_digest() == b.state_digest()


def test_a_twin_with_metrics_that_follows_a_tape_defers_to_the_same_numbers():
    backend_mod._TAPES.clear()
    _reference(seed=6)   # the tape a twin of seed 6 follows

    def scored(deferred: bool):
        sim = SimBackend("online-boutique", seed=6)
        evidence = []
        for k0 in range(0, 60, 8):   # invocation intervals of 8 ticks, the events inside them
            if deferred:
                sim.begin_deferred()
            for k in range(k0 + 2, k0 + 10, 2):
                got = sim.advance_to(k * 15.0)
                evidence += [] if deferred else got
                if k in EVENTS:
                    EVENTS[k](sim)
            if deferred:
                evidence += sim.end_deferred()
        return sim, evidence

    a, ev_a = scored(False)
    b, ev_b = scored(True)
    assert b._follow is not None   # (followed the tape: not vacuous)
    assert ev_a == ev_b
    assert_same_twins(a, b)


def test_end_without_ticks_is_empty():
    sim = SimBackend("online-boutique", seed=1, metrics=False)
    sim.begin_deferred()
    assert sim.end_deferred() == []
    assert len(sim.advance_to(30.0)) == 2          # back to block-by-block evidence


@pytest.mark.parametrize("app", ["online-boutique", "astronomy-shop"])
def test_reference_run_driver_unchanged_by_deferral(app):
    cfg = M.MarathonConfig(app=app, seed=2, injection_s=1800, observation_s=600)

    def run(deferred: bool):
        backend = M._make_backend(cfg, metrics=False)
        drv = M._Driver(cfg, backend, M._schedule(cfg.schedule_key()), checks=False)
        if not deferred:   # the block-by-block path the driver takes when checks are on
            drv.checks, drv._checks = True, lambda view: {}
        n = int(round(cfg.horizon_s / cfg.tick_s))
        drv.plan_until(n * cfg.tick_s)
        out = [drv.tick(k * cfg.tick_s) for k in range(1, n + 1)]
        return backend, out

    a, out_a = run(False)
    b, out_b = run(True)
    assert [o[0] for o in out_a] == [o[0] for o in out_b]
    assert [o[2] for o in out_a] == [o[2] for o in out_b]
    assert sum(1 for o in out_b if o[2]) > 3       # events happened between deferred runs
    # the driver's deferred span keeps no health history (evidence_only: it reads entry evidence alone);
    # the dynamics are the same (histories of full deferred spans: the tests above)
    assert b.history.n <= 1 and a.history.n == len(out_a) + 1
    assert a.state_digest() == b.state_digest() and a.pod_ooms == b.pod_ooms
    assert M.reference_evidence.__wrapped__(cfg)["total"] == [o[0].total for o in out_a]


def test_an_evidence_only_span_gives_the_same_evidence_and_dynamics(monkeypatch):
    full, ev_full = _run(True)
    snaps = [0]
    fields = [0]
    orig, orig_fields = SimBackend._snapshot, SimBackend._state_fields

    def snapshot(self):
        snaps[0] += 1
        return orig(self)

    def state_fields(self):
        fields[0] += 1
        return orig_fields(self)

    monkeypatch.setattr(SimBackend, "begin_deferred",
                        lambda self, evidence_only=True, _b=SimBackend.begin_deferred: _b(self, evidence_only))
    monkeypatch.setattr(SimBackend, "_snapshot", snapshot)
    monkeypatch.setattr(SimBackend, "_state_fields", state_fields)
    lean, ev_lean = _run(True)
    monkeypatch.undo()
    assert ev_lean == ev_full and len(ev_lean) == 140
    assert sum(lean.pod_ooms.values()) > 0 and lean.pod_ooms == full.pod_ooms
    assert lean.state_digest() == full.state_digest()
    assert snaps[0] == 2                             # the constructor's and one at the span's end
    assert fields[0] == 2                            # (the state fields too: desired replicas, restarts)
    assert lean.history.n <= 1 and len(lean.history.epochs) < len(full.history.epochs)
    # after the span the twin runs on as the full one does, health reads included
    for sim in (full, lean):
        sim.scale("frontend", 3)
    assert full.advance_to(2400.0) == lean.advance_to(2400.0)
    for t in (2200.0, 2400.0):
        for s in ("frontend", "cartservice", "adservice"):
            assert full.service_health(s, at=t) == lean.service_health(s, at=t)
        assert full.serving_revisions("frontend", at=t) == lean.serving_revisions("frontend", at=t)
