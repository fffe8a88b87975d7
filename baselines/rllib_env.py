"""The RL view as an RLlib environment: env creator, per-runner/per-sub-env seeding, infra failures.

`make_env(env_config)` builds ``RLView(SREMarathonEnv(...))`` wrapped in `RLlibEnv`. ``env_config``
(a dict or RLlib's ``EnvContext``) holds the app, the backend and the view/marathon options; the
keys of `DEFAULT_ENV_CONFIG` are ours, every other key goes to `SREMarathonEnv` unchanged
(``noise``, ``cadence_s``...). `register()` registers the creator under `ENV_NAME` with Ray's
registry (gymnasium's registry does not reach Ray workers). Nothing here imports ray at import.

Seeding: each sub-env belongs to a *stream* ``(worker_index, sub_index, generation)``; its first
``reset`` seeds the core env from ``SeedSequence([seed, worker, sub, generation(, rllib seed)])``
and every later (unseeded, auto-) reset draws the next scenario from that generator, so every
rollout of every runner plays a different scenario and a rerun plays the same ones. The worker
index comes from the ``EnvContext``; the sub index counts the sub-envs a process built for that
worker (exact for sync vectorisation) and is set exactly for any vectorisation mode by
`StreamCallbacks` (``on_environment_created``), which also bumps ``generation`` when RLlib
recreates a failed env so the replacement does not replay the same scenarios.

GC: with ``tune_gc`` (default) `make_env` sets rollout thresholds for the garbage collector of its process and fixes
the allocator's mmap threshold (`wrappers.gc_policy.tune_process`: an env runner only steps marathons; the same
results, ~3 ms less per step, resident memory that does not climb with every episode), and loads the alert tape's
compiled kernels at once where numba is installed (`sremarathon_env.alerts.compiled.warm`: a runner steps many
episodes; the same results).

Infrastructure failures (a lost connection to a live cluster, a timeout, `InfrastructureError` or
any exception with ``infrastructure = True``) are never scored: with ``on_infra_failure="recreate"``
(the default under RLlib) the step raises RLlib's ``StepFailedRecreateEnvError`` so the runner's
fault tolerance (``restart_failed_sub_environments``) drops the unfinished episode and rebuilds
the env; with ``"flag"`` the episode ends (``truncated``) with reward 0 and
``info["infra_failure"]`` / ``info["episode_valid"] = False`` for the caller to discard it. Other
exceptions propagate (they are bugs, not infrastructure).

>>> env = make_env({"app": "online-boutique", "injection_s": 240, "observation_s": 240, "seed": 3})
>>> worker, sub, generation = env.stream   # (0, 0, 0) for a process's first env: no EnvContext, its first sub-env
>>> worker, generation, make_env({"seed": 3}).stream == (worker, sub + 1, generation)   # the next one built
(0, 0, True)
>>> obs, info = env.reset()
>>> sorted(obs), info["stream"] == [worker, sub, generation]
(['action_mask', 'observations'], True)
>>> obs, r, term, trunc, info = env.step(0)
>>> info["episode_valid"]
True
>>> env.close()
"""

from __future__ import annotations

import itertools
from typing import Any

import gymnasium as gym
import numpy as np

ENV_NAME = "SREMarathonRL"

#: our keys (everything else in env_config goes to SREMarathonEnv)
DEFAULT_ENV_CONFIG: dict[str, Any] = {
    "app": "online-boutique",
    "backend": "sim",
    "seed": 0,                  # base seed of every stream
    "on_infra_failure": "recreate",
    # laptop-sized marathons: 20 min of injection + 8 min of observation = 14 steps per episode
    "injection_s": 1200,
    "observation_s": 480,
    "reference_run": False,     # the no-action reference run only feeds the report's degradation figure
    "tune_gc": True,            # rollout GC and allocator settings for this process (wrappers.gc_policy.tune_process),
                                # and the alert tape's compiled kernels loaded at once (numba installed)
}
_OURS = ("seed", "on_infra_failure", "num_envs", "sub_index", "tune_gc")

#: per-process count of sub-envs built per worker index (sync vectorisation builds them in order)
_built: dict[int, itertools.count] = {}


