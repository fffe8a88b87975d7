"""Garbage-collector thresholds and allocator settings for processes that only step marathons (RL rollout workers,
benchmarks).

A marathon keeps ~150-200 k tracked objects alive (the twin's cluster state, alert caches, the bundle), and a step
allocates thousands of short-lived containers. With CPython's default thresholds (700, 10, 10) a faulted Online
Boutique marathon under the RL view triggers ~14 young collections per step and a full collection every ~30 steps,
each traversing every live object: ~4.5 ms of a ~35 ms step (measured with `gc.callbacks`, 3 marathons; 55 ms of it
at each reset). With (10000, 10, 10) it is ~1.5 ms. Results do not depend on when cyclic garbage is freed (nothing
in the project has weak-reference callbacks, and its one finalizer, `Cluster.__del__`, only empties the dying
cluster's own pod lists), so bundles and digests are unchanged. (A dropped marathon is freed by reference counting:
its twin holds no reference cycle, see `SimBackend._bind`.)

This changes process-wide state: call it from the entry point of a process that steps marathons (an RLlib env
creator, a benchmark), not from library code.

>>> import gc
>>> old = tune_gc()
>>> gc.get_threshold()[0] >= ROLLOUT_THRESHOLDS[0]
True
>>> tune_gc(old) == ROLLOUT_THRESHOLDS
True
>>> gc.get_threshold() == old
True

The allocator: glibc's malloc raises its mmap threshold each time a large block is freed, so the numpy arrays a
marathon allocates and frees (metric store, alert tape, twin blocks) soon come from the heap, whose freed pages it
rarely returns: a rollout process's resident memory then climbs with every episode (OB RL view, 30 episodes:
693 -> 1073 MB). `tune_malloc` fixes the threshold (arrays of 256 KiB and more are mapped and unmapped on their own:
641-682 MB, flat, at the same step cost). A no-op (False) where the C library is not glibc.

>>> tune_malloc() in (True, False)
True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

#: young-generation threshold raised ~14x; the older generations keep CPython's ratios
ROLLOUT_THRESHOLDS = (10000, 10, 10)


def tune_gc(thresholds: tuple[int, ...] = ROLLOUT_THRESHOLDS) -> tuple[int, int, int]:
    """Set the collector's thresholds (``gc.set_threshold``) and return the previous ones (to restore them)."""
    old = gc.get_threshold()
    gc.set_threshold(*thresholds)
    return old


#: glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: allocations of at least this many bytes are mapped on their own (returned to the system when freed)
MMAP_THRESHOLD = 256 * 1024
#: free memory at the top of the heap kept before it is returned
TRIM_THRESHOLD = 64 * 1024 * 1024


def _glibc_call(name: str):
    """The C library's function ``name`` on Linux (None elsewhere, or where the library lacks it: musl has
    neither ``mallopt`` nor ``malloc_trim``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        return None


def tune_malloc(mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Fix glibc's mmap and trim thresholds for this process (``mallopt``); True where they were set.
    Process-wide, like `tune_gc`: call it from a process entry point, not from library code."""
    mallopt = _glibc_call("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold))) and bool(mallopt(_M_TRIM_THRESHOLD, int(trim_threshold)))


def release_free_heap() -> bool:
    """Hand the heap's free pages back to the system (glibc ``malloc_trim(0)``); False where not available.
    For measurements of what a process still references (`sremarathon_env.mem_bench`)."""
    trim = _glibc_call("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True


def tune_process() -> None:
    """`tune_gc` and `tune_malloc`: the settings of a process that only steps marathons (the CLI, RLlib env runners)."""
    tune_gc()
    tune_malloc()


__all__ = ["MMAP_THRESHOLD", "ROLLOUT_THRESHOLDS", "TRIM_THRESHOLD", "release_free_heap", "tune_gc", "tune_malloc",
           "tune_process"]
