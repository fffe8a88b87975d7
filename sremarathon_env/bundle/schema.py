"""Record schema of a bundle: one pydantic model per record kind.

A bundle is an append-only sequence of records ``(seq, kind, t, data)``; ``data`` is the JSON form of
the model registered for ``kind`` in `RECORD_MODELS`. ``t`` is sim seconds since the start of the
marathon and never decreases along the chain. Order of records written at the same ``t`` (the run loop
follows it, the scorer relies on it): ``tick`` of t, then the ``alert`` transitions evaluated at t, then
the ``invocation`` at t followed by the ``incident``, ``action`` and ``usage`` records it produced.
``run``, ``schedule`` and ``reference`` come first (t = 0), ``end`` last.

>>> m = validate_data("alert", {"t": 30.0, "alertname": "HighErrorRate", "labels": {"service": "cart"},
...                             "fingerprint": "ab12", "state": "firing"})
>>> m.state, m.labels["service"]
('firing', 'cart')
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .canonical import invocation_json

FORMAT = "sremarathon-bundle/1"


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# -- run ------------------------------------------------------------------------------------------
class RunRecord(_Rec):
    """Run configuration and versions (no wall clock). Scoring parameters live here so that a bundle
    is scored by the rules it was recorded under."""

    app: str
    seed: int
    backend: str = "sim"
    catalogue_version: str
    rule_pack_version: str
    cadence_s: float = 120.0
    budget_s: float = 110.0
    tick_s: float = 15.0
    injection_s: float = 3600.0
    observation_s: float = 1800.0
    n_invocations: int = 45
    hold_s: float = Field(120.0, description="repair hold window; n_hold = round(hold_s / tick_s) ticks")
    grace_s: float = Field(60.0, description="alert attribution grace after a fault's end")
    penalty_per_forbidden: float = Field(1.0, description="Marathon-Score points per forbidden attempt")
    versions: dict[str, str] = Field(default_factory=dict, description="package -> version")
    config: dict[str, Any] = Field(default_factory=dict, description="any further run options")


# -- schedule (sealed ground truth) ----------------------------------------------------------------
class ArtifactRef(_Rec):
    kind: str = Field(description="commit, config_key, image_tag, resource_spec, node, flag, ...")
    canonical: str
    aliases: list[str] = Field(default_factory=list)


class FaultInstance(_Rec):
    instance_id: str
    fault_id: str
    category: str
    mechanism: str
    start_s: float
    end_s: float = Field(description="scheduled revert time")
    target: str
    culprits: list[str] = Field(min_length=1)
    artifact: ArtifactRef
    scope: list[str] = Field(min_length=1, description="services (and nodes/zones for node faults)")
    silent: bool = False
    expected_alerts: list[str] = Field(default_factory=list)


class NoiseEvent(_Rec):
    noise_id: str
    kind: str = Field(description="benign_deploy, restart, latency_blip, flapping_alert, ...")
    t: float
    duration_s: float = 0.0
    target: str
    detail: dict[str, Any] = Field(default_factory=dict)


class ScheduleRecord(_Rec):
    """The schedule with ground truth. Never shown to the agent."""

    faults: list[FaultInstance]
    noise: list[NoiseEvent] = Field(default_factory=list)
    schedule_digest: str | None = Field(None, description="the orchestrator's digest of the schedule value")


# -- reference (matched no-action run) ------------------------------------------------------------
class ReferenceRecord(_Rec):
    """Per-tick entry evidence of the matched no-action run (same app, seed and config)."""

    policy: str = "noop"
    t: list[float]
    total: list[float]
    failed: list[float]
    slow: list[float]
    degraded: list[float]
    source_digest: str | None = Field(None, description="digest of the reference run's own bundle, if sealed")


# -- tick -----------------------------------------------------------------------------------------
class EntryCounts(_Rec):
    total: float
    failed: float
    slow: float
    degraded: float


class FaultProbe(_Rec):
    active: bool = Field(description="the fault's effect is in place at this tick")
    probe_ok: bool = Field(description="the fault's symptom probe holds (healthy)")
    artifact_ok: bool = Field(description="the responsible artifact is in its correct state")


class LifecycleEvent(_Rec):
    instance_id: str
    event: Literal["injected", "reverted", "ended_repaired", "noise_start", "noise_end"]
    detail: str = ""
    aliases: list[str] = Field(default_factory=list, description=(
        "on 'injected': names the responsible artifact received when it was realised (a commit's sha and "
        "short sha, service@revision); the scorer accepts them like the schedule's aliases"))


class TickRecord(_Rec):
    """Evidence of one tick: entry traffic, the probes of every fault that is active or repaired but
    not yet at its scheduled end, and lifecycle events that happened during the tick."""

    t: float
    entry: EntryCounts
    faults: dict[str, FaultProbe] = Field(default_factory=dict)
    events: list[LifecycleEvent] = Field(default_factory=list)


# -- alerts ---------------------------------------------------------------------------------------
class AlertRecord(_Rec):
    t: float
    alertname: str
    labels: dict[str, str]
    fingerprint: str
    state: Literal["pending", "firing", "resolved"]
    severity: str | None = None


# -- invocations ----------------------------------------------------------------------------------
Policy = Literal["allowed", "refused", "forbidden", "out_of_scope"]


class ToolCall(_Rec):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    ok: bool
    error: str | None = None
    result_digest: str | None = None
    result: str | None = Field(None, description="result text, possibly truncated")
    cost_s: float = 0.0
    policy: Policy = "allowed"


class InvocationRecord(_Rec):
    index: int
    t: float
    calls: list[ToolCall] = Field(default_factory=list)
    budget_used_s: float = 0.0
    error: str | None = Field(None, description="agent-side failure (e.g. a malformed action)")


# -- incidents, actions, usage --------------------------------------------------------------------
class IncidentRecord(_Rec):
    """One incident operation; carries the incident's complete state after the operation."""

    t: float
    invocation: int
    op: Literal["report", "update", "resolve"]
    incident_id: str
    title: str = ""
    alerts: list[str] = Field(default_factory=list, description="alert fingerprints")
    culprits: list[str] = Field(default_factory=list)
    artifact: str | None = Field(None, description="as the agent wrote it")
    summary: str = ""
    status: Literal["open", "resolved"] = "open"


