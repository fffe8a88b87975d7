"""SRE-Marathon Gym: a Gymnasium environment for continuous, long-horizon SRE operation.

Importing the package registers the Gymnasium ids (once the environment exists); it imports no heavy
dependency (ray, torch, kubernetes, matplotlib) at import time.
"""

__version__ = "0.1.0"

from sremarathon_env.registration import register_envs as _register_envs  # noqa: E402

_register_envs()
