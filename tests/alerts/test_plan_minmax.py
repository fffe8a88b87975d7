"""The plan's ``max_over_time`` / ``min_over_time`` over a batch of rows (``_minmax_windows``: the window's extreme,
the first of its zeros where that is a zero) gives what ``rangefuncs`` gives, bit for bit: samples with signed
zeros, infinities and gaps, windows that are empty, clipped at either end, or past the block."""

from __future__ import annotations

import numpy as np

from sremarathon_env.alerts.plan import _minmax_windows
from sremarathon_env.alerts.rangefuncs import RANGE_FUNCS
from sremarathon_env.alerts.values import Win


def test_minmax_windows_equal_rangefuncs():
    rng = np.random.default_rng(9)
    special = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 2.5, np.nan])
    for case in range(500):
        n, G, T = int(rng.integers(1, 6)), int(rng.integers(0, 25)), int(rng.integers(1, 9))
        v = special[rng.integers(len(special), size=(n, G))]
        if rng.random() < 0.3:
            v = np.where(rng.random((n, G)) < 0.5, np.nan, rng.normal(size=(n, G)))
        lo = rng.integers(-4, G + 3, size=T)
        hi = lo + rng.integers(-2, 12, size=T)
        w = Win([], v, ~np.isnan(v), np.arange(G, dtype=np.int64) * 15000, lo, hi, 300000, 0)
        for name in ("max_over_time", "min_over_time"):
            want_v, want_p = RANGE_FUNCS[name](w, np.zeros(T, dtype=np.int64), None)
            got_v, got_p = _minmax_windows(v, lo, hi, name == "max_over_time")
            assert np.array_equal(got_p, want_p), (case, name)
            assert got_v.shape == want_v.shape, (case, name)
            a = np.where(np.isnan(got_v), np.nan, got_v).view(np.int64)
            b = np.where(np.isnan(want_v), np.nan, np.asarray(want_v, dtype=np.float64)).view(np.int64)
            assert np.array_equal(a, b), (case, name, got_v, want_v)
