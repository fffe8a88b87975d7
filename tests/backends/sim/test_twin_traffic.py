"""Traffic behaviour of the twin: healthy baselines, dependency failures, deadlines, zones."""

import numpy as np
import pytest

from apps import load_app, parse_app
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim.model import CompiledApp
from sremarathon_env.backends.sim.traffic import TrafficModel, add_children


@pytest.mark.parametrize("name", ["online-boutique", "train-ticket", "astronomy-shop"])
def test_healthy_app_has_near_zero_errors_and_plausible_latency(name):
    sim = SimBackend(name, seed=4)
    ev = sim.advance_to(1800.0)
    total = sum(e.total for e in ev)
    assert total > 100
    assert sum(e.failed for e in ev) / total < 0.005
    assert sum(e.slow for e in ev) / total < 0.005
    h = sim.path_health(None)
    assert 1.0 < h["p95_ms"] < 2500.0
    for s in sim.app.service_names:
        assert sim.service_health(s)["ready"] >= 1


def test_fatal_dependency_down_fails_entry_requests_degrading_one_only_degrades(ob):
    sim = SimBackend(ob, seed=1)
    sim.advance_to(300)
    assert sim.scale("productcatalogservice", 0).ok
    ev = sim.advance_to(600)[-4:]
    assert sum(e.failed for e in ev) / sum(e.total for e in ev) > 0.5
    assert sim.edge_health("frontend", "productcatalogservice")["error_ratio"] == pytest.approx(1.0)
    sim.scale("productcatalogservice", 1)
    sim.advance_to(900)
    assert sim.path_health(None)["error_ratio"] < 0.01
    sim.scale("adservice", 0)
    ev = sim.advance_to(1200)[-4:]
    tot = sum(e.total for e in ev)
    assert sum(e.failed for e in ev) / tot < 0.01
    assert sum(e.degraded for e in ev) / tot > 0.3
    assert sim.path_health("index")["degraded_ratio"] > 0.9
    assert sim.path_health("setCurrency")["degraded_ratio"] < 1e-6


def test_ad_deadline_drops_ads_silently_when_adservice_is_slow(ob):
    from faults.effects import Effect

    sim = SimBackend(ob, seed=2)
    sim.advance_to(120)
    h = sim.apply_effect(Effect(kind="latency", service="adservice", ms=400))
    sim.advance_to(300)
    idx = sim.path_health("index")
    assert idx["error_ratio"] < 0.01 and idx["degraded_ratio"] > 0.9
    assert idx["p95_ms"] < 400  # the frontend stops waiting at 100 ms
    sim.remove_effect(h)
    sim.advance_to(420)
    assert sim.path_health("index")["degraded_ratio"] < 0.05


def test_cross_zone_placement_changes_latency(ob):
    data = ob.model_dump()
    for s in data["services"]:
        s["node"] = "node-a1" if s["name"] in ("frontend", "productcatalogservice", "currencyservice", "cartservice",
                                                 "redis-cart", "recommendationservice", "adservice") else s["node"]
    same_zone = parse_app(data)
    data2 = ob.model_dump()
    for s in data2["services"]:
        s["node"] = "node-b1" if s["name"] != "frontend" else "node-a1"
    cross = parse_app(data2)
    a, b = SimBackend(same_zone, seed=3, noise_load=False), SimBackend(cross, seed=3, noise_load=False)
    a.advance_to(300)
    b.advance_to(300)
    la, lb = a.path_health("browseProduct")["p95_ms"], b.path_health("browseProduct")["p95_ms"]
    assert lb > la + 50  # ~9 cross-zone calls at 25 ms each on a product page
    # draining zone b moves the pods and the latency follows
    b.drain_node("node-b2")
    b.drain_node("node-b1")
    b.advance_to(420)
    assert b.path_health("browseProduct")["p95_ms"] < lb - 50


def test_load_factor_effect_raises_rates_and_cpu(ob):
    from faults.effects import Effect

    sim = SimBackend(ob, seed=5, noise_load=False)
    sim.advance_to(120)
    r0 = sim.service_health("frontend")["rate"]
    sim.apply_effect(Effect(kind="load_factor", factor=3.0))
    sim.advance_to(240)
    assert sim.service_health("frontend")["rate"] == pytest.approx(3 * r0, rel=1e-6)


