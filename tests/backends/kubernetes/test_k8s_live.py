"""The live backend against a real control plane (etcd, kube-apiserver, controllers, scheduler, kwok).

Marked ``live``: they need the binaries of ``live/build_control_plane.sh`` (cached by version) and
the ``kubernetes`` package (extra ``live``); without them they skip (and fail where
``SREMARATHON_REQUIRE_LIVE=1``, as ``.ci/run`` sets). Run them alone, not under
xdist (one cluster per session): ``pytest -m live -p no:xdist tests/backends/kubernetes``.
"""

from __future__ import annotations

import os
import time

import pytest

from faults.catalogue import load_catalogue
from faults.effects import Effect
from faults.realise import apply_repair, inject, probe_ok

pytestmark = pytest.mark.live

NS = "sre-live-test"


def _wait(cond, timeout_s, what, period_s=1.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if cond():
            return time.monotonic() - t0
        time.sleep(period_s)
    raise AssertionError(f"timed out after {timeout_s} s: {what}")


def _skip(why: str) -> None:
    """Skip, or fail where the live tests must run (CI sets SREMARATHON_REQUIRE_LIVE=1)."""
    if os.environ.get("SREMARATHON_REQUIRE_LIVE") == "1":
        pytest.fail(f"live tests required but: {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        _skip("the kubernetes package is not installed (extra [live])")
    from sremarathon_env.backends.kubernetes.cluster import LocalCluster, Ports, find_bin_dir
    if find_bin_dir() is None:
        _skip("no control-plane binaries (run live/build_control_plane.sh)")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("one cluster per session: run the live tests without xdist (-p no:xdist -m live)")
    # free ports (a leftover or concurrent cluster cannot collide) and components tied to this process
    # (a killed test run leaves no orphan kube-apiserver behind)
    c = LocalCluster(name="sre-test", workdir=str(tmp_path_factory.mktemp("cluster")), ports=Ports.free(),
                     die_with_parent=True)
    t0 = time.monotonic()
    c.up()
    c.start_s = round(time.monotonic() - t0, 1)
    yield c
    c.down()


@pytest.fixture(scope="module")
def backend(cluster):
    from sremarathon_env.backends.kubernetes.backend import KubernetesBackend
    b = KubernetesBackend("online-boutique", kubeconfig=cluster.kubeconfig_path, namespace=NS, realtime=False)
    yield b
    if not b.api_closed:
        b.close()


def _fault(fid_part: str, template: str):
    return next(f for f in load_catalogue("online-boutique") if f.template == template and fid_part in f.id)


def test_deploy_online_boutique(cluster, backend):
    print(f"\ncluster start {cluster.start_s} s, app deploy {backend.deploy_seconds} s")
    deps = backend.k8s_get("deployment")
    assert [d["metadata"]["name"] for d in deps] == sorted(backend.app.service_names)
    assert all(d["status"].get("readyReplicas") == d["spec"]["replicas"] for d in deps)
    nodes = backend.k8s_get("node")
    zones = sorted(n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes)
    assert zones == ["zone-a"] * 3 + ["zone-b"] * 2
    pods = backend.k8s_get("pod")
    # placement follows the app model's preferred node, across both zones
    on = {p["metadata"]["labels"]["app"]: p["spec"]["nodeName"] for p in pods}
    assert on == {s.name: s.node for s in backend.app.services}
    assert backend.service_health("frontend")["ready"] == 1.0
    assert backend.k8s_get("nope")[0]["reason"] == "NotFound" and backend.k8s_get("pod", "missing") == []
    hist = backend.deploy_history("frontend")
    assert len(hist) == 1 and hist[0]["current"] and hist[0]["ready"] == 1


def test_scale_and_errors(backend):
    assert backend.scale("adservice", 2).ok
    _wait(lambda: backend.service_health("adservice")["ready"] == 2.0, 60, "2 ready adservice pods")
    assert backend.scale("adservice", 1).ok
    _wait(lambda: backend.service_health("adservice")["ready"] == 1.0, 60, "back to 1")
    assert not backend.scale("nope", 1).ok and not backend.scale("adservice", -1).ok
    assert backend.scale("nope", 1).message == 'deployments.apps "nope" not found'
    assert not backend.rollback("adservice", 99).ok


def test_set_config_rolls_out_a_revision(backend):
    r = backend.set_config("frontend", "FRONTEND_MESSAGE", "hello")
    assert r.ok and r.data["revision"] == 2, r
    assert backend.env_of("frontend")["FRONTEND_MESSAGE"] == "hello"
    _wait(lambda: backend.serving_revisions("frontend") == {2: 1}, 60, "revision 2 serving")
    hist = backend.deploy_history("frontend")
    assert [h["revision"] for h in hist] == [1, 2] and hist[1]["current"] and hist[1]["author"] == "kubectl"
    assert not backend.set_config("frontend", "BAD-KEY", "x").ok


# (template, id part, repair index, timeout to fail, timeout to heal)
FAULTS = [
    ("bad-image", "adservice", 0),
    ("scale-zero", "adservice", 0),
    ("pod-failure", "adservice", 0),
    ("memory-oom", "adservice", 0),
    ("low-memory-limit", "adservice", 0),
    ("missing-env", "cartservice", 1),
    ("node-down", "node-a1", 0),
]


@pytest.mark.parametrize("template,part,repair", FAULTS, ids=[f[0] for f in FAULTS])
def test_fault_probe_fails_then_heals_after_repair(backend, template, part, repair):
    f = _fault(part, template)
    memo: dict = {}
    assert probe_ok(f, backend, memo), f"{f.id}: probe fails before injection"
    h = inject(f, backend)
    assert h.ok, h.message
    took = _wait(lambda: not probe_ok(f, backend, memo), 90, f"{f.id}: probe fails", period_s=2.0)
    res = apply_repair(f.repairs[repair], f, backend)
    assert getattr(res, "ok", True), res
    healed = _wait(lambda: probe_ok(f, backend, memo) and probe_ok(f, backend, memo), 120, f"{f.id}: probe heals",
                   period_s=2.0)
    print(f"\n{f.id}: failed after {took:.1f} s, healed {healed:.1f} s after {f.repairs[repair].tool}")
    for eh in h.effect_handles:
        backend.remove_effect(eh)
    if template == "node-down":
        backend.uncordon_node("node-a1")


def test_wrong_selector_empties_endpoints_and_revert_restores(backend):
    assert backend.service_health("cartservice")["endpoints"] == 1.0
    h = backend.apply_effect(Effect(kind="no_endpoints", service="cartservice"))
    _wait(lambda: backend.service_health("cartservice")["endpoints"] == 0.0, 30, "no endpoints")
    backend.remove_effect(h)
    _wait(lambda: backend.service_health("cartservice")["endpoints"] == 1.0, 30, "endpoints back")


def test_crash_effect_shows_crashloop_then_heals(backend):
    h = backend.apply_effect(Effect(kind="crash", service="emailservice"))
    _wait(lambda: any((cs.get("state", {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"
                      for p in backend.k8s_get("pod") if p["metadata"]["labels"]["app"] == "emailservice"
                      for cs in p["status"].get("containerStatuses", [])), 60, "CrashLoopBackOff")
    r0 = backend.service_health("emailservice")["restarts"]
    _wait(lambda: backend.service_health("emailservice")["restarts"] > r0, 40, "restart count grows")
    reasons = {e["reason"] for e in backend.events(-1e9, 1e9)}
    assert "BackOff" in reasons
    backend.remove_effect(h)
    _wait(lambda: backend.service_health("emailservice")["ready"] == 1.0, 60, "ready again")


def test_nothing_outside_the_namespace(cluster, backend):
    api = backend.api
    namespaces = sorted(n["metadata"]["name"] for n in api.items("namespaces", None))
    assert set(namespaces) - {"default", "kube-node-lease", "kube-public", "kube-system"} == {NS}
    for ns in ("default", "kube-public", "kube-system"):
        for plural in ("pods", "deployments", "services", "configmaps"):
            names = [i["metadata"]["name"] for i in api.items(plural, ns)]
            allowed = {"kubernetes", "kube-root-ca.crt", "extension-apiserver-authentication"}
            assert set(names) <= allowed | {n for n in names if n.startswith("kube-apiserver-legacy")}, (ns, plural, names)
    from sremarathon_env.backends.kubernetes.stages import NODE_FAULT_LABEL
    assert all(NODE_FAULT_LABEL not in n["metadata"].get("labels", {}) for n in api.items("nodes", None))


def test_zz_cluster_down_leaves_no_process(cluster, backend):
    backend.close()                       # deletes the namespace, reverts direct effects
    assert backend.api_closed
    pids = dict(cluster.running())
    assert len(pids) == 5
    cluster.down()
    assert cluster.running() == {}
    for pid in pids.values():
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(") ")[1][0] == "Z"
