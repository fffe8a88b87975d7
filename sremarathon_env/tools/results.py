"""What every tool call returns: a JSON-able `ToolResult`, also when the call was refused or malformed.

A result says what was called (validated ``args``, or a ``raw_args`` preview when the call did not
validate), what came back (``result``, cut to the result cap with ``truncated``), what it cost in
budget seconds, the policy decision, and for interventions the target services and the cited
incident, which is everything the recorder writes for an ``action`` record.

>>> r = ToolResult(tool="get_topology", ok=True, result={"services": []}, cost_s=2.0, t=120.0,
...                policy=PolicyInfo(decision="allowed"))
>>> r.model_dump(mode="json")["policy"]
{'decision': 'allowed', 'reason': ''}
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ErrorType = Literal["validation_error", "unknown_tool", "budget_exhausted", "policy_refused", "forbidden",
                    "not_found", "backend_error", "query_error", "build_failed"]
Decision = Literal["allowed", "refused", "forbidden", "out_of_scope"]
Category = Literal["read", "report", "intervention", "forbidden"]


class ToolFailure(Exception):
    """Raised inside a tool handler to end the call with a structured error (never escapes the runtime)."""

    def __init__(self, type: ErrorType, message: str, details: Any = None):
        super().__init__(message)
        self.type = type
        self.message = message
        self.details = details


class ToolError(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: ErrorType
    message: str
    details: Any = None


class PolicyInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    decision: Decision
    reason: str = ""


class ToolResult(BaseModel):
    """One tool call's outcome. ``ok`` is False exactly when ``error`` is set."""

    tool: str
    ok: bool
    category: Category | None = Field(default=None, description="None for an unknown tool")
    args: dict[str, Any] | None = Field(default=None, description="validated arguments (None if invalid)")
    raw_args: str | None = Field(default=None, description="preview of the arguments when they did not validate")
    result: Any = None
    truncated: bool = False
    error: ToolError | None = None
    cost_s: float = 0.0
    budget_left_s: float = 0.0
    t: float = Field(default=0.0, description="sim time of the invocation (frozen during it)")
    index: int = Field(default=0, description="position of the call within its invocation")
    policy: PolicyInfo
    target_services: list[str] = Field(default_factory=list)
    cited_incident: str | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    # -- what the recorder writes (field names of the bundle's records; plain dicts, no import) -----
    def as_tool_call(self) -> dict[str, Any]:
        """Fields of the bundle's per-call entry of an ``invocation`` record."""
        return {"tool": self.tool, "args": self.args if self.args is not None else {"_raw": self.raw_args},
                "ok": self.ok, "error": None if self.error is None else f"{self.error.type}: {self.error.message}",
                "result": json.dumps(self.result, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                if self.ok else None, "cost_s": self.cost_s, "policy": self.policy.decision}

    def as_action(self) -> dict[str, Any] | None:
        """Fields of an ``action`` record, or None when the call is not an action. Actions are validated
        calls that attempted an intervention or a forbidden operation (including a read outside the
        namespace); a call refused only for the budget attempted nothing and is not one."""
        if self.args is None or (self.error is not None and self.error.type == "budget_exhausted"):
            return None
        forbidden = self.policy.decision == "forbidden"
        if self.category != "intervention" and not forbidden:
            return None
        if self.ok:
            message = str(self.result.get("message", "")) if isinstance(self.result, dict) else ""
        else:
            message = f"{self.error.type}: {self.error.message}" if self.error else ""
        return {"tool": self.tool, "args": self.args, "targets": list(self.target_services),
                "incident_id": self.cited_incident, "in_scope": self.policy.decision != "out_of_scope",
                "ok": self.ok, "forbidden": forbidden,
                "refused": self.policy.reason or self.policy.decision if self.policy.decision in ("refused", "forbidden") else None,
                "message": message}

    def as_incident_op(self) -> dict[str, Any] | None:
        """Fields of an ``incident`` record for a successful report/update/resolve, else None."""
        if not self.ok or self.category != "report" or not isinstance(self.result, dict):
            return None
        inc = self.result.get("incident") or {}
        op = {"report_incident": "report", "update_incident": "update", "resolve_incident": "resolve"}[self.tool]
        return {"op": op, "incident_id": inc["id"], "title": inc["title"], "alerts": list(inc["alert_fingerprints"]),
                "culprits": list(inc["culprit_services"]), "artifact": inc["artifact"], "summary": inc["summary"],
                "status": inc["status"]}


# -- JSON hygiene and result caps --------------------------------------------------------------

def jsonable(x: Any) -> Any:
    """A JSON-able copy of ``x``: non-finite floats become strings, tuples lists, unknown objects str."""
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else ("NaN" if math.isnan(x) else ("+Inf" if x > 0 else "-Inf"))
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if hasattr(x, "model_dump"):
        return jsonable(x.model_dump(mode="json"))
    if hasattr(x, "item") and callable(x.item):  # numpy scalars
        try:
            return jsonable(x.item())
        except Exception:  # noqa: BLE001
            pass
    return str(x)


def _size(x: Any) -> int:
    return len(json.dumps(x, separators=(",", ":"), ensure_ascii=False))


def fit(result: Any, cap: int) -> tuple[Any, bool]:
    """Cut ``result`` so its compact JSON is at most about ``cap`` characters. Lists at the top level
    or in a top-level dict lose items from the end (an ``omitted`` count is added to the dict), long
    strings are cut with a marker; anything else becomes a ``preview``. Returns (result, truncated)."""
    if _size(result) <= cap:
        return result, False
    if isinstance(result, list):
        k = _largest_prefix(lambda n: result[:n], len(result), cap)
        return result[:k], True
    if isinstance(result, dict):
        out = dict(result)
        keys = sorted((k for k, v in out.items() if isinstance(v, (list, str))), key=lambda k: -_size(out[k]))
        for key in keys:
            v = out[key]
            if isinstance(v, list):
                def build(n: int, v=v, key=key) -> dict:
                    return {**out, key: v[:n], "omitted": out.get("omitted", 0) + len(v) - n}
                k = _largest_prefix(build, len(v), cap)
                out = build(k)
            else:
                def build(n: int, v=v, key=key) -> dict:
                    return {**out, key: v[:n] + (f"\n... [{len(v) - n} characters truncated]" if n < len(v) else "")}
                k = _largest_prefix(build, len(v), cap)
                out = build(k)
            if _size(out) <= cap:
                return out, True
    text = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
    return {"preview": text[: max(cap - 64, 0)]}, True


def _largest_prefix(build, n: int, cap: int) -> int:
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _size(build(mid)) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return lo


__all__ = ["Category", "Decision", "ErrorType", "PolicyInfo", "ToolError", "ToolFailure", "ToolResult", "fit",
           "jsonable"]
