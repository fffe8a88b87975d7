"""PPO with action masking on the RL view (RLlib 2.60, new API stack), checkpoint policies, benchmarks.

- `ppo_config` builds a ``PPOConfig`` on `baselines.rllib_env` (Ray-registered creator, stream
  seeding, env and sub-env fault tolerance) with RLlib's action-masking RL module
  (``ActionMaskingTorchRLModule``: the ``action_mask`` of the Dict observation masks the logits);
  ``head="factored"`` adds logit terms shared by every service per action kind (`baselines.ppo_module`).
- `train` runs it: progress bar, one line per iteration with the mean return (the mean
  Marathon-Score of the episodes finished in the iteration: returns equal final scores), a
  checkpoint per ``checkpoint_every`` iterations (plus ``sremarathon.json`` with the env config).
- `PPOPolicy` loads a checkpoint's RL module (torch only, no Ray runtime) and acts through the RL
  view as a `baselines.base.Policy`: ``sremarathon run --policy ppo:PATH``.
- `bench_sampling` measures RLlib sampling on our env against `TrivialMaskedEnv` (same spaces,
  episode length and runner settings); `evaluate` scores policies on fixed seeds.

`init_ray(address)` connects to an existing cluster when given an address (``ray://...`` or
``auto``), so training scales out with Ray itself; the cluster's nodes need this package installed.
Ray and torch are imported only inside the functions that use them.

>>> cfg = ppo_config({"injection_s": 240, "observation_s": 240}, env_runners=2)  # doctest: +SKIP
>>> cfg.num_env_runners, cfg.train_batch_size_per_learner                         # doctest: +SKIP
(2, 8)
>>> default_train_batch(env_runners=2, envs_per_runner=1, steps=14)
28
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from baselines.base import Policy
from baselines.rllib_env import DEFAULT_ENV_CONFIG, ENV_NAME, TrivialMaskedEnv, episode_steps, register

TRIVIAL_ENV_NAME = "SREMarathonRL-trivial"
CHECKPOINT_META = "sremarathon.json"
MODULE_SUBDIR = Path("learner_group") / "learner" / "rl_module" / "default_policy"


def default_train_batch(env_runners: int, envs_per_runner: int, steps: int) -> int:
    """One episode per sub-env per iteration."""
    return max(env_runners, 1) * max(envs_per_runner, 1) * max(steps, 1)


def ppo_config(env_config: dict[str, Any] | None = None, *, env_runners: int = 2, envs_per_runner: int = 1,
               seed: int = 0, train_batch: int | None = None, minibatch: int = 64, epochs: int = 6,
               lr: float = 3e-4, entropy_coeff: float = 0.01, hiddens: tuple[int, ...] = (128, 128),
               gamma: float = 0.99, lambda_: float = 0.95, head: str = "plain", vectorize: str = "sync",
               sample_timeout_s: float = 300.0, env: str = ENV_NAME):
    """A PPOConfig that learns on a laptop (small MLP, one episode per sub-env per iteration)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule

    from baselines.rllib_env import stream_callbacks_class

    if head not in ("plain", "factored"):
        raise ValueError(f"head must be 'plain' or 'factored', not {head!r}")
    module_class = ActionMaskingTorchRLModule
    if head == "factored":  # plus per-action-kind logit terms shared by all services (baselines.ppo_module)
        from baselines.ppo_module import FactoredMaskingTorchRLModule as module_class

    env_cfg = {**DEFAULT_ENV_CONFIG, **(env_config or {}), "seed": int(seed)}
    steps = episode_steps(env_cfg)
    batch = int(train_batch or default_train_batch(env_runners, envs_per_runner, steps))
    return (
        PPOConfig()
        .environment(env, env_config=env_cfg)
        .env_runners(num_env_runners=env_runners, num_envs_per_env_runner=envs_per_runner,
                     gym_env_vectorize_mode=vectorize, rollout_fragment_length="auto",
                     sample_timeout_s=sample_timeout_s, num_cpus_per_env_runner=1)
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=batch, minibatch_size=min(minibatch, batch), num_epochs=epochs,
                  lr=lr, gamma=gamma, lambda_=lambda_, entropy_coeff=entropy_coeff, vf_clip_param=100.0)
        .rl_module(rl_module_spec=RLModuleSpec(
            module_class=module_class,
            model_config={"fcnet_hiddens": list(hiddens), "fcnet_activation": "tanh",
                          "head_fcnet_hiddens": [], "vf_share_layers": False}))
        .callbacks(stream_callbacks_class())
        .fault_tolerance(restart_failed_env_runners=True, restart_failed_sub_environments=True)
        .reporting(metrics_num_episodes_for_smoothing=max(env_runners, 1) * max(envs_per_runner, 1))
        .debugging(seed=int(seed))
    )