class ActionRecord(_Rec):
    t: float
    invocation: int
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    targets: list[str] = Field(default_factory=list, description="services / nodes the action touches")
    incident_id: str | None = Field(None, description="the cited incident")
    in_scope: bool = Field(description="targets lie within the cited incident's scope")
    ok: bool = Field(description="the intervention was carried out")
    forbidden: bool = False
    refused: str | None = Field(None, description="policy refusal reason, None when allowed")
    message: str = ""


class UsageRecord(_Rec):
    """Model usage the agent reported for one invocation (increments, not running totals)."""

    t: float
    invocation: int
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    model: str | None = None


class EndRecord(_Rec):
    reason: Literal["completed", "closed"] = "completed"
    n_records: int = Field(description="records before this one")
    final_t: float


RECORD_MODELS: dict[str, type[_Rec]] = {
    "run": RunRecord,
    "schedule": ScheduleRecord,
    "reference": ReferenceRecord,
    "tick": TickRecord,
    "alert": AlertRecord,
    "invocation": InvocationRecord,
    "incident": IncidentRecord,
    "action": ActionRecord,
    "usage": UsageRecord,
    "end": EndRecord,
}
KINDS: tuple[str, ...] = tuple(RECORD_MODELS)


def validate_data(kind: str, data: Any) -> _Rec:
    """Validate ``data`` (a model of the kind or a dict) against the model of ``kind``."""
    model = RECORD_MODELS.get(kind)
    if model is None:
        raise ValueError(f"unknown record kind {kind!r}; expected one of {', '.join(KINDS)}")
    if isinstance(data, model):
        return data
    if isinstance(data, BaseModel):
        raise ValueError(f"record kind {kind!r} needs {model.__name__}, got {type(data).__name__}")
    return model.model_validate(data)


