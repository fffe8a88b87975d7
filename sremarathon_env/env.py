"""The Gymnasium facade over one `Marathon`: one ``step()`` is one agent invocation.

The core observation is a ``Dict`` of the sim clock and four bounded JSON texts (cumulative alert
history, incidents, the persistent workspace, the last invocation's results); the action is a JSON
text of tool calls. The reward is the change of the Marathon-Score of the evidence recorded so far,
so the running sum of an episode's rewards (``ret += reward``, left to right) equals the final
score bit for bit. The end of the marathon is ``truncated=True``; ``terminated`` is always False.

>>> import gymnasium as gym, sremarathon_env
>>> env = gym.make("SREMarathon/OnlineBoutique-v0", injection_s=600, observation_s=240)
>>> obs, info = env.reset(seed=7)
>>> float(obs["t"][0]), info["scenario_seed"] == info["scenario_seed"], info["bundle"]
(120.0, True, None)
>>> obs, r, term, trunc, info = env.step('[{"tool": "get_topology", "args": {}}]')
>>> term, trunc, float(obs["t"][0])
(False, False, 240.0)
>>> env.close(); env.close()

Actions (``step`` accepts any of these; a bad one never raises, it is recorded as an invocation
error and shown in ``last_results_json``):

- a JSON text: ``[{"tool": "restart", "args": {...}}, ...]`` (also OpenAI-style
  ``{"name", "arguments"}`` items, a single call object, or ``{"calls": [...], "usage": {...}}``
  whose ``usage`` (model calls, tokens, cost) is recorded for the score report);
- the same structure as Python objects (a list of dicts, or a dict with ``calls``);
- ``""``, ``"[]"``, ``None`` or ``[]``: an invocation without calls.

Seeding: ``reset(seed=s)`` seeds ``np_random`` and the scenario seed is drawn from it, so an unseeded
``reset()`` (vector autoreset) draws a fresh scenario; ``reset(options={"scenario_seed": n})`` runs
scenario ``n`` directly (``sremarathon run --seed N`` is scenario ``N``). ``info`` carries the
scenario seed, the schedule digest (never the schedule), the bundle path (None when in memory), the
env version, backend, app and the score so far; the final step adds ``score_report`` (the full
report as a dict) and ``bundle_digest``.
"""

from __future__ import annotations

import json
import math
import os
import re
import string
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sremarathon_env.observation import AlertRows, bounded_json_list, bounded_text, dumps
from sremarathon_env.registration import IDS
from sremarathon_env.tools.reads import alert_dict

#: Text spaces use this ordered charset (JSON text with ``ensure_ascii`` always fits in it).
CHARSET = string.printable
ENV_VERSION = "0.1.0"

APP_IDS = IDS  #: app model id -> Gymnasium id


def parse_action(action: Any) -> tuple[list[Any], dict[str, Any] | None, str | None]:
    """Normalise an action into (calls, usage, error). Never raises.

    >>> parse_action('[{"tool": "get_topology"}]')[0]
    [{'tool': 'get_topology'}]
    >>> parse_action('{"calls": [], "usage": {"calls": 1}}')[1]
    {'calls': 1}
    >>> parse_action('not json')[2][:24]
    'action is not valid JSON'
    """
    if action is None:
        return [], None, None
    if isinstance(action, (bytes, bytearray)):
        try:
            action = action.decode("utf-8")
        except UnicodeDecodeError as exc:
            return [], None, f"action is not UTF-8 text: {exc}"
    if isinstance(action, np.ndarray) and action.shape == ():
        action = action.item()
    if isinstance(action, str):
        text = action.strip()
        if not text:
            return [], None, None
        try:
            action = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            return [], None, f"action is not valid JSON: {str(exc)[:200]}"
    usage = None
    if isinstance(action, dict):
        if "calls" in action or "tool_calls" in action:
            usage = action.get("usage") if isinstance(action.get("usage"), dict) else None
            action = action.get("calls", action.get("tool_calls"))
        else:
            action = [action]
    if action is None:
        return [], usage, None
    if not isinstance(action, (list, tuple)):
        return [], usage, f"action is not a list of tool calls: {type(action).__name__}"
    return list(action), usage, None


