"""The deterministic digital twin (``sim`` backend).

>>> from sremarathon_env.backends.sim import SimBackend
>>> sim = SimBackend("online-boutique", seed=3)
>>> _ = sim.advance_to(60.0)
>>> sim.k8s_get("deployment", "frontend")[0]["status"]["availableReplicas"]
1
"""

from sremarathon_env.backends.sim.backend import SimBackend

__all__ = ["SimBackend"]
