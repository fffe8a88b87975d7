"""Canonical JSON and the per-record hash chain.

Canonical JSON: keys sorted, no whitespace, ASCII only (non-ASCII escaped), floats rendered by Python's
shortest round-trip ``repr``, NaN and infinities refused. A record line is the canonical JSON of
``{"data", "hash", "kind", "prev", "seq", "t"}``; ``hash`` is the SHA-256 of the canonical JSON of the
same object without ``hash``, so every record commits to its predecessor through ``prev``.

>>> line, h = record_line(0, "run", 0.0, {"b": 1, "a": [1.5, "x"]}, GENESIS)
>>> line == '{"data":{"a":[1.5,"x"],"b":1},"hash":"%s","kind":"run","prev":"%s","seq":0,"t":0.0}' % (h, GENESIS)
True
>>> parse_line(line)["hash"] == h
True
"""

from __future__ import annotations

import hashlib
import math
import json
from typing import Any

GENESIS = "0" * 64

_encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


class CanonicalError(ValueError):
    """A value that has no canonical JSON form, or a line that is not canonical."""


def dumps(value: Any) -> str:
    """Canonical JSON of a JSON-able value."""
    try:
        return _encoder.encode(value)
    except (ValueError, TypeError) as e:
        raise CanonicalError(f"not canonical JSON: {e}") from None


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _envelope(data_json: str, kind: str, prev: str, seq: int, t: float) -> tuple[str, str]:
    kind_json = f'"{kind}"' if kind.isidentifier() and kind.isascii() else dumps(kind)
    t = float(t)
    if not math.isfinite(t):
        raise CanonicalError(f"not canonical JSON: t={t!r}")
    t_json = float.__repr__(t)  # what the JSON encoder writes for a finite float
    h = chain_hash(data_json, kind_json, prev, seq, t_json)
    return chain_line(data_json, h, kind_json, prev, seq, t_json), h


def chain_hash(data_json: str, kind_json: str, prev: str, seq: int, t_json: str) -> str:
    """The hash of a record from the canonical texts of its parts (``kind_json``, ``t_json``: the JSON of the kind
    and of the finite float time; `_envelope` is the checked form).

    >>> line, h = record_line(3, "tick", 15.0, {"a": 1}, GENESIS)
    >>> chain_hash('{"a":1}', '"tick"', GENESIS, 3, "15.0") == h
    True
    """
    return sha256_hex(f'{{"data":{data_json},"kind":{kind_json},"prev":"{prev}","seq":{seq},"t":{t_json}}}')


def chain_line(data_json: str, h: str, kind_json: str, prev: str, seq: int, t_json: str) -> str:
    """A record's canonical line from the texts of its parts and its hash (`chain_hash`).

    >>> line, h = record_line(3, "tick", 15.0, {"a": 1}, GENESIS)
    >>> chain_line('{"a":1}', h, '"tick"', GENESIS, 3, "15.0") == line
    True
    """
    return f'{{"data":{data_json},"hash":"{h}","kind":{kind_json},"prev":"{prev}","seq":{seq},"t":{t_json}}}'


def record_line(seq: int, kind: str, t: float, data: dict[str, Any], prev: str) -> tuple[str, str]:
    """The canonical line (without newline) of one record, and its hash."""
    return _envelope(dumps(data), kind, prev, seq, t)


# -- the canonical JSON of the hot kinds' plain data, without the encoder ------------------------------------
# For data that ``schema.dump_plain`` built (exact types: dicts of str, float, bool, None, lists of str), the same
# text as ``dumps``: keys in sorted order, strings as the encoder's ASCII escaping writes them, finite floats by
# ``float.__repr__``. A non-finite float gives None (the caller then takes ``dumps``, which reports it).
_esc = json.encoder.encode_basestring_ascii
_frepr = float.__repr__
_BOOL = {True: "true", False: "false"}
#: a probe's text by its (active, probe_ok, artifact_ok), keys sorted
_PROBE = {(a, p, r): '{"active":%s,"artifact_ok":%s,"probe_ok":%s}' % (_BOOL[a], _BOOL[r], _BOOL[p])
          for a in (True, False) for p in (True, False) for r in (True, False)}
#: the text of a label set, by its items in their order (content-keyed: equal items, equal text); cleared when full
_LABELS_JSON: dict[tuple, str] = {}
LABELS_JSON_MAX = 4096


def _finite(x: float) -> bool:
    return x - x == 0.0


def _str_dict(d: dict) -> str:
    """A dict of str to str, as ``dumps`` writes it."""
    items = tuple(d.items())
    hit = _LABELS_JSON.get(items)
    if hit is None:
        if len(_LABELS_JSON) >= LABELS_JSON_MAX:
            _LABELS_JSON.clear()
        hit = _LABELS_JSON[items] = "{" + ",".join([_esc(k) + ":" + _esc(v) for k, v in sorted(items)]) + "}"
    return hit


