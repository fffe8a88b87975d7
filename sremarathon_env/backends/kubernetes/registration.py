"""Gymnasium ids of the live backend (nondeterministic: a real cluster runs on the wall clock).

>>> register_live_envs()
>>> import gymnasium as gym
>>> gym.spec("SREMarathon/OnlineBoutique-live-v0").nondeterministic
True
"""

from __future__ import annotations

ENTRY_POINT = "sremarathon_env.env:SREMarathonEnv"

#: app model id -> Gymnasium id of the live backend
LIVE_IDS = {
    "online-boutique": "SREMarathon/OnlineBoutique-live-v0",
    "train-ticket": "SREMarathon/TrainTicket-live-v0",
    "astronomy-shop": "SREMarathon/AstronomyShop-live-v0",
}


def register_live_envs() -> None:
    """Register the live ids (idempotent; imports only gymnasium's registry)."""
    from gymnasium.envs.registration import register, registry

    for app, env_id in LIVE_IDS.items():
        if env_id not in registry:
            register(id=env_id, entry_point=ENTRY_POINT, kwargs={"app": app, "backend": "live"},
                     nondeterministic=True, disable_env_checker=False, order_enforce=True)
