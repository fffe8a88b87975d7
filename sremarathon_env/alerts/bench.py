"""``sremarathon bench`` section: the cost of evaluating the alert rule pack over a marathon.

For each app, a healthy 90-minute twin run is recorded first; then the whole pack is evaluated over
its 360 ticks the way the run loop does (one ``evaluate_until`` per 120 s invocation, 45 calls) and
in one pass, and compared with the twin's own cost and with the target (30% of the twin's 100 ms
budget for Online Boutique, i.e. 30 ms). Then the pack's cost over a faulted marathon (the core
run loop with its fault schedule and no agent actions; pods are replaced, so series sets grow and
the plan follows them) is measured with a second engine watching the marathon's store, with the
plan's rebuilds (count and CPU ms, part of the faulted cost). Costs are CPU time of this process
(``time.process_time``), in ms. Each engine is released after its measurement, as the run loop releases its engine
at a marathon's end, so the measurements after the first reuse the tape's buffers (the steady state of a process
that runs marathons one after another; the first marathon of a process also pays for fresh pages).

>>> rows = alerts_section(["online-boutique"], repeat=1)
>>> rows[0]["rules"] >= 44, rows[0]["ticks"]
(True, 360)
"""

from __future__ import annotations

import statistics
import time

MARATHON_S = 5400.0
INVOCATION_S = 120.0
TARGET_SHARE = 0.30
TWIN_TARGET_MS = {"online-boutique": 100.0, "train-ticket": 250.0}


def alerts_section(apps: list[str], repeat: int = 3) -> list[dict]:
    from apps import load_app
    from sremarathon_env.alerts import AlertEngine, load_rule_pack
    from sremarathon_env.backends.sim import SimBackend

    pack = load_rule_pack()
    warm_kernels()   # the steady state: the compiled kernels (where numba is installed) loaded before measuring
    rows = []
    for name in apps:
        try:
            app = load_app(name)
        except (KeyError, FileNotFoundError, OSError, ValueError) as exc:
            print(f"  skipping {name}: {exc}")
            continue
        twin_ms, chunked_ms, single_ms, faulted_ms, build_ms, n_builds = [], [], [], [], [], []
        n_transitions = n_faulted = 0
        for r in range(repeat):
            sim = SimBackend(app, seed=r)
            t0 = time.process_time()
            for k in range(1, int(MARATHON_S / INVOCATION_S) + 1):
                sim.advance_to(k * INVOCATION_S)
                sim.store.complete()   # the twin's writes left for the next store read count as the twin's
            twin_ms.append((time.process_time() - t0) * 1e3)
            eng = AlertEngine(pack, sim.store)
            t0 = time.process_time()
            for k in range(1, int(MARATHON_S / INVOCATION_S) + 1):
                n_transitions += len(eng.evaluate_until(k * INVOCATION_S))
            chunked_ms.append((time.process_time() - t0) * 1e3)
            eng.release()   # as the run loop does at a marathon's end: the next engines reuse the tape's buffers
            eng = AlertEngine(pack, sim.store)
            t0 = time.process_time()
            eng.evaluate_until(MARATHON_S)
            single_ms.append((time.process_time() - t0) * 1e3)
            eng.release()
            ms, n, builds, b_ms = faulted_pack_stats(name, r, pack)
            faulted_ms.append(ms)
            build_ms.append(b_ms)
            n_builds.append(builds)
            n_faulted += n
        target = TARGET_SHARE * TWIN_TARGET_MS.get(name, 250.0)
        chunked = statistics.median(chunked_ms)
        twin = statistics.median(twin_ms)
        rows.append({"app": name, "rules": len(pack.rules), "ticks": int(MARATHON_S / 15.0),
                     "series": sim.store.n_series(), "twin_ms": twin, "pack_ms": chunked,
                     "pack_one_pass_ms": statistics.median(single_ms), "per_invocation_ms": chunked / 45,
                     "target_ms": target, "ratio_target": chunked / target, "ratio_twin": chunked / twin,
                     "transitions": n_transitions // max(repeat, 1), "faulted_pack_ms": statistics.median(faulted_ms),
                     "faulted_transitions": n_faulted // max(repeat, 1), "faulted_builds": int(statistics.median(n_builds)),
                     "faulted_build_ms": statistics.median(build_ms), "kernels": compiled_status()})
    return rows


def faulted_pack_ms(app: str, seed: int, pack) -> tuple[float, int]:
    """(CPU ms, transitions) of the pack over a faulted marathon: a second engine on the run loop's store,
    called after every invocation's ticks, as the run loop calls its own."""
    ms, n, _, _ = faulted_pack_stats(app, seed, pack)
    return ms, n


def faulted_pack_stats(app: str, seed: int, pack) -> tuple[float, int, int, float]:
    """As ``faulted_pack_ms``, plus the plan's rebuilds (series sets changed) and their CPU ms."""
    from sremarathon_env.alerts import AlertEngine
    from sremarathon_env.marathon import Marathon, MarathonConfig

    m = Marathon(MarathonConfig(app=app, seed=seed, reference_run=False))
    m.start()
    eng = AlertEngine(pack, m.backend.store)
    spent, n = 0.0, 0
    while True:
        t0 = time.process_time()
        n += len(eng.evaluate_until(m.now))
        spent += time.process_time() - t0
        m.invoke([])
        if not m.advance_to_next_invocation():
            break
    plan = eng._plan
    eng.release()
    m.release()
    return spent * 1e3, n, plan.builds if plan else 0, (plan.build_cpu_s * 1e3 if plan else 0.0)


def warm_kernels() -> None:
    """Load the tape's compiled kernels now (``SREMARATHON_NUMBA=0``: no), as a long-running process does after
    its first marathons (``alerts.compiled``); its cost shows in `compiled_status`."""
    from sremarathon_env.alerts.compiled import warm

    warm()


def compiled_status() -> str:
    """Whether the tape's compiled (numba) kernels ran, in one line (see ``alerts.compiled``)."""
    from sremarathon_env.alerts.compiled import status

    return status()


def print_alerts(rows: list[dict]) -> None:
    print("alert rule pack over a healthy marathon (45 invocations of 120 s; CPU ms), and over a faulted one:")
    if rows:
        k = rows[0]["kernels"]
        print(f"  ({k}{'; SREMARATHON_NUMBA=0 turns them off' if ': on' in k else ''})")
    print(f"  {'app':<18}{'rules':>6}{'series':>8}{'twin ms':>9}{'pack ms':>9}{'(1 pass)':>9}{'/call':>7}"
          f"{'target':>8}{'ratio':>7}{'x twin':>8}{'faulted':>9}{'rebuilds':>9}{'build ms':>9}")
    for r in rows:
        print(f"  {r['app']:<18}{r['rules']:6d}{r['series']:8d}{r['twin_ms']:9.1f}{r['pack_ms']:9.1f}"
              f"{r['pack_one_pass_ms']:9.1f}{r['per_invocation_ms']:7.2f}{r['target_ms']:8.0f}{r['ratio_target']:7.2f}"
              f"{r['ratio_twin']:8.2f}{r['faulted_pack_ms']:9.1f}{r['faulted_builds']:9d}{r['faulted_build_ms']:9.1f}")


SECTION = ("alerts", alerts_section, print_alerts)
