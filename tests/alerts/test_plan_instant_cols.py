"""`plan._instant_cols_py` (Python ints, a call's few ticks) against `plan._instant_cols_np` (numpy: the definition),
on random grids, offsets, store lengths and evaluation times (before the grid, past the store, gaps, repeats), and
`_instant_cols` choosing between them."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.alerts import plan as PL
from sremarathon_env.alerts.engine import _Ctx


def _same(a, b) -> bool:
    ref_a, j_a, ok_a, js_a, all_a = a
    ref_b, j_b, ok_b, js_b, all_b = b
    return (all(np.array_equal(x, y) and x.dtype == y.dtype and x.shape == y.shape
                for x, y in ((ref_a, ref_b), (j_a, j_b), (ok_a, ok_b)))
            and js_a == js_b and type(all_a) is type(all_b) is bool and all_a == all_b)


@pytest.mark.parametrize("seed", range(40))
def test_python_ints_equal_numpy(seed):
    rng = np.random.default_rng(seed)
    step = int(rng.choice([1_000, 15_000, 30_000, 7]))
    g = PL._Grid(int(rng.integers(-3, 4)) * step + int(rng.integers(0, step)), step,
                 int(rng.choice([0, step, 300_000, 5 * step + 1])))
    for _ in range(25):
        T = int(rng.integers(0, PL.INSTANT_PY_MAX + 1))
        start = int(rng.integers(-10, 400))
        if rng.random() < 0.6:   # the alert engine's calls: consecutive ticks
            times = (start + np.arange(T, dtype=np.int64)) * 15_000
        else:                    # anything: gaps, repeats, unsorted, off the grid
            times = np.sort(rng.integers(-60_000, 6_000_000, size=T)).astype(np.int64)
            if rng.random() < 0.5:
                rng.shuffle(times)
        n_ticks = int(rng.integers(0, 400))
        offset = int(rng.choice([0, 15_000, -30_000, int(rng.integers(-100_000, 100_000))]))
        E = PL._Env(times, n_ticks, _Ctx(times, 15_000))
        assert _same(PL._instant_cols_py(g, E, offset), PL._instant_cols_np(g, E, None, offset))


def test_instant_cols_picks_the_python_path_only_where_it_applies(monkeypatch):
    calls = []
    monkeypatch.setattr(PL, "_instant_cols_py", lambda *a: calls.append("py") or PL._instant_cols_np(a[0], a[1], None, a[2]))
    g = PL._Grid(0, 15_000, 300_000)
    for T, at, off, expect, dt in ((8, None, 0, "py", np.int64), (PL.INSTANT_PY_MAX + 1, None, 0, "np", np.int64),
                                   (8, 60_000, 0, "np", np.int64), (8, None, 1.5, "np", np.int64),
                                   (8, None, 0, "np", np.int32)):
        times = np.arange(T, dtype=dt) * 15_000
        E = PL._Env(times, 50, _Ctx(times, 15_000))
        calls.clear()
        got = PL._instant_cols(g, E, at, off)
        assert calls == ([expect] if expect == "py" else [])
        assert _same(got, PL._instant_cols_np(g, E, at, off))
        assert PL._instant_cols(g, E, at, off) is got   # cached per call
