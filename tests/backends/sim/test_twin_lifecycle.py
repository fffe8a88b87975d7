"""Pods, rollouts and interventions behave as on Kubernetes."""

import pytest

from faults.effects import Effect, Marker
from sremarathon_env.backends.sim import SimBackend


def _pods(sim, app):
    return [p for p in sim.k8s_get("pods") if p["metadata"]["labels"]["app"] == app]


def _cond(sim, dep, kind):
    return next(c for c in sim.k8s_get("deployment", dep)[0]["status"]["conditions"] if c["type"] == kind)


def test_bad_image_keeps_old_pods_serving_and_progress_deadline(ob):
    sim = SimBackend(ob, seed=1)
    sim.advance_to(120)
    r = sim.deploy("frontend", message="bump", author="dev", image_tag="bad")
    assert r.ok and r.data["revision"] == 2
    sim.advance_to(300)
    reasons = sorted(p["status"]["containerStatuses"][0]["state"].get("waiting", {}).get("reason", "Running")
                     for p in _pods(sim, "frontend"))
    assert reasons in (["ErrImagePull", "Running"], ["ImagePullBackOff", "Running"])
    assert sim.serving_revisions("frontend") == {1: 1}
    assert sim.path_health(None)["error_ratio"] < 0.01
    assert _cond(sim, "frontend", "Progressing")["status"] == "True"
    sim.advance_to(120 + 615)
    c = _cond(sim, "frontend", "Progressing")
    assert (c["status"], c["reason"]) == ("False", "ProgressDeadlineExceeded")
    # rollback restores revision 1's template as a new revision and the stuck pod goes away
    r = sim.rollback("frontend", None)
    assert r.ok and r.data["from_revision"] == 1
    sim.advance_to(780)
    assert list(sim.serving_revisions("frontend").values()) == [1]
    assert len(_pods(sim, "frontend")) == 1
    assert _cond(sim, "frontend", "Progressing")["status"] == "True"


def test_rollout_replaces_pods_with_surge(ob):
    sim = SimBackend(ob, seed=2)
    sim.advance_to(60)
    assert sim.scale("currencyservice", 4).ok
    sim.advance_to(180)
    assert sim.service_health("currencyservice")["ready"] == 4
    old = {p["metadata"]["name"] for p in _pods(sim, "currencyservice")}
    assert sim.restart("currencyservice").ok
    seen_max = 0
    for t in range(195, 420, 15):
        sim.advance_to(t)
        seen_max = max(seen_max, len(_pods(sim, "currencyservice")))
        assert sim.service_health("currencyservice")["ready"] >= 3  # maxUnavailable 25 % of 4
    new = {p["metadata"]["name"] for p in _pods(sim, "currencyservice")}
    assert seen_max <= 5 and len(new) == 4 and not (old & new)
    assert all(n.startswith("currencyservice-") and len(n.split("-")[-1]) == 5 and len(n.split("-")[-2]) == 10 for n in new)


def test_scale_to_zero_leaves_no_endpoints(ob):
    sim = SimBackend(ob, seed=3)
    sim.scale("cartservice", 0)
    sim.advance_to(60)
    ep = sim.k8s_get("endpoints", "cartservice")[0]
    assert ep["subsets"] == []
    assert sim.service_health("cartservice")["ready"] == 0


def test_oom_loop_from_low_memory_limit_backs_off(ob):
    sim = SimBackend(ob, seed=4)
    sim.advance_to(60)
    assert sim.set_resources("productcatalogservice", mem_limit_mi=8).ok
    restarts, times = [], []
    for t in range(75, 1500, 15):
        sim.advance_to(t)
        p = [p for p in _pods(sim, "productcatalogservice") if p["spec"]["containers"][0]["resources"]["limits"]["memory"] == "8Mi"]
        if p:
            restarts.append(p[0]["status"]["containerStatuses"][0]["restartCount"])
            times.append(t)
    assert restarts[-1] >= 4
    ps = [p for p in _pods(sim, "productcatalogservice") if p["spec"]["containers"][0]["resources"]["limits"]["memory"] == "8Mi"][0]
    cs = ps["status"]["containerStatuses"][0]
    assert cs["lastState"]["terminated"]["reason"] == "OOMKilled"
    # gaps between restarts grow (10 s, 20 s, 40 s ...)
    first = [times[restarts.index(k)] for k in sorted(set(restarts)) if k > 0]
    gaps = [b - a for a, b in zip(first, first[1:])]
    assert gaps[-1] > gaps[0]
    # the old revision keeps serving (maxUnavailable 0 with one replica)
    assert sim.serving_revisions("productcatalogservice") == {1: 1}


