"""Comparisons of two twins run the same way by different code paths (a fast path and its definition)."""

from __future__ import annotations

import numpy as np


def assert_same_store(a, b) -> None:
    """The two twins' metric stores hold the same families, series (label values in order) and samples
    (NaN where a series has no sample)."""
    assert a.store.names() == b.store.names()
    for name in a.store.names():
        for fa, fb in zip(a.store.families(name), b.store.families(name), strict=True):
            assert fa._label_values == fb._label_values, name
            assert np.array_equal(fa.values(a.store.n_ticks), fb.values(b.store.n_ticks), equal_nan=True), name


def assert_same_twins(a, b, history_nan: bool = False) -> None:
    """The same per-tick history (``history_nan``: NaN equals NaN in the float arrays; else any NaN fails) and the
    same metric store."""
    n = a.history.n
    assert n == b.history.n
    for name in ("node", "edge", "path", "svc"):
        assert np.array_equal(getattr(a.history, name)[:, :n], getattr(b.history, name)[:, :n],
                              equal_nan=history_nan), name
    for name in ("ready", "reason", "epoch_of"):
        assert np.array_equal(getattr(a.history, name)[:n], getattr(b.history, name)[:n]), name
    assert_same_store(a, b)
