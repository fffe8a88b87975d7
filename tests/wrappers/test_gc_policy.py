"""Rollout GC thresholds: fewer collections, and the same observations, masks, rewards and bundle digest."""

from __future__ import annotations

import gc

import gymnasium as gym
import numpy as np

import sremarathon_env  # noqa: F401
from sremarathon_env.registration import IDS
from wrappers.gc_policy import ROLLOUT_THRESHOLDS, tune_gc
from wrappers.rl import RLView


def _episode() -> tuple[list, str, int]:
    env = RLView(gym.make(IDS["online-boutique"], injection_s=1200, observation_s=240, reference_run=False))
    rng = np.random.default_rng(3)
    before = sum(s["collections"] for s in gc.get_stats())
    obs, _ = env.reset(seed=4)
    out = []
    while True:
        out.append((obs["observations"].tobytes(), obs["action_mask"].tobytes()))
        a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, r, _, trunc, info = env.step(a)
        out.append(r)
        if trunc:
            return out, info["bundle_digest"], sum(s["collections"] for s in gc.get_stats()) - before


def test_tuned_gc_changes_nothing_but_the_number_of_collections():
    default = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        ref, ref_digest, ref_n = _episode()
        assert tune_gc() == (700, 10, 10) and gc.get_threshold() == ROLLOUT_THRESHOLDS
        got, digest, n = _episode()
    finally:
        gc.set_threshold(*default)
    assert got == ref and digest == ref_digest
    assert n * 4 < ref_n, (n, ref_n)


_MALLINFO_PROBE = r"""
import ctypes, ctypes.util, sys
import numpy as np
from wrappers.gc_policy import tune_malloc

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
libc.mallinfo2.restype = MallInfo2
applied = tune_malloc() if sys.argv[1] == "tuned" else False
big = np.ones(4 << 20, dtype=np.uint8)    # mapped on its own; freeing it raises glibc's dynamic threshold
del big
before = libc.mallinfo2().hblks
mid = np.ones(512 << 10, dtype=np.uint8)  # above the fixed threshold, below the raised one
print(applied, libc.mallinfo2().hblks - before)
"""


def _probe(mode: str) -> tuple[str, int]:
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _MALLINFO_PROBE, mode], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    applied, hblks = out.stdout.split()
    return applied, int(hblks)


def test_tune_malloc_keeps_large_arrays_mapped_after_a_larger_one_was_freed():
    import ctypes.util
    import sys

    import pytest

    if not sys.platform.startswith("linux") or "musl" in (ctypes.util.find_library("c") or ""):
        pytest.skip("glibc only")
    try:
        default = _probe("default")
    except Exception:   # pragma: no cover - a C library without mallinfo2 (glibc < 2.33)
        pytest.skip("no mallinfo2")
    tuned = _probe("tuned")
    assert default == ("False", 0), "glibc's dynamic threshold: the 512 KiB array came from the heap"
    assert tuned == ("True", 1), "with the fixed threshold it is mapped on its own (returned when freed)"