def test_missing_required_env_crash_loops_with_exit_code_2(ob):
    sim = SimBackend(ob, seed=5)
    sim.advance_to(30)
    r = sim.deploy("checkoutservice", message="cleanup env", author="dev", env={"PAYMENT_SERVICE_ADDR": None})
    assert r.ok
    sim.advance_to(240)
    new = [p for p in _pods(sim, "checkoutservice") if p["status"]["containerStatuses"][0]["restartCount"] > 0]
    assert new
    cs = new[0]["status"]["containerStatuses"][0]
    assert cs["lastState"]["terminated"]["exitCode"] == 2
    assert any('environment variable "PAYMENT_SERVICE_ADDR" not set' in l for l in sim.logs("checkoutservice", 0, 240, "not set", 20))


def test_unknown_dependency_address_fails_that_edge(ob):
    sim = SimBackend(ob, seed=6)
    sim.advance_to(30)
    assert sim.set_config("frontend", "CURRENCY_SERVICE_ADDR", "currencyservice-typo:7000").ok
    sim.advance_to(240)
    assert sim.serving_revisions("frontend") == {2: 1}
    assert sim.edge_health("frontend", "currencyservice")["error_ratio"] == pytest.approx(1.0)
    assert sim.path_health(None)["error_ratio"] > 0.5
    lines = sim.logs("frontend", 120, 240, "no such host", 10)
    assert lines and "currencyservice-typo" in lines[-1]


def test_bad_arguments_return_errors_not_exceptions(ob):
    sim = SimBackend(ob, seed=7)
    assert not sim.scale("nope", 1).ok
    assert not sim.scale("frontend", -1).ok
    assert not sim.rollback("frontend", 9).ok
    assert not sim.rollback("frontend", None).ok
    assert not sim.set_resources("frontend", mem_limit_mi=-5).ok
    assert not sim.set_resources("frontend", cpu_request_m=500, cpu_limit_m=200).ok
    assert not sim.set_config("nothing", "K", "v").ok
    assert not sim.drain_node("node-zz").ok
    assert not sim.deploy("nope", message="m", author="a").ok
    assert sim.k8s_get("widgets")[0]["kind"] == "Status"
    assert sim.k8s_get("pods", "no-such-pod") == []


def test_node_down_reschedules_after_eviction_timeout(ob):
    sim = SimBackend(ob, seed=8)
    sim.advance_to(60)
    h = sim.apply_effect(Effect(kind="node_down", node="node-b1"))
    sim.advance_to(120)
    assert sim.service_health("productcatalogservice")["ready"] == 0
    sim.advance_to(60 + 300 + 60)
    pods = _pods(sim, "productcatalogservice")
    assert [p["spec"]["nodeName"] for p in pods] != ["node-b1"]
    assert sim.service_health("productcatalogservice")["ready"] == 1
    sim.remove_effect(h)
    sim.advance_to(480)
    assert sim.k8s_get("node", "node-b1")[0]["status"]["conditions"][0]["status"] == "True"


def test_new_template_over_crashlooping_rollout_scales_up(ob):
    """One replica (surge 1, maxUnavailable 0): old healthy RS, a crash-looping new RS, then another new
    template. Scaling the unhealthy RS down frees room that the newest RS takes in the same moment, as the
    Deployment controller does when the ReplicaSet update requeues it; it must not stay at 0 replicas."""
    sim = SimBackend(ob, seed=5)
    sim.advance_to(30)
    assert sim.deploy("checkoutservice", message="cleanup env", author="dev", env={"PAYMENT_SERVICE_ADDR": None}).ok
    sim.advance_to(240)
    assert sim.serving_revisions("checkoutservice") == {1: 1}
    assert sim.set_resources("checkoutservice", mem_limit_mi=512).ok  # revision 3: still without the env var
    sim.advance_to(300)
    rs = {r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: r["spec"]["replicas"]
          for r in sim.k8s_get("replicasets") if r["metadata"]["name"].startswith("checkoutservice-")}
    assert rs == {"1": 1, "2": 0, "3": 1}, rs
    assert sim.serving_revisions("checkoutservice") == {1: 1}  # the broken revision 3 never takes over
