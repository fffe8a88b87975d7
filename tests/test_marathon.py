"""The run loop without Gymnasium: record order, determinism, the oracle door, crash safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scoring import score, score_bundle
from sremarathon_env.bundle import read_bundle, verify_bundle
from sremarathon_env.marathon import Marathon, MarathonConfig

SHORT = dict(app="online-boutique", injection_s=600, observation_s=240)


def _run(calls_at: dict[int, list] | None = None, **kw) -> Marathon:
    m = Marathon(MarathonConfig(**{**SHORT, **kw}))
    m.start()
    while True:
        m.invoke((calls_at or {}).get(m.invocation_index, []))
        if not m.advance_to_next_invocation():
            break
    return m


def test_record_order_and_clock():
    m = _run(seed=1)
    report = m.finish()
    recs = m.recorder.records
    assert [r.kind for r in recs[:3]] == ["run", "schedule", "reference"]
    assert recs[-1].kind == "end"
    ts = [r.t for r in recs]
    assert ts == sorted(ts)
    ticks = [r for r in recs if r.kind == "tick"]
    assert len(ticks) == (600 + 240) // 15
    assert [r.t for r in ticks] == [15.0 * k for k in range(1, len(ticks) + 1)]
    invs = [r for r in recs if r.kind == "invocation"]
    assert [r.t for r in invs] == [120.0 * k for k in range(1, 8)]
    # at equal t: the tick comes before the alerts and the invocation
    for i, r in enumerate(recs):
        if r.kind == "alert":
            prev_tick = max(j for j in range(i) if recs[j].kind == "tick")
            assert recs[prev_tick].t == r.t
    assert report.marathon_score == score(recs).marathon_score == m.score


def test_same_config_same_calls_same_digest_and_seeds_differ():
    calls = {1: [{"tool": "get_alerts", "args": {}}, {"tool": "kubectl_get", "args": {"kind": "pods"}}],
             3: [{"tool": "query_metrics", "args": {"query": "sum(rate(istio_requests_total[5m]))"}}]}
    a, b = _run(calls, seed=2), _run(calls, seed=2)
    assert a.finish().digest == b.finish().digest
    c = _run(calls, seed=3)
    assert c.finish().digest != a.recorder.digest


def test_observation_never_shows_the_schedule():
    m = Marathon(MarathonConfig(**SHORT, seed=0))
    obs = m.start()
    assert set(obs) == {"t", "invocation", "budget_s", "alerts", "incidents", "workspace", "last_results"}
    text = repr(obs)
    for lf in m.driver.live:
        assert lf.fault.id not in text


def test_oracle_door_reports_injected_faults_only():
    m = Marathon(MarathonConfig(**SHORT, seed=0))
    m.start()
    truth = m.oracle_ground_truth_TEST_ONLY()
    assert truth and all(t["start_s"] <= m.now for t in truth)
    assert all(t["fault"].culprits for t in truth)


def test_localising_and_repairing_through_the_tools_earns_credit():
    """Report the injected fault with its exact culprits and artifact, apply its first repair: the scorer
    must credit at least correlation and localisation for it."""
    m = Marathon(MarathonConfig(**SHORT, seed=0, noise=False))
    m.start()
    credited = set()
    for _ in range(m.n_invocations):
        alerts = [a for a in m.observation()["alerts"] if a["state"] == "firing"]
        for gt in m.oracle_ground_truth_TEST_ONLY():
            f = gt["fault"]
            if gt["ended"] or gt["instance_id"] in credited:
                continue
            fps = [a["fingerprint"] for a in alerts
                   if set(f.scope) & {a["labels"].get("service"), a["labels"].get("node")}]
            if not fps:
                continue
            r = m.call("report_incident", {"title": f.id, "alert_fingerprints": fps,
                                           "culprit_services": list(f.culprits), "artifact": f.artifact.canonical,
                                           "summary": "found"})
            assert r.ok, r.error
            credited.add(gt["instance_id"])
        if not m.advance_to_next_invocation():
            break
    report = m.finish()
    assert credited
    localised = [fs for fs in report.faults if fs.localised_t is not None]
    assert localised, "an exact report must localise"
    # finish() reports from the incremental scorer: the batch scorer's report over the sealed bundle
    batch = score(m.recorder.records, complete=True)
    batch.digest = m.recorder.digest
    assert report.model_dump() == batch.model_dump()
    assert m.finish().model_dump() == batch.model_dump()   # again, after sealing: the same report


@pytest.mark.parametrize("policy", ["random", "runbook"])
def test_finish_reports_what_the_batch_scorer_reports(policy):
    """Marathons with actions (incidents, repairs, refused or forbidden calls): the report of `Marathon.finish`
    (the incremental scorer, fed every record) is the batch scorer's over the sealed bundle, field for field."""
    from baselines import make_policy

    m = Marathon(MarathonConfig(**SHORT, seed=4))
    pol = make_policy(policy)
    m.start()
    pol.reset(m.app, 4)
    while True:
        m.end_invocation(usage=pol.act(m))
        if not m.advance_to_next_invocation():
            break
    report = m.finish()
    batch = score(m.recorder.records, complete=True)
    batch.digest = m.recorder.digest
    assert report.model_dump() == batch.model_dump()
    assert {r.kind for r in m.recorder.records} >= {"incident", "action"} and report.stages_total > 0


