"""Argument rules both backends share, so a bad intervention gets the same error from the twin and from
a live cluster (the tools layer shows these messages to the agent).

>>> KIND_PLURALS["deploy"], env_key_error("9BAD"), replicas_error(3)
('deployments', "invalid environment variable name '9BAD'", None)
>>> merge_resources({"mem_request_mi": 64, "mem_limit_mi": 128}, mem_limit_mi=32)
({'mem_request_mi': 32, 'mem_limit_mi': 32}, {'mem_limit_mi': 32}, None)
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

#: kubectl's kind names and short names -> the API's plural resource name
KIND_PLURALS = {
    "pod": "pods", "pods": "pods", "po": "pods",
    "deployment": "deployments", "deployments": "deployments", "deploy": "deployments",
    "replicaset": "replicasets", "replicasets": "replicasets", "rs": "replicasets",
    "service": "services", "services": "services", "svc": "services",
    "endpoints": "endpoints", "endpoint": "endpoints", "ep": "endpoints",
    "node": "nodes", "nodes": "nodes", "no": "nodes",
    "configmap": "configmaps", "configmaps": "configmaps", "cm": "configmaps",
    "resourcequota": "resourcequotas", "resourcequotas": "resourcequotas", "quota": "resourcequotas",
    "event": "events", "events": "events", "ev": "events",
}

#: the most replicas `scale` accepts on either backend
MAX_REPLICAS = 50

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNITS = (("cpu", "m"), ("mem", "mi"))


def env_key_error(key: Any) -> str | None:
    """The error for an environment variable name Kubernetes would reject, or None."""
    if not isinstance(key, str) or not _ENV_KEY.match(key):
        return f"invalid environment variable name {key!r}"
    return None


def replicas_error(replicas: Any) -> str | None:
    """The error for a replica count `scale` refuses (not an integer in [0, MAX_REPLICAS]), or None."""
    if isinstance(replicas, bool) or not isinstance(replicas, (int, np.integer)) or not 0 <= replicas <= MAX_REPLICAS:
        return f"replicas must be an integer in [0, {MAX_REPLICAS}], got {replicas!r}"
    return None


def patched(current: dict, changes: dict | None, text: bool = False) -> dict:
    """A copy of ``current`` with a deploy's ``changes`` applied (files by path, env by name): a value of None
    removes its key, any other sets it (as its ``str`` where ``text``, as environment values are kept).

    >>> patched({"a": "1", "b": "2"}, {"b": None, "c": 3}, text=True)
    {'a': '1', 'c': '3'}
    """
    out = dict(current)
    for k, v in (changes or {}).items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = str(v) if text else v
    return out


def merge_resources(current: dict[str, Any], **given: Any) -> tuple[dict | None, dict, str | None]:
    """Apply ``set_resources`` arguments (``cpu_request_m``, ``cpu_limit_m``, ``mem_request_mi``,
    ``mem_limit_mi``; None = unchanged) to a container's current resources.

    Returns (new resources, the changes, None) or (None, changes, error). A limit given alone below the
    current request pulls the request down with it (the request would otherwise be rejected as larger
    than the limit); an explicit request above its limit is an error, as on Kubernetes."""
    changes = {k: v for k, v in given.items() if v is not None}
    if not changes:
        return None, changes, "no resource given"
    for k, v in changes.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0 or v > 64000:
            return None, changes, f"{k} must be a positive integer, got {v!r}"
    changes = {k: int(v) for k, v in changes.items()}
    res = dict(current, **changes)
    for kind, unit in _UNITS:
        rk, lk = f"{kind}_request_{unit}", f"{kind}_limit_{unit}"
        if lk in changes and rk not in changes and res.get(rk) is not None and res[rk] > res[lk]:
            res[rk] = res[lk]
    for kind, unit in _UNITS:
        req, lim = res.get(f"{kind}_request_{unit}"), res.get(f"{kind}_limit_{unit}")
        if req is not None and lim is not None and req > lim:
            return None, changes, (f"spec.containers[0].resources.requests: Invalid value: {kind} request {req} "
                                   f"must be less than or equal to {kind} limit {lim}")
    return res, changes, None