def init_ray(address: str | None = None, env_runners: int = 2) -> None:
    """Start a local Ray (enough logical CPUs for the runners and the learner) or connect to the
    cluster at ``address``. Torch and BLAS use one thread per process."""
    import ray

    if ray.is_initialized():
        return
    env_vars = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "RAY_DEDUP_LOGS": "1"}
    if address:
        ray.init(address=address, runtime_env={"env_vars": env_vars})
    else:
        os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
        ray.init(num_cpus=max(env_runners, 0) + 1, num_gpus=0, include_dashboard=False, log_to_driver=True,
                 runtime_env={"env_vars": env_vars}, configure_logging=True, logging_level="ERROR")


def shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


def _mean_return(result: dict[str, Any]) -> float:
    er = result.get("env_runners") or {}
    v = er.get("episode_return_mean")
    return float(v) if v is not None else math.nan


def train(app: str = "online-boutique", iterations: int = 5, env_runners: int = 2, *, envs_per_runner: int = 1,
          seed: int = 0, out: str | Path = "runs/ppo", address: str | None = None, checkpoint_every: int = 1,
          env_config: dict[str, Any] | None = None, progress: bool = True,
          on_iteration: Callable[[dict[str, Any]], None] | None = None, keep_ray: bool = False,
          **config_options: Any) -> dict[str, Any]:
    """Train PPO; returns ``{"rows": [per-iteration dicts], "checkpoint": last path, "env_config"}``."""
    import torch

    torch.set_num_threads(1)
    env_cfg = {**(env_config or {}), "app": app}
    init_ray(address, env_runners)
    register()
    cfg = ppo_config(env_cfg, env_runners=env_runners, envs_per_runner=envs_per_runner, seed=seed, **config_options)
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    ckpt = None
    bar = _Bar(iterations, f"ppo {app}") if progress else None
    algo = cfg.build_algo()
    try:
        t0 = time.perf_counter()
        for i in range(1, iterations + 1):
            res = algo.train()
            er = res.get("env_runners") or {}
            row = {"iteration": i, "mean_return": _mean_return(res),
                   "episodes": int(er.get("num_episodes", 0) or 0),
                   "env_steps": int(er.get("num_env_steps_sampled_lifetime", 0)
                                    or res.get("num_env_steps_sampled_lifetime", 0) or 0),
                   "env_step_failures": int(er.get("num_env_step_failures", 0) or 0),
                   "wall_s": round(time.perf_counter() - t0, 1)}
            if checkpoint_every and (i % checkpoint_every == 0 or i == iterations):
                ckpt = save_checkpoint(algo, out / f"checkpoint-{i:04d}", cfg.env_config, row)
                row["checkpoint"] = str(ckpt)
            rows.append(row)
            if row["episodes"] == 0 and row["env_step_failures"] > 0:
                raise RuntimeError(f"iteration {i}: no episode finished and {row['env_step_failures']} env steps "
                                   "failed (see the EnvRunner errors above); the env is broken, not the cluster")
            if bar:
                bar.update(row)
            if on_iteration:
                on_iteration(row)
    finally:
        if bar:
            bar.close()
        algo.stop()
        if not keep_ray:
            shutdown_ray()
    return {"rows": rows, "checkpoint": None if ckpt is None else str(ckpt), "env_config": dict(cfg.env_config)}