@pytest.mark.slow
def test_sigkill_mid_marathon_leaves_a_verifiable_incomplete_prefix(tmp_path: Path):
    out = tmp_path / "bundle"
    code = (
        "from sremarathon_env.marathon import Marathon, MarathonConfig\n"
        f"m = Marathon(MarathonConfig(app='online-boutique', seed=4, bundle_dir={str(out)!r}))\n"
        "m.start()\n"
        "print('started', flush=True)\n"
        "while m.advance_to_next_invocation():\n"
        "    m.invoke([{'tool': 'get_alerts', 'args': {}}])\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert proc.stdout.readline().strip() == "started"
    records = out / "records.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not records.exists() or records.stat().st_size < 20_000):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    report = verify_bundle(out)
    assert report.ok, report
    b = read_bundle(out)
    assert b.complete is False and len(b.records) > 3
    partial = score_bundle(out)
    assert partial.complete is False


def test_change_driven_faults_enter_through_the_build_pipeline():
    """The run loop injects source changes through BuildPipeline.build_change: a change that breaks the
    service's unit tests is rejected and the fault stays unrealised, with the pipeline's verdict."""
    from apps import load_app
    from faults.catalogue import load_catalogue
    from faults.realise import inject
    from sremarathon_env.backends.sim import SimBackend
    from sremarathon_env.pipeline import BuildPipeline

    app = load_app("online-boutique")
    fault = next(f for f in load_catalogue(app.name) if f.realisation.kind == "deploy" and f.realisation.files)
    backend = SimBackend(app, 0)
    pipeline = BuildPipeline(app)
    calls = []

    def build(service, files):
        calls.append(service)
        return pipeline.build_change(backend, service, files)

    h = inject(fault, backend, build=build)
    assert h.ok and calls == [fault.realisation.service]

    def broken(service, files):  # the same change plus a deleted handler file: the unit tests must fail
        tree = pipeline.current_tree(backend, service)
        gone = {p: "" for p in tree if "handler" in p}
        return pipeline.build_change(backend, service, {**files, **gone})

    h2 = inject(fault, SimBackend(app, 0), build=broken)
    assert not h2.ok and "build rejected" in h2.message


def test_a_dropped_marathons_driver_and_fault_handles_are_freed_without_the_cyclic_collector():
    """The driver keeps no closure over itself (its build hook is a method): once a marathon is dropped, its driver
    and the faults' handles go at once (reference counting), not at the next full collection."""
    import weakref

    from tests.collector import collector_off

    m = _run()
    assert any(lf.handle is not None for lf in m.driver.live)
    refs = [weakref.ref(m.driver)] + [weakref.ref(lf) for lf in m.driver.live]
    with collector_off():
        del m
        assert all(r() is None for r in refs)


@pytest.mark.parametrize("app,policy", [("online-boutique", "oracle"), ("astronomy-shop", "random")])
def test_the_scored_twin_following_the_reference_runs_tape_changes_no_bundle(app, policy, monkeypatch):
    """The scored twin takes the no-action reference run's taped numbers while its state-changing calls
    equal the reference run's (`SimBackend._note`): a run with the tapes must give the very bundle a run
    without them gives, also for policies that intervene (the twin then leaves the tape)."""
    from baselines.runner import run_marathon
    from sremarathon_env import marathon as marathon_mod
    from sremarathon_env.backends.sim import backend as backend_mod

    def run():
        marathon_mod.reference_evidence.cache_clear()
        backend_mod._TAPES.clear()
        report, _ = run_marathon(app, 17, policy, injection_s=900, observation_s=300)
        return report.digest, report.marathon_score

    with_tape = run()
    followed = []
    orig = backend_mod.SimBackend._followed
    monkeypatch.setattr(backend_mod.SimBackend, "_followed", lambda self: followed.append(1) and None)
    without = run()
    monkeypatch.setattr(backend_mod.SimBackend, "_followed", orig)
    assert followed, "the scored twin looked for a tape"
    assert with_tape == without


def test_config_refuses_unknown_app_and_backend_at_construction():
    """A bad app or backend is refused when the config (or the env) is made, not at the first reset."""
    import gymnasium as gym
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="unknown app 'bogus'; available: online-boutique"):
        MarathonConfig(app="bogus")
    with pytest.raises(ValidationError, match="unknown backend 'k8s'"):
        MarathonConfig(backend="k8s")
    with pytest.raises(ValidationError, match="unknown backend 'bogus'"):
        gym.make("SREMarathon/OnlineBoutique-v0", backend="bogus")
    assert MarathonConfig(backend="kubernetes").backend == "live"   # the product's name for the live backend
    assert MarathonConfig(backend="sim").backend == "sim"


