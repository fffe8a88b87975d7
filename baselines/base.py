"""The policy interface every baseline implements, and small helpers over the observation.

A policy is called once per invocation with the running `Marathon` (``session``): it reads the
observation (``session.observation()``), makes tool calls one at a time (``session.call(tool, args)``
returns the result immediately, so a policy can read, decide and act within one invocation) and
returns optional model usage (``{"model_calls", "prompt_tokens", "completion_tokens", "cost_usd",
"model"}``) that the runner passes to ``end_invocation``.

>>> class Quiet(Policy):
...     name = "quiet"
...     def act(self, session):
...         return None
>>> p = Quiet(); p.reset(None, 0); p.act(None) is None
True
>>> firing({"alerts": [{"fingerprint": "a", "state": "firing"}, {"fingerprint": "b", "state": "resolved"}]})
[{'fingerprint': 'a', 'state': 'firing'}]
"""

from __future__ import annotations

from typing import Any

from sremarathon_env.tools.policy import services_in_labels


class Policy:
    """Base class: ``reset`` at the start of each marathon, ``act`` once per invocation."""

    name: str = "policy"

    def reset(self, app: Any, seed: int) -> None:
        """Forget everything from a previous run. ``app`` is the run's `AppSpec`."""
        self.app = app
        self.seed = seed

    def act(self, session: Any) -> dict[str, Any] | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (HTTP clients...) after a run."""


# -- observation helpers ---------------------------------------------------------------------------
def alertname(a: dict[str, Any]) -> str:
    return str(a.get("alertname") or (a.get("labels") or {}).get("alertname") or "")


def fingerprint(a: dict[str, Any]) -> str:
    return str(a.get("fingerprint") or "")


def firing(obs: dict[str, Any]) -> list[dict[str, Any]]:
    """Alerts of the cumulative history that are firing now."""
    return [a for a in obs.get("alerts", []) if a.get("state") == "firing"]


def alert_services(app: Any, a: dict[str, Any]) -> list[str]:
    """The app services an alert's labels name (declaration order)."""
    return services_in_labels(app, a.get("labels") or {})


def alert_scope_labels(a: dict[str, Any]) -> set[str]:
    """The values of the labels that place an alert in a fault's scope (as the scorer reads them)."""
    from scoring.matching import SCOPE_LABELS, norm

    labels = a.get("labels") or {}
    return {norm(str(labels[k])) for k in SCOPE_LABELS if labels.get(k)}


def open_incidents(obs: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in obs.get("incidents", []) if i.get("status") == "open"]


def incident_id_of(result: Any) -> str | None:
    """The incident id in a successful report_incident result."""
    if getattr(result, "ok", False) and isinstance(result.result, dict):
        inc = result.result.get("incident") or {}
        return inc.get("id")
    return None