def exact_final_reward(running: float, final: float) -> float:
    """The reward ``r`` with ``running + r == final`` in floating point (nearest to the exact
    difference), so an episode's left-to-right return equals the final score exactly. Such an ``r``
    exists whenever the final score is within a factor two of the running sum (then ``final -
    running`` is exact) and in practice always; otherwise the plain difference is returned.

    >>> r = exact_final_reward(0.1 + 0.2, 1.0); (0.1 + 0.2) + r == 1.0
    True
    """
    r = final - running
    for _ in range(64):
        s = running + r
        if s == final:
            return r
        r = math.nextafter(r, math.inf if s < final else -math.inf)
    return final - running  # pragma: no cover - unreachable for finite inputs


class SREMarathonEnv(gym.Env):
    """One marathon per episode on one app. See the module docstring for spaces and semantics.

    Args:
        app: app model id (``online-boutique``, ``train-ticket``, ``astronomy-shop``).
        backend: ``sim`` (the embedded digital twin) or ``live`` (alias ``kubernetes``: a cluster; the
            ``SREMarathon/<App>-live-v0`` ids set it). Anything else is refused here.
        cadence_s, budget_s, tick_s: invocation period, budget per invocation, twin tick.
        injection_s, observation_s: the two phases of the marathon (faults only in the first).
        noise, noise_rate: benign noise (deploys, restarts, blips) and its rate multiplier.
        bundle_dir: None keeps bundles in memory; a directory gets one sub-directory per episode
            (``<app>-s<scenario_seed>-e<episode>``).
        reference_run: compute the matched no-action run (degradation figure in the score report).
        max_alert_chars, max_incident_chars, max_workspace_chars, max_result_chars: lengths of
            the observation's texts (oldest alerts and longest contents are cut first).
        max_action_chars: length of the Text action space.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, app: str = "online-boutique", backend: str = "sim", cadence_s: float = 120.0,
                 budget_s: float = 110.0, tick_s: float = 15.0, injection_s: int = 3600, observation_s: int = 1800,
                 noise: bool = True, noise_rate: float = 1.0, bundle_dir: str | None = None,
                 reference_run: bool = True, render_mode: str | None = None, max_alert_chars: int = 65536,
                 max_incident_chars: int = 8192, max_workspace_chars: int = 16384, max_result_chars: int = 16384,
                 max_action_chars: int = 131072):
        from sremarathon_env.marathon import MarathonConfig

        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.config = MarathonConfig(app=app, seed=0, backend=backend, cadence_s=cadence_s, budget_s=budget_s,
                                     tick_s=tick_s, injection_s=injection_s, observation_s=observation_s,
                                     noise=noise, noise_rate=noise_rate, bundle_dir=None,
                                     reference_run=reference_run)
        self.bundle_dir = None if bundle_dir is None else str(bundle_dir)
        self.caps = {"alerts": int(max_alert_chars), "incidents": int(max_incident_chars),
                     "workspace": int(max_workspace_chars), "results": int(max_result_chars)}
        self.n_invocations = self.config.n_invocations
        horizon = float(self.config.horizon_s)
        text = lambda n: spaces.Text(max_length=n, min_length=0, charset=CHARSET)  # noqa: E731
        self.observation_space = spaces.Dict({
            "t": spaces.Box(0.0, horizon, shape=(1,), dtype=np.float32),
            "invocation": spaces.Discrete(self.n_invocations + 1),
            "budget_s": spaces.Box(0.0, float(budget_s), shape=(1,), dtype=np.float32),
            "alerts_json": text(self.caps["alerts"]),
            "incidents_json": text(self.caps["incidents"]),
            "workspace_json": text(self.caps["workspace"]),
            "last_results_json": text(self.caps["results"]),
        })
        self.action_space = spaces.Text(max_length=int(max_action_chars), min_length=0, charset=CHARSET)
        self.marathon = None
        self.scenario_seed: int | None = None
        self.episode = 0
        self._running = 0.0
        self._prev_score = 0.0
        self._last_error: str | None = None
        self._bundle_path: str | None = None
        self._done = False
        self._alert_cache: dict[Any, tuple] = {}   # alert key -> (state, JSON text)
        self._alert_pos = 0                        # position in the alert engine's change log
        self._alert_rows = AlertRows()             # the history's entries in order (`_alert_rows_now`)
        self._schedule_digest = ""
        self._log: list[tuple] = []   # the episode's tool calls and invocation ends (pickling replays it)

    # -- Gymnasium API ------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None, observe: bool = True):
        """Gymnasium's reset. ``observe=False`` (views that build their own observation from the marathon, e.g.
        the RL view, as with `end_invocation`) returns None in place of the core observation and skips building
        it; nothing else changes."""
        super().reset(seed=seed)
        from sremarathon_env.marathon import Marathon

        options = options or {}
        if options.get("scenario_seed") is not None:
            scenario_seed = int(options["scenario_seed"])
            if scenario_seed < 0:
                raise ValueError("options['scenario_seed'] must be a non-negative integer")
        else:
            scenario_seed = int(self.np_random.integers(0, 2**31 - 1))
        self._close_marathon()
        self.episode += 1
        self.scenario_seed = scenario_seed
        self._bundle_path = self._episode_dir(scenario_seed)
        cfg = self.config.model_copy(update={"seed": scenario_seed, "bundle_dir": self._bundle_path})
        self.marathon = Marathon(cfg)
        self._log = []
        self.marathon.start(observe=False)   # the env builds its own observation
        self._schedule_digest = self.marathon.schedule_digest
        self._running = 0.0
        self._prev_score = float(self.marathon.score)
        self._last_error = None
        self._done = False
        self._alert_cache = {}
        self._alert_pos = 0
        self._alert_rows = AlertRows()
        return self._obs() if observe else None, self._info()

    def step(self, action: Any):
        if self.marathon is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._done:
            raise gym.error.ResetNeeded("the marathon is over (truncated); call reset()")
        from sremarathon_env.marathon import _split_call

        calls, usage, error = parse_action(action)
        for item in calls:
            self.call(*_split_call(item))
        return self.end_invocation(usage, error)

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.marathon is None:
            return None
        return render_text(self.raw_observation(), max_chars=8000)

    def close(self) -> None:
        self._close_marathon()
        super().close()

    # -- building blocks shared with the views -------------------------------------------------------
    def call(self, tool: Any, args: Any = None):
        """Run one tool call inside the current invocation (for the per-tool-call view)."""
        self._log.append(("call", tool, args))
        return self.marathon.call(tool, args)

    def end_invocation(self, usage: dict | None = None, error: str | None = None, observe: bool = True):
        """Close the current invocation, advance the clock; the step tuple (per-tool-call view).
        ``observe=False`` (views that build their own observation from the marathon, e.g. the RL view)
        returns None in place of the core observation and skips building it; nothing else changes."""
        if self._done:
            raise gym.error.ResetNeeded("the marathon is over (truncated); call reset()")
        self._log.append(("end", usage, error))
        self.marathon.end_invocation(usage, error)
        self._last_error = error
        return self._after_invocation(observe)

    def _after_invocation(self, observe: bool = True):
        m = self.marathon
        more = m.advance_to_next_invocation()
        info_extra: dict[str, Any] = {}
        if more:
            score = float(m.score)
            reward = score - self._prev_score
            self._prev_score = score
        else:
            report = m.finish()
            final = float(report.marathon_score)
            reward = exact_final_reward(self._running, final)
            self._prev_score = final
            self._done = True
            info_extra = {"score_report": report.model_dump(mode="json"), "bundle_digest": report.digest}
        self._running += reward
        info = self._info()
        info.update(info_extra)
        return self._obs() if observe else None, float(reward), False, bool(not more), info

    def raw_observation(self) -> dict[str, Any]:
        """The current observation as Python structures (what the texts serialise)."""
        m = self.marathon
        return {
            "t": float(m.now), "invocation": int(m.invocation_index), "budget_s": float(m.ctx.budget_s),
            "alerts": [alert_dict(a) for a in m.alert_engine.history()],
            "incidents": m.ctx.incidents.snapshot(),
            "workspace": m.ctx.workspace.snapshot(),
            "last_results": [r.to_json() for r in m.last_results],
            "last_error": self._last_error,
        }

    def _alert_entries(self) -> list[tuple[str | None, str]]:
        """(state, JSON text) of every alert of the cumulative history, oldest first (read-only: kept between
        calls). A text is encoded once per change of its alert: the engine's change log (``changed_texts_since``) says
        which changed; the entries in history order are kept too (`AlertRows`), and only the changed ones and the
        added ones are taken (``[cache[k] for k in eng.history_keys()]``, without a lookup per alert per step)."""
        return self._alert_rows_now().filled().entries

    def _alert_rows_now(self) -> "AlertRows":
        """`AlertRows` of the cumulative history now (kept between calls; a fresh one for an engine without a change
        log). A resolved alert's text is built only when read (``changed_texts_since(..., lazy=True)``: most of
        those the bounded list leaves out are never built); every change is taken here before the rows are read,
        so an unbuilt text is that of an alert unchanged since."""
        eng = self.marathon.alert_engine
        if not hasattr(eng, "changed_texts_since"):   # an engine without a change log: encode every alert
            return AlertRows.of([(d.get("state"), dumps(d)) for d in (alert_dict(a) for a in eng.history())])
        cache = self._alert_cache
        self._alert_pos, changed = eng.changed_texts_since(self._alert_pos, lazy=True)   # texts: `dumps` of the dicts
        rows = self._alert_rows
        at, put = rows.at.get, rows.put
        for key, state, text in changed:   # the known entries put, the new ones appended below
            entry = cache[key] = (state, text)
            i = at(key)
            if i is not None:
                put(i, entry)
        keys = eng.history_keys()
        known = rows.keys
        n = len(known)
        if len(keys) != n:   # alerts were added (never removed: the same count is the same order)
            if keys[:n] != known:   # one among the known ones: take the order again
                n = 0
                rows.clear()
            for k in keys[n:]:
                rows.append(k, cache[k])
        return rows

    def _alerts_json(self) -> str:
        """The cumulative alert history as a JSON list, oldest first, at most ``max_alert_chars``:
        every pending or firing alert is kept; the oldest resolved ones are left out first, counted in
        a leading ``{"omitted_resolved": n}`` (`AlertRows.alerts_json`; `alerts_json_of` is its definition)."""
        return self._alert_rows_now().alerts_json(self.caps["alerts"])

    def _obs(self) -> dict[str, Any]:
        m = self.marathon
        ws = m.ctx.workspace.snapshot()
        ws_items = [dumps({"path": p, "bytes": len(c.encode()), "content": c}) for p, c in sorted(ws.items())]
        results = {"invocation": int(m.invocation_index) - 1, "error": self._last_error,
                   "results": [r.to_json() for r in m.last_results]}
        return {
            "t": np.array([m.now], dtype=np.float32),
            "invocation": int(min(m.invocation_index, self.n_invocations)),
            "budget_s": np.array([min(max(float(m.ctx.budget_s), 0.0), self.config.budget_s)], dtype=np.float32),
            "alerts_json": self._alerts_json(),
            "incidents_json": bounded_json_list([dumps(i) for i in m.ctx.incidents.snapshot()], self.caps["incidents"]),
            "workspace_json": bounded_json_list(ws_items, self.caps["workspace"]),
            "last_results_json": bounded_text(dumps(results), self.caps["results"]),
        }

    def _info(self) -> dict[str, Any]:
        m = self.marathon
        return {"scenario_seed": self.scenario_seed, "schedule_digest": self._schedule_digest,
                "bundle": self._bundle_path, "env_version": ENV_VERSION, "backend": self.config.backend,
                "app": self.config.app, "score": float(self._prev_score), "t": float(m.now),
                "invocation": int(m.invocation_index)}

    def _episode_dir(self, scenario_seed: int) -> str | None:
        if self.bundle_dir is None:
            return None
        base = os.path.join(self.bundle_dir, f"{self.config.app}-s{scenario_seed}-e{self.episode:04d}")
        path, k = base, 0
        while os.path.exists(path):
            k += 1
            path = f"{base}-{k}"
        return path

    def _close_marathon(self) -> None:
        m, self.marathon = self.marathon, None
        if m is not None and getattr(m, "recorder", None) is not None and not m.finished:
            m.recorder.close()
        if m is not None:
            m.release()   # its alert tape's buffers go to the next episode's (nothing observable changes)

    # -- pickling: the episode so far is replayed from its calls (deterministic), never copied -------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        m = state.pop("marathon")
        state["_alert_cache"] = {}
        state["_alert_pos"] = 0
        state["_alert_rows"] = AlertRows()
        state["_replay_config"] = None if m is None else m.config
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        cfg = state.pop("_replay_config", None)
        self.__dict__.update(state)
        self.marathon = None
        if cfg is None:
            return
        from sremarathon_env.marathon import Marathon

        if cfg.bundle_dir is not None:  # a clone records into a sibling directory of the original's bundle
            self._bundle_path = self._episode_dir(cfg.seed)
            cfg = cfg.model_copy(update={"bundle_dir": self._bundle_path})
        m = self.marathon = Marathon(cfg)
        m.start(observe=False)
        for op in self._log:
            if op[0] == "call":
                m.call(op[1], op[2])
            else:
                m.end_invocation(op[1], op[2])
                if not m.advance_to_next_invocation():
                    m.finish()


def render_text(raw: dict[str, Any], max_chars: int = 24000, tool_names: list[str] | None = None) -> str:
    """A prompt-ready rendering of `SREMarathonEnv.raw_observation`, at most ``max_chars``: a header,
    then alerts (firing, pending, then the rest of the history newest first), incidents, workspace
    files and the last invocation's results. Incidents, workspace and results get at most a quarter,
    a fifth and a quarter of the room each and are cut first within themselves; alerts fill the rest
    and end with a count of the alerts left out."""
    head = [f"# SRE marathon - t={raw['t']:.0f}s, invocation {raw['invocation']}, budget {raw['budget_s']:.0f}s"]
    if tool_names:
        head.append("Tools: " + ", ".join(tool_names))
    incs = raw["incidents"]
    inc = [f"## Incidents ({sum(1 for i in incs if i.get('status') == 'open')} open, {len(incs)} in all)"]
    for i in reversed(incs):
        inc.append(f"- {i['id']} [{i['status']}] {i['title']!r} culprits={i['culprit_services']} "
                   f"artifact={i['artifact']!r} alerts={len(i['alert_fingerprints'])}")
    ws = raw["workspace"]
    wsl = [f"## Workspace ({len(ws)} files)"]
    for p, c in sorted(ws.items()):
        wsl.append(f"### {p}\n{bounded_text(c, 2000)}")
    res = ["## Last invocation" + (f" - error: {raw['last_error']}" if raw.get("last_error") else "")]
    for r in raw["last_results"]:
        body = dumps(r.get("result")) if r.get("ok") else dumps(r.get("error"))
        res.append(f"- {r['tool']} ok={r['ok']} cost={r.get('cost_s', 0):g}s: {bounded_text(body, 3000)}")
    parts = {"incidents": bounded_text("\n".join(inc), max_chars // 4),
             "workspace": bounded_text("\n".join(wsl), max_chars // 5),
             "results": bounded_text("\n".join(res), max_chars // 4)}
    room = max_chars - len("\n".join(head)) - sum(len(v) + 1 for v in parts.values()) - 1
    alerts = raw["alerts"]
    firing = [a for a in alerts if a.get("state") == "firing"]
    pending = [a for a in alerts if a.get("state") == "pending"]
    rest = [a for a in reversed(alerts) if a.get("state") not in ("firing", "pending")]
    al = [f"## Alerts: {len(firing)} firing, {len(pending)} pending, {len(alerts)} in history (newest first)"]
    used = len(al[0])
    ordered = firing + pending + rest
    for k, a in enumerate(ordered):
        line = _alert_line(a)
        tail = len(f"\n... {len(ordered) - k} more alerts not shown (get_alerts lists them)")
        if used + len(line) + 1 + tail > room:
            al.append(f"... {len(ordered) - k} more alerts not shown (get_alerts lists them)")
            break
        al.append(line)
        used += len(line) + 1
    text = "\n".join(head + ["\n".join(al), parts["incidents"], parts["workspace"], parts["results"]])
    return bounded_text(sanitize(text), max_chars)


def _alert_line(a: dict[str, Any]) -> str:
    labels = a.get("labels") or {}
    shown = " ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in ("alertname", "namespace", "template"))
    when = " ".join(f"{k}={v:g}" for k, v in (("since", a.get("active_at")), ("fired", a.get("first_firing_at")),
                                               ("resolved", a.get("resolved_at")))
                    if isinstance(v, (int, float)))
    val = a.get("value")
    val = f" value={val:.4g}" if isinstance(val, float) else ""
    summary = (a.get("annotations") or {}).get("summary", "")
    return (f"- [{a.get('state')}] {a.get('alertname', labels.get('alertname', '?'))} fp={a.get('fingerprint')} "
            f"{shown} {when}{val}" + (f" - {summary}" if summary else ""))


_NOT_PRINTABLE = re.compile(r"[^\t\n\r\x0b\x0c\x20-\x7e]")


def sanitize(text: str) -> str:
    """``text`` with every character outside `CHARSET` replaced by ``?``."""
    return _NOT_PRINTABLE.sub("?", text)
