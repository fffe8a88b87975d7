"""A marathon starts on an app deployed long before: a healthy twin is in steady state from t=0."""

import numpy as np
import pytest

from sremarathon_env.alerts import AlertEngine, load_rule_pack
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim.backend import WARM_S


@pytest.mark.parametrize("name", ["online-boutique", "train-ticket", "astronomy-shop"])
def test_healthy_twin_fires_and_pends_no_alert_for_90_minutes(name):
    sim = SimBackend(name, seed=0)
    engine = AlertEngine(load_rule_pack(), sim.store)
    transitions = []
    for k in range(1, 46):   # in invocation steps, as the run loop advances
        sim.advance_to(k * 120.0)
        transitions += engine.evaluate_until(k * 120.0)
    assert [(t.alertname, dict(t.labels).get("service"), t.state) for t in transitions] == []
    assert engine.history() == []


def test_pods_are_running_and_ready_before_t0_and_counters_carry_the_warm_hour(ob):
    sim = SimBackend(ob, seed=3)
    pods = sim.cluster.active_pods()
    assert pods and all(p.phase == "Running" and p.ready and p.started_t <= -WARM_S for p in pods)
    assert all(sim.service_health(s)["ready"] == sim.service_health(s)["desired"] for s in sim.app.service_names)
    # counters at t=0 already hold about an hour of traffic at the t=0 rate, and then keep growing at it
    (req,) = sim.store.families("loadgenerator_requests_total")
    rate0 = sim.path_health(None)["rate"]
    first = np.nansum(req.values(1)[:, 0])
    assert first == pytest.approx(rate0 * WARM_S, rel=1e-6)
    sim.advance_to(600.0)
    later = np.nansum(req.values(41)[:, 40])
    assert later - first == pytest.approx(rate0 * 600.0, rel=0.15)
    (cpu,) = sim.store.families("container_cpu_usage_seconds_total")
    assert np.all(cpu.values(1)[:, 0] > 0)
