"""``sremarathon bench``: what the twin costs, per app, against the targets.

Prints, per app: the median cost of advancing one 15 s tick (a single-tick ``advance_to``), of a full
90-minute marathon of a healthy twin (360 ticks, advanced in 120 s invocation steps as the run loop
does, and in one call), the twin's peak memory (tracemalloc), the ratio to each target, the CPU time
of the run loop's no-action reference run (scheduled faults and noise, a twin without metrics) and of
``clone()`` of a warm twin without metrics (what fault validation pays per fault). Sections
are functions in `SECTIONS` so that other parts (alerts, the whole environment) can add theirs; `OPT_IN` ones
(memory across episodes) run only when named.

    $ sremarathon bench --apps online-boutique --repeat 3
    $ sremarathon bench --apps online-boutique --sections rl
    $ sremarathon bench --apps online-boutique --sections memory

>>> rows = twin_section(["online-boutique"], repeat=1)
>>> rows[0]["app"], rows[0]["ticks"]
('online-boutique', 360)
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from typing import Callable

from apps import APP_NAMES, load_app
from sremarathon_env.cli_args import app_name, positive_int

MARATHON_S = 5400.0
INVOCATION_S = 120.0
#: targets on one core: full marathon of the twin alone (ms) and memory per twin (MB)
TARGET_MARATHON_MS = {"online-boutique": 100.0, "train-ticket": 250.0}
TARGET_DEFAULT_MS = 250.0
TARGET_MEMORY_MB = 100.0


def _available(apps: list[str]) -> list[str]:
    out = []
    for a in apps:
        try:
            load_app(a)
            out.append(a)
        except (KeyError, FileNotFoundError, OSError, ValueError) as exc:
            print(f"  skipping {a}: {exc}")
    return out


def twin_section(apps: list[str], repeat: int = 3) -> list[dict]:
    from sremarathon_env.backends.sim import SimBackend

    rows = []
    for name in _available(apps):
        app = load_app(name)
        SimBackend(app, seed=0).advance_to(INVOCATION_S)   # warm caches (compiled app, sources)
        tick_ms, chunked_ms, oneshot_ms, build_ms = [], [], [], []
        for r in range(repeat):
            t0 = time.perf_counter()
            sim = SimBackend(app, seed=r)
            build_ms.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            for k in range(1, int(MARATHON_S / INVOCATION_S) + 1):
                sim.advance_to(k * INVOCATION_S)
                sim.store.complete()   # the writes the twin leaves for the next store read (the alert rules')
            chunked_ms.append((time.perf_counter() - t0) * 1e3)
            sim = SimBackend(app, seed=r)
            t0 = time.perf_counter()
            sim.advance_to(MARATHON_S)
            sim.store.complete()
            oneshot_ms.append((time.perf_counter() - t0) * 1e3)
            sim = SimBackend(app, seed=r)
            for k in range(1, 41):
                t0 = time.perf_counter()
                sim.advance_to(k * sim.tick_s)
                sim.store.complete()
                tick_ms.append((time.perf_counter() - t0) * 1e3)
        # the run loop's no-action reference run: scheduled faults and noise, block-driven twin, per-tick checks
        from sremarathon_env.marathon import MarathonConfig, reference_evidence

        faulted_ms = []
        for r in range(repeat):
            reference_evidence.cache_clear()
            t0 = time.process_time()
            reference_evidence(MarathonConfig(app=name, seed=r))
            faulted_ms.append((time.process_time() - t0) * 1e3)
        reference_evidence.cache_clear()
        warm = SimBackend(app, seed=0, metrics=False)
        warm.advance_to(120.0)
        clone_ms = []
        for _ in range(max(5, repeat)):
            t0 = time.process_time()
            warm.clone()
            clone_ms.append((time.process_time() - t0) * 1e3)
        tracemalloc.start()
        sim = SimBackend(app, seed=0)
        for k in range(1, int(MARATHON_S / INVOCATION_S) + 1):
            sim.advance_to(k * INVOCATION_S)
            sim.store.complete()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        target = TARGET_MARATHON_MS.get(name, TARGET_DEFAULT_MS)
        marathon = statistics.median(chunked_ms)
        rows.append({"app": name, "ticks": int(MARATHON_S / sim.tick_s), "build_ms": statistics.median(build_ms),
                     "tick_ms": statistics.median(tick_ms), "marathon_ms": marathon,
                     "marathon_oneshot_ms": statistics.median(oneshot_ms), "peak_mb": peak / 2**20,
                     "target_ms": target, "ratio_time": marathon / target, "ratio_mem": peak / 2**20 / TARGET_MEMORY_MB,
                     "series": sim.store.n_series(), "faulted_ms": statistics.median(faulted_ms),
                     "clone_ms": statistics.median(clone_ms)})
    return rows


def print_table(title: str, columns: list[tuple[str, int, str, str]], rows: list[dict]) -> None:
    """Print ``rows`` under ``title``: one column per (header, width, format spec, row key); the first column is
    left-aligned, the others right-aligned.

    >>> print_table("t:", [("app", 6, "", "app"), ("ms", 7, ".1f", "ms")], [{"app": "ob", "ms": 1.25}])
    t:
      app        ms
      ob        1.2
    """
    print(title)
    (h0, w0, _, _), rest = columns[0], columns[1:]
    print("  " + f"{h0:<{w0}}" + "".join(f"{h:>{w}}" for h, w, _, _ in rest))
    for r in rows:
        print("  " + f"{r[columns[0][3]]:<{w0}}" + "".join(format(r[k], f"{w}{spec}") for _, w, spec, k in rest))


def _print_twin(rows: list[dict]) -> None:
    print_table("twin alone (healthy, one core):", [
        ("app", 18, "", "app"), ("build ms", 9, ".1f", "build_ms"), ("tick ms", 9, ".3f", "tick_ms"),
        ("90 min ms", 11, ".1f", "marathon_ms"), ("(1 call)", 10, ".1f", "marathon_oneshot_ms"),
        ("target", 8, ".0f", "target_ms"), ("ratio", 7, ".2f", "ratio_time"), ("peak MB", 9, ".1f", "peak_mb"),
        ("ratio", 7, ".2f", "ratio_mem"), ("series", 8, "d", "series"), ("faulted ms", 11, ".1f", "faulted_ms"),
        ("clone ms", 9, ".2f", "clone_ms")], rows)
    print("  faulted ms: CPU time of the run loop's no-action reference run (scheduled faults and noise, twin without")
    print("  metrics, no alerts); clone ms: CPU time of clone() of a warm twin without metrics (validation, per fault)")


#: (title, run(apps, repeat) -> rows, print(rows)); other parts append their own sections
SECTIONS: list[tuple[str, Callable[[list[str], int], list[dict]], Callable[[list[dict]], None]]] = [
    ("twin", twin_section, _print_twin),
]
SECTIONS.append(__import__("sremarathon_env.alerts.bench", fromlist=["SECTION"]).SECTION)
SECTIONS.append(__import__("sremarathon_env.env_bench", fromlist=["SECTION"]).SECTION)
SECTIONS.append(__import__("sremarathon_env.rl_bench", fromlist=["SECTION"]).SECTION)
SECTIONS.append(__import__("sremarathon_env.mem_bench", fromlist=["SECTION"]).SECTION)
#: sections run only when named in ``--sections`` (slow: many episodes)
OPT_IN = {"memory"}


def run(args: argparse.Namespace) -> int:
    apps = args.apps or list(APP_NAMES)
    for title, fn, show in SECTIONS:
        if (args.sections and title not in args.sections) or (not args.sections and title in OPT_IN):
            continue
        show(fn(apps, args.repeat))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="measure the cost of the twin (and other sections) per app")
    p.add_argument("--apps", nargs="*", type=app_name, default=None, help=f"apps (default: {' '.join(APP_NAMES)})")
    p.add_argument("--repeat", type=positive_int, default=3, help="repetitions; medians are reported")
    p.add_argument("--sections", nargs="*", default=None, choices=[title for title, _, _ in SECTIONS],
                   help="only these sections: twin, alerts, env, rl, memory (default: all but memory)")
    p.set_defaults(func=run)
