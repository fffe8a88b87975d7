"""`ToolRuntime.call`: every tool call goes through the policy layer and comes back as a `ToolResult`.

Order of checks (the first that applies decides; costs in budget seconds):

1. budget already spent -> ``budget_exhausted`` (cost 0);
2. arguments that are not a JSON object (or bigger than ``Limits.max_args_chars``), an unknown tool,
   or arguments the tool's pydantic model rejects -> ``unknown_tool`` / ``validation_error``
   (cost ``Limits.invalid_call_cost_s``);
3. a forbidden operation (`policy.forbidden_reason`) -> ``forbidden``, recorded, cost as in 2;
4. the call's cost exceeds the budget left -> ``budget_exhausted`` (cost 0);
5. interventions: no cited incident, or one that is unknown or resolved -> ``policy_refused``
   (cost as in 2); an unknown target -> ``not_found`` (cost as in 2); a target outside the incident's
   affected services -> carried out, decision ``out_of_scope`` (a node action is in scope also when
   the incident names its node: a cited alert's ``node`` label, or the node as culprit or artifact);
6. the tool runs and costs its documented seconds; a failure inside it is a structured error
   (``not_found``, ``query_error``, ``build_failed``, ``backend_error``...).

Nothing raises out of `ToolRuntime.call`, whatever the arguments are.

>>> from apps import load_app
>>> class NoBackend: pass
>>> rt = ToolRuntime(ToolContext(backend=NoBackend(), app=load_app("online-boutique"), now=120.0))
>>> r = rt.call("get_topology", {})
>>> r.ok, r.cost_s, r.budget_left_s, len(r.result["services"]) > 5
(True, 2.0, 108.0, True)
>>> r = rt.call("restart", '{"service": "cartservice"}')
>>> r.ok, r.error.type, r.policy.decision
(False, 'policy_refused', 'refused')
>>> rt.call("read_secret", {"name": "db"}).policy.decision
'forbidden'
>>> rt.call("nope", "{not json").error.type
'unknown_tool'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic import ValidationError

from apps.spec import AppSpec
from sremarathon_env.pipeline import BuildPipeline
from sremarathon_env.tools import actions, reads
from sremarathon_env.tools.incidents import IncidentStore
from sremarathon_env.tools.limits import Limits
from sremarathon_env.tools.policy import affected_services, forbidden_reason
from sremarathon_env.tools.results import PolicyInfo, ToolError, ToolFailure, ToolResult, fit, jsonable
from sremarathon_env.tools.specs import TOOLS, ToolArgs
from sremarathon_env.tools.workspace import Workspace

HANDLERS = {**reads.HANDLERS, **actions.REPORT_HANDLERS}


@dataclass
class ToolContext:
    """Everything a tool call may touch. ``incidents`` and ``workspace`` persist across invocations;
    ``now`` and ``budget_s`` are per invocation (see `ToolRuntime.begin_invocation`)."""

    backend: Any                      # a `Backend`
    app: AppSpec
    alerts: Any | None = None         # an AlertEngine: ``history()``
    promql: Any | None = None         # a PromQLEngine: ``instant(expr, t)``, ``range(expr, start, end, step)``
    incidents: IncidentStore = field(default_factory=IncidentStore)
    workspace: Workspace | None = None
    now: float = 0.0
    budget_s: float | None = None     # budget left in this invocation (None: Limits.budget_s)
    namespace: str | None = None      # None: the app's namespace
    limits: Limits = field(default_factory=Limits)
    pipeline: BuildPipeline | None = None
    epoch: datetime = datetime(2026, 1, 1, tzinfo=timezone.utc)  # wall time shown for sim time 0

    def __post_init__(self) -> None:
        if self.workspace is None:
            self.workspace = Workspace(self.limits)
        if self.budget_s is None:
            self.budget_s = self.limits.budget_s
        if self.namespace is None:
            self.namespace = self.app.namespace
        if self.pipeline is None:
            self.pipeline = BuildPipeline(self.app)


def _preview(args: Any, n: int) -> str:
    try:
        text = args if isinstance(args, str) else json.dumps(args, default=str, ensure_ascii=False)
    except Exception:  # noqa: BLE001 - e.g. circular structures
        text = repr(args)
    return text[:n]


def _validation_details(exc: ValidationError) -> list[dict[str, str]]:
    return [{"loc": ".".join(str(p) for p in e.get("loc", ())) or "<root>", "msg": str(e.get("msg", ""))}
            for e in exc.errors(include_url=False, include_context=False, include_input=False)][:20]


def _node_in_scope(ctx: ToolContext, tool: str, args: Any, inc: Any, labels: list[dict]) -> bool:
    """A node action is also in scope when the incident names its node: a cited alert's ``node`` label,
    or the node as culprit or artifact (a drained node has no pods left, so no service names it)."""
    if tool in ("drain_node", "uncordon_node"):
        nodes = {args.node}
    elif tool == "failover_zone":
        nodes = {n.name for n in ctx.app.topology.nodes if n.zone == args.zone}
    else:
        return False
    named = {str(lb.get("node")) for lb in labels if lb.get("node")}
    named.update(inc.culprit_services)
    named.add(inc.artifact)
    return bool(nodes & named)


class ToolRuntime:
    def __init__(self, ctx: ToolContext):
        self.ctx = ctx
        self.index = 0
        self.results: list[ToolResult] = []   # this invocation's calls, in order
        self.forbidden_attempts = 0           # over the whole run

    # -- invocation lifecycle -----------------------------------------------------------------------
    def begin_invocation(self, now: float, budget_s: float | None = None) -> None:
        """Freeze the clock at ``now`` and refill the budget for a new invocation."""
        self.ctx.now = float(now)
        self.ctx.budget_s = float(self.ctx.limits.budget_s if budget_s is None else budget_s)
        self.index = 0
        self.results = []

    # -- the one entry point --------------------------------------------------------------------
    def call(self, name: str, args: dict | str | None = None) -> ToolResult:
        """Run one tool call through the policy layer. Never raises."""
        try:
            res = self._call(name, args)
        except Exception as exc:  # noqa: BLE001 - last line of defence: the run loop must go on
            res = self._result(name if isinstance(name, str) else str(name)[:100], None, None, args,
                               ToolError(type="backend_error", message=f"internal error: {type(exc).__name__}: {exc}"[:2000]),
                               PolicyInfo(decision="allowed"), cost=0.0)
        self.index += 1
        self.results.append(res)
        return res

    def call_openai(self, tool_call: Any) -> ToolResult:
        """Run an OpenAI-style tool call ``{"name": ..., "arguments": "<json>"}`` (or with a
        ``function`` wrapper). Never raises."""
        try:
            fn = tool_call.get("function", tool_call) if isinstance(tool_call, dict) else {}
            return self.call(fn.get("name") if isinstance(fn, dict) else None, fn.get("arguments") if isinstance(fn, dict) else None)
        except Exception:  # noqa: BLE001
            return self.call(None, None)  # type: ignore[arg-type]

    # -- internals ------------------------------------------------------------------------------
    def _charge(self, cost: float) -> float:
        c = max(0.0, min(float(cost), self.ctx.budget_s))
        self.ctx.budget_s -= c
        return c

    def _result(self, name: str, model: type[ToolArgs] | None, args: ToolArgs | None, raw: Any,
                error: ToolError | None, policy: PolicyInfo, *, cost: float, result: Any = None,
                targets: list[str] = (), cited: str | None = None) -> ToolResult:
        truncated = False
        if error is None:
            result, truncated = fit(jsonable(result), self.ctx.limits.result_chars)
        else:
            error = ToolError(type=error.type, message=error.message, details=fit(jsonable(error.details),
                              self.ctx.limits.result_chars)[0])
        return ToolResult(
            tool=name, ok=error is None, category=model.CATEGORY if model else None,
            args=args.model_dump(mode="json") if args is not None else None,
            raw_args=None if args is not None else _preview(raw, self.ctx.limits.raw_args_chars),
            result=result if error is None else None, truncated=truncated, error=error,
            cost_s=self._charge(cost), budget_left_s=0.0, t=self.ctx.now, index=self.index, policy=policy,
            target_services=list(targets), cited_incident=cited,
        ).model_copy(update={"budget_left_s": self.ctx.budget_s})

    def _call(self, name: Any, raw: Any) -> ToolResult:
        ctx, lim = self.ctx, self.ctx.limits
        name_s = name if isinstance(name, str) else repr(name)[:100]
        name_s = name_s[:100]
        model = TOOLS.get(name_s) if isinstance(name, str) else None

        def fail(t: str, msg: str, details: Any = None, *, cost: float = lim.invalid_call_cost_s,
                 decision: str = "refused", a: ToolArgs | None = None, targets=(), cited=None) -> ToolResult:
            return self._result(name_s, model, a, raw, ToolError(type=t, message=msg, details=details),
                                PolicyInfo(decision=decision, reason=msg[:500]), cost=cost, targets=targets,
                                cited=cited)

        # 1. budget
        if ctx.budget_s <= 0:
            return fail("budget_exhausted", "the budget of this invocation is spent; the call was not run", cost=0.0)
        # 2. tool and arguments
        if model is None:
            return fail("unknown_tool", f"unknown tool {name_s!r}", {"tools": list(TOOLS)})
        if raw is None:
            data: Any = {}
        elif isinstance(raw, str):
            if len(raw) > lim.max_args_chars:
                return fail("validation_error", f"arguments exceed {lim.max_args_chars} characters")
            if raw.strip() == "":
                data = {}
            else:
                try:
                    data = json.loads(raw)
                except (ValueError, RecursionError) as exc:
                    return fail("validation_error", f"arguments are not valid JSON: {exc}"[:500])
        else:
            data = raw
        if not isinstance(data, dict):
            return fail("validation_error", f"arguments must be a JSON object, not {type(data).__name__}")
        try:
            args = model.model_validate(data)
        except ValidationError as exc:
            det = _validation_details(exc)
            msg = "; ".join(f"{d['loc']}: {d['msg']}" for d in det[:5])
            return fail("validation_error", f"invalid arguments for {name_s}: {msg}"[:1000], det)
        except (RecursionError, TypeError, ValueError) as exc:
            return fail("validation_error", f"invalid arguments for {name_s}: {exc}"[:1000])
        # 3. forbidden
        adict = args.model_dump()
        why = forbidden_reason(name_s, model.CATEGORY, adict, ctx.namespace)
        if why is not None:
            self.forbidden_attempts += 1
            return fail("forbidden", why, decision="forbidden", a=args)
        # 4. budget for this call
        cost = float(args.cost(ctx.now))
        if cost > ctx.budget_s + 1e-9:
            return fail("budget_exhausted", f"{name_s} costs {cost:g} s but only {ctx.budget_s:g} s are left",
                        cost=0.0, a=args)
        # 5. interventions: citation and scope
        targets: list[str] = []
        cited = getattr(args, "incident_id", None)
        policy = PolicyInfo(decision="allowed")
        if model.CATEGORY == "intervention":
            if not cited:
                return fail("policy_refused", "interventions must cite an open incident (incident_id)", a=args)
            inc = ctx.incidents.get(cited)
            if inc is None:
                return fail("policy_refused", f"cited incident {cited!r} does not exist",
                            {"open_incidents": ctx.incidents.open_ids()}, a=args, cited=cited)
            if inc.status != "open":
                return fail("policy_refused", f"cited incident {cited} is resolved", a=args, cited=cited)
            try:
                targets = actions.TARGETS[name_s](ctx, args)
            except ToolFailure as f:
                return fail(f.type, f.message, f.details, a=args, cited=cited, decision="allowed")
            cited_fps = set(inc.alert_fingerprints)
            labels = reads.alert_labels(ctx, cited_fps) if cited_fps else []
            scope = affected_services(ctx.app, inc.culprit_services, labels)
            if not set(targets) & set(scope) and not _node_in_scope(ctx, name_s, args, inc, labels):
                policy = PolicyInfo(decision="out_of_scope",
                                    reason=f"{', '.join(targets) or 'no service'} outside {cited}'s affected "
                                           f"services ({', '.join(scope) or 'none'})")
        # 6. run
        handler = HANDLERS.get(name_s) or actions.EXECUTE[name_s]
        try:
            out = handler(ctx, args)
        except ToolFailure as f:
            return self._result(name_s, model, args, raw, ToolError(type=f.type, message=f.message, details=f.details),
                                policy, cost=cost, targets=targets, cited=cited)
        except Exception as exc:  # noqa: BLE001 - a backend bug must not end the run
            return self._result(name_s, model, args, raw,
                                ToolError(type="backend_error", message=f"{type(exc).__name__}: {exc}"[:2000]),
                                policy, cost=cost, targets=targets, cited=cited)
        if model.CATEGORY == "report":
            cited = out["incident"]["id"]
        return self._result(name_s, model, args, raw, None, policy, cost=cost, result=out, targets=targets,
                            cited=cited)


__all__ = ["ToolContext", "ToolRuntime"]
