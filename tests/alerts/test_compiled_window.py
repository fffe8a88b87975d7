"""The compiled window kernel's zero-point clamp of rate / increase (a counter extrapolated back to zero) against the
numpy reference, where the compiled kernel decides without dividing: small counters whose first value is near, at
or below the window's increase, and gaps that put the first sample far after the window's start (d_start near or
beyond the sampled interval)."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.alerts import compiled
from sremarathon_env.alerts.tape import CODES, KernelSpec, Tape
from sremarathon_env.telemetry.store import MetricStore

from .test_compiled import ST, _kernel_both

numba = pytest.importorskip("numba")


def _counters(rng, n_rows: int, n_ticks: int) -> np.ndarray:
    out = np.empty((n_rows, n_ticks))
    for i in range(n_rows):
        start = float(rng.choice([0.0, 0.5, 1.0, 2.0, 3.0, 7.0, 1e-300, 5e-324]))
        inc = rng.choice([0.0, 0.5, 1.0, 1.0, 2.0, 3.0], n_ticks)
        v = start + np.concatenate(([0.0], np.cumsum(inc[1:])))
        if rng.random() < 0.3:   # resets
            for k in np.flatnonzero(rng.random(n_ticks) < 0.05):
                v[k:] -= v[k] - float(rng.integers(0, 3))
        gaps = rng.random(n_ticks) < float(rng.choice([0.0, 0.1, 0.4]))
        for _ in range(int(rng.integers(0, 4))):   # long gaps: first samples late in windows
            a = int(rng.integers(0, n_ticks))
            gaps[a : a + int(rng.integers(3, 30))] = True
        v[gaps] = np.nan
        out[i] = v
    return out


@pytest.mark.parametrize("seed", range(4))
def test_zero_point_clamp_matches_numpy(seed, monkeypatch):
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    assert compiled.kernels() is not None
    rng = np.random.default_rng(100 + seed)
    n_rows, n_ticks = 40, 160
    data = _counters(rng, n_rows, n_ticks)
    store = MetricStore(step_s=15.0, capacity=n_ticks)
    fam = store.family("c_total", ("i",))
    rows = fam.rows([(str(i),) for i in range(n_rows)])
    for k in range(n_ticks):
        store.write(fam, rows, k, data[:, k])
    tapes = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("SREMARATHON_NUMBA", mode)
        tapes[mode] = Tape(store)
        tapes[mode].slots([(fam, int(r)) for r in rows])
        tapes[mode].sync()
    windows = [(r, o) for r in (30_000, 45_000, 60_000, 100_000, 300_000, 900_000) for o in (0, 15_000, 20_000)]
    for code in (CODES["rate"], CODES["increase"], CODES["delta"]):
        n = len(windows) * n_rows
        spec = KernelSpec(np.tile(np.arange(n_rows), len(windows)), np.repeat([w[0] for w in windows], n_rows),
                          np.repeat([w[1] for w in windows], n_rows), np.full(n, code))
        for t0 in (0, 7_000):
            times = np.arange(2, n_ticks + 3, dtype=np.int64) * ST + t0 + int(rng.integers(0, 2)) * 5_000
            _kernel_both(monkeypatch, tapes["0"], tapes["1"], spec, times, t0)
