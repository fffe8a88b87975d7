"""``sremarathon bench`` section ``env``: the whole environment, per app, against its targets.

Per app it runs ``repeat`` full marathons of the core env with a no-op action (fresh scenario seeds)
and prints: the median ``reset()`` (schedule, twin, the matched no-action reference run, up to the
first invocation), the median and 90th percentile of ``step()``, a whole marathon including
``reset()``, and the share of step time spent in the twin (``backend.advance_to``, the traffic of a deferred span
computed at its end, ``end_deferred``, and the metric writes left for the next store read), the faults
(injection, revert, noise, symptom probes: the rest of the driver's tick), the alert rules
(``evaluate_until``), recording (``Recorder.append``), reward replay (the incremental scorer's
``feed`` plus the final ``score``), the env's observation and the rest. Targets: step median <= 5 ms
(Online Boutique), whole marathon <= 0.25 s, reward replay <= 10 % of step time.

>>> rows = env_section(["online-boutique"], repeat=1, injection_s=600, observation_s=240)
>>> rows[0]["steps"], 0.0 <= rows[0]["share"]["reward"] <= 1.0
(7, True)
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

TARGET_STEP_MS = 5.0
TARGET_MARATHON_S = 0.25
TARGET_REWARD_SHARE = 0.10
PARTS = ("twin", "faults", "alerts", "recording", "reward", "observation", "other")


class Timers:
    """Seconds (of ``clock``) spent inside wrapped methods, summed per key in ``t``; `wrap` replaces a method
    by a timed one on that instance (delete the instance attribute to take the class's method back). Time is
    exclusive: a timed call made inside another timed call counts for its own key only (the driver's tick
    runs the twin; the alert rules' first store read does the twin's pending metric writes).

    >>> ticks = iter(range(100))   # a clock that reads 0, 1, 2, ... : outer starts at 0, inner runs 1 -> 2, outer ends at 3
    >>> timers = Timers(("outer", "inner"), clock=lambda: float(next(ticks)))
    >>> class Job:
    ...     def inner(self): return 1
    ...     def outer(self): return self.inner() + 1
    >>> job = Job()
    >>> timers.wrap(job, "inner", "inner"); timers.wrap(job, "outer", "outer")
    >>> job.outer(), timers.t
    (2, {'outer': 2.0, 'inner': 1.0})
    """

    def __init__(self, keys: tuple[str, ...] = ("twin", "tick", "alerts", "recording", "reward", "observation"),
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.t: dict[str, float] = {k: 0.0 for k in keys}
        self.clock = clock
        self._inner = [0.0]   # per running timed call (a stack): the time of the timed calls made inside it

    def wrap(self, obj: Any, name: str, key: str) -> None:
        fn = getattr(obj, name)
        t, clock, inner = self.t, self.clock, self._inner

        def timed(*a: Any, **kw: Any) -> Any:
            inner.append(0.0)
            t0 = clock()
            try:
                return fn(*a, **kw)
            finally:
                dt = clock() - t0
                t[key] += dt - inner.pop()
                inner[-1] += dt

        setattr(obj, name, timed)


def instrument_marathon(m: Any, timers: Timers) -> None:
    """Time a marathon's twin (its ticks, the traffic of a deferred span computed at its end, and its pending metric
    writes, wherever they are done), driver tick (the faults: the orchestrator's events and checks), alert rules,
    recording and reward replay."""
    timers.wrap(m.backend, "advance_to", "twin")
    if hasattr(m.backend, "end_deferred"):   # a span's traffic, computed in one step when the driver ends the span
        timers.wrap(m.backend, "end_deferred", "twin")
    writer = getattr(m.backend, "writer", None)
    if hasattr(writer, "complete"):   # the twin's metric writes left for the next store read (`MetricStore.defer`)
        timers.wrap(writer, "complete", "twin")
    timers.wrap(m.driver, "tick", "tick")
    timers.wrap(m.alert_engine, "evaluate_until", "alerts")
    timers.wrap(m.recorder, "append", "recording")
    for name in ("append_tick", "append_alert"):   # the run loop's tick and alert records, from their parts
        if hasattr(m.recorder, name):
            timers.wrap(m.recorder, name, "recording")
    timers.wrap(m.scorer, "feed", "reward")
    timers.wrap(m, "finish", "reward")   # final score(records) replay (+ sealing, a few records)


def env_section(apps: list[str], repeat: int = 3, injection_s: int = 3600, observation_s: int = 1800) -> list[dict]:
    import gymnasium as gym

    import sremarathon_env  # noqa: F401  (registers the ids)
    from sremarathon_env.alerts.bench import compiled_status, warm_kernels
    from sremarathon_env.registration import IDS

    warm_kernels()   # the steady state of a process that steps many marathons (compiled kernels where numba is installed)
    rows = []
    for app in apps:
        if app not in IDS:
            print(f"  skipping {app}: no registered env id")
            continue
        env = gym.make(IDS[app], injection_s=injection_s, observation_s=observation_s).unwrapped
        env.reset(seed=10_000)            # warm caches (app model, catalogue, rule pack)
        resets, steps, marathons = [], [], []
        cpu_resets, cpu_steps, cpu_marathons = [], [], []   # the same in CPU time (robust on a shared machine)
        share = {k: 0.0 for k in PARTS}
        n_steps = 0
        for r in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            env.reset(seed=r)
            t_reset = time.perf_counter() - t0
            c_reset = time.process_time() - c0
            timers = Timers()
            instrument_marathon(env.marathon, timers)
            timers.wrap(env, "_obs", "observation")
            t_steps = c_steps = 0.0
            k = 0
            while True:
                t1, c1 = time.perf_counter(), time.process_time()
                _, _, _, trunc, _ = env.step("[]")
                dt = time.perf_counter() - t1
                dc = time.process_time() - c1
                steps.append(dt)
                cpu_steps.append(dc)
                t_steps += dt
                c_steps += dc
                k += 1
                if trunc:
                    break
            resets.append(t_reset)
            marathons.append(t_reset + t_steps)
            cpu_resets.append(c_reset)
            cpu_marathons.append(c_reset + c_steps)
            n_steps = k
            t = timers.t
            parts = {"twin": t["twin"], "faults": t["tick"], "alerts": t["alerts"],
                     "recording": t["recording"], "reward": t["reward"], "observation": t["observation"]}
            parts["other"] = max(t_steps - sum(parts.values()), 0.0)
            for key, v in parts.items():
                share[key] += v / t_steps / repeat
        env.close()
        steps_ms = sorted(s * 1e3 for s in steps)
        rows.append({"app": app, "steps": n_steps, "reset_s": statistics.median(resets),
                     "step_ms": statistics.median(steps_ms), "step_p90_ms": steps_ms[int(0.9 * (len(steps_ms) - 1))],
                     "marathon_s": statistics.median(marathons), "share": share,
                     "cpu": {"reset_s": statistics.median(cpu_resets),
                             "step_ms": statistics.median(c * 1e3 for c in cpu_steps),
                             "marathon_s": statistics.median(cpu_marathons)}, "kernels": compiled_status()})
    return rows


def print_env(rows: list[dict]) -> None:
    print("environment (core env, no-op action, full marathon incl. reset):")
    print(f"  {'app':<16}{'steps':>6}{'reset s':>9}{'step ms':>9}{'p90 ms':>8}{'x5ms':>7}{'run s':>8}{'x0.25s':>8}  "
          + " ".join(f"{p[:6]:>6}" for p in PARTS))
    for r in rows:
        sh = r["share"]
        print(f"  {r['app']:<16}{r['steps']:6d}{r['reset_s']:9.3f}{r['step_ms']:9.2f}{r['step_p90_ms']:8.2f}"
              f"{r['step_ms'] / TARGET_STEP_MS:7.1f}{r['marathon_s']:8.3f}{r['marathon_s'] / TARGET_MARATHON_S:8.1f}  "
              + " ".join(f"{100 * sh[p]:5.1f}%" for p in PARTS))
    for r in rows:
        c = r.get("cpu")
        if c:
            print(f"  {r['app']:<16} CPU time: reset {c['reset_s']:.3f} s, step median {c['step_ms']:.2f} ms, "
                  f"marathon {c['marathon_s']:.3f} s (wall above; CPU is what a busy machine does not inflate)")
    if rows:
        worst = max(r["share"]["reward"] for r in rows)
        print(f"  reward replay share: max {100 * worst:.1f}% (target <= {100 * TARGET_REWARD_SHARE:.0f}%)")
        print(f"  ({rows[0].get('kernels', '')})")


def _run(apps: list[str], repeat: int) -> list[dict]:
    return env_section(apps, repeat)


#: the section registered in `sremarathon_env.bench.SECTIONS`
SECTION: tuple[str, Callable[[list[str], int], list[dict]], Callable[[list[dict]], None]] = ("env", _run, print_env)
