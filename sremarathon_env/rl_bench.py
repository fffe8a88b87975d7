"""``sremarathon bench --sections rl``: the environment as RL training runs it.

The ``env`` section times the core env with a no-op action over full marathons. Training runs something
else: the RL view (`wrappers.rl.RLView`) with the RLlib env factory's settings (`baselines.rllib_env.
DEFAULT_ENV_CONFIG`: 20 + 8 minute marathons of 14 steps, no reference run) and actions that intervene, so
the twin soon leaves the reference run's tape and the alert plan sees the pods the actions create. Per app
this section plays ``repeat`` x `EPISODES` such episodes with uniformly random masked actions (seeded) and
prints CPU time per step including the reset's share (what bounds RLlib's sampling throughput), per reset,
per step and per episode, and where a step's time goes: the twin, the faults (injection, revert, noise,
symptom probes), the alert rules, the action's tool calls, the RL observation and mask, recording, reward
replay, and the rest.

>>> rows = rl_section(["online-boutique"], repeat=1, episodes=1, injection_s=240, observation_s=120)
>>> rows[0]["steps"], abs(sum(rows[0]["share"].values()) - 1.0) < 1e-6
(3, True)
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

#: episodes per repetition and app
EPISODES = 6
PARTS = ("twin", "faults", "alerts", "tools", "observation", "recording", "reward", "other")


#: what a step's time is summed under (`env_bench.Timers` keys; "tick" is the driver's fault work: times are exclusive)
_KEYS = ("twin", "tick", "alerts", "tools", "observation", "recording", "reward")


def rl_section(apps: list[str], repeat: int = 3, episodes: int = EPISODES, injection_s: int | None = None,
               observation_s: int | None = None) -> list[dict]:
    import gymnasium as gym
    import numpy as np

    import sremarathon_env  # noqa: F401 - registers the ids
    from baselines.rllib_env import DEFAULT_ENV_CONFIG
    from sremarathon_env.env_bench import Timers, instrument_marathon
    from sremarathon_env.registration import IDS
    from wrappers.gc_policy import tune_process
    from wrappers.rl import RLView

    from sremarathon_env.alerts.bench import compiled_status, warm_kernels

    tune_process()   # the env runner's process settings
    warm_kernels()   # a runner's steady state: it loads the compiled kernels (numba installed) after its first episodes
    inj = int(DEFAULT_ENV_CONFIG["injection_s"] if injection_s is None else injection_s)
    obs_s = int(DEFAULT_ENV_CONFIG["observation_s"] if observation_s is None else observation_s)
    rows = []
    for app in apps:
        env = RLView(gym.make(IDS[app], reference_run=bool(DEFAULT_ENV_CONFIG["reference_run"]),
                              injection_s=inj, observation_s=obs_s))
        core = env.unwrapped
        env.reset(seed=10_000)   # warm caches (app model, catalogue, rule pack) and the first-reset checks
        rng = np.random.default_rng(0)
        per_step, resets, steps, episode_s = [], [], [], []
        share = {k: 0.0 for k in PARTS}
        n_steps = 0
        for rep in range(repeat):
            c_all = 0.0
            k_all = 0
            for e in range(episodes):
                c0 = time.process_time()
                obs, _ = env.reset(seed=rep * episodes + e)
                c_reset = time.process_time() - c0
                clock = Timers(_KEYS, clock=time.process_time)
                instrument_marathon(core.marathon, clock)
                clock.wrap(core, "call", "tools")
                clock.wrap(env, "_observe", "observation")
                c_steps = 0.0
                k = 0
                while True:
                    a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
                    c1 = time.process_time()
                    obs, _, term, trunc, _ = env.step(a)
                    dc = time.process_time() - c1
                    steps.append(dc)
                    c_steps += dc
                    k += 1
                    if term or trunc:
                        break
                del env._observe, core.call   # the wrappers live on the instances: back to the classes' methods
                resets.append(c_reset)
                episode_s.append(c_reset + c_steps)
                c_all += c_reset + c_steps
                k_all += k
                n_steps = k
                t = clock.t
                parts = {"twin": t["twin"], "faults": t["tick"], "alerts": t["alerts"],
                         "tools": t["tools"], "observation": t["observation"], "recording": t["recording"],
                         "reward": t["reward"]}
                parts["other"] = max(c_steps - sum(parts.values()), 0.0)
                total = sum(parts.values())
                for key, v in parts.items():
                    share[key] += v / total / (repeat * episodes) if total > 0 else 0.0
            per_step.append(c_all / k_all)
        env.close()
        rows.append({"app": app, "steps": n_steps, "injection_s": inj, "observation_s": obs_s,
                     "cpu_step_incl_reset_ms": statistics.median(per_step) * 1e3,
                     "cpu_reset_ms": statistics.median(resets) * 1e3,
                     "cpu_step_ms": statistics.median(steps) * 1e3,
                     "cpu_episode_s": statistics.median(episode_s), "share": share, "kernels": compiled_status()})
    return rows


def print_rl(rows: list[dict]) -> None:
    if not rows:
        return
    r0 = rows[0]
    print(f"RL view as training runs it (RLlib factory settings: {r0['injection_s']} + {r0['observation_s']} s, "
          "no reference run; random masked actions; CPU ms):")
    print(f"  {'app':<16}{'steps':>6}{'/step+reset':>12}{'reset':>8}{'step':>8}{'episode':>9}  "
          + " ".join(f"{p[:6]:>6}" for p in PARTS))
    for r in rows:
        sh = r["share"]
        print(f"  {r['app']:<16}{r['steps']:6d}{r['cpu_step_incl_reset_ms']:12.2f}{r['cpu_reset_ms']:8.1f}"
              f"{r['cpu_step_ms']:8.2f}{r['cpu_episode_s'] * 1e3:9.0f}  " + " ".join(f"{100 * sh[p]:5.1f}%" for p in PARTS))
    print("  /step+reset: CPU per env step with each episode's reset spread over its steps (what bounds RLlib's\n"
          "  sampling; `sremarathon train-bench` measures it under RLlib); shares are of step time")
    print(f"  ({r0.get('kernels', '')})")


def _run(apps: list[str], repeat: int) -> list[dict]:
    return rl_section(apps, repeat)


#: the section registered in `sremarathon_env.bench.SECTIONS`
SECTION: tuple[str, Callable[[list[str], int], list[dict]], Callable[[list[dict]], None]] = ("rl", _run, print_rl)