def save_checkpoint(algo: Any, path: Path, env_config: dict[str, Any], row: dict[str, Any] | None = None) -> Path:
    path = Path(algo.save_to_path(str(path)))
    meta = {"env_config": {k: v for k, v in dict(env_config).items()}, "iteration": (row or {}).get("iteration"),
            "mean_return": (row or {}).get("mean_return"), "module": str(MODULE_SUBDIR)}
    (path / CHECKPOINT_META).write_text(json.dumps(meta, indent=1, sort_keys=True, default=str) + "\n")
    return path


class _Bar:
    def __init__(self, total: int, label: str):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console()
        self.p = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("mean return {task.fields[ret]}"), TimeElapsedColumn(), console=self.console)
        self.p.start()
        self.task = self.p.add_task(label, total=total, ret="-")

    def update(self, row: dict[str, Any]) -> None:
        ret = "n/a" if math.isnan(row["mean_return"]) else f"{row['mean_return']:.2f}"
        self.p.console.print(f"iteration {row['iteration']}: mean return {ret} over {row['episodes']} episodes, "
                             f"{row['env_steps']} env steps, {row['wall_s']} s"
                             + (f", checkpoint {row['checkpoint']}" if row.get("checkpoint") else ""))
        self.p.update(self.task, completed=row["iteration"], ret=ret)

    def close(self) -> None:
        self.p.stop()


# -- checkpoints as policies ----------------------------------------------------------------------
def module_dir(path: str | Path) -> Path:
    """The RL module directory of an algorithm checkpoint (or ``path`` itself if it is one)."""
    p = Path(path)
    for cand in (p / MODULE_SUBDIR, p):
        if (cand / "class_and_ctor_args.pkl").exists() or (cand / "module_state.pt").exists() \
                or (cand / "rl_module_metadata.json").exists():
            return cand
    raise FileNotFoundError(f"no RLlib RL module checkpoint at {p} (expected {p / MODULE_SUBDIR})")


def load_module(path: str | Path):
    """The trained ``ActionMaskingTorchRLModule`` of a checkpoint (inference on CPU)."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    module = RLModule.from_checkpoint(str(module_dir(path)))
    module.eval() if hasattr(module, "eval") else None
    return module


def masked_logits(module: Any, obs: dict[str, np.ndarray]) -> np.ndarray:
    """Action logits (invalid actions at the float minimum) for one RL-view observation."""
    import torch

    batch = {"obs": {"observations": torch.from_numpy(np.asarray(obs["observations"], dtype=np.float32)[None]),
                     "action_mask": torch.from_numpy(np.asarray(obs["action_mask"], dtype=np.float32)[None])}}
    with torch.no_grad():
        out = module.forward_inference(batch)
    return out["action_dist_inputs"][0].cpu().numpy()


class PPOPolicy(Policy):
    """A trained checkpoint acting through the RL view; greedy (argmax over valid actions) unless
    ``explore=True`` (samples the masked softmax with a generator seeded from the run's seed)."""

    name = "ppo"

    def __init__(self, path: str | Path, explore: bool = False):
        self.path = str(path)
        self.explore = bool(explore)
        self.options = {"path": self.path, "explore": self.explore}
        self.module = load_module(path)
        meta = Path(path) / CHECKPOINT_META
        self.meta = json.loads(meta.read_text()) if meta.exists() else {}

    def reset(self, app: Any, seed: int) -> None:
        super().reset(app, seed)
        self.rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x50504F]))
        self.view = None
        self._session = None

    def choose(self, obs: dict[str, np.ndarray]) -> int:
        logits = masked_logits(self.module, obs)
        valid = np.asarray(obs["action_mask"]) > 0
        if not self.explore:
            return int(np.argmax(np.where(valid, logits, -np.inf)))
        z = np.where(valid, logits - logits[valid].max(), -np.inf)
        p = np.exp(z)
        p /= p.sum()
        return int(self.rng.choice(len(p), p=p))

    def act(self, session: Any) -> None:
        from baselines.random_policy import _Core, play_rl_action
        from wrappers.rl import RLView

        if self.view is None or self._session is not session:
            self.view = RLView(_Core(session))
            self._session = session
        play_rl_action(session, self.view, self.choose(self.view._observe()))
        return None