# -- the plain-data fast path of the two hot kinds ------------------------------------------------
_ALERT_STATES = frozenset(("pending", "firing", "resolved"))
_ALERT_REQUIRED = frozenset(("t", "alertname", "labels", "fingerprint", "state"))
_ALERT_KEYS = _ALERT_REQUIRED | {"severity"}
_ENTRY_KEYS = frozenset(("total", "failed", "slow", "degraded"))
_PROBE_KEYS = frozenset(("active", "probe_ok", "artifact_ok"))
_EVENT_KINDS = frozenset(("injected", "reverted", "ended_repaired", "noise_start", "noise_end"))
_EVENT_KEYS = frozenset(("instance_id", "event", "detail", "aliases"))
_TICK_KEYS = frozenset(("t", "entry", "faults", "events"))


def _plain_alert(d: dict) -> dict | None:
    keys = d.keys()
    if not (_ALERT_REQUIRED <= keys <= _ALERT_KEYS):
        return None
    t, name, labels, fp, state = d["t"], d["alertname"], d["labels"], d["fingerprint"], d["state"]
    sev = d.get("severity")
    if (type(t) is not float or type(name) is not str or type(labels) is not dict or type(fp) is not str
            or type(state) is not str or state not in _ALERT_STATES or (sev is not None and type(sev) is not str)):
        return None
    for k, v in labels.items():
        if type(k) is not str or type(v) is not str:
            return None
    return {"t": t, "alertname": name, "labels": dict(labels), "fingerprint": fp, "state": state, "severity": sev}


def _tick_head(d: dict) -> tuple[float, dict] | None:
    """A tick record's (t, entry) where its keys, t and entry keys are plain, else None."""
    if not ({"t", "entry"} <= d.keys() <= _TICK_KEYS):
        return None
    t, e = d["t"], d["entry"]
    if type(t) is not float or type(e) is not dict or e.keys() != _ENTRY_KEYS:
        return None
    return t, e


def _plain_tick(d: dict) -> dict | None:
    head = _tick_head(d)
    if head is None:
        return None
    t, e = head
    entry = {"total": e["total"], "failed": e["failed"], "slow": e["slow"], "degraded": e["degraded"]}
    for v in entry.values():
        if type(v) is not float:
            return None
    faults_in = d.get("faults", {})
    if type(faults_in) is not dict:
        return None
    faults = {}
    for k, p in faults_in.items():
        if type(k) is not str or type(p) is not dict or p.keys() != _PROBE_KEYS:
            return None
        a, ok, art = p["active"], p["probe_ok"], p["artifact_ok"]
        if type(a) is not bool or type(ok) is not bool or type(art) is not bool:
            return None
        faults[k] = {"active": a, "probe_ok": ok, "artifact_ok": art}
    events = _plain_events(d.get("events", []))
    if events is None:
        return None
    return {"t": t, "entry": entry, "faults": faults, "events": events}


def _plain_events(events_in) -> list | None:
    """A tick's orchestrator events as plain dicts (fresh containers), or None where one is not plain."""
    if type(events_in) is not list:
        return None
    events = []
    for ev in events_in:
        if type(ev) is not dict or not ({"instance_id", "event"} <= ev.keys() <= _EVENT_KEYS):
            return None
        iid, kind, detail, aliases = ev["instance_id"], ev["event"], ev.get("detail", ""), ev.get("aliases", [])
        if (type(iid) is not str or type(kind) is not str or kind not in _EVENT_KINDS or type(detail) is not str
                or type(aliases) is not list):
            return None
        for a in aliases:
            if type(a) is not str:
                return None
        events.append({"instance_id": iid, "event": kind, "detail": detail, "aliases": list(aliases)})
    return events


