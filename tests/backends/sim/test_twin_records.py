"""A twin that keeps no event or log records (``records=False``: the run loop's no-action reference run, read for
nothing but its entry evidence) runs the same dynamics and gives the same evidence and the same tape as a twin that
keeps them, bit for bit; only the records are missing, and the reads they serve refuse. The run loop's evidence-only
driver path (`_Driver.evidence`) gives what its per-tick path gives."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sremarathon_env import marathon as M
from sremarathon_env.backends.sim import backend as backend_mod


@pytest.fixture(autouse=True)
def _own_tapes():
    """The tapes this module's reference runs leave are dropped after each test (other tests expect none of theirs)."""
    before = dict(backend_mod._TAPES)
    yield
    backend_mod._TAPES.clear()
    backend_mod._TAPES.update(before)


def assert_same(a, b, path: str = "") -> None:
    """``a`` and ``b`` hold the same values: arrays bit for bit (dtype and shape too; NaN equals NaN), containers
    element by element, objects field by field, anything else by ``==`` (floats: NaN equals NaN)."""
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert a.tobytes() == b.tobytes(), path   # (bit for bit: -0.0 and NaN payloads included)
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert a == b or (a != a and b != b), path
    elif dataclasses.is_dataclass(a) or hasattr(a, "__dict__") and not isinstance(a, type):
        fa = vars(a) if hasattr(a, "__dict__") else {f.name: getattr(a, f.name) for f in dataclasses.fields(a)}
        fb = vars(b) if hasattr(b, "__dict__") else {f.name: getattr(b, f.name) for f in dataclasses.fields(b)}
        assert_same(fa, fb, path)
    else:
        assert a == b, path


def assert_same_tapes(a: "backend_mod._Tape", b: "backend_mod._Tape") -> None:
    """Two reference runs' tapes hold the same outputs, state refreshes, runs, placements, deploys and draws."""
    for name in ("ticks", "refresh", "epochs", "runs", "picks", "deploys", "draws"):
        assert_same(getattr(a, name), getattr(b, name), name)


def _cfg(app: str, seed: int) -> M.MarathonConfig:
    return M.MarathonConfig(app=app, seed=seed, injection_s=1800, observation_s=600)


def _reference(cfg: M.MarathonConfig, records: bool, per_tick: bool = False):
    """A reference run (the twin, its evidence per tick, the tape it left): through `_Driver.evidence`, or
    (``per_tick``) through the driver's per-tick results as the run loop's reference run took them before."""
    backend = M._make_backend(cfg, metrics=False, records=records)
    drv = M._Driver(cfg, backend, M._schedule(cfg.schedule_key()), checks=False)
    n = int(round(cfg.horizon_s / cfg.tick_s))
    if per_tick:
        drv.plan_until(n * cfg.tick_s)
        evidence = [drv.tick(k * cfg.tick_s)[0] for k in range(1, n + 1)]
    else:
        evidence = drv.evidence(n)
    tape = backend_mod._TAPES[backend._tape_key()]   # (the latest run of its key: this one)
    return backend, drv, evidence, tape


def _dynamics(sim) -> tuple:
    c = sim.cluster
    pods = [(p.name, p.rs.id, p.node, p.phase, p.cstate, p.reason, p.ready, p.restarts, p.started_t, p.ready_t,
             p.next_t, p.deleted, p.backoff_s) for p in c.pods]
    return (sim.state_digest(), sim.pod_ooms, pods, sorted(c._heap), sim._calls, sim._tick, sim.registry,
            [(rs.id, rs.name, rs.revision, rs.replicas, rs.effects) for rs in c.rs_by_id])


@pytest.mark.parametrize("app,seed", [("online-boutique", 3), ("train-ticket", 5)])
def test_a_twin_without_records_runs_the_same_as_one_with_them(app, seed):
    cfg = _cfg(app, seed)
    full, _, ev_full, tape_full = _reference(cfg, records=True)
    quiet, _, ev_quiet, tape_quiet = _reference(cfg, records=False)
    assert ev_quiet == ev_full
    assert _dynamics(quiet) == _dynamics(full)
    assert_same_tapes(tape_quiet, tape_full)
    # the records alone are missing (and the run made plenty of them: the test is not vacuous)
    assert len(full.cluster.events) > 100 and len(full.cluster.lifecycle) > 100 and full.sig_timeline
    assert sum(full.pod_ooms.values()) > 0 and len(full.cluster.pods) > 30
    assert quiet.cluster.events == [] and quiet.cluster.lifecycle == [] and quiet.sig_timeline == []
    with pytest.raises(RuntimeError, match="records=False"):
        quiet.events(0.0, cfg.horizon_s)
    with pytest.raises(RuntimeError, match="records=False"):
        quiet.logs("frontend", 0.0, cfg.horizon_s)
    assert full.events(0.0, cfg.horizon_s) and full.logs(app_service(full), 0.0, cfg.horizon_s, limit=5)


def app_service(sim) -> str:
    return sim.cluster.svc_names[0]


def test_the_evidence_only_driver_path_gives_the_per_tick_results():
    """`_Driver.evidence` (no per-tick results, no event records, no repaired-at-end read) against the driver's
    per-tick path on a twin of the same seed: the same evidence, the same twin at the end, the same faults realised
    and ended, the same tape."""
    cfg = _cfg("online-boutique", 7)
    a, drv_a, ev_a, tape_a = _reference(cfg, records=True, per_tick=True)
    b, drv_b, ev_b, tape_b = _reference(cfg, records=True)
    assert ev_b == ev_a and len(ev_b) == int(round(cfg.horizon_s / cfg.tick_s))
    assert _dynamics(b) == _dynamics(a)
    assert a.cluster.events == b.cluster.events and a.cluster.lifecycle == b.cluster.lifecycle
    assert [(lf.handle is None, lf.done, lf.handle and lf.handle.ok) for lf in drv_b.live] == \
        [(lf.handle is None, lf.done, lf.handle and lf.handle.ok) for lf in drv_a.live]
    assert sum(lf.done for lf in drv_b.live) > 5 and drv_b.noise_pending == [] and drv_b.noise_active == []
    assert_same_tapes(tape_b, tape_a)
    assert M.reference_evidence.__wrapped__(cfg) == {
        "t": [e.t for e in ev_a], "total": [e.total for e in ev_a], "failed": [e.failed for e in ev_a],
        "slow": [e.slow for e in ev_a], "degraded": [e.degraded for e in ev_a]}


def test_the_evidence_only_driver_path_is_for_a_fresh_driver_without_checks():
    cfg = M.MarathonConfig(app="online-boutique", seed=2, injection_s=600, observation_s=0)
    sched = M._schedule(cfg.schedule_key())
    with pytest.raises(ValueError):   # checks on
        M._Driver(cfg, M._make_backend(cfg, metrics=False), sched).evidence(4)
    drv = M._Driver(cfg, M._make_backend(cfg, metrics=False), sched, checks=False)
    drv.plan_until(8 * cfg.tick_s)
    with pytest.raises(ValueError):   # planned beyond
        drv.evidence(4)
    drv = M._Driver(cfg, M._make_backend(cfg, metrics=False), sched, checks=False)
    drv.tick(cfg.tick_s)
    with pytest.raises(ValueError):   # not fresh
        drv.evidence(4)
    # a twin with metrics (no evidence-only span): tick by tick, the same evidence
    metric = M._Driver(cfg, M._make_backend(cfg, metrics=True), sched, checks=False).evidence(40)
    assert metric == M._Driver(cfg, M._make_backend(cfg, metrics=False), sched, checks=False).evidence(40)
