"""The scored run in deferred spans (`marathon._Driver._run_span`) records exactly what the block-by-block run
(`_Driver.tick`, ``marathon.SPANS = False``) records: every record's hash, for no-op and intervening runs of the
three apps, with scale and load-factor faults (whose events end a span) among them, and the RL view's episodes."""

import numpy as np
import pytest

from sremarathon_env import marathon as M
from sremarathon_env.backends.sim import backend as B


def _marathon(app, seed, intervene):
    m = M.Marathon(M.MarathonConfig(app=app, seed=seed, reference_run=False, injection_s=2400, observation_s=600))
    m.start(observe=False)
    rng = np.random.default_rng(seed)
    while True:
        if intervene and rng.random() < 0.7:
            s = m.app.service_names[int(rng.integers(len(m.app.service_names)))]
            inc = m.call("report_incident", {"title": "t", "alert_fingerprints": [], "culprit_services": [s],
                                             "artifact": s, "summary": "s"})
            tool = ["restart", "scale", "rollback", "set_config", "get_topology"][int(rng.integers(5))]
            args = {"service": s, "incident_id": inc.result["incident"]["id"]}
            if tool == "scale":
                args["replicas"] = int(rng.integers(0, 4))
            elif tool == "rollback":
                args["to_revision"] = 1
            elif tool == "set_config":
                args = {"target": s, "key": "LOG_LEVEL", "value": "debug", "incident_id": args["incident_id"]}
            elif tool == "get_topology":
                args = {}
            m.call(tool, args)
        m.end_invocation()
        if not m.advance_to_next_invocation():
            break
    report = m.finish()
    return [r.hash for r in m.recorder.records], report.digest


def _both(monkeypatch, fn):
    monkeypatch.setattr(M, "SPANS", False)
    want = fn()
    monkeypatch.setattr(M, "SPANS", True)
    settles = []
    orig = B.SimBackend._settle

    def settle(self, runs):
        if self.metrics:
            settles.append(len(runs))
        return orig(self, runs)

    monkeypatch.setattr(B.SimBackend, "_settle", settle)
    got = fn()
    return want, got, settles


@pytest.mark.parametrize("app, seed, intervene", [
    ("online-boutique", 1, False),    # 3 scale faults, 3 load-factor ones
    ("online-boutique", 2, True),
    ("astronomy-shop", 0, True),      # 2 scale faults, 5 load-factor ones
    ("train-ticket", 1, False),
])
def test_spans_record_what_blocks_record(app, seed, intervene, monkeypatch):
    want, got, settles = _both(monkeypatch, lambda: _marathon(app, seed, intervene))
    assert got == want
    assert max(settles) > 1, "spans took several blocks' traffic in one step"


def test_rl_episodes_in_spans_match_blocks(monkeypatch):
    from baselines.rllib_env import make_env

    def episodes():
        env = make_env({"app": "online-boutique"})
        env.set_stream(0, 0)   # (each env made gets its own stream otherwise)
        rng = np.random.default_rng(0)
        out = []
        for seed in (3, 4):
            obs, _ = env.reset(seed=seed)
            while True:
                a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
                obs, r, te, tr, info = env.step(a)
                out.append((r, obs["observations"].tobytes(), obs["action_mask"].tobytes()))
                if te or tr:
                    break
            out.append([r.hash for r in env.unwrapped.marathon.recorder.records])
        return out

    want, got, settles = _both(monkeypatch, episodes)
    assert got == want
    assert max(settles) > 1


def test_a_health_reading_event_ends_the_span():
    # a scale fault's injection reads the prior replica count from the twin's health: never inside a span
    cfg = M.MarathonConfig(app="online-boutique", seed=1, reference_run=False)
    sched = M._schedule(cfg.schedule_key())
    by_id = M._faults_by_id(cfg.app)
    scale = [f for f in sched.faults if by_id[f.fault_id].realisation.kind == "scale"]
    assert scale
    m = M.Marathon(cfg)
    m.start(observe=False)
    drv = m.driver
    sf = scale[0]
    t = float(sf.start_s)
    lf = next(x for x in drv.live if x.instance_id == sf.instance_id)
    assert M._health_event(lf.fault, lf.start_s, lf.end_s, t)
    effects = [x for x in drv.live if x.fault.realisation.kind == "effects"
               and not any(e.kind == "load_factor" for e in x.fault.realisation.effects)]
    assert effects and not any(M._health_event(x.fault, x.start_s, x.end_s, x.end_s) for x in effects)


def test_an_error_inside_a_span_goes_on_and_leaves_the_twin_out_of_it(monkeypatch):
    m = M.Marathon(M.MarathonConfig(app="online-boutique", seed=1, reference_run=False))
    m.start(observe=False)
    m.end_invocation()
    calls = []
    orig = M._Driver._apply_events

    def failing(self, t):
        calls.append(t)
        if len(calls) == 3:
            raise RuntimeError("boom")
        return orig(self, t)

    monkeypatch.setattr(M._Driver, "_apply_events", failing)
    with pytest.raises(RuntimeError, match="boom"):
        m.advance_to_next_invocation()
    assert len(calls) == 3
    t = m.backend.now + m.config.tick_s
    assert all(ev is not None for ev in m.backend.advance_to(t))   # (inside a span: one None per tick)