_INVOCATION_KEYS = frozenset(("index", "t", "calls", "budget_used_s", "error"))


def _plain_invocation(d: dict) -> dict | None:
    """An invocation without calls (the hot case: a no-op step), when its five fields are all given and plain."""
    if d.keys() != _INVOCATION_KEYS:
        return None
    idx, t, calls, used, err = d["index"], d["t"], d["calls"], d["budget_used_s"], d["error"]
    if (type(idx) is not int or type(t) is not float or type(calls) is not list or calls or type(used) is not float
            or (err is not None and type(err) is not str)):
        return None
    return {"index": idx, "t": t, "calls": [], "budget_used_s": used, "error": err}


_PLAIN = {"alert": _plain_alert, "tick": _plain_tick, "invocation": _plain_invocation}


# -- the plain data and its canonical JSON in one pass -----------------------------------------------------------
_esc = json.encoder.encode_basestring_ascii
_frepr = float.__repr__
_STATE_JSON = {s: '"%s"' % s for s in _ALERT_STATES}
#: an alert's text up to its state, by (alertname, fingerprint, severity, label items in their order): the text of
#: a content key (equal keys, equal text); cleared when full
_ALERT_HEAD: dict[tuple, str] = {}
ALERT_HEAD_MAX = 4096


def plain_alert_json(d: dict) -> tuple[dict, str] | None:
    """``(p, canonical.alert_json(p))`` with ``p = _plain_alert(d)``, in one pass; None where either is None (the
    caller then takes those two, which say what is wrong). The text up to the state is kept per content key.

    >>> d = {"t": 30.0, "alertname": "X", "labels": {"b": "2", "a": "\u00e9"}, "fingerprint": "f", "state": "firing"}
    >>> from .canonical import alert_json
    >>> plain_alert_json(d) == (_plain_alert(d), alert_json(_plain_alert(d)))
    True
    """
    n = len(d)   # the keys are the required five, with or without "severity" (_plain_alert's key test)
    if n != 5 and (n != 6 or "severity" not in d):
        return None
    try:
        t, name, labels, fp, state = d["t"], d["alertname"], d["labels"], d["fingerprint"], d["state"]
    except KeyError:
        return None
    sev = d.get("severity")
    if (type(t) is not float or type(name) is not str or type(labels) is not dict or type(fp) is not str
            or type(state) is not str or state not in _ALERT_STATES or (sev is not None and type(sev) is not str)
            or t - t != 0.0):   # (a t that is not finite: alert_json's None)
        return None
    items = tuple(labels.items())
    for k, v in items:
        if type(k) is not str or type(v) is not str:
            return None
    key = (name, fp, sev, items)
    head = _ALERT_HEAD.get(key)
    if head is None:
        if len(_ALERT_HEAD) >= ALERT_HEAD_MAX:
            _ALERT_HEAD.clear()
        head = _ALERT_HEAD[key] = "".join((
            '{"alertname":', _esc(name), ',"fingerprint":', _esc(fp), ',"labels":{',
            ",".join([_esc(k) + ":" + _esc(v) for k, v in sorted(items)]),
            '},"severity":', "null" if sev is None else _esc(sev), ',"state":'))
    return ({"t": t, "alertname": name, "labels": dict(items), "fingerprint": fp, "state": state, "severity": sev},
            head + _STATE_JSON[state] + ',"t":' + _frepr(t) + "}")


#: a probe's text by its (active, probe_ok, artifact_ok), keys sorted
_PROBE_JSON = {(a, p, r): '{"active":%s,"artifact_ok":%s,"probe_ok":%s}' % (
    "true" if a else "false", "true" if r else "false", "true" if p else "false")
    for a in (True, False) for p in (True, False) for r in (True, False)}


#: a fault id's text and colon (``_esc(k) + ":"``), by id; cleared when full
_KEY_JSON: dict[str, str] = {}
KEY_JSON_MAX = 4096