class InfrastructureError(RuntimeError):
    """Raised by a backend when the infrastructure (not the agent) broke an episode."""

    infrastructure = True


def is_infra_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is an infrastructure failure (scored never, retried by RLlib)."""
    if getattr(exc, "infrastructure", False):
        return True
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    name = type(exc).__name__
    mod = type(exc).__module__ or ""
    if mod.startswith("httpx") and name in ("TransportError", "ConnectError", "ReadTimeout", "WriteTimeout",
                                            "PoolTimeout", "ConnectTimeout", "RemoteProtocolError", "ReadError"):
        return True
    return mod.startswith("sremarathon_env.backends.kubernetes") and name == "ClusterError"


def stream_seed(seed: int, worker: int, sub: int, generation: int = 0, extra: int | None = None) -> int:
    """The first-reset seed of a stream (a 63-bit int).

    >>> stream_seed(0, 1, 0) != stream_seed(0, 0, 1) != stream_seed(0, 1, 0, 1)
    True
    """
    entropy = [int(seed), int(worker), int(sub), int(generation)] + ([int(extra)] if extra is not None else [])
    return int(np.random.SeedSequence(entropy).generate_state(2, dtype=np.uint32).astype(np.uint64)
               .dot(np.array([1, 2**32], dtype=np.uint64)) & np.uint64(2**63 - 1))


def split_config(env_config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(our options, SREMarathonEnv kwargs) of an env_config (dict or EnvContext), defaults applied."""
    cfg = {**DEFAULT_ENV_CONFIG, **dict(env_config or {})}
    ours = {k: cfg.pop(k) for k in _OURS if k in cfg}
    ours.setdefault("seed", 0)
    ours.setdefault("on_infra_failure", "recreate")
    if ours["on_infra_failure"] not in ("recreate", "flag"):
        raise ValueError("env_config['on_infra_failure'] must be 'recreate' or 'flag'")
    return ours, cfg


class RLlibEnv(gym.Wrapper):
    """The RL view plus stream seeding and infrastructure-failure handling (see module docstring)."""

    def __init__(self, env: gym.Env, seed: int = 0, worker_index: int = 0, sub_index: int = 0,
                 on_infra_failure: str = "recreate"):
        super().__init__(env)
        self.base_seed = int(seed)
        self.stream = (int(worker_index), int(sub_index), 0)
        self.on_infra_failure = on_infra_failure
        self._seeded = False
        self._last_obs: Any = None
        self.infra_failures = 0

    def set_stream(self, worker: int, sub: int, generation: int = 0) -> None:
        """Place this env on stream (worker, sub, generation); the next reset reseeds it."""
        self.stream = (int(worker), int(sub), int(generation))
        self._seeded = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if not self._seeded or seed is not None:
            seed = stream_seed(self.base_seed, *self.stream, extra=seed)
            self._seeded = True
        obs, info = self.env.reset(seed=seed, options=options)
        self._last_obs = obs
        info = dict(info)
        info["stream"] = list(self.stream)
        info["episode_valid"] = True
        return obs, info

    def step(self, action: Any):
        try:
            obs, reward, term, trunc, info = self.env.step(action)
        except Exception as exc:  # noqa: BLE001 - classified below; anything else is re-raised
            if not is_infra_failure(exc):
                raise
            self.infra_failures += 1
            failure = {"type": type(exc).__name__, "message": str(exc)[:500], "stream": list(self.stream)}
            if self.on_infra_failure == "recreate":
                from ray.rllib.env.env_errors import StepFailedRecreateEnvError

                raise StepFailedRecreateEnvError(f"infrastructure failure (episode dropped, not scored): "
                                                 f"{failure}") from exc
            return self._last_obs, 0.0, False, True, {"infra_failure": failure, "episode_valid": False}
        self._last_obs = obs
        info = dict(info)
        info["episode_valid"] = True
        return obs, reward, term, trunc, info


