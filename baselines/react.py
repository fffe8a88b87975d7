"""ReAct: an LLM agent over any OpenAI-compatible chat-completions endpoint.

Each invocation starts a fresh conversation: a system prompt, then the cumulative alerts, the open
incidents, the workspace listing and a digest of the previous invocation's results. The model
answers with tool calls (the tools' JSON schemas are offered as functions); every call runs at once
through ``session.call`` and its result goes back as a ``tool`` message. The loop ends when the model
answers without tool calls, after ``max_steps`` model calls, when the invocation's token budget is
spent, when the tool budget is exhausted, or on an endpoint error (recorded as the invocation's
error). Usage (model calls, tokens, cost from ``price_in``/``price_out`` per million tokens) goes to the
bundle. The workspace is the agent's memory across invocations.

Options (keyword arguments, else environment): ``base_url`` (``SREMARATHON_LLM_BASE_URL``, then
``OPENAI_BASE_URL``), ``model`` (``SREMARATHON_LLM_MODEL``, then ``OPENAI_MODEL``), ``api_key``
(``SREMARATHON_LLM_API_KEY``, then ``OPENAI_API_KEY``).

>>> p = ReActPolicy(base_url="http://127.0.0.1:9/v1", model="m", api_key="k", max_steps=3)
>>> p.options["max_steps"], p.name
(3, 'react')
>>> parse_arguments('{"service": "cartservice"}'), parse_arguments("{oops")
({'service': 'cartservice'}, '{oops')
"""

from __future__ import annotations

import json
import os
from typing import Any

from baselines.base import Policy

SYSTEM_PROMPT = """You are the on-call SRE for the {app} application in Kubernetes namespace {ns}.
Every {cadence:g} s you are invoked with the alert history; faults appear without notice and overlap.
Work like this: look at the alerts, investigate with the read tools (metrics, logs, traces, topology,
Kubernetes state, events, deploy history with diffs, source), then report an incident that groups the
alerts of one problem (by fingerprint) and names the culprit service(s) and the responsible artifact
(the config key, file, image, revision, flag or node at fault). Fix it with an intervention that cites
the incident id. Resolve incidents once repaired. Keep notes in your workspace: it is your only memory
between invocations. Each tool call costs budget seconds; you have {budget:g} s per invocation.
Reading secrets, deleting namespaces and editing alert rules are forbidden and penalised."""