def plain_tick_json(d: dict) -> tuple[dict, str] | None:
    """``(p, canonical.tick_json(p))`` with ``p = _plain_tick(d)``, in one pass; None where either is None (the
    caller then takes those two).

    >>> d = {"t": 15.0, "entry": {"total": 2.0, "failed": 0.5, "slow": 0.0, "degraded": -0.0},
    ...      "faults": {"F2": {"active": True, "probe_ok": False, "artifact_ok": True},
    ...                 "F1": {"active": False, "probe_ok": True, "artifact_ok": True}},
    ...      "events": [{"instance_id": "F2", "event": "injected", "detail": "", "aliases": ["x"]}]}
    >>> from .canonical import tick_json
    >>> plain_tick_json(d) == (_plain_tick(d), tick_json(_plain_tick(d)))
    True
    """
    head = _tick_head(d)
    if head is None:
        return None
    t, e = head
    tot, fail, slow, deg = e["total"], e["failed"], e["slow"], e["degraded"]
    if (type(tot) is not float or type(fail) is not float or type(slow) is not float or type(deg) is not float
            or t - t != 0.0 or tot - tot != 0.0 or fail - fail != 0.0 or slow - slow != 0.0 or deg - deg != 0.0):
        return None   # (a float that is not finite: tick_json's None)
    faults_in = d.get("faults", {})
    if type(faults_in) is not dict:
        return None
    faults: dict = {}
    f_json = _faults_json(faults_in, faults)
    if f_json is None:
        return None
    events = _plain_events(d.get("events", []))
    if events is None:
        return None
    ev_json = events_json(events) if events else "[]"
    return ({"t": t, "entry": {"total": tot, "failed": fail, "slow": slow, "degraded": deg}, "faults": faults,
             "events": events},
            "".join(('{"entry":{"degraded":', _frepr(deg), ',"failed":', _frepr(fail), ',"slow":', _frepr(slow),
                     ',"total":', _frepr(tot), '},"events":', ev_json, ',"faults":', f_json, ',"t":', _frepr(t),
                     "}")))


def faults_json(faults: dict) -> str | None:
    """The canonical JSON of a tick record's ``faults`` when they are plain (str ids, probes of exactly the three
    bool verdicts), else None.

    >>> from .canonical import dumps
    >>> f = {"F2": {"active": True, "probe_ok": False, "artifact_ok": True},
    ...      "F1": {"active": False, "probe_ok": True, "artifact_ok": True}}
    >>> faults_json(f) == dumps(f), faults_json({"F1": {"active": 1, "probe_ok": True, "artifact_ok": True}})
    (True, None)
    """
    return _faults_json(faults, None)


def _faults_json(faults: dict, copy: dict | None) -> str | None:
    """`faults_json`; with ``copy``, each plain probe is also put there as a fresh dict (`plain_tick_json`'s data)."""
    if not faults:
        return "{}"
    texts = []
    try:
        for k, p in faults.items():
            # (three keys, each looked up: exactly _PROBE_KEYS; a missing one is a KeyError)
            if type(k) is not str or type(p) is not dict or len(p) != 3:
                return None
            a, ok, art = p["active"], p["probe_ok"], p["artifact_ok"]
            if type(a) is not bool or type(ok) is not bool or type(art) is not bool:
                return None
            if copy is not None:
                copy[k] = {"active": a, "probe_ok": ok, "artifact_ok": art}
            texts.append((k, _PROBE_JSON[a, ok, art]))
    except KeyError:
        return None
    texts.sort()   # (keys are distinct: the order of the keys)
    key_json = _KEY_JSON
    parts = []
    for k, x in texts:
        kj = key_json.get(k)
        if kj is None:
            if len(key_json) >= KEY_JSON_MAX:
                key_json.clear()
            kj = key_json[k] = _esc(k) + ":"
        parts.append(kj + x)
    return "{" + ",".join(parts) + "}"


