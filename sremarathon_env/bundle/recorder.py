"""The recorder: append-only, hash-chained records, flushed to disk one line at a time, and sealing.

A bundle on disk is a directory:
- ``records.jsonl``: one canonical record line per record (see `canonical`), each written with a single
  ``write`` as it is appended, so a process killed at any moment leaves a prefix that verifies;
- ``manifest.json``: written at `Recorder.seal` (atomically, by rename); its digest covers the chain
  head, the record count per kind, the complete flag and the final time;
- ``meta.json`` (optional): wall-clock and host metadata. It is NOT hashed and never scored.

``Recorder(None)`` keeps the same chain in memory only (for RL rollouts); its digest is identical to the
on-disk one for the same records.

>>> rec = Recorder(None)
>>> _ = rec.append("alert", 30.0, {"t": 30.0, "alertname": "X", "labels": {}, "fingerprint": "f1",
...                                "state": "firing"})
>>> m = rec.seal()
>>> m.complete, m.n_records, m.counts
(True, 2, {'alert': 1, 'end': 1})
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from pydantic import BaseModel, ConfigDict

from .canonical import (GENESIS, PLAIN_JSON, CanonicalError, _envelope, chain_hash, chain_line, dumps, record_line,
                        sha256_hex)
from .schema import (FORMAT, KINDS, PLAIN_WITH_JSON, alert_head, dump_plain, events_json, faults_json, plain_events,
                     validate_data)

#: the tests set it: every record of `Recorder.append_tick` / `append_alert` is compared with its definition
CHECK_ENCODED = False
_frepr = float.__repr__   # what the JSON encoder writes for a finite float
_STATE_JSON = {s: '"%s"' % s for s in ("pending", "firing", "resolved")}

#: fingerprint -> (alert record text up to the state, name, labels, severity it was made for), shared by the
#: recorders of a process (each marathon's recorder meets most of the alerts of the ones before: the same label sets);
#: an entry is taken only for an equal name, label set and severity (`alert_head` of those); starts again past its bound
_HEADS: dict[str, tuple] = {}
HEADS_MAX = 8192

RECORDS_FILE = "records.jsonl"
MANIFEST_FILE = "manifest.json"
META_FILE = "meta.json"


class BundleError(Exception):
    """A bundle that cannot be written or does not verify. ``seq``/``line`` locate the first bad record
    (0-based record number, 1-based line number) when the problem is in one."""

    def __init__(self, message: str, *, seq: int | None = None, line: int | None = None, file: str | None = None):
        where = []
        if file:
            where.append(file)
        if line is not None:
            where.append(f"line {line}")
        if seq is not None:
            where.append(f"record {seq}")
        super().__init__(f"{': '.join([', '.join(where)] if where else [])}{': ' if where else ''}{message}")
        self.reason = message
        self.seq = seq
        self.line = line
        self.file = file


@dataclass(frozen=True, slots=True)
class Record:
    """One record of the chain. ``data`` is the JSON form of the kind's model (see `schema`)."""

    seq: int
    kind: str
    t: float
    data: dict[str, Any]
    prev: str
    hash: str

    def model(self) -> BaseModel:
        """The typed model of ``data`` (validated on every call; the scorer reads ``data`` directly)."""
        return validate_data(self.kind, self.data)


_new_object = object.__new__
_SET_SEQ, _SET_KIND, _SET_T, _SET_DATA, _SET_PREV, _SET_HASH = (Record.__dict__[f].__set__
                                                                for f in ("seq", "kind", "t", "data", "prev", "hash"))


def _record(seq: int, kind: str, t: float, data: dict[str, Any], prev: str, h: str) -> Record:
    """``Record(seq, kind, t, data, prev, h)`` without the frozen dataclass's ``__init__`` (an ``object.__setattr__``
    call per field): the same slots, set through their descriptors (every record of a run is made here).

    >>> _record(3, "tick", 15.0, {"t": 15.0}, "p", "h") == Record(3, "tick", 15.0, {"t": 15.0}, "p", "h")
    True
    """
    rec = _new_object(Record)
    _SET_SEQ(rec, seq)
    _SET_KIND(rec, kind)
    _SET_T(rec, t)
    _SET_DATA(rec, data)
    _SET_PREV(rec, prev)
    _SET_HASH(rec, h)
    return rec


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str
    n_records: int
    head: str
    counts: dict[str, int]
    complete: bool
    final_t: float
    digest: str

    def to_json(self) -> str:
        return dumps(self.model_dump()) + "\n"


