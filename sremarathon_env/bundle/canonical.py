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
    body = f'{{"data":{data_json},"kind":{kind_json},"prev":"{prev}","seq":{seq},"t":{t_json}}}'
    h = sha256_hex(body)
    line = f'{{"data":{data_json},"hash":"{h}","kind":{kind_json},"prev":"{prev}","seq":{seq},"t":{t_json}}}'
    return line, h


def record_line(seq: int, kind: str, t: float, data: dict[str, Any], prev: str) -> tuple[str, str]:
    """The canonical line (without newline) of one record, and its hash."""
    return _envelope(dumps(data), kind, prev, seq, t)


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
