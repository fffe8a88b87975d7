"""Gymnasium ids of the environment, registered when ``sremarathon_env`` is imported.

>>> import gymnasium as gym, sremarathon_env
>>> sorted(i for i in gym.registry if i.startswith("SREMarathon/") and "-live-" not in i)
['SREMarathon/AstronomyShop-v0', 'SREMarathon/OnlineBoutique-v0', 'SREMarathon/TrainTicket-v0']
>>> gym.spec("SREMarathon/OnlineBoutique-live-v0").nondeterministic
True

Use ``gym.make(id, **kwargs)`` with the constructor options of `sremarathon_env.env.SREMarathonEnv`
(``injection_s``, ``observation_s``, ``bundle_dir``, ...), ``gym.register_envs(sremarathon_env)`` to
keep linters quiet, or the ``"sremarathon_env.env:SREMarathonEnv"`` entry point directly. The
marathon ends itself (``truncated=True``), so no TimeLimit is added.
"""

from __future__ import annotations

ENTRY_POINT = "sremarathon_env.env:SREMarathonEnv"

#: app model id -> Gymnasium id (kept in sync with sremarathon_env.env.APP_IDS)
IDS = {
    "online-boutique": "SREMarathon/OnlineBoutique-v0",
    "train-ticket": "SREMarathon/TrainTicket-v0",
    "astronomy-shop": "SREMarathon/AstronomyShop-v0",
}


def register_envs() -> None:
    """Register the ids (idempotent; light: imports only gymnasium's registry)."""
    from gymnasium.envs.registration import register, registry

    for app, env_id in IDS.items():
        if env_id in registry:
            continue
        register(id=env_id, entry_point=ENTRY_POINT, kwargs={"app": app}, nondeterministic=False,
                 disable_env_checker=False, order_enforce=True)
    try:  # the live variants (``SREMarathon/<App>-live-v0``, nondeterministic), registered by their backend
        from sremarathon_env.backends.kubernetes.registration import register_live_envs
    except ImportError:  # pragma: no cover - a build without the live backend
        return
    register_live_envs()
