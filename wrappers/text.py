"""Text view for LLM agents: a prompt-ready Text observation; the action is JSON text of tool calls.

The observation is `sremarathon_env.env.render_text` of the core observation (firing and pending
alerts first, then the cumulative history newest first, incidents, workspace files with their
contents, the last invocation's results), cut to ``max_chars``. ``env.tool_schemas`` holds the
tools' OpenAI-style function definitions (``schema_format="mcp"`` for MCP), and
``env.system_prompt`` a short description of the task. The action is what the core env accepts:
a JSON list of ``{"tool", "args"}`` calls (or ``{"calls": [...], "usage": {...}}``).

>>> import gymnasium as gym, sremarathon_env
>>> from wrappers.text import TextView
>>> env = TextView(gym.make("SREMarathon/OnlineBoutique-v0", injection_s=600, observation_s=240))
>>> obs, info = env.reset(seed=3)
>>> obs.splitlines()[0]
'# SRE marathon - t=120s, invocation 1, budget 110s'
>>> len(env.tool_schemas) > 20
True
>>> obs, r, term, trunc, info = env.step('[{"tool": "get_alerts", "args": {"state": "firing"}}]')
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from sremarathon_env.env import CHARSET, render_text

SYSTEM_PROMPT = (
    "You are the on-call SRE for the {app} application during a {minutes:.0f}-minute marathon of injected "
    "faults. You are invoked every {cadence:.0f} s of cluster time with a budget of {budget:.0f} s of tool "
    "time. Group firing alerts into incidents (report_incident) naming the culprit services and the "
    "responsible artifact, then repair by interventions that cite the incident id. Reply with a JSON list "
    'of tool calls, e.g. [{{"tool": "get_alerts", "args": {{"state": "firing"}}}}].'
)


class TextView(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Text observation and JSON-text action over a core `SREMarathonEnv`."""

    def __init__(self, env: gym.Env, max_chars: int = 24000, schema_format: str = "openai"):
        gym.utils.RecordConstructorArgs.__init__(self, max_chars=max_chars, schema_format=schema_format)
        gym.Wrapper.__init__(self, env)
        from sremarathon_env.tools import TOOL_NAMES, tool_schemas

        self.max_chars = int(max_chars)
        self.tool_schemas: list[dict[str, Any]] = tool_schemas(schema_format)
        self.tool_names = list(TOOL_NAMES)
        core = env.unwrapped
        cfg = core.config
        self.system_prompt = SYSTEM_PROMPT.format(app=cfg.app, minutes=cfg.horizon_s / 60, cadence=cfg.cadence_s,
                                                  budget=cfg.budget_s)
        self.observation_space = spaces.Text(max_length=self.max_chars, min_length=0, charset=CHARSET)
        self.action_space = core.action_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        _, info = self.env.reset(seed=seed, options=options)
        return self.render_observation(), info

    def step(self, action: Any):
        _, reward, term, trunc, info = self.env.step(action)
        return self.render_observation(), reward, term, trunc, info

    def render_observation(self) -> str:
        return render_text(self.env.unwrapped.raw_observation(), self.max_chars)

    def tools_json(self) -> str:
        """The tool schemas as one JSON text (for prompts of models without native tool calling)."""
        return json.dumps(self.tool_schemas, sort_keys=True)
