"""The fault hook: effect kinds, bindings (direct, revision, flag), metrics and logs evidence."""

import numpy as np
import pytest

from faults.effects import Effect, Marker
from sremarathon_env.backends.sim import SimBackend


def _series(sim, name, **labels):
    out = []
    for fam in sim.store.families(name):
        vals = fam.values(sim.store.n_ticks)
        for r in range(len(fam)):
            lab = fam.labels(r)
            if all(lab.get(k) == v for k, v in labels.items()):
                out.append((lab, vals[r]))
    return out


def test_memory_leak_oom_kills_with_rising_restarts(ob):
    sim = SimBackend(ob, seed=1)
    sim.advance_to(60)
    sim.apply_effect(Effect(kind="memory_leak", service="currencyservice", mi_per_min=40))
    sim.advance_to(1200)
    s = _series(sim, "kube_pod_container_status_restarts_total", container="currencyservice")
    last = max(np.nanmax(v) for _, v in s)
    assert last >= 3
    mem = _series(sim, "container_memory_working_set_bytes", container="currencyservice")
    assert np.nanmax(mem[0][1]) > 100 * 2**20
    oom = _series(sim, "kube_pod_container_status_last_terminated_reason", reason="OOMKilled")
    assert oom
    assert any(e["reason"] == "OOMKilling" for e in sim.events(0, 1200))


def test_edge_error_shows_in_mesh_metrics_and_entry_failures(ob):
    sim = SimBackend(ob, seed=2)
    sim.advance_to(120)
    h = sim.apply_effect(Effect(kind="edge_error", caller="frontend", callee="cartservice", rate=0.5))
    ev = sim.advance_to(300)[-4:]
    s = _series(sim, "istio_requests_total", reporter="source", source_workload="frontend",
                destination_workload="cartservice", response_code="503")
    assert s and np.nanmax(s[0][1]) > 10
    ok = _series(sim, "istio_requests_total", reporter="source", source_workload="frontend",
                 destination_workload="cartservice", response_code="200")[0][1]
    assert ok[-1] > ok[8]
    assert 0.3 < sum(e.failed for e in ev) / sum(e.total for e in ev) < 0.9
    sim.remove_effect(h)
    ev = sim.advance_to(420)[-2:]
    assert sum(e.failed for e in ev) < 0.01 * sum(e.total for e in ev)


def test_flag_bound_effect_follows_the_flag():
    sim = SimBackend("astronomy-shop", seed=3)
    sim.advance_to(60)
    h = sim.apply_effect(Effect(kind="error_rate", service="payment", rate=1.0, bind="flag", flag="paymentFailure",
                                variant="100%", log_signature="failed to charge card: payment failure flag"))
    sim.advance_to(180)
    assert sim.service_health("payment")["error_ratio"] < 0.01
    flag = sim.app.flags_config_map
    assert sim.set_config(flag, "paymentFailure", "100%").ok
    sim.advance_to(300)
    assert sim.service_health("payment")["error_ratio"] > 0.9
    assert any("payment failure flag" in l for l in sim.logs("payment", 180, 300, None, 50))
    assert not sim.set_config(flag, "paymentFailure", "bogus").ok
    assert sim.set_config(flag, "paymentFailure", "off").ok
    sim.advance_to(420)
    assert sim.service_health("payment")["error_ratio"] < 0.01
    assert h.startswith("eff-")


def test_revision_bound_effect_dropped_by_fixing_build_and_by_rollback(ob):
    sim = SimBackend(ob, seed=4)
    sim.advance_to(60)
    path = "main.go"
    text = sim.read_source("paymentservice", sim.source_files("paymentservice")[0])
    first = sim.source_files("paymentservice")[0]
    bad = text + "\n// retry budget: 0\n"
    eff = Effect(kind="error_rate", service="paymentservice", rate=0.8, bind="revision",
                 marker=Marker(source_contains=(first, "retry budget: 0")))
    r = sim.deploy("paymentservice", message="tune retries", author="dev", files={first: bad}, effects=[eff])
    assert r.ok
    sim.advance_to(240)
    assert sim.service_health("paymentservice")["error_ratio"] > 0.5
    # a benign build that keeps the snippet keeps the effect
    sim.deploy("paymentservice", message="log tweak", author="dev", files={first: bad + "// log\n"})
    sim.advance_to(420)
    assert sim.service_health("paymentservice")["error_ratio"] > 0.5
    # the fix removes the snippet: the effect does not carry over
    sim.deploy("paymentservice", message="fix", author="dev", files={first: text})
    sim.advance_to(600)
    assert sim.service_health("paymentservice")["error_ratio"] < 0.01
    # rolling back to the faulty revision brings it back, rolling back to revision 1 drops it
    assert sim.rollback("paymentservice", 3).ok
    sim.advance_to(780)
    assert sim.service_health("paymentservice")["error_ratio"] > 0.5
    assert sim.rollback("paymentservice", 1).ok
    sim.advance_to(960)
    assert sim.service_health("paymentservice")["error_ratio"] < 0.01
    hist = sim.deploy_history("paymentservice")
    assert any("retry budget: 0" in h["diff"] for h in hist)
    del path


