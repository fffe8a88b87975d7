"""The compiled check of left-out rows (``compiled.all_nan``, `plan._all_nan_compiled`) against its numpy definition
(``np.isnan(data[rows, c0:c1]).all()``) on random store arrays, rows and column ranges, the compiled choice of rows
to leave out (``compiled.prunable``, `plan._prunable`) against its numpy definition on random families, left-out
rows, windows and thresholds, and the plan's exclusions with both: rows left out and taken back as with the numpy
check (the plan test run with the kernels on, the kernel answering both ways)."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.alerts import compiled
from sremarathon_env.alerts import plan as PL

numba = pytest.importorskip("numba")


@pytest.fixture
def nb(monkeypatch):
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    k = compiled.kernels()
    assert k is not None
    return k


def _sparse(rng, R: int, C: int, share: float) -> np.ndarray:
    """An (R, C) store array without samples (NaN) but in about ``share`` of its cells, which hold one of a few
    values (signed zeros, infinities)."""
    data = np.full((R, C), np.nan)
    data[rng.random((R, C)) < share] = rng.choice([0.0, -0.0, 1.5, np.inf, -np.inf])
    return data


@pytest.mark.parametrize("seed", range(30))
def test_all_nan_equals_numpy(nb, seed):
    rng = np.random.default_rng(seed)
    R, C = int(rng.integers(1, 40)), int(rng.integers(1, 30))
    data = _sparse(rng, R, C, rng.random() * 0.2)
    for _ in range(40):
        rows = np.sort(rng.choice(R, size=int(rng.integers(1, R + 1)), replace=False)).astype(np.intp)
        if rng.random() < 0.3:
            rows = rng.integers(0, R, size=int(rng.integers(1, 6))).astype(np.intp)   # repeats, any order
        c0 = int(rng.integers(0, C + 2))
        c1 = int(rng.integers(c0, C + 6))   # (past the array: the slice clips)
        want = bool(np.isnan(data[rows, c0:c1]).all())
        got = nb.all_nan(data, rows, c0, c1)
        assert got == (1 if want else 0), (rows, c0, c1)
        assert PL._all_nan_compiled(nb, data, rows, c0, c1) is want
    # outside the array (numpy wraps a negative row and raises past the end) or a negative start: not decided
    assert nb.all_nan(data, np.array([-1], np.intp), 0, C) == -1
    assert nb.all_nan(data, np.array([R], np.intp), 0, C) == -1
    assert nb.all_nan(data, np.array([0], np.intp), -1, C) == -1
    assert PL._all_nan_compiled(nb, data, np.array([-1], np.intp), 0, C) is False


def test_other_layouts_are_left_to_numpy(nb):
    data = np.full((4, 6), np.nan)
    rows = np.array([0, 2], np.intp)
    assert PL._all_nan_compiled(nb, data, rows, 0, 6) is True
    assert PL._all_nan_compiled(nb, np.asfortranarray(data), rows, 0, 6) is False
    assert PL._all_nan_compiled(nb, data[:, ::2], rows, 0, 3) is False
    assert PL._all_nan_compiled(nb, data.astype(np.float32), rows, 0, 6) is False
    assert PL._all_nan_compiled(nb, data, rows.astype(np.int32), 0, 6) is False
    assert PL._all_nan_compiled(nb, data, np.array([0, 1, 2, 3], np.intp)[::2], 0, 6) is False


@pytest.mark.parametrize("seed", range(30))
def test_prunable_equals_numpy(nb, seed):
    rng = np.random.default_rng(seed)
    cap_rows, C = int(rng.integers(1, 60)), int(rng.integers(1, 30))
    data = _sparse(rng, cap_rows, C, rng.random())
    decided = 0
    for _ in range(40):
        rows = int(rng.integers(0, cap_rows + 1))
        n = int(rng.integers(1, C + 1))
        c0 = int(rng.integers(0, n))
        ent = PL._Excluded(None)
        if rows and rng.random() < 0.6:   # left-out rows: mostly rows without a sample in the last column
            pool = np.flatnonzero(np.isnan(data[:rows, n - 1])) if rng.random() < 0.8 else np.arange(rows)
            if len(pool):
                ent.set(np.sort(rng.choice(pool, size=int(rng.integers(1, len(pool) + 1)), replace=False)))
        least = max(1, (rows - len(ent.rows)) * float(rng.choice([0.0, 0.1, 0.25, 0.5, 1.0])))
        want = PL._prunable(None, data, rows, ent, c0, n, least)
        got = PL._prunable(nb, data, rows, ent, c0, n, least)
        if want is None:
            assert got is None
            continue
        decided += 1
        assert got is not None and got.dtype == np.intp and want.dtype == np.intp
        assert np.array_equal(got, want), (rows, n, c0, least)
    assert decided   # (some draws reach the rows, not only the counts)


def test_prunable_other_layouts_are_left_to_numpy(nb):
    data = np.full((5, 4), np.nan)
    data[1, 0] = 1.0
    ent = PL._Excluded(None)
    ent.set(np.array([3], np.intp))
    want = PL._prunable(None, data, 5, ent, 0, 4, 1)
    assert want.tolist() == [0, 2, 4]
    calls = []

    class _Spy:
        @staticmethod
        def prunable(*a):
            calls.append(a)
            return nb.prunable(*a)

    for d in (np.asfortranarray(data), data.astype(np.float32), data[:, ::2]):
        n = d.shape[1]
        assert np.array_equal(PL._prunable(_Spy, d, 5, ent, 0, n, 1), PL._prunable(None, d, 5, ent, 0, n, 1))
    assert not calls
    assert PL._prunable(_Spy, data, 5, ent, 0, 4, 1).tolist() == [0, 2, 4] and calls


def test_plan_exclusions_with_the_compiled_check(nb, monkeypatch):
    from .test_plan import test_plan_leaves_out_rows_without_samples_and_takes_them_back as plan_test

    seen = []
    pruned = []
    kern, prune = nb.all_nan, nb.prunable

    class _Counting:
        def __getattr__(self, name):
            return getattr(nb, name)

        @staticmethod
        def all_nan(*a):
            r = kern(*a)
            seen.append(r)
            return r

        @staticmethod
        def prunable(*a):
            r = prune(*a)
            pruned.append(r)
            return r

    monkeypatch.setattr(PL, "kernels", lambda: _Counting())
    plan_test()
    assert 1 in seen and 0 in seen   # rows stayed out, and a written row was found by the kernel
    assert any(k for _, _, k in pruned)   # the rows left out were chosen by the kernel
