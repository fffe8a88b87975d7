"""`faulthook.resolve` visits only the revisions that carry effects or config faults (`faulthook._weights`);
its definition weighs every revision with ready pods and the current revision of a service without any
(`_weights_plain` below). At every state refresh of reference runs with their fault schedules, and of
hand-made runs with revision-bound effects on services with no ready pod left, config faults, flags,
rollbacks and node loss, the resolution equals the one made with the definition's weights, field for
field and in order."""

import numpy as np
import pytest

from faults.effects import Effect, Marker
from sremarathon_env import marathon as M
from sremarathon_env.backends.sim import SimBackend, faulthook


def _weights_plain(sim, up=None) -> list:
    """The definition of `_weights`' order and weights: every revision with ready pods, by Deployment and
    its ReplicaSets' order, and the current revision of a service without any (weight 1). (``up``, the
    caller's readiness, is not used: the definition reads the cluster's.)"""
    c = sim.cluster
    n = len(c.pods)
    up = c.p_active[:n] & c.p_ready[:n] & ~c.p_lost[:n]
    per_rs = np.bincount(c.p_rs[:n][up], minlength=len(c.rs_by_id)).tolist()
    per_svc = np.bincount(c.p_svc[:n][up], minlength=sim.m.S).tolist()
    weights = []
    for dep in c.deployments.values():
        live = per_svc[dep.svc]
        if live:
            for rs in dep.rss:
                k = per_rs[rs.id]
                if k:
                    weights.append((dep.svc, rs, k / live))
        else:
            weights.append((dep.svc, dep.current, 1.0))
    return weights


def _same_resolution(a: faulthook.Resolution, b: faulthook.Resolution) -> None:
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name
        elif isinstance(x, dict):
            assert list(x.items()) == list(y.items()), name
        elif isinstance(x, set):
            assert sorted(x) == sorted(y), name
        else:
            assert x == y, name


@pytest.fixture
def checked(monkeypatch):
    """Every resolve also made with the definition's weights and compared; counts of what was covered."""
    seen = {"calls": 0, "weighted": 0, "zero_svc": 0, "config": 0, "revision": 0, "up": 0}
    resolve, fast = faulthook.resolve, faulthook._weights

    def both(sim, t, up=None):
        if up is not None:   # the readiness the caller passes is the cluster's
            n = len(sim.cluster.pods)
            c = sim.cluster
            assert up.tolist() == (c.p_active[:n] & c.p_ready[:n] & ~c.p_lost[:n]).tolist()
            seen["up"] += 1
        got = resolve(sim, t, up)
        plain = _weights_plain(sim)
        monkeypatch.setattr(faulthook, "_weights", _weights_plain)
        try:
            want = resolve(sim, t)
        finally:
            monkeypatch.setattr(faulthook, "_weights", fast)
        _same_resolution(got, want)
        mine = fast(sim)
        # the picked revisions are the definition's, less those that carry nothing, in its order
        assert mine == [(s, rs, w) for s, rs, w in plain if rs.effects or sim.config_faults_of(rs)]
        seen["calls"] += 1
        seen["weighted"] += bool(mine)
        seen["zero_svc"] += any(w == 1.0 and not rs.pods for _, rs, w in mine)
        seen["config"] += any(sim.config_faults_of(rs) for _, rs, _ in mine)
        seen["revision"] += any(rs.effects for _, rs, _ in mine)
        return got

    monkeypatch.setattr(faulthook, "resolve", both)
    return seen


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket", "astronomy-shop"])
def test_reference_runs_resolve_as_the_definition(checked, app):
    for seed in (1, 2):
        M.reference_evidence.__wrapped__(M.MarathonConfig(app=app, seed=seed))
    assert checked["calls"] > 200 and checked["weighted"] > 20 and checked["up"] == checked["calls"]
    assert checked["revision"] > 5


