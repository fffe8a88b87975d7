"""``sremarathon bench --sections memory``: does a rollout process's memory stay flat across episodes?

RL runs step thousands of marathons in one process, so anything a marathon leaves behind (a cache that keeps
label lists of finished engines, arrays of a dead metric store) adds up. Per app, this section runs RL-view
episodes with random masked actions and no reference run, as an RLlib env runner does (with its process
settings: `wrappers.gc_policy.tune_process`), and prints the resident memory and the number of gc-tracked
objects after the warm-up episodes and after the last one, each after a full collection and (glibc) after
returning free heap pages to the system (``malloc_trim``), so that what is left is what is still referenced.
Growth per episode is (last - warm-up) / episodes in between. Opt-in (a few seconds per episode and app).

>>> rows = memory_section(["online-boutique"], repeat=1, episodes=2, warmup=1, injection_s=240, observation_s=120)
>>> rows[0]["app"], rows[0]["episodes"], rows[0]["rss_warm_mb"] > 0
('online-boutique', 2, True)
"""

from __future__ import annotations

import gc
from typing import Callable

#: episodes after the warm-up ones, and warm-up episodes (the bounded alert caches, the content-keyed ones that a
#: first plan build reuses included, fill during the first ~40 on Train Ticket)
EPISODES = 20
WARMUP = 40


def _rss_mb() -> float:
    """Resident set size of this process (MB; 0 where /proc is not available)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _settle() -> float:
    """Collect garbage, hand free heap pages back (glibc), and return the resident MB."""
    from wrappers.gc_policy import release_free_heap

    gc.collect()
    release_free_heap()
    return _rss_mb()


def memory_section(apps: list[str], repeat: int = 1, episodes: int = EPISODES, warmup: int = WARMUP,
                   injection_s: int = 3600, observation_s: int = 1800) -> list[dict]:
    import gymnasium as gym
    import numpy as np

    import sremarathon_env  # noqa: F401 - registers the ids
    from sremarathon_env.registration import IDS
    from wrappers.gc_policy import tune_process
    from wrappers.rl import RLView

    tune_process()
    rows = []
    for app in apps:
        env = RLView(gym.make(IDS[app], reference_run=False, injection_s=injection_s, observation_s=observation_s))
        rng = np.random.default_rng(0)

        def episode(seed: int) -> None:
            obs, _ = env.reset(seed=seed)
            while True:
                obs, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
                if term or trunc:
                    return

        for s in range(warmup):
            episode(10_000 + s)
        warm_mb, warm_obj = _settle(), len(gc.get_objects())
        for s in range(episodes):
            episode(20_000 + s)
        last_mb, last_obj = _settle(), len(gc.get_objects())
        env.close()
        rows.append({"app": app, "warmup": warmup, "episodes": episodes, "rss_warm_mb": warm_mb, "rss_last_mb": last_mb,
                     "mb_per_episode": (last_mb - warm_mb) / max(episodes, 1), "objects_warm": warm_obj,
                     "objects_last": last_obj})
    return rows


def print_memory(rows: list[dict]) -> None:
    from sremarathon_env.bench import print_table

    print_table("memory across RL-view episodes (random masked actions, no reference run; RSS after gc + malloc_trim):", [
        ("app", 18, "", "app"), ("warm-up", 8, "d", "warmup"), ("episodes", 9, "d", "episodes"),
        ("RSS MB", 8, ".0f", "rss_warm_mb"), ("-> MB", 8, ".0f", "rss_last_mb"), ("MB/episode", 11, ".2f", "mb_per_episode"),
        ("objects", 9, "d", "objects_warm"), ("->", 9, "d", "objects_last")], rows)


def _run(apps: list[str], repeat: int) -> list[dict]:
    return memory_section(apps, repeat)


#: the section registered in `sremarathon_env.bench.SECTIONS` (opt-in: `--sections memory`)
SECTION: tuple[str, Callable[[list[str], int], list[dict]], Callable[[list[dict]], None]] = ("memory", _run, print_memory)