def test_dependency_down_logs_name_the_peer(ob):
    sim = SimBackend(ob, seed=5)
    sim.advance_to(60)
    sim.scale("cartservice", 0)
    sim.advance_to(240)
    lines = sim.logs("frontend", 120, 240, "cartservice", 50)
    assert lines and all("cartservice" in l for l in lines)
    assert any("connection refused" in l or "Unavailable" in l for l in lines)
    checkout = sim.logs("checkoutservice", 0, 240, "refused", 50)
    assert any("cartservice" in l for l in checkout)


def test_crash_effect_and_not_ready_effect(ob):
    sim = SimBackend(ob, seed=6)
    sim.advance_to(60)
    h = sim.apply_effect(Effect(kind="crash", service="emailservice", reason="Error", exit_code=1,
                                log_signature="Traceback: RuntimeError: template missing"))
    sim.advance_to(400)
    pod = [p for p in sim.k8s_get("pods") if p["metadata"]["labels"]["app"] == "emailservice"][0]
    assert pod["status"]["containerStatuses"][0]["restartCount"] >= 2
    sim.remove_effect(h)
    sim.advance_to(1200)
    assert sim.service_health("emailservice")["ready"] == 1
    h2 = sim.apply_effect(Effect(kind="not_ready", service="shippingservice"))
    sim.advance_to(1260)
    assert sim.service_health("shippingservice")["ready"] == 0
    assert sim.k8s_get("endpoints", "shippingservice")[0]["subsets"][0].get("notReadyAddresses")
    sim.remove_effect(h2)
    sim.advance_to(1320)
    assert sim.service_health("shippingservice")["ready"] == 1


def test_cpu_burn_throttles(ob):
    sim = SimBackend(ob, seed=7)
    sim.advance_to(60)
    sim.apply_effect(Effect(kind="cpu_burn", service="currencyservice", millicores=400))
    sim.advance_to(600)
    thr = _series(sim, "container_cpu_cfs_throttled_periods_total", container="currencyservice")[0][1]
    per = _series(sim, "container_cpu_cfs_periods_total", container="currencyservice")[0][1]
    assert (thr[-1] - thr[20]) / (per[-1] - per[20]) > 0.5
    assert sim.service_health("currencyservice")["p95_ms"] > 5


def test_state_digest_returns_to_healthy_after_effects_settle(ob):
    sim = SimBackend(ob, seed=8)
    sim.advance_to(120)
    healthy = sim.state_digest()
    for eff in (Effect(kind="crash", service="adservice"), Effect(kind="not_ready", service="cartservice"),
                Effect(kind="memory_leak", service="currencyservice", mi_per_min=60),
                Effect(kind="latency", service="productcatalogservice", ms=300),
                Effect(kind="node_down", node="node-a3")):
        h = sim.apply_effect(eff)
        sim.advance_to(sim.now + 600)
        assert sim.state_digest() != healthy or eff.kind == "latency"
        sim.remove_effect(h)
        sim.advance_to(sim.now + 900)
        assert sim.state_digest() == healthy, eff.kind
    other = SimBackend(ob, seed=99)
    other.advance_to(120)
    assert other.state_digest() == healthy


def test_until_restart_effect_ends_when_its_pods_are_replaced(ob):
    sim = SimBackend(ob, seed=9)
    sim.advance_to(60)
    base = sim.service_health("cartservice")["p95_ms"]
    h = sim.apply_effect(Effect(kind="latency", service="cartservice", ms=500, until_restart=True))
    sim.advance_to(180)
    assert sim.effect_active(h) and sim.service_health("cartservice")["p95_ms"] > 400
    assert sim.restart("cartservice").ok
    sim.advance_to(360)
    assert not sim.effect_active(h)
    assert sim.service_health("cartservice")["p95_ms"] < base + 60  # the new pod may sit in another zone


