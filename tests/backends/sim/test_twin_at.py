"""Per-tick reads of past ticks (``at=``, ``backend.at(t)``) and the run loop's block driver."""

import pytest

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.marathon import MarathonConfig, _Driver, _make_backend, _schedule


def _reads(view, sim, handles):
    out = {}
    for s in sim.app.service_names:
        out[("svc", s)] = view.service_health(s)
        out[("rev", s)] = view.serving_revisions(s)
    for p in [None, *sim.m.path_names]:
        out[("path", p)] = view.path_health(p)
    for (c, d) in sorted(k for k in sim.m.edge_index if k[0] != "loadgenerator"):
        out[("edge", c, d)] = view.edge_health(c, d)
    for h in handles:
        out[("eff", h)] = view.effect_active(h)
    for n in sim.m.node_names:
        out[("node", n)] = view.pods_on_node(n)
    return out


def test_reads_of_a_past_tick_equal_the_reads_made_right_after_it(ob):
    """Rollouts, an OOM-killing leak, a restart-ended effect and a node outage: every read of tick t
    made later through ``at(t)`` equals the read made right after advancing to t."""
    sim = SimBackend(ob, seed=11)
    handles = []
    live, known, actions = {}, {}, {
        4: lambda: handles.append(sim.apply_effect(Effect(kind="memory_leak", service="currencyservice", mi_per_min=60))),
        6: lambda: handles.append(sim.apply_effect(Effect(kind="latency", service="cartservice", ms=300,
                                                          until_restart=True))),
        9: lambda: sim.set_config("productcatalogservice", "EXTRA_LATENCY", "150ms"),
        14: lambda: sim.restart("cartservice"),
        20: lambda: handles.append(sim.apply_effect(Effect(kind="node_down", node=sim.m.node_names[1]))),
        40: lambda: sim.remove_effect(handles[-1]),
    }
    for k in range(1, 61):
        if k in actions:
            actions[k]()
        sim.advance_to(k * 15.0)
        known[k] = list(handles)
        live[k] = _reads(sim.at(k * 15.0), sim, known[k])
        assert live[k] == {key: v for key, v in _reads(sim, sim, list(handles)).items()}, k
    for k in range(1, 61):
        assert _reads(sim.at(k * 15.0), sim, known[k]) == live[k], k
    # the scenario did change what the reads see
    assert live[59][("svc", "currencyservice")]["restarts"] > live[3][("svc", "currencyservice")]["restarts"]
    assert live[10][("eff", handles[1])] and not live[40][("eff", handles[1])]
    assert live[25][("node", sim.m.node_names[1])] != live[3][("node", sim.m.node_names[1])]
    with pytest.raises(ValueError):
        sim.service_health("frontend", at=61 * 15.0)


@pytest.mark.parametrize("app", ["online-boutique", "astronomy-shop"])
def test_block_driver_gives_the_single_tick_driver_results(app):
    cfg = MarathonConfig(app=app, seed=3, injection_s=1200, observation_s=240)
    n = int(cfg.horizon_s / cfg.tick_s)
    runs = []
    for blocks in (False, True):
        backend = _make_backend(cfg)
        drv = _Driver(cfg, backend, _schedule(cfg.schedule_key()))
        res = []
        for k in range(1, n + 1):
            if blocks and (k - 1) % 8 == 0:
                drv.plan_until((k + 7) * cfg.tick_s)
            ev, probes, events = drv.tick(k * cfg.tick_s)
            res.append(((ev.t, ev.total, ev.failed, ev.slow, ev.degraded), probes, events))
        runs.append((res, backend.state_digest()))
    (single, d1), (block, d2) = runs
    assert sum(len(r[2]) for r in single) >= 4          # faults were injected and ended
    assert sum(len(r[1]) for r in single) > 0
    assert block == single
    assert d1 == d2


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket"])
def test_twin_without_metrics_has_the_same_dynamics(app):
    """``metrics=False`` (reference run, validation) writes no series but evolves bit for bit like the
    exporting twin under the same scheduled faults: entry evidence, health reads, probe results."""
    cfg = MarathonConfig(app=app, seed=2, injection_s=1500, observation_s=300)
    n = int(cfg.horizon_s / cfg.tick_s)
    runs = []
    for metrics in (True, False):
        backend = _make_backend(cfg, metrics=metrics)
        drv = _Driver(cfg, backend, _schedule(cfg.schedule_key()))
        drv.plan_until(n * cfg.tick_s)
        res = [drv.tick(k * cfg.tick_s) for k in range(1, n + 1)]
        res = [((ev.t, ev.total, ev.failed, ev.slow, ev.degraded), probes, events) for ev, probes, events in res]
        health = [backend.service_health(s) for s in backend.app.service_names]
        runs.append((res, health, backend.state_digest(), backend.store.n_series()))
    (r1, h1, d1, n1), (r2, h2, d2, n2) = runs
    assert sum(len(r[2]) for r in r1) >= 2 and n1 > 100 and n2 == 0
    assert r1 == r2 and h1 == h2 and d1 == d2