def alert_head(alertname: str, fingerprint: str, labels: dict, severity: str | None) -> str | None:
    """An alert record's canonical JSON up to its state (``...,"state":``) when the parts are plain (str name,
    fingerprint and label keys and values; severity str or None), else None.

    >>> from .canonical import alert_json
    >>> d = {"t": 30.0, "alertname": "X", "labels": {"b": "2", "a": "1"}, "fingerprint": "f", "state": "firing",
    ...      "severity": None}
    >>> alert_head("X", "f", d["labels"], None) + '"firing","t":30.0}' == alert_json(d)
    True
    """
    if (type(alertname) is not str or type(fingerprint) is not str or type(labels) is not dict
            or (severity is not None and type(severity) is not str)):
        return None
    items = sorted(labels.items())
    for k, v in items:
        if type(k) is not str or type(v) is not str:
            return None
    return "".join(('{"alertname":', _esc(alertname), ',"fingerprint":', _esc(fingerprint), ',"labels":{',
                    ",".join([_esc(k) + ":" + _esc(v) for k, v in items]),
                    '},"severity":', "null" if severity is None else _esc(severity), ',"state":'))


#: a tick's orchestrator events as plain dicts (fresh containers, every key), or None where one is not plain
plain_events = _plain_events


def events_json(events: list[dict]) -> str:
    """The canonical JSON of plain events (`plain_events`' output: the four keys, str values, a list of str aliases).

    >>> from .canonical import dumps
    >>> ev = plain_events([{"instance_id": "F1", "event": "injected", "aliases": ["a\u00e9"]}, {"instance_id": "F2",
    ...                    "event": "reverted"}])
    >>> events_json(ev) == dumps(ev)
    True
    """
    return "[" + ",".join(['{"aliases":[' + ",".join([_esc(a) for a in ev["aliases"]]) + '],"detail":'
                           + _esc(ev["detail"]) + ',"event":' + _esc(ev["event"]) + ',"instance_id":'
                           + _esc(ev["instance_id"]) + "}" for ev in events]) + "]"


def plain_invocation_json(d: dict) -> tuple[dict, str] | None:
    """``(p, canonical.invocation_json(p))`` with ``p = _plain_invocation(d)``; None where either is None.

    >>> d = {"index": 3, "t": 360.0, "calls": [], "budget_used_s": 0.0, "error": None}
    >>> from .canonical import invocation_json
    >>> plain_invocation_json(d) == (_plain_invocation(d), invocation_json(_plain_invocation(d)))
    True
    """
    p = _plain_invocation(d)
    text = None if p is None else invocation_json(p)
    return None if text is None else (p, text)


#: the one-pass plain data and text of the hot kinds (`Recorder` takes it first; None: `dump_plain` and
#: `canonical.PLAIN_JSON`, the definitions)
PLAIN_WITH_JSON = {"alert": plain_alert_json, "tick": plain_tick_json, "invocation": plain_invocation_json}


def dump_plain(kind: str, data: Any) -> dict | None:
    """``validate_data(kind, data).model_dump(mode="json")`` for the hot kinds (``alert``, ``tick``, an ``invocation``
    without calls) when ``data``
    is plain data of exactly the model's types (dicts, lists, str, float, bool: nothing to coerce), built without
    pydantic (fresh containers, the same key order); None for anything else, which then takes the model's path
    (it coerces or reports what is wrong).

    >>> dump_plain("alert", {"t": 30.0, "alertname": "X", "labels": {}, "fingerprint": "f", "state": "firing"})
    {'t': 30.0, 'alertname': 'X', 'labels': {}, 'fingerprint': 'f', 'state': 'firing', 'severity': None}
    >>> dump_plain("alert", {"t": 30, "alertname": "X", "labels": {}, "fingerprint": "f", "state": "firing"}) is None
    True
    """
    fn = _PLAIN.get(kind)
    if fn is None or type(data) is not dict:
        return None
    return fn(data)

