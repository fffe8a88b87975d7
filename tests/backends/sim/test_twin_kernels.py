"""The twin's compiled kernels (`sremarathon_env.backends.sim.kernels`) give the numpy reference's bits: a cAdvisor
block (`MetricWriter._pods_block`: the counters' cells in the four families, the per-slot running totals and last
utilisation) and the per-service memory utilisation (`SimBackend._mem_util`, and its definition `_mem_util_plain`),
on random blocks (one tick and many, per-slot and per-tick running flags, burn or none, limits or none, stopped pods,
restarted counters) and on whole marathons of the three apps with agent actions (store and history of a twin with the
kernels equal to those of one without)."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim import backend as backend_mod
from sremarathon_env.backends.sim import kernels as kernels_mod
from sremarathon_env.backends.sim import metrics as metrics_mod
from tests.backends.sim.twins import assert_same_twins

numba = pytest.importorskip("numba")


@pytest.fixture
def ks(monkeypatch):
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    k = kernels_mod.kernels()
    assert k is not None
    return k


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _twin(app: str = "online-boutique", seed: int = 3) -> SimBackend:
    sim = SimBackend(app, seed=seed)
    sim.advance_to(300.0)
    sim.store.complete()
    return sim


def _random_block(rng, sim: SimBackend, K: int, per_tick_running: bool, burn: str):
    """A block over the twin's flow slots with random rates, working sets, limits (some none) and running flags."""
    w = sim.writer
    sl = w.flow_slots_now()
    n = len(sl)
    lay = list(sim._layout_arrays(sl))
    has_lim = rng.random(n) < 0.7
    lay[6] = has_lim
    lay[7] = np.where(has_lim, rng.choice([0.05, 0.1, 0.5, 2.0], n), 1.0)
    lay[4] = rng.choice([0.0, 0.3, 2.5, 40.0], n)
    ppr = rng.choice([0.0, 0.7, 3.1, 250.0, 1e4], (K, n)) * rng.random((K, n))
    running = rng.random((K, n) if per_tick_running else n) < 0.8
    mem = rng.random((K, n)) * 300.0
    b = None if burn == "none" else rng.random((K, n) if burn == "tick" else n) * rng.choice([0.0, 1.5], n)
    lag = rng.random((K, len(w.lag)))
    return sl, w.flow_rows, tuple(lay), ppr, b, running, mem, lag


def _state(sim: SimBackend) -> list[bytes]:
    w = sim.writer
    return [_bits(a) for a in (sim.cpu_cum, sim.periods_cum, sim.throttled_cum, sim.pod_util, w.cpu._data,
                               w.periods._data, w.throttled._data, w.mem._data, w.lag._data)]


@pytest.mark.parametrize("seed", range(6))
def test_pods_block_kernel_gives_the_numpy_bits(ks, seed):
    rng = np.random.default_rng(seed)
    sim = _twin(seed=seed + 1)
    w = sim.writer
    for name in ("cpu_cum", "periods_cum", "throttled_cum", "pod_util"):   # running totals so far, some restarted
        a = getattr(sim, name)
        a[:] = rng.random(len(a)) * 1e3 * (rng.random(len(a)) < 0.8)
    k0 = sim.store._n
    for K, per_tick, burn in ((1, False, "none"), (1, True, "slot"), (4, False, "tick"), (7, True, "none"),
                              (13, False, "slot"), (64, True, "tick")):
        block = _random_block(rng, sim, K, per_tick, burn)
        sim.store.set_n_ticks(k0 + K)
        before = [getattr(sim, n).copy() for n in ("cpu_cum", "periods_cum", "throttled_cum", "pod_util")]
        data = [f._data.copy() for f in (w.cpu, w.periods, w.throttled, w.mem, w.lag)]
        w._pods_block(k0, K, 15.0, *block)
        want = _state(sim)
        for n, a in zip(("cpu_cum", "periods_cum", "throttled_cum", "pod_util"), before):
            setattr(sim, n, a)
        for f, d in zip((w.cpu, w.periods, w.throttled, w.mem, w.lag), data):
            f._data = d
        w._pods_compiled(ks, k0, K, 15.0, *block)
        assert _state(sim) == want, (K, per_tick, burn)
        k0 += K