def test_rates_are_steps_rates_and_edge_rates_can_be_left_out():
    from sremarathon_env.backends.sim.model import CompiledApp
    from sremarathon_env.backends.sim.traffic import TrafficModel

    m = CompiledApp(load_app("astronomy-shop"))
    tm = TrafficModel(m)
    task = np.random.default_rng(3).uniform(0.1, 2.0, (5, m.P))
    out = tm.step(task, tm.healthy_inputs())
    node, svc, edge = tm.rates(task)
    assert np.array_equal(node, out.node_rate) and np.array_equal(svc, out.svc_rate)
    assert np.array_equal(edge, out.edge_rate)
    node2, svc2, none = tm.rates(task, edges=False)
    assert none is None and np.array_equal(node2, node) and np.array_equal(svc2, svc)


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket", "astronomy-shop"])
def test_add_children_equals_the_fancy_index_update(app):
    """`add_children` against ``LL[:, :, parents] += reduceat(...)`` bit for bit, on every level of the app's
    call trees, for one and several ticks, with values of every magnitude and sign (and +-0, inf)."""
    m = CompiledApp(load_app(app))
    tm = TrafficModel(m)
    rng = np.random.default_rng(7)
    for K in (1, 2, 5):
        LL = rng.standard_normal((2, K, m.N)) * 10.0 ** rng.integers(-300, 300, size=(2, K, m.N))
        LL.flat[::17] = 0.0
        LL.flat[5::23] = -0.0
        LL.flat[3::97] = np.inf
        want, got = LL.copy(), LL.copy()
        with np.errstate(all="ignore"):   # inf * 0 and overflow are part of the point
            for idx, dl, dl_k, dl_K, W, starts, parents in tm._levels:
                assert len(np.unique(parents)) == len(parents)
                want[:, :, parents] += np.add.reduceat(want[:, :, idx] * W, starts, axis=2)
                add_children(got, idx, W, starts, parents)
                assert np.array_equal(got.view(np.int64), want.view(np.int64))


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket"])
def test_group_sums_gather_as_fancy_indexing_does(app):
    """`_Groups` gathers its columns with ``take``: the floats of ``X[..., order]`` (with weights and groups
    without members)."""
    from sremarathon_env.backends.sim.traffic import _Groups

    m = CompiledApp(load_app(app))
    tm = TrafficModel(m)
    X = np.random.default_rng(3).standard_normal((3, 10, m.N))
    for g in (tm._svc, tm._edge, tm._deg, _Groups(m.node_svc[: m.N // 2], m.S + 3)):
        Y = X[..., : len(g.order)] if len(g.order) < m.N else X
        cols = Y[..., g.order]
        if g.weight is not None:
            cols = cols * g.weight
        want = np.zeros(Y.shape[:-1] + (g.n,))
        if len(g.order):
            want[..., g.present] = np.add.reduceat(cols, g.starts, axis=-1)
        assert np.array_equal(g(Y).view(np.int64), want.view(np.int64))


def test_norm_cdf_in_place_equals_its_definition():
    """`norm_cdf` (in place) against `norm_cdf_plain`, bit for bit: every magnitude and sign, +-0, +-inf, NaN,
    subnormals; 1-D and 3-D, float and integer input."""
    from sremarathon_env.backends.sim.util import norm_cdf, norm_cdf_plain

    rng = np.random.default_rng(11)
    x = rng.standard_normal(20000) * 10.0 ** rng.integers(-320, 308, 20000)
    x = np.concatenate([x, rng.standard_normal(2000), [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -5e-324]])
    with np.errstate(all="ignore"):
        for arr in (x, x[:2040].reshape(4, 30, 17), np.arange(-40, 40)):
            got, want = norm_cdf(arr), norm_cdf_plain(arr)
            assert got.shape == want.shape and got.dtype == want.dtype == np.float64
            assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_seqsum_row_by_row_equals_the_cumulative_sum():
    """`seqsum` (row by row for few ticks or wide rows) against `seqsum_plain` (cumsum), bit for bit: one to
    70 ticks, rows of 1 to 5000 values in 1-3 dimensions, values of every magnitude, broadcast increments."""
    from sremarathon_env.backends.sim.util import SEQSUM_ROWS, SEQSUM_WIDTH, seqsum, seqsum_plain

    rng = np.random.default_rng(2)
    for K in (1, 2, 3, SEQSUM_ROWS, SEQSUM_ROWS + 1, 17, 70):
        for shape in ((1,), (SEQSUM_WIDTH - 1,), (SEQSUM_WIDTH,), (5000,), (13, 2, 14), (40, 7)):
            start = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 8, size=shape)
            inc = rng.standard_normal((K,) + shape) * 10.0 ** rng.integers(-8, 8, size=(K,) + shape)
            for i in (inc, np.broadcast_to(inc[0], inc.shape)):
                got, want = seqsum(start, i), seqsum_plain(start, i)
                assert got.shape == want.shape == i.shape and got.dtype == want.dtype
                assert np.array_equal(got.view(np.int64), want.view(np.int64))