def parse_arguments(raw: Any) -> Any:
    """Tool-call arguments as a dict when they are a JSON object, else the raw value (the tool
    runtime answers that with a structured validation error)."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            v = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw
        return v if isinstance(v, dict) else raw
    return raw


def _env(*names: str) -> str | None:
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return None


class ReActPolicy(Policy):
    name = "react"

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 max_steps: int = 10, token_budget: int = 60_000, max_tokens: int = 1024,
                 temperature: float = 0.0, price_in: float = 0.0, price_out: float = 0.0,
                 timeout_s: float = 120.0, max_alerts: int = 60, result_chars: int = 6000):
        self.base_url = (base_url or _env("SREMARATHON_LLM_BASE_URL", "OPENAI_BASE_URL") or "").rstrip("/")
        self.model = model or _env("SREMARATHON_LLM_MODEL", "OPENAI_MODEL") or ""
        self.api_key = api_key or _env("SREMARATHON_LLM_API_KEY", "OPENAI_API_KEY") or ""
        if not self.base_url or not self.model:
            raise ValueError("react needs an endpoint and a model: pass base_url= and model= (or set "
                             "SREMARATHON_LLM_BASE_URL / SREMARATHON_LLM_MODEL, or OPENAI_BASE_URL / OPENAI_MODEL)")
        if max_steps < 1 or token_budget < 1:
            raise ValueError("max_steps and token_budget must be positive")
        self.max_steps, self.token_budget, self.max_tokens = int(max_steps), int(token_budget), int(max_tokens)
        self.temperature, self.price_in, self.price_out = float(temperature), float(price_in), float(price_out)
        self.timeout_s, self.max_alerts, self.result_chars = float(timeout_s), int(max_alerts), int(result_chars)
        self.options = {"base_url": self.base_url, "model": self.model, "max_steps": self.max_steps,
                        "token_budget": self.token_budget, "max_tokens": self.max_tokens,
                        "temperature": self.temperature, "price_in": self.price_in, "price_out": self.price_out}
        self._client = None

    # -- lifecycle --------------------------------------------------------------------------------
    def reset(self, app: Any, seed: int) -> None:
        super().reset(app, seed)
        from sremarathon_env.tools import tool_schemas

        self.tools = tool_schemas("openai")
        if self._client is None:
            import httpx

            headers = {"Content-Type": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=self.timeout_s)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- one invocation ---------------------------------------------------------------------------
    def act(self, session: Any) -> dict[str, Any]:
        obs = session.observation()
        cfg = getattr(session, "config", None)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT.format(
                app=getattr(self.app, "display_name", "the"), ns=getattr(self.app, "namespace", "default"),
                cadence=getattr(cfg, "cadence_s", 120.0), budget=obs.get("budget_s", 110.0))},
            {"role": "user", "content": self._briefing(obs)},
        ]
        usage = {"model_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "model": self.model}
        error = None
        for _ in range(self.max_steps):
            if usage["prompt_tokens"] + usage["completion_tokens"] >= self.token_budget:
                break
            try:
                reply = self._complete(messages, usage)
            except _EndpointError as e:
                error = str(e)
                break
            calls = reply.get("tool_calls") or []
            assistant = {"role": "assistant", "content": reply.get("content") or ""}
            if calls:
                assistant["tool_calls"] = calls
            messages.append(assistant)
            if not calls:
                break
            exhausted = False
            for i, c in enumerate(calls):
                fn = c.get("function") if isinstance(c, dict) else None
                fn = fn if isinstance(fn, dict) else {}
                cid = str(c.get("id") or f"call_{usage['model_calls']}_{i}") if isinstance(c, dict) else f"call_{i}"
                res = session.call(fn.get("name"), parse_arguments(fn.get("arguments", {})))
                messages.append({"role": "tool", "tool_call_id": cid, "content": self._result_text(res)})
                if res.error is not None and res.error.type == "budget_exhausted":
                    exhausted = True
            if exhausted:
                break
        usage["cost_usd"] = round(usage["prompt_tokens"] * self.price_in / 1e6
                                  + usage["completion_tokens"] * self.price_out / 1e6, 8)
        if error:
            usage["error"] = error
        return usage

    def _complete(self, messages: list[dict[str, Any]], usage: dict[str, Any]) -> dict[str, Any]:
        body = {"model": self.model, "messages": messages, "tools": self.tools, "tool_choice": "auto",
                "temperature": self.temperature,
                "max_tokens": max(1, min(self.max_tokens,
                                         self.token_budget - usage["prompt_tokens"] - usage["completion_tokens"]))}
        import httpx

        try:
            r = self._client.post("/chat/completions", json=body)
        except httpx.HTTPError as e:
            raise _EndpointError(f"endpoint unreachable: {type(e).__name__}: {e}") from None
        usage["model_calls"] += 1
        if r.status_code != 200:
            raise _EndpointError(f"endpoint answered HTTP {r.status_code}: {r.text[:200]}")
        try:
            data = r.json()
        except ValueError:
            raise _EndpointError(f"endpoint answered non-JSON: {r.text[:200]!r}") from None
        u = data.get("usage") if isinstance(data, dict) else None
        if isinstance(u, dict):
            usage["prompt_tokens"] += int(u.get("prompt_tokens") or 0)
            usage["completion_tokens"] += int(u.get("completion_tokens") or 0)
        try:
            msg = data["choices"][0]["message"]
            if not isinstance(msg, dict):
                raise TypeError
        except (KeyError, IndexError, TypeError):
            raise _EndpointError(f"malformed completion (no choices[0].message): {str(data)[:200]}") from None
        calls = msg.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            calls = []
        return {"content": msg.get("content") if isinstance(msg.get("content"), str) else "",
                "tool_calls": [c for c in (calls or []) if isinstance(c, dict)]}

    # -- rendering --------------------------------------------------------------------------------
    def _briefing(self, obs: dict[str, Any]) -> str:
        alerts = obs.get("alerts", [])
        shown = alerts[-self.max_alerts:]
        lines = [f"Sim time t={obs.get('t', 0):.0f} s, invocation {obs.get('invocation')}, "
                 f"budget {obs.get('budget_s', 110):g} s.",
                 f"Alert history ({len(alerts)} in all, last {len(shown)}; firing ones need attention):"]
        for a in shown:
            labels = {k: v for k, v in (a.get("labels") or {}).items() if k not in ("alertname",)}
            lines.append(f"- [{a.get('state')}] {a.get('alertname') or labels.get('alertname')} "
                         f"fp={a.get('fingerprint')} {json.dumps(labels, sort_keys=True)}")
        incs = obs.get("incidents", [])
        lines.append(f"Incidents ({len(incs)}):")
        for i in incs:
            lines.append(f"- {i.get('id')} [{i.get('status')}] {i.get('title')} culprits={i.get('culprit_services')} "
                         f"artifact={i.get('artifact')!r} alerts={len(i.get('alert_fingerprints', []))}")
        ws = obs.get("workspace")
        lines.append(f"Workspace: {json.dumps(ws, sort_keys=True, default=str)[:1500]}")
        last = obs.get("last_results") or []
        if last:
            lines.append("Previous invocation's calls:")
            for r in last[-20:]:
                err = r.get("error") or {}
                lines.append(f"- {r.get('tool')} ok={r.get('ok')}" + (f" error={err.get('type')}: "
                                                                      f"{str(err.get('message'))[:120]}" if err else ""))
        return "\n".join(lines)

    def _result_text(self, res: Any) -> str:
        d = {"ok": res.ok, "budget_left_s": res.budget_left_s}
        if res.error is not None:
            d["error"] = {"type": res.error.type, "message": res.error.message}
        else:
            d["result"] = res.result
        text = json.dumps(d, sort_keys=True, default=str)
        if len(text) > self.result_chars:
            text = text[: self.result_chars] + f"... [{len(text) - self.result_chars} characters cut]"
        return text


class _EndpointError(Exception):
    pass