def alert_json(d: dict) -> str | None:
    """``dumps(d)`` of an alert record's plain data (``schema.dump_plain("alert", ...)``); None when ``t`` is not
    finite.

    >>> d = {"t": 30.0, "alertname": "X", "labels": {"b": "2", "a": "1"}, "fingerprint": "f", "state": "firing",
    ...      "severity": None}
    >>> alert_json(d) == dumps(d)
    True
    """
    t = d["t"]
    if not _finite(t):
        return None
    sev = d["severity"]
    return "".join(('{"alertname":', _esc(d["alertname"]), ',"fingerprint":', _esc(d["fingerprint"]), ',"labels":',
                    _str_dict(d["labels"]), ',"severity":', "null" if sev is None else _esc(sev), ',"state":',
                    _esc(d["state"]), ',"t":', _frepr(t), "}"))


def tick_json(d: dict) -> str | None:
    """``dumps(d)`` of a tick record's plain data (``schema.dump_plain("tick", ...)``); None when a float is not
    finite.

    >>> d = {"t": 15.0, "entry": {"total": 2.0, "failed": 0.5, "slow": 0.0, "degraded": -0.0},
    ...      "faults": {"F2": {"active": True, "probe_ok": False, "artifact_ok": True}},
    ...      "events": [{"instance_id": "F2", "event": "injected", "detail": "", "aliases": ["x"]}]}
    >>> tick_json(d) == dumps(d)
    True
    """
    t, e = d["t"], d["entry"]
    tot, fail, slow, deg = e["total"], e["failed"], e["slow"], e["degraded"]
    if not (_finite(t) and _finite(tot) and _finite(fail) and _finite(slow) and _finite(deg)):
        return None
    faults = d["faults"]
    if faults:
        f_json = "{" + ",".join([_esc(k) + ":" + _PROBE[p["active"], p["probe_ok"], p["artifact_ok"]]
                                 for k, p in sorted(faults.items())]) + "}"
    else:
        f_json = "{}"
    events = d["events"]
    if events:
        ev_json = "[" + ",".join([
            '{"aliases":[' + ",".join([_esc(a) for a in ev["aliases"]]) + '],"detail":' + _esc(ev["detail"])
            + ',"event":' + _esc(ev["event"]) + ',"instance_id":' + _esc(ev["instance_id"]) + "}"
            for ev in events]) + "]"
    else:
        ev_json = "[]"
    return "".join(('{"entry":{"degraded":', _frepr(deg), ',"failed":', _frepr(fail), ',"slow":', _frepr(slow),
                    ',"total":', _frepr(tot), '},"events":', ev_json, ',"faults":', f_json, ',"t":', _frepr(t), "}"))


def invocation_json(d: dict) -> str | None:
    """``dumps(d)`` of an invocation record's plain data without calls (``schema.dump_plain("invocation", ...)``);
    None when a float is not finite.

    >>> d = {"index": 2, "t": 240.0, "calls": [], "budget_used_s": 0.0, "error": "bad \u00e9"}
    >>> invocation_json(d) == dumps(d)
    True
    """
    t, used, err = d["t"], d["budget_used_s"], d["error"]
    if not (_finite(t) and _finite(used)):
        return None
    return "".join(('{"budget_used_s":', _frepr(used), ',"calls":[],"error":', "null" if err is None else _esc(err),
                    ',"index":', int.__repr__(d["index"]), ',"t":', _frepr(t), "}"))


#: the fast encoders by record kind
PLAIN_JSON = {"alert": alert_json, "tick": tick_json, "invocation": invocation_json}


_FIELDS = frozenset(("data", "hash", "kind", "prev", "seq", "t"))


def parse_line(line: str) -> dict[str, Any]:
    """Parse one record line and check that it is canonical and that its hash is right.

    Raises `CanonicalError` saying what is wrong."""
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise CanonicalError(f"not JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict) or set(obj) != _FIELDS:
        got = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise CanonicalError(f"not a record object (fields {got})")
    seq, kind, t, prev, h = obj["seq"], obj["kind"], obj["t"], obj["prev"], obj["hash"]
    if type(seq) is not int or not isinstance(kind, str) or type(t) is not float:
        raise CanonicalError("bad field types (seq int, kind str, t float)")
    if not isinstance(prev, str) or not isinstance(h, str):
        raise CanonicalError("bad field types (prev, hash must be hex strings)")
    expect, expect_h = _envelope(dumps(obj["data"]), kind, prev, seq, t)
    if expect_h != h:
        raise CanonicalError("hash does not match content")
    if expect != line:
        raise CanonicalError("not in canonical form")
    return obj