def manifest_digest(n_records: int, head: str, counts: dict[str, int], complete: bool, final_t: float) -> str:
    body = {"format": FORMAT, "n_records": n_records, "head": head, "counts": dict(sorted(counts.items())),
            "complete": complete, "final_t": float(final_t)}
    return sha256_hex(dumps(body))


def make_manifest(n_records: int, head: str, counts: dict[str, int], complete: bool, final_t: float) -> Manifest:
    counts = dict(sorted(counts.items()))
    return Manifest(format=FORMAT, n_records=n_records, head=head, counts=counts, complete=complete,
                    final_t=float(final_t), digest=manifest_digest(n_records, head, counts, complete, final_t))


class Recorder:
    """Append records, chain and (optionally) persist them; `seal` at the end.

    ``path``: the bundle directory (created; must not already hold a bundle), or None for memory only.
    ``validate``: check every record's data against its kind's model (on by default).
    ``listeners``: callables fed each new `Record` after it is appended (e.g. a scorer).
    ``meta``: wall-clock/host metadata written to meta.json, outside everything hashed.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, validate: bool = True,
                 listeners: Iterable[Callable[[Record], Any]] = (), meta: dict[str, Any] | None = None,
                 fsync: bool = False):
        self.path = Path(path) if path is not None else None
        self.validate = validate
        self.listeners = list(listeners)
        self.fsync = fsync
        self.records: list[Record] = []
        self.counts: dict[str, int] = {}
        self.head = GENESIS
        self.final_t = 0.0
        self.manifest: Manifest | None = None
        self._fd: int | None = None
        self._faults: dict | None = None   # the faults of the last `append_tick` record, and their text
        self._faults_json = "{}"
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            if (self.path / RECORDS_FILE).exists() or (self.path / MANIFEST_FILE).exists():
                raise BundleError(f"{self.path} already holds a bundle")
            if meta is not None:
                (self.path / META_FILE).write_text(json.dumps(meta, sort_keys=True, indent=1, default=str) + "\n")
            self._fd = os.open(self.path / RECORDS_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)

    # -- appending ------------------------------------------------------------------------------
    def append(self, kind: str, t: float, data: Any) -> Record:
        """Append one record; returns it. Raises `BundleError` for bad data, a time going backwards or
        a sealed recorder (nothing is written then)."""
        if self.manifest is not None:
            raise BundleError("bundle is sealed")
        if kind == "end":
            raise BundleError("the end record is written by seal()")
        return self._append(kind, t, data)

    def _append(self, kind: str, t: float, data: Any) -> Record:
        seq = len(self.records)
        try:
            t = float(t)
        except (TypeError, ValueError):
            raise BundleError(f"t must be a number, got {t!r}", seq=seq) from None
        if not t >= self.final_t:  # also refuses NaN
            raise BundleError(f"time goes backwards: {kind} at t={t} after t={self.final_t}", seq=seq)
        fast = PLAIN_WITH_JSON.get(kind) if self.validate and type(data) is dict else None
        hit = fast(data) if fast is not None else None
        if hit is not None and hit[0]["t"] == t:
            # the hot kinds' plain data and canonical JSON in one pass (what the path below computes)
            return self._add(seq, kind, t, hit[0], _envelope(hit[1], kind, self.head, seq, t))
        plain = dump_plain(kind, data) if self.validate else None
        data_json = None
        if plain is not None:  # plain data of the model's exact types: what the model would dump
            if plain["t"] != t:
                raise BundleError(f"{kind} record: data t={plain['t']} differs from record t={t}", seq=seq)
            data = plain
            enc = PLAIN_JSON.get(kind)   # its canonical JSON without the encoder (None: the encoder reports what is wrong)
            data_json = enc(plain) if enc is not None else None
        elif self.validate or isinstance(data, BaseModel):
            try:
                model = validate_data(kind, data)
            except ValueError as e:
                raise BundleError(f"invalid {kind} record: {e}", seq=seq) from None
            dt = getattr(model, "t", None)
            if isinstance(dt, float) and dt != t:
                raise BundleError(f"{kind} record: data t={dt} differs from record t={t}", seq=seq)
            data = model.model_dump(mode="json")
        elif kind not in KINDS:
            raise BundleError(f"unknown record kind {kind!r}", seq=seq)
        try:
            if data_json is not None:
                line, h = _envelope(data_json, kind, self.head, seq, t)
            else:
                line, h = record_line(seq, kind, t, data, self.head)
        except CanonicalError as e:
            raise BundleError(f"{kind} record: {e}", seq=seq) from None
        return self._add(seq, kind, t, data, (line, h))

    # -- the run loop's hot kinds, from their parts ----------------------------------------------------
    def append_tick(self, t: float, total: float, failed: float, slow: float, degraded: float, faults: dict,
                    events: list) -> Record:
        """``append("tick", t, {"t": t, "entry": {"total": total, "failed": failed, "slow": slow, "degraded":
        degraded}, "faults": faults, "events": events})``: the same record, built from the parts. ``faults`` (and
        ``events`` when empty) become the record's data (the caller hands them over and leaves them as they are);
        plain data (float times and counts, str fault ids, bool probes) is encoded from pre-encoded pieces, and a
        ``faults`` equal to the previous tick record's (most ticks: the same faults and verdicts) takes that one's
        text. Anything else takes `append` (which copies, coerces or reports).

        >>> a, b = Recorder(None), Recorder(None)
        >>> probes = {"F1": {"active": True, "probe_ok": False, "artifact_ok": True}}
        >>> r = a.append_tick(15.0, 10.0, 1.0, 0.0, 0.0, probes, [])
        >>> d = {"t": 15.0, "entry": {"total": 10.0, "failed": 1.0, "slow": 0.0, "degraded": 0.0},
        ...      "faults": {"F1": {"active": True, "probe_ok": False, "artifact_ok": True}}, "events": []}
        >>> r == b.append("tick", 15.0, d)
        True
        """
        if (self.manifest is None and type(t) is float and t >= self.final_t and t - t == 0.0
                and type(total) is float and type(failed) is float and type(slow) is float
                and type(degraded) is float and total - total == 0.0 and failed - failed == 0.0
                and slow - slow == 0.0 and degraded - degraded == 0.0 and type(faults) is dict
                and type(events) is list):
            if faults is self._faults:   # (the last record's own dict handed over again: the record gets a copy)
                faults = {k: dict(p) if type(p) is dict else p for k, p in faults.items()}
            f_json = self._faults_json if faults == self._faults else faults_json(faults)
            ev = plain_events(events) if events else events
            if f_json is not None and ev is not None:
                ev_json = "[]" if not ev else events_json(ev)
                self._faults, self._faults_json = faults, f_json
                t_json = _frepr(t)
                data_json = "".join(('{"entry":{"degraded":', _frepr(degraded), ',"failed":', _frepr(failed),
                                     ',"slow":', _frepr(slow), ',"total":', _frepr(total), '},"events":', ev_json,
                                     ',"faults":', f_json, ',"t":', t_json, "}"))
                data = {"t": t, "entry": {"total": total, "failed": failed, "slow": slow, "degraded": degraded},
                        "faults": faults, "events": ev}
                return self._add_encoded("tick", '"tick"', t, t_json, data, data_json)
        return self.append("tick", t, {"t": t, "entry": {"total": total, "failed": failed, "slow": slow,
                                                          "degraded": degraded}, "faults": faults, "events": events})

    def append_alert(self, t: float, alertname: str, labels: dict, fingerprint: str, state: str,
                     severity: str | None) -> Record:
        """``append("alert", t, {"t": t, "alertname": alertname, "labels": labels, "fingerprint": fingerprint,
        "state": state, "severity": severity})``: the same record, built from the parts. ``labels`` becomes the
        record's (handed over, left as it is). The text up to the state is kept per fingerprint with the name,
        labels and severity it was made for (taken again only for equal ones: one text per alert; `_HEADS`, shared by
        the process's recorders).
        Anything not plain takes `append`.

        >>> a, b = Recorder(None), Recorder(None)
        >>> r = a.append_alert(30.0, "X", {"alertname": "X", "severity": "page"}, "f1", "firing", "page")
        >>> r == b.append("alert", 30.0, {"t": 30.0, "alertname": "X", "labels": {"alertname": "X",
        ...                               "severity": "page"}, "fingerprint": "f1", "state": "firing",
        ...                               "severity": "page"})
        True
        """
        state_json = _STATE_JSON.get(state) if type(state) is str else None
        if (state_json is not None and self.manifest is None and type(t) is float and t >= self.final_t
                and t - t == 0.0 and type(labels) is dict):
            hit = _HEADS.get(fingerprint) if type(fingerprint) is str else None
            if hit is None or hit[1] != alertname or hit[3] != severity or hit[2] != labels:
                head = alert_head(alertname, fingerprint, labels, severity)
                hit = None if head is None else (head, alertname, dict(labels), severity)   # (its own labels)
                if hit is not None:
                    if len(_HEADS) >= HEADS_MAX:
                        _HEADS.clear()
                    _HEADS[fingerprint] = hit
            if hit is not None:
                t_json = _frepr(t)
                data = {"t": t, "alertname": alertname, "labels": labels, "fingerprint": fingerprint, "state": state,
                        "severity": severity}
                return self._add_encoded("alert", '"alert"', t, t_json, data,
                                         hit[0] + state_json + ',"t":' + t_json + "}")
        return self.append("alert", t, {"t": t, "alertname": alertname, "labels": labels, "fingerprint": fingerprint,
                                        "state": state, "severity": severity})

    def _add_encoded(self, kind: str, kind_json: str, t: float, t_json: str, data: dict, data_json: str) -> Record:
        """Chain a record given as its plain data and canonical texts (`append_tick`, `append_alert`); the line is
        made only for a bundle on disk. `CHECK_ENCODED` holds each to the definitions (`dump_plain`, `dumps`)."""
        if CHECK_ENCODED:
            plain = dump_plain(kind, data)
            if plain is None or plain != data or dumps(plain) != data_json or t_json != dumps(t):
                raise AssertionError(f"encoded {kind} record differs from its definition: {data!r} {data_json!r}")
        seq = len(self.records)
        h = chain_hash(data_json, kind_json, self.head, seq, t_json)
        line = chain_line(data_json, h, kind_json, self.head, seq, t_json) if self._fd is not None else None
        return self._add(seq, kind, t, data, (line, h))

    def _write(self, line: str) -> None:
        buf = (line + "\n").encode("ascii")
        while buf:
            n = os.write(self._fd, buf)
            buf = buf[n:]

    def _add(self, seq: int, kind: str, t: float, data: dict, line_hash: tuple[str, str]) -> Record:
        line, h = line_hash
        if self._fd is not None:
            self._write(line)
        rec = _record(seq, kind, t, data, self.head, h)
        self.records.append(rec)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.head = h
        self.final_t = t
        for fn in self.listeners:
            fn(rec)
        return rec

    # -- sealing --------------------------------------------------------------------------------
    @property
    def digest(self) -> str:
        """Digest of the bundle so far (of the manifest once sealed)."""
        if self.manifest is not None:
            return self.manifest.digest
        return manifest_digest(len(self.records), self.head, self.counts, False, self.final_t)

    @property
    def sealed(self) -> bool:
        return self.manifest is not None

    def seal(self, reason: str = "completed") -> Manifest:
        """Append the end record and write the manifest. ``reason="completed"`` marks the bundle
        complete; ``"closed"`` (a run stopped early) seals it as incomplete."""
        if self.manifest is not None:
            return self.manifest
        self._append("end", self.final_t, {"reason": reason, "n_records": len(self.records),
                                           "final_t": self.final_t})
        m = make_manifest(len(self.records), self.head, self.counts, reason == "completed", self.final_t)
        if self._fd is not None:
            if self.fsync:
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
            tmp = self.path / (MANIFEST_FILE + ".tmp")
            tmp.write_text(m.to_json(), encoding="ascii")
            os.replace(tmp, self.path / MANIFEST_FILE)
        self.manifest = m
        return m

    def close(self) -> None:
        """Release the file without sealing (the bundle reads as an incomplete prefix)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass
