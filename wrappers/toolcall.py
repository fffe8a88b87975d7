"""Per-tool-call env: each ``step()`` is ONE tool call, for agents that think between calls.

The action is JSON text (or a dict) ``{"tool": name, "args": {...}}``; ``{"tool": "end_invocation"}``
(optionally with ``"usage": {...}``) closes the invocation. The invocation also closes by itself when
the budget left is below ``min_call_s`` (1 s, the cheapest tool) or a call is refused for lack of
budget (the refused call stays recorded). Inside an invocation the clock is
frozen and the reward is 0; the step that closes it advances the clock to the next invocation and
returns the invocation's reward (the Marathon-Score change), so the episode's return still equals the
final score. The observation is the text view's rendering plus the result of the call just made.
``info["invocation_ended"]`` tells which steps closed an invocation.

>>> import gymnasium as gym, sremarathon_env
>>> from wrappers.toolcall import ToolCallEnv
>>> env = ToolCallEnv(gym.make("SREMarathon/OnlineBoutique-v0", injection_s=600, observation_s=240))
>>> obs, info = env.reset(seed=5)
>>> obs, r, term, trunc, info = env.step('{"tool": "get_topology", "args": {}}')
>>> r, info["invocation_ended"], "## Last call: get_topology ok=True" in obs
(0.0, False, True)
>>> obs, r, term, trunc, info = env.step('{"tool": "end_invocation"}')
>>> info["invocation_ended"], info["t"]
(True, 240.0)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium import spaces

from sremarathon_env.env import CHARSET, parse_action, render_text, sanitize
from sremarathon_env.observation import bounded_text, dumps

END = "end_invocation"


class ToolCallEnv(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """One tool call per step over a core `SREMarathonEnv`."""

    def __init__(self, env: gym.Env, max_chars: int = 24000, min_call_s: float = 1.0, schema_format: str = "openai"):
        gym.utils.RecordConstructorArgs.__init__(self, max_chars=max_chars, min_call_s=min_call_s,
                                                 schema_format=schema_format)
        gym.Wrapper.__init__(self, env)
        from sremarathon_env.tools import tool_schemas

        self.max_chars = int(max_chars)
        self.min_call_s = float(min_call_s)
        self.tool_schemas = tool_schemas(schema_format) + [_end_schema(schema_format)]
        self.observation_space = spaces.Text(max_length=self.max_chars, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(max_length=env.unwrapped.action_space.max_length, min_length=0, charset=CHARSET)
        self._last: str = ""
        self._calls_in_invocation = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        _, info = self.env.reset(seed=seed, options=options)
        self._last = ""
        self._calls_in_invocation = 0
        info = dict(info, invocation_ended=False)
        return self._render(), info

    def step(self, action: Any):
        core = self.env.unwrapped
        calls, usage, error = parse_action(action)
        end = False
        res = None
        if error is None and len(calls) == 1 and isinstance(calls[0], dict) and calls[0].get("tool") == END:
            end = True
            usage = calls[0].get("usage") if isinstance(calls[0].get("usage"), dict) else usage
            self._last = "## Last call: end_invocation"
        elif error is not None or len(calls) != 1:
            msg = error or f"expected exactly one tool call, got {len(calls)}"
            self._last = "## Last call: rejected - " + msg
            res = core.call(None, {"error": msg})  # recorded as an invalid call (it costs the invalid-call fee)
            self._last += f" (cost {res.cost_s:g}s)"
        else:
            item = calls[0]
            from sremarathon_env.marathon import _split_call

            name, args = _split_call(item)
            res = core.call(name, args)
            body = dumps(res.result) if res.ok else dumps(res.error.model_dump(mode="json") if res.error else None)
            self._last = (f"## Last call: {res.tool} ok={res.ok} cost={res.cost_s:g}s budget_left={res.budget_left_s:g}s\n"
                          + bounded_text(body, self.max_chars // 2))
        exhausted = res is not None and res.error is not None and res.error.type == "budget_exhausted"
        if not end and (exhausted or float(core.marathon.ctx.budget_s) < self.min_call_s):
            end = True
            self._last += "\n(budget exhausted: invocation ended)"
        if end:
            _, reward, term, trunc, info = core.end_invocation(usage)
            info = dict(info, invocation_ended=True)
        else:
            reward, term, trunc = 0.0, False, False
            info = dict(core._info(), invocation_ended=False)
        return self._render(), float(reward), bool(term), bool(trunc), info

    def _render(self) -> str:
        raw = self.env.unwrapped.raw_observation()
        head = render_text(raw, self.max_chars // 2)
        text = head + "\n" + sanitize(self._last) if self._last else head
        return bounded_text(text, self.max_chars)


def _end_schema(fmt: str) -> dict[str, Any]:
    params = {"type": "object", "properties": {"usage": {"type": "object", "description":
              "optional model usage to record: calls, prompt_tokens, completion_tokens, cost_usd"}}}
    desc = "End this invocation: the cluster runs until your next invocation. Costs nothing."
    if fmt == "mcp":
        return {"name": END, "description": desc, "inputSchema": params}
    return {"type": "function", "function": {"name": END, "description": desc, "parameters": params}}


__all__ = ["ToolCallEnv", "END"]
