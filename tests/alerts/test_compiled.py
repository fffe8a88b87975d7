"""The compiled (numba) tape kernels equal the numpy reference bit for bit: the summary arrays after every
incremental sync, and every value and presence bit of the window kernel, for every function code, on random
series with NaN gaps, counter resets (several per window), empty windows, offsets and odd ranges."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.alerts import compiled
from sremarathon_env.alerts.tape import CODES, KernelSpec, Tape, window_kernel
from sremarathon_env.telemetry.store import MetricStore

numba = pytest.importorskip("numba")

ST = 15000


def _series(rng, n_rows: int, n_ticks: int) -> np.ndarray:
    """(rows, ticks): counters with frequent resets, gauges, constants, negatives, sparse and empty rows."""
    out = np.empty((n_rows, n_ticks))
    for i in range(n_rows):
        kind = i % 6
        if kind == 0:    # counter, resets now and then (often two or more in a window)
            inc = rng.integers(0, 20, n_ticks).astype(float)
            v = np.cumsum(inc) + rng.integers(0, 100)
            for k in np.flatnonzero(rng.random(n_ticks) < 0.15):
                v[k:] -= v[k] - rng.integers(0, 5)
        elif kind == 1:  # gauge, random values, some negative
            v = rng.normal(0, 50, n_ticks).round(1)
        elif kind == 2:  # constant stretches (changes rare), zeros
            v = np.repeat(rng.integers(-2, 3, n_ticks // 7 + 1), 7)[:n_ticks].astype(float)
        elif kind == 3:  # fractional counter starting near zero (the zero-point clamp of rate/increase)
            v = np.cumsum(rng.random(n_ticks) * 3.7)
        elif kind == 4:  # large values (float rounding in differences)
            v = 1e15 + np.cumsum(rng.integers(0, 1000, n_ticks)) * 0.37
        else:            # mostly absent
            v = rng.normal(0, 1, n_ticks)
            v[rng.random(n_ticks) < 0.8] = np.nan
        gaps = rng.random(n_ticks) < 0.12
        if rng.random() < 0.3:   # a long gap: windows with no sample at all
            a = int(rng.integers(0, n_ticks))
            gaps[a : a + int(rng.integers(5, 40))] = True
        v = v.astype(float)
        v[gaps] = np.nan
        out[i] = v
    if n_rows > 6:
        out[6] = np.nan   # a series with no sample at all
    return out


def _store(data: np.ndarray, fams: int = 3) -> tuple[MetricStore, list]:
    store = MetricStore(step_s=15.0, capacity=32)
    n = len(data)
    parts = np.array_split(np.arange(n), fams)
    families = []
    for j, part in enumerate(parts):
        fam = store.family(f"m{j}_total", ("i",))
        families.append((fam, fam.rows([(str(i),) for i in range(len(part))]), part))
    return store, families


def _write(store, families, data, k):
    for fam, rows, part in families:
        store.write(fam, rows, k, data[part, k])


def _tapes_equal(a: Tape, b: Tape):
    S, N = len(a._row_of), a.N
    assert (b.N, len(b._row_of)) == (N, S)
    for name, extra in Tape._SUMMARIES:
        x, y = getattr(a, name)[:S, : N + extra], getattr(b, name)[:S, : N + extra]
        if name == "POS":   # ranks below each slot's count only
            for s in range(S):
                c = int(a.CS[s, N])
                assert x[s, :c].tobytes() == y[s, :c].tobytes(), (name, s)
        else:
            assert x.tobytes() == y.tobytes(), name


def _spec(rng, n_slots: int, n: int, sorted_runs: bool) -> KernelSpec:
    ranges = [1, 14_999, 15_000, 60_000, 90_500, 300_000, 1_000_999, 3_600_000, 86_400_000]
    offsets = [0, 0, 0, 7_500, 60_000, 600_000, 10 ** 7]
    if sorted_runs:   # runs of rows with one window, as a plan lists them
        k = max(n // 12, 1)
        r = np.repeat(rng.choice(ranges, k), 12)[:n]
        o = np.repeat(rng.choice(offsets, k), 12)[:n]
        if len(r) < n:
            r = np.resize(r, n)
            o = np.resize(o, n)
    else:
        r, o = rng.choice(ranges, n), rng.choice(offsets, n)
    codes = rng.integers(0, len(CODES), n)
    return KernelSpec(rng.integers(0, n_slots, n), r, o, codes)


def _kernel_both(monkeypatch, tape_np, tape_nb, spec, times, t0):
    monkeypatch.setenv("SREMARATHON_NUMBA", "0")
    v0, p0 = window_kernel(tape_np, spec, times, t0, ST)
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    v1, p1 = window_kernel(tape_nb, spec, times, t0, ST)
    assert np.array_equal(p0, p1)
    assert v0.dtype == v1.dtype and v0.shape == v1.shape
    # the same bits where present; where absent the same value too (NaN: any NaN, its payload is not a result)
    assert np.where(p0, v0, 0.0).tobytes() == np.where(p0, v1, 0.0).tobytes()
    same = (v0.view(np.int64) == v1.view(np.int64)) | (np.isnan(v0) & np.isnan(v1))
    assert same.all()
    # into the caller's buffers (filled with garbage first: every cell is written), both paths: the same arrays
    for mode, tape, v, p in (("0", tape_np, v0, p0), ("1", tape_nb, v1, p1)):
        monkeypatch.setenv("SREMARATHON_NUMBA", mode)
        ov, op = np.full(v.shape, np.nan), np.ones(p.shape, bool)
        ov.view(np.int64)[::2] = 12345
        got = window_kernel(tape, spec, times, t0, ST, out=(ov, op))
        assert got[0] is ov and got[1] is op
        assert np.array_equal(op, p) and ov.tobytes() == v.tobytes()


@pytest.mark.parametrize("seed", range(6))
def test_compiled_tape_and_kernel_match_numpy(seed, monkeypatch):
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")   # (numba is installed: the module skips otherwise) loaded now
    assert compiled.kernels() is not None
    rng = np.random.default_rng(seed)
    n_rows, n_ticks = 30, 260
    data = _series(rng, n_rows, n_ticks)
    store, families = _store(data)
    tapes = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("SREMARATHON_NUMBA", mode)
        tapes[mode] = Tape(store, capacity=16)
    t0 = int(rng.integers(0, 3)) * ST   # evaluation clock offset
    registered = 0
    k = 0
    while k < n_ticks:
        step = int(rng.integers(1, 20))
        for j in range(k, min(k + step, n_ticks)):
            _write(store, families, data, j)
        k = min(k + step, n_ticks)
        # register some series late (a pending range of slots, synced from column 0)
        if registered < n_rows and (registered == 0 or rng.random() < 0.3):
            more = int(rng.integers(1, 8))
            pairs = []
            for i in range(registered, min(registered + more, n_rows)):
                fam, rows, part = next(f for f in families if i in f[2])
                pairs.append((fam, int(rows[int(np.flatnonzero(part == i)[0])])))
            registered += len(pairs)
            for mode in ("0", "1"):
                tapes[mode].slots(pairs)
        upto = k if rng.random() < 0.8 else max(k - int(rng.integers(0, 3)), 0)
        for mode in ("0", "1"):
            monkeypatch.setenv("SREMARATHON_NUMBA", mode)
            tapes[mode].sync(upto)
        _tapes_equal(tapes["0"], tapes["1"])
        N = tapes["0"].N
        if N == 0:
            continue
        for sorted_runs in (True, False):
            spec = _spec(rng, len(tapes["0"]._row_of), 90, sorted_runs)
            times = t0 + np.sort(rng.integers(-3, N + 4, 8)).astype(np.int64) * ST + rng.integers(0, 2) * 7_000
            _kernel_both(monkeypatch, tapes["0"], tapes["1"], spec, times, t0)
    assert tapes["0"].resets == tapes["1"].resets == 0


def test_compiled_extend_detects_a_rewritten_column(monkeypatch):
    """The compiled extension reads the last column again, as the numpy one: a change makes the tape start over."""
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    assert compiled.kernels() is not None   # (numba is installed: the module skips otherwise)
    rng = np.random.default_rng(7)
    data = _series(rng, 12, 40)
    for mode in ("0", "1"):
        monkeypatch.setenv("SREMARATHON_NUMBA", mode)
        store, families = _store(data, fams=2)
        tape = Tape(store, capacity=64)
        for fam, rows, _ in families:
            tape.slots([(fam, int(r)) for r in rows])
        for j in range(30):
            _write(store, families, data, j)
        tape.sync()
        fam, rows, part = families[1]
        vals = data[part, 29].copy()
        vals[-1] = -1.0 if vals[-1] == vals[-1] else 3.0
        store.write(fam, rows, 29, vals)   # a column the tape read, rewritten
        for j in range(30, 40):
            _write(store, families, data, j)
        tape.sync()
        assert tape.resets == 1 and tape.N == 40
        if mode == "0":
            ref = tape
    _tapes_equal(ref, tape)


def test_compiled_off_switch(monkeypatch):
    monkeypatch.setenv("SREMARATHON_NUMBA", "0")
    assert compiled.kernels() is None
    assert "off" in compiled.status()
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    assert compiled.kernels() is not None
    assert compiled.status().startswith("compiled kernels: on")


@pytest.mark.parametrize("mode", [None, "auto", "junk"])
def test_auto_mode_loads_after_the_numpy_kernels_spent_their_budget(mode, monkeypatch):
    """Unset (or anything but 0/1): the numpy kernels run until they have spent AUTO_AFTER_S of CPU, then the
    compiled ones load; the tape's numpy paths report their time."""
    if mode is None:
        monkeypatch.delenv("SREMARATHON_NUMBA", raising=False)
    else:
        monkeypatch.setenv("SREMARATHON_NUMBA", mode)
    monkeypatch.setattr(compiled, "_LOADED", [])
    monkeypatch.setattr(compiled, "_SPENT", [0.0])
    monkeypatch.setattr(compiled, "AUTO_AFTER_S", 0.01)
    assert compiled.kernels() is None and "not loaded yet" in compiled.status()
    data = _series(np.random.default_rng(3), 60, 300)
    store, families = _store(data)
    tape = Tape(store, capacity=512)
    for fam, rows, _ in families:
        tape.slots([(fam, int(r)) for r in rows])
    spec = KernelSpec(np.arange(60), np.full(60, 3_600_000), np.zeros(60, np.int64), np.arange(60) % 8)
    for j in range(300):
        _write(store, families, data, j)
        if j % 8 == 7:
            tape.sync()
            window_kernel(tape, spec, np.arange(j - 7, j + 1, dtype=np.int64) * ST, 0, ST)
        if compiled._LOADED:
            break
    assert compiled._SPENT[0] >= 0.01 and compiled.kernels() is not None
    assert compiled.status().startswith("compiled kernels: on")