class _LoopDriver:
    """The definitions the driver's event bookkeeping is held to: every fault visited in `live` order each time
    (its injection if its start is due and it is not injected, then its end if due and it is injected and not
    ended), the active list rebuilt from all faults, the next event the minimum over every pending time."""

    @staticmethod
    def apply_events(drv, t: float) -> list[dict]:
        events: list[dict] = []
        for lf in drv.live:   # every fault, each through the driver's own per-fault step
            drv._fault_step(lf, t, events)
        drv._noise_step(t, events)
        drv._active = [lf for lf in drv.live if lf.handle is not None and not lf.done]
        return events

    @staticmethod
    def next_event_k(drv) -> int:
        import math

        times = [lf.start_s for lf in drv.live if lf.handle is None]
        times += [lf.end_s for lf in drv._active]
        if drv.noise_pending:
            times.append(drv.noise_pending[0].start_s)
        times += [ev.end_s for ev, _ in drv.noise_active]
        if not times:
            return 1 << 40
        return int(math.ceil(min(times) / drv.cfg.tick_s - 1e-9))


@pytest.mark.parametrize("app,seed", [("online-boutique", 5), ("train-ticket", 1), ("astronomy-shop", 8)])
def test_driver_event_bookkeeping_equals_the_loop_over_every_fault(app, seed, monkeypatch):
    """`_Driver._apply_events` visits only the faults with something due and `_next_event_k` reads the earliest
    pending times from the start-ordered list and the active faults: both held to `_LoopDriver` (events, their
    order, the active faults, the next event tick, the twin's state and evidence at every tick) on schedules with
    tied start times added (faults sharing a start, a fault starting when another ends)."""
    from faults.orchestrator import ScheduledFault
    from sremarathon_env import marathon as M

    cfg = MarathonConfig(app=app, seed=seed, injection_s=1800, observation_s=600)
    sched = M._schedule(cfg.schedule_key())
    extra = []
    for i, sf in enumerate(sched.faults[:6]):   # ties: same start as another fault, start at another's end
        other = sched.faults[-1 - i]
        start = sf.start_s if i % 2 == 0 else sf.end_s
        extra.append(ScheduledFault(instance_id=f"X{i}", fault_id=other.fault_id, start_s=start,
                                    end_s=start + 240, category=other.category, target=other.target))
    sched = sched.model_copy(update={"faults": [*sched.faults, *extra]})
    n = int(cfg.horizon_s / cfg.tick_s)
    runs = []
    for loop in (False, True):
        if loop:
            monkeypatch.setattr(M._Driver, "_apply_events", _LoopDriver.apply_events)
            monkeypatch.setattr(M._Driver, "_next_event_k", _LoopDriver.next_event_k)
        backend = M._make_backend(cfg, metrics=False)
        drv = M._Driver(cfg, backend, sched, checks=False)
        out = []
        for k in range(1, n + 1):
            ev, _, events = drv.tick(k * cfg.tick_s)   # one tick at a time: events, active list, next event each tick
            out.append(((ev.t, ev.total, ev.failed, ev.slow, ev.degraded), events,
                        [lf.instance_id for lf in drv._active], drv._next_event_k()))
        runs.append((out, backend.state_digest()))
    assert sum(len(o[1]) for o in runs[0][0]) > 20
    assert runs[0] == runs[1]