def test_services_without_ready_pods_config_faults_and_rollbacks(checked):
    sim = SimBackend("online-boutique", seed=5)
    sim.advance_to(60)
    # a revision-bound crash: the new pods crash-loop while the old ones serve
    sim.deploy("currencyservice", message="crash", author="a", files={"server.js": "// boom\n"},
               effects=[Effect(kind="crash", service="currencyservice", bind="revision",
                               marker=Marker(source_contains=("server.js", "boom")))])
    # config faults: a wrong address (edge), an extra latency, then an invalid duration (crash)
    sim.set_config("checkoutservice", "PAYMENT_SERVICE_ADDR", "nosuchservice:50051")
    sim.set_config("productcatalogservice", "EXTRA_LATENCY", "250ms")
    sim.advance_to(300)
    sim.set_config("productcatalogservice", "EXTRA_LATENCY", "not-a-duration")
    sim.apply_effect(Effect(kind="latency", service="cartservice", ms=100))
    slow = Marker(source_contains=("x.txt", "slow"))
    sim.deploy("adservice", message="slow", author="a", files={"x.txt": "slow\n"},
               effects=[Effect(kind="latency", service="adservice", ms=300, bind="revision", marker=slow),
                        Effect(kind="cpu_burn", service="adservice", millicores=300, bind="revision", marker=slow)])
    sim.advance_to(600)
    # no pod at all: the current revision (with its config fault) weighs 1
    sim.scale("checkoutservice", 0)
    sim.scale("currencyservice", 3)
    sim.advance_to(700)
    sim.rollback("currencyservice")
    sim.rollback("adservice")
    sim.scale("checkoutservice", 2)
    node = sim.cluster.nodes[sim.cluster.pods[0].node].name
    sim.apply_effect(Effect(kind="node_down", node=node))
    sim.advance_to(1200)
    assert checked["calls"] > 10 and checked["zero_svc"] > 0 and checked["config"] > 0 and checked["revision"] > 0


def test_flag_bound_effects_and_gated_paths(checked):
    sim = SimBackend("astronomy-shop", seed=3)
    sim.advance_to(60)
    sim.apply_effect(Effect(kind="error_rate", service="payment", rate=1.0, bind="flag", flag="paymentFailure",
                            variant="100%"))
    sim.deploy("payment", message="m", author="a", files={"a.txt": "a\n"},
               effects=[Effect(kind="memory_leak", service="payment", mi_per_min=30, bind="revision",
                               marker=Marker(source_contains=("a.txt", "a")))])
    sim.advance_to(180)
    sim.set_config(sim.app.flags_config_map, "paymentFailure", "100%")
    sim.advance_to(600)
    assert checked["calls"] > 5 and checked["revision"] > 0


def test_revisions_known_to_carry_nothing_are_found_again_when_they_gain_effects(checked):
    """`_weights` skips the revisions it found to carry neither effect handles nor config faults (`_rs_boring`);
    a revision that gains handles later - a deploy with effects onto the unchanged current template, a deploy that
    takes an earlier revision's template again with effects - is visited again: the definition's weights at every
    refresh, and the effects do act."""
    sim = SimBackend("online-boutique", seed=6)
    sim.advance_to(60)
    plain_files = {"x.txt": "plain\n"}
    sim.deploy("cartservice", message="plain", author="a", files=plain_files)          # revision B, nothing
    sim.advance_to(300)
    b = sim.cluster.deployments["cartservice"].current
    assert sim._rs_boring[b.id]                                                        # skipped from now on
    marker = Marker(source_contains=("x.txt", "plain"))
    sim.deploy("cartservice", message="same", author="a", files=plain_files,           # unchanged template: B gains
               effects=[Effect(kind="latency", service="cartservice", ms=400, bind="revision", marker=marker)])
    assert sim.cluster.deployments["cartservice"].current is b and b.effects and not sim._rs_boring[b.id]
    sim.advance_to(420)
    assert sim.res.lat_add.max() >= 400 * 0.99
    # an env change (revision C), another, then C's template again with effects: C is taken again, with them
    sim.deploy("adservice", message="env", author="a", env={"EXTRA_FLAG": "1"})
    sim.advance_to(700)
    c = sim.cluster.deployments["adservice"].current
    assert sim._rs_boring[c.id]
    sim.deploy("adservice", message="env", author="a", env={"EXTRA_FLAG": "2"})
    sim.advance_to(900)
    sim.deploy("adservice", message="back", author="a", env={"EXTRA_FLAG": "1"},
               effects=[Effect(kind="error_rate", service="adservice", rate=0.5, bind="revision", marker=marker)])
    assert sim.cluster.deployments["adservice"].current is c and c.effects and not sim._rs_boring[c.id]
    sim.advance_to(1200)
    assert any(rs is c for _, rs, _ in faulthook._weights(sim))
    assert checked["calls"] >= 8 and checked["revision"] > 2