def make_env(env_config: Any = None) -> gym.Env:
    """RLlib env creator: ``RLlibEnv(RLView(SREMarathonEnv(**kwargs)))`` on this worker's stream."""
    from sremarathon_env.env import SREMarathonEnv
    from wrappers.rl import RLView

    ours, kwargs = split_config(env_config)
    worker = int(getattr(env_config, "worker_index", 0) or 0)
    sub = ours.get("sub_index")
    if sub is None:
        sub = next(_built.setdefault(worker, itertools.count()))
    if ours.get("tune_gc"):   # env runners are processes that only step marathons (local mode: the driver's too)
        from wrappers.gc_policy import tune_process

        tune_process()   # GC thresholds and the allocator's mmap threshold (resident memory flat across episodes)
        from sremarathon_env.alerts.compiled import warm

        warm()   # the alert tape's compiled kernels from the first episode (numba installed; ~0.4 s once per process)
    core = SREMarathonEnv(**kwargs)
    return RLlibEnv(RLView(core), seed=ours["seed"], worker_index=worker, sub_index=sub,
                    on_infra_failure=ours["on_infra_failure"])


def register(name: str = ENV_NAME) -> str:
    """Register `make_env` with Ray's registry under ``name`` (call before building the algorithm)."""
    from ray.tune.registry import register_env

    register_env(name, make_env)
    return name


def stream_callbacks_class():
    """An RLlibCallback class that places each sub-env on its exact stream and counts infra-failed
    episodes (``flag`` mode) as the metric ``infra_failed_episodes``."""
    from ray.rllib.callbacks.callbacks import RLlibCallback

    class StreamCallbacks(RLlibCallback):
        def on_environment_created(self, *, env_runner, metrics_logger=None, env, env_context, **kwargs):
            gen = getattr(env_runner, "_sremarathon_generation", -1) + 1
            env_runner._sremarathon_generation = gen
            worker = int(getattr(env_context, "worker_index", 0) or 0)
            n = int(getattr(env, "num_envs", 1))
            # per-sub-env values: set_attr reaches the RLlibEnv wrapper that defines the attributes
            env.set_attr("stream", [(worker, i, gen) for i in range(n)])
            env.set_attr("_seeded", [False] * n)

        def on_episode_end(self, *, episode, metrics_logger=None, **kwargs):
            infos = episode.get_infos(-1) if hasattr(episode, "get_infos") else None
            if metrics_logger is not None and isinstance(infos, dict):
                metrics_logger.log_value("infra_failed_episodes", float("infra_failure" in infos), reduce="sum")

    return StreamCallbacks


def episode_steps(env_config: Any = None) -> int:
    """Steps (invocations) per episode under ``env_config``."""
    from sremarathon_env.marathon import MarathonConfig

    _, kw = split_config(env_config)
    fields = {k: kw[k] for k in ("app", "injection_s", "observation_s", "cadence_s") if k in kw}
    return int(MarathonConfig(seed=0, **fields).n_invocations)


class TrivialMaskedEnv(gym.Env):
    """A near-free env with the RL view's spaces and episode length (the sampling benchmark's
    yardstick): constant observations, ``noop`` plus a few actions valid, reward 0.

    >>> env = TrivialMaskedEnv({"injection_s": 240, "observation_s": 240})
    >>> obs, _ = env.reset(seed=0); env.observation_space.contains(obs), env.steps
    (True, 4)
    """

    def __init__(self, env_config: Any = None):
        from wrappers.rl import MAX_ACTIONS, OBS_DIM

        self.observation_space = gym.spaces.Dict({
            "observations": gym.spaces.Box(-1.0, 1.0, shape=(OBS_DIM,), dtype=np.float32),
            "action_mask": gym.spaces.Box(0.0, 1.0, shape=(MAX_ACTIONS,), dtype=np.float32),
        })
        self.action_space = gym.spaces.Discrete(MAX_ACTIONS)
        self.steps = episode_steps(env_config)
        mask = np.zeros(MAX_ACTIONS, dtype=np.float32)
        mask[[0, 1, 2, 10]] = 1.0
        self._obs = {"observations": np.zeros(OBS_DIM, dtype=np.float32), "action_mask": mask}
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        return {k: v.copy() for k, v in self._obs.items()}, {}

    def step(self, action: Any):
        self._t += 1
        return {k: v.copy() for k, v in self._obs.items()}, 0.0, False, self._t >= self.steps, {}
