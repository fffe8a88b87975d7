"""What the alert engine reuses from one episode to the next gives exactly a from-scratch result."""

from __future__ import annotations

import numpy as np

from sremarathon_env.alerts import tape as tape_mod


def test_tape_arrays_without_huge_page_advice_restore_the_switch():
    """The tape's arrays are plain uninitialised arrays of the asked shape and dtype; numpy's huge-page switch
    is what it was before (also where it was off)."""
    flip = tape_mod._SET_MADVISE_HUGEPAGE
    for dt in (np.float64, np.int64):
        a = tape_mod._empty_small_pages((700, 513), dt)
        assert a.shape == (700, 513) and a.dtype == dt and a.flags.c_contiguous and a.flags.writeable
        a[:, :3] = 1
        assert (a[:, :3] == 1).all()
    if flip is None:
        return
    before = flip(True)
    try:
        tape_mod._empty_small_pages((1024, 1024), np.float64)
        assert flip(False) is True          # restored to on
        tape_mod._empty_small_pages((1024, 1024), np.float64)
        assert flip(before) is False        # restored to off
    finally:
        flip(before)