def test_pods_block_kernel_leaves_a_block_outside_the_arrays_to_numpy(ks):
    sim = _twin()
    w = sim.writer
    sl = w.flow_slots_now()
    lay = sim._layout_arrays(sl)
    n = len(sl)
    cols = w.cpu._data.shape[1]
    args = (sl, w.flow_rows, lay, np.ones((2, n)), None, np.ones(n, bool), np.ones((2, n)), np.zeros((2, 0)))
    with pytest.raises((IndexError, ValueError)):   # numpy's error, no cell written by the kernel first
        w._pods_compiled(ks, cols - 1, 2, 15.0, *args)
    assert ks.pods_block(cols - 1, 15.0, 150.0, 0.002, 1.0, sl, w.flow_rows, lay[4], lay[6], lay[7], np.ones((2, n)),
                         kernels_mod.NO_BURN, np.ones((1, n), bool), np.ones((2, n)), sim.cpu_cum, sim.periods_cum,
                         sim.throttled_cum, sim.pod_util, w.cpu._data, w.periods._data, w.throttled._data,
                         w.mem._data) == -1


@pytest.mark.parametrize("seed", range(6))
def test_mem_util_kernel_gives_the_numpy_bits(ks, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    sim = _twin(seed=seed + 1)
    sl = sim.writer.flow_slots_now()
    n = len(sl)
    sim.cluster.p_mem_lim[sl[rng.random(n) < 0.3]] = np.nan   # pods without a limit
    if seed % 2:   # several pods per service (in no order), some services without any
        sim.cluster.p_svc[sl] = rng.integers(0, max(1, sim.m.S // 3), n)
    sim._blk = None   # (the layout's constants made again)
    sim._mem_layout = (None,)
    for K in (1, 3, 17):
        mem = rng.random((K, n)) * 400.0 * (rng.random((K, n)) < 0.9)
        running = rng.random(n) < 0.75
        if seed == 0:
            running[:] = False   # none runs: every service 0
        got = sim._mem_util(mem, running, sl)
        with monkeypatch.context() as mp:
            mp.setattr(backend_mod, "kernels", lambda: None)
            want = sim._mem_util(mem, running, sl)
        assert _bits(got) == _bits(want) == _bits(sim._mem_util_plain(mem, running, sl))


@pytest.mark.parametrize("app,seed", [("online-boutique", 2), ("train-ticket", 3), ("astronomy-shop", 4)])
def test_twins_with_kernels_equal_twins_without(monkeypatch, app, seed):
    """Whole marathons with actions and queries: the kernels' twin has the store and history of the numpy one's."""
    from tests.backends.sim.test_twin_pending_writes import _marathon

    calls = []
    orig = kernels_mod.kernels

    def counted():
        k = orig()
        calls.append(k is not None)
        return k

    monkeypatch.setattr(metrics_mod, "kernels", counted)
    monkeypatch.setattr(backend_mod, "kernels", counted)
    monkeypatch.setenv("SREMARATHON_NUMBA", "0")
    plain = _marathon(app, seed, True)
    assert calls and not any(calls)
    calls.clear()
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    fast = _marathon(app, seed, True)
    assert calls and all(calls)
    assert_same_twins(plain.backend, fast.backend)
    for name in ("cpu_cum", "periods_cum", "throttled_cum", "pod_util"):
        assert _bits(getattr(plain.backend, name)) == _bits(getattr(fast.backend, name)), name


_CUMS = ("h_cum", "h_sum_cum", "h_cnt_cum", "lg_cum", "lg_slow_cum", "lg_deg_cum")


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket"])
def test_traffic_counter_kernel_gives_the_numpy_bits(ks, app):
    """`MetricWriter._cum_compiled` writes the histogram and load-generator cells and keeps the running totals that
    `_cum_numpy` (`seqsum`) does, for one tick and for blocks past seqsum's row-by-row size."""
    rng = np.random.default_rng(7)
    sim = _twin(app)
    w = sim.writer
    fams = (w.h_bucket, w.h_sum, w.h_count, w.lg_req, w.lg_slow, w.lg_deg)
    k0 = sim.store._n
    for K in (1, 3, 4, 5, 9, 40):
        incs = metrics_mod.TrafficIncrements(*(rng.random((K,) + getattr(w, c).shape) * rng.choice([0.0, 1e-3, 7.0, 1e6])
                                               for c in ("req_cum", "h_cum", "h_sum_cum", "h_cnt_cum", "lg_cum",
                                                         "lg_slow_cum", "lg_deg_cum")))
        sim.store.set_n_ticks(k0 + K)
        cums = {c: getattr(w, c).copy() for c in _CUMS}
        data = [f._data.copy() for f in fams]
        w._cum_numpy(slice(k0, k0 + K), K, incs)
        want = [_bits(getattr(w, c)) for c in _CUMS] + [_bits(f._data) for f in fams]
        for c, a in cums.items():
            setattr(w, c, a)
        for f, d in zip(fams, data):
            f._data = d
        w._cum_compiled(ks, k0, K, incs)
        assert [_bits(getattr(w, c)) for c in _CUMS] + [_bits(f._data) for f in fams] == want, K
        assert all(getattr(w, c).shape == cums[c].shape for c in _CUMS)
        k0 += K


def test_fill_rows_kernel_gives_numpys_slice_assignment(ks):
    """`kernels.fill_rows` is ``data[r0:r1, a:b] = vals[r0:r1, None]`` where the bounds lie inside the arrays, and
    leaves everything to numpy (-1, nothing written) where a slice would clip."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        R, C = int(rng.integers(1, 40)), int(rng.integers(1, 50))
        data = rng.random((R, C))
        data[rng.random((R, C)) < 0.2] = np.nan
        vals = rng.random(int(rng.integers(1, 60)))
        vals[rng.random(len(vals)) < 0.3] = np.nan
        r0, r1 = sorted(rng.integers(0, R + 3, 2).tolist())
        a, b = sorted(rng.integers(0, C + 3, 2).tolist())
        inside = r1 <= R and b <= C and r1 <= len(vals)
        want = data.copy()
        if inside:
            want[r0:r1, a:b] = vals[r0:r1, None]
        got = data.copy()
        assert ks.fill_rows(got, r0, r1, a, b, vals) == (0 if inside else -1)
        assert _bits(got) == _bits(want)


@pytest.mark.parametrize("app,seed", [("online-boutique", 1), ("astronomy-shop", 2), ("train-ticket", 3)])
def test_state_rows_kernel_gives_the_numpy_bits(ks, monkeypatch, app, seed):
    """A block's state fields in its history rows (memory utilisation, consumer lag into callees - several edges into
    one callee too -, ready, desired, restarts), with and without the kernel, other fields left as they were."""
    rng = np.random.default_rng(seed)
    sim = _twin(app, seed)
    sl = sim.writer.flow_slots_now()
    n = len(sl)
    if seed % 2:
        sim.cluster.p_svc[sl] = rng.integers(0, max(1, sim.m.S // 2), n)
        sim._blk = None
        sim._mem_layout = (None,)
    callee = rng.integers(0, sim.m.S, 4)
    callee[1] = callee[0]
    sim._lag_callee, sim._lag_callee_a = callee.tolist(), callee.astype(np.intp)
    sim.ready_count = rng.integers(0, 4, sim.m.S).astype(float)
    sim._desired = rng.integers(0, 4, sim.m.S).astype(float)
    sim._restarts = rng.integers(0, 9, sim.m.S).astype(float)
    for K in (1, 2, 9):
        mem = rng.random((K, n)) * 400.0
        running = rng.random(n) < 0.7
        lag = rng.random((K, 4)) * rng.choice([0.0, 50.0])
        base = rng.random((K, 12, sim.m.S))
        got, want = base.copy(), base.copy()
        sim._state_rows(got, mem, running, sl, lag)
        with monkeypatch.context() as mp:
            mp.setattr(backend_mod, "kernels", lambda: None)
            sim._state_rows(want, mem, running, sl, lag)
        assert _bits(got) == _bits(want)


def _twin_writes(sim: SimBackend, seed: int) -> None:
    """Random traffic writes (several runs each, counters that cross half a request inside later runs)."""
    rng = np.random.default_rng(seed)
    w = sim.writer
    k0 = sim.store._n
    for K in (1, 2, 5, 9, 30):
        cuts = sorted(set(rng.integers(1, K, int(rng.integers(0, 4))).tolist())) if K > 1 else []
        edges = [0] + cuts + [K]
        bounds = list(zip(edges[:-1], edges[1:]))
        req = rng.random((K,) + w.req_cum.shape) * rng.choice([0.0, 0.01, 0.2, 3.0], w.req_cum.shape)
        incs = metrics_mod.TrafficIncrements(req, *(rng.random((K,) + getattr(w, c).shape)
                                                    for c in ("h_cum", "h_sum_cum", "h_cnt_cum", "lg_cum",
                                                              "lg_slow_cum", "lg_deg_cum")))
        sim.store.set_n_ticks(k0 + K)
        w.write_traffic(k0, K, 15.0, None, np.zeros(sim.m.E), bounds, incs)
        k0 += K


def test_request_counter_kernels_give_the_numpy_store(ks, monkeypatch):
    """`write_traffic`'s request counters by `req_cum` / `take_rows`: the running totals, the series enabled (in the
    same order: the same rows), their cells and the NaN before a series' first run, as the numpy loop over runs."""
    twins = {}
    for mode in ("numpy", "kernels"):
        sim = _twin("online-boutique", 5)
        assert sim.writer.spans is None
        with monkeypatch.context() as mp:
            if mode == "numpy":
                mp.setattr(metrics_mod, "kernels", lambda: None)
            before = len(sim.writer.req_rows)
            _twin_writes(sim, 11)
            assert len(sim.writer.req_rows) > before + 5   # series enabled inside the writes
        twins[mode] = sim
    a, b = twins["numpy"].writer, twins["kernels"].writer
    assert _bits(a.req_cum) == _bits(b.req_cum) and a.req_cum.shape == b.req_cum.shape
    assert _bits(a.req_on) == _bits(b.req_on) and _bits(a._flat_row) == _bits(b._flat_row)
    assert a.req._label_values == b.req._label_values
    n = a.store._n
    assert _bits(a.req._data[: len(a.req._label_values), :n]) == _bits(b.req._data[: len(b.req._label_values), :n])


def test_fill_live_kernel_writes_the_live_rows_of_the_slice(ks):
    """`kernels.fill_live`: numpy's slice assignment on the rows with a live series, every other cell as it was; -1
    with nothing written where a bound lies outside the arrays."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        R, C = int(rng.integers(1, 40)), int(rng.integers(1, 50))
        data = rng.random((R, C))
        vals = rng.random(int(rng.integers(1, 60)))
        live = rng.random(int(rng.integers(1, 60))) < 0.6
        r0, r1 = sorted(rng.integers(0, R + 3, 2).tolist())
        a, b = sorted(rng.integers(0, C + 3, 2).tolist())
        inside = r1 <= R and b <= C and r1 <= len(vals) and r1 <= len(live)
        want = data.copy()
        if inside:
            rows = np.flatnonzero(live[r0:r1]) + r0
            want[rows, a:b] = vals[rows, None]
        got = data.copy()
        assert ks.fill_live(got, r0, r1, a, b, vals, live) == (0 if inside else -1)
        assert _bits(got) == _bits(want)