def test_clone_is_independent_and_identical(ob):
    sim = SimBackend(ob, seed=10)
    sim.advance_to(240)   # on the 120 s invocation grid: block-for-block the same floats as `again`
    twin = sim.clone()
    sim.scale("frontend", 0)
    a = sim.advance_to(600)
    b = twin.advance_to(600)
    assert sum(e.failed for e in a) > 0.5 * sum(e.total for e in a)
    assert sum(e.failed for e in b) < 0.01 * sum(e.total for e in b)
    again = SimBackend(ob, seed=10)
    again.advance_to(600)
    assert again.state_digest() == twin.state_digest()
    fam = "loadgenerator_requests_total"
    assert (again.store.families(fam)[0].values(again.store.n_ticks)
            == twin.store.families(fam)[0].values(twin.store.n_ticks)).all()


def test_flag_gated_load_path_follows_its_flag():
    sim = SimBackend("astronomy-shop", seed=11, noise_load=False)
    sim.advance_to(60)
    assert sim.path_health("flood_home")["rate"] == 0.0
    flag = next(f for f in sim.app.flags if f.name == "loadGeneratorFloodHomepage")
    on = next(v for v, x in flag.variants.items() if not isinstance(x, bool) and x not in (0, "off") or x is True)
    assert sim.set_config(sim.app.flags_config_map, flag.name, on).ok
    sim.advance_to(120)
    assert sim.path_health("flood_home")["rate"] > sim.path_health("index")["rate"]


def test_clone_shares_nothing_it_can_change(ob):
    """A clone made after a source deploy (shared trees, templates, history arrays) diverges freely:
    deploys, rollbacks and ticks in one never show in the other's sources, history or past reads."""
    sim = SimBackend(ob, seed=4, metrics=False)
    path = sim.source_files("cartservice")[0]
    text = sim.read_source("cartservice", path)
    sim.advance_to(120)
    sim.deploy("cartservice", message="tweak", author="dev", files={path: text + "\n// a\n"})
    sim.advance_to(240)
    twin = sim.clone()
    before = (sim.deploy_history("cartservice"), sim.service_health("cartservice", at=120.0))
    twin.deploy("cartservice", message="tweak again", author="dev", files={path: text + "\n// b\n"})
    twin.rollback("paymentservice", None)
    twin.scale("frontend", 0)
    twin.advance_to(900)
    sim.advance_to(900)
    assert sim.read_source("cartservice", path).endswith("// a\n")
    assert twin.read_source("cartservice", path).endswith("// b\n")
    assert sim.deploy_history("cartservice")[:2] == before[0][:2] and len(sim.deploy_history("cartservice")) == 2
    assert len(twin.deploy_history("cartservice")) == 3 and "+// b" in twin.deploy_history("cartservice")[-1]["diff"]
    assert sim.service_health("cartservice", at=120.0) == before[1]
    assert sim.path_health(None, at=600.0)["error_ratio"] < 0.05 < twin.path_health(None, at=600.0)["error_ratio"]
    again = SimBackend(ob, seed=4, metrics=False)
    again.advance_to(120)
    again.deploy("cartservice", message="tweak", author="dev", files={path: text + "\n// a\n"})
    again.advance_to(900)
    assert again.state_digest() == sim.state_digest()
    assert again.deploy_history("cartservice") == sim.deploy_history("cartservice")


def test_live_reads_right_after_pod_slots_grow(ob):
    """Pods created between two ticks may outgrow the slot arrays of the last refresh: reads made
    before the next tick see them as not ready instead of failing (was an IndexError)."""
    sim = SimBackend(ob, seed=3)
    c = sim.cluster
    t, last = 0.0, None
    while last is None:
        t += 300.0
        sim.advance_to(t)
        for svc in sim.app.service_names:
            before = len(c.p_svc)
            sim.restart(svc)          # the rollout's surge pod is created now, before any tick
            if len(c.p_svc) > before:
                last = svc
                break
    assert len(c.pods) > before
    new = c.pods[-1]
    assert new.slot >= before and new.rs.deployment == last
    assert sim.pod_ready_eff[new.slot] == False   # noqa: E712 - numpy bool
    rev = sim.deployment_spec(last)["revision"]
    assert rev not in sim.serving_revisions(last)
    assert sim.deploy_history(last)[-1]["ready"] == 0
    assert sim.service_health(last)["ready"] >= 1.0
    assert any(p["metadata"]["name"] == new.name for p in sim.k8s_get("pod"))
    sim.advance_to(t + 600.0)
    assert sim.serving_revisions(last).get(rev, 0) >= 1
