"""Baseline policies: noop, random, runbook, keep, oracle, react (and ppo checkpoints).

>>> from baselines import make_policy, POLICY_NAMES
>>> make_policy("noop").name, "keep" in POLICY_NAMES
('noop', True)
"""

from __future__ import annotations

from typing import Any

from baselines.base import Policy

POLICY_NAMES: tuple[str, ...] = ("noop", "random", "runbook", "keep", "oracle", "react")


def make_policy(spec: str, **options: Any) -> Policy:
    """A policy by name: ``noop``, ``random``, ``runbook``, ``keep``, ``oracle``, ``react`` or
    ``ppo:PATH`` (an RLlib checkpoint). ``options`` go to the policy's constructor."""
    name, _, arg = spec.partition(":")
    if name == "noop":
        from baselines.noop import NoopPolicy
        return NoopPolicy(**options)
    if name == "random":
        from baselines.random_policy import RandomPolicy
        return RandomPolicy(**options)
    if name == "runbook":
        from baselines.runbook import RunbookPolicy
        return RunbookPolicy(**options)
    if name == "keep":
        from baselines.keep import KeepPolicy
        return KeepPolicy(**options)
    if name == "oracle":
        from baselines.oracle import OraclePolicy
        return OraclePolicy(**options)
    if name == "react":
        from baselines.react import ReActPolicy
        return ReActPolicy(**options)
    if name == "ppo":
        if not arg:
            raise ValueError("ppo needs a checkpoint: ppo:PATH")
        try:
            from baselines.ppo import PPOPolicy
        except ImportError as e:
            raise ValueError(f"ppo policies need the RL baseline (baselines/ppo.py and the [rl] extra): {e}") from None
        return PPOPolicy(arg, **options)
    raise ValueError(f"unknown policy {spec!r}; expected one of {', '.join(POLICY_NAMES)} or ppo:PATH")


__all__ = ["Policy", "make_policy", "POLICY_NAMES"]