def evaluate(policy: str | Policy, app: str, seeds: list[int], env_config: dict[str, Any] | None = None) -> list[float]:
    """Marathon-Scores of ``policy`` on scenarios ``seeds`` under the env config's marathon settings."""
    from baselines.runner import run_marathon

    cfg = {**DEFAULT_ENV_CONFIG, **(env_config or {})}
    fields = {k: cfg[k] for k in ("injection_s", "observation_s", "cadence_s", "noise", "noise_rate",
                                  "reference_run") if k in cfg}
    scores = []
    for s in seeds:
        report, _ = run_marathon(app, int(s), policy, **fields)
        scores.append(float(report.marathon_score))
    return scores


# -- sampling benchmark ---------------------------------------------------------------------------
def bench_sampling(app: str = "online-boutique", env_runners: int = 2, envs_per_runner: int = 1,
                   episodes_per_runner: int = 2, env_config: dict[str, Any] | None = None,
                   address: str | None = None, keep_ray: bool = False) -> dict[str, Any]:
    """Env steps per second of RLlib sampling (PPO module, exploration) on our RL view and on
    `TrivialMaskedEnv` with the same spaces, episode length and runner settings."""
    import torch
    from ray.tune.registry import register_env

    # one torch thread, as in the env runner actors (OMP_NUM_THREADS=1) and in `train`: with --env-runners 0
    # the driver samples, and its default thread pool spun against any other process (the trivial env's
    # step cost moved 3-13 ms from run to run on a busy 2-core machine)
    torch.set_num_threads(1)
    env_cfg = {**(env_config or {}), "app": app}
    init_ray(address, env_runners)
    register()
    register_env(TRIVIAL_ENV_NAME, lambda c: TrivialMaskedEnv(c))
    steps = episode_steps({**DEFAULT_ENV_CONFIG, **env_cfg}) * episodes_per_runner * max(envs_per_runner, 1)
    out: dict[str, Any] = {"env_runners": env_runners, "envs_per_runner": envs_per_runner,
                           "steps_per_runner": steps}
    try:
        for key, name in (("trivial", TRIVIAL_ENV_NAME), ("sremarathon", ENV_NAME)):
            cfg = ppo_config(env_cfg, env_runners=env_runners, envs_per_runner=envs_per_runner, env=name)
            algo = cfg.build_algo()
            try:
                group = algo.env_runner_group
                remote = env_runners > 0

                def run(n: int) -> tuple[int, float, float]:
                    """(env steps, wall seconds, CPU seconds summed over the runners that sampled)."""
                    def sample(r: Any) -> tuple[int, float]:
                        c0 = time.process_time()
                        k = sum(len(e) for e in r.sample(num_timesteps=n))
                        return k, time.process_time() - c0

                    t0 = time.perf_counter()
                    res = group.foreach_env_runner(sample, local_env_runner=not remote)
                    return int(sum(k for k, _ in res)), time.perf_counter() - t0, float(sum(c for _, c in res))

                # the trivial env gets a longer sample so its fixed per-call overhead does not understate it
                n_steps = steps if key == "sremarathon" else max(steps, 2000)
                run(max(n_steps // 4, 1))  # warm-up (first resets, module build)
                n, dt, cpu = run(n_steps)
                out[key] = {"env_steps": n, "seconds": round(dt, 3), "steps_per_s": round(n / dt, 2),
                            "cpu_s": round(cpu, 3), "steps_per_cpu_s": round(n / cpu, 2) if cpu > 0 else None,
                            "cpu_ms_per_step": round(1e3 * cpu / n, 3) if n else None}
            finally:
                algo.stop()
    finally:
        if not keep_ray:
            shutdown_ray()
    out["ratio"] = round(out["sremarathon"]["steps_per_s"] / out["trivial"]["steps_per_s"], 4)
    # the same ratio in CPU time of the sampling runners (robust on a shared, loaded machine)
    a, b = out["sremarathon"]["steps_per_cpu_s"], out["trivial"]["steps_per_cpu_s"]
    out["ratio_cpu"] = round(a / b, 4) if a and b else None
    return out
