"""Reading and verifying bundles.

`verify_bundle` checks a bundle directory without raising and says what is wrong with the first bad
record; `read_bundle` returns a verified `Bundle` or raises `BundleError`. Checks, in order: every line
is canonical JSON whose hash matches its content, ``seq`` counts from 0, ``prev`` is the previous
record's hash, the kind is known (and, with ``validate``, the data fits its model), time never goes
backwards; then, when a manifest exists, that it is canonical, that its digest is right and that it
matches the chain (head, count per kind, final time) exactly, with an ``end`` record last.

A bundle without a manifest is an unsealed prefix (a run that was killed or is still running): it
reads as ``complete=False``. Its last line may be torn (no newline, cut mid-record); such a tail is
reported in ``torn_tail_bytes`` and ignored. A sealed bundle allows no torn tail.

>>> import tempfile
>>> from sremarathon_env.bundle import Recorder
>>> d = tempfile.mkdtemp() + "/b"
>>> r = Recorder(d); _ = r.append("usage", 120.0, {"t": 120.0, "invocation": 0, "model_calls": 1}); _ = r.seal()
>>> rep = verify_bundle(d); rep.ok, rep.complete, rep.n_records, rep.digest == r.digest
(True, True, 2, True)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .canonical import GENESIS, CanonicalError, parse_line
from .recorder import MANIFEST_FILE, META_FILE, RECORDS_FILE, BundleError, Manifest, Record, make_manifest
from .schema import FORMAT, KINDS, validate_data


@dataclass
class Bundle:
    """A verified bundle (complete or an incomplete prefix)."""

    records: list[Record]
    complete: bool
    digest: str
    manifest: Manifest | None = None
    path: Path | None = None
    meta: dict[str, Any] | None = None
    torn_tail_bytes: int = 0

    def of_kind(self, kind: str) -> list[Record]:
        return [r for r in self.records if r.kind == kind]

    def first(self, kind: str) -> Record | None:
        for r in self.records:
            if r.kind == kind:
                return r
        return None

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.records:
            out[r.kind] = out.get(r.kind, 0) + 1
        return dict(sorted(out.items()))

    @property
    def final_t(self) -> float:
        return self.records[-1].t if self.records else 0.0

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)


@dataclass
class VerifyReport:
    ok: bool
    complete: bool = False
    n_records: int = 0
    digest: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    final_t: float = 0.0
    torn_tail_bytes: int = 0
    error: str | None = None
    bad_seq: int | None = None
    bad_line: int | None = None
    bad_file: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _check_chain(lines: list[str], validate: bool) -> list[Record]:
    records: list[Record] = []
    prev = GENESIS
    last_t = 0.0
    for i, line in enumerate(lines):
        try:
            obj = parse_line(line)
        except CanonicalError as e:
            raise BundleError(str(e), seq=i, line=i + 1, file=RECORDS_FILE) from None
        kind, t = obj["kind"], obj["t"]
        if obj["seq"] != i:
            raise BundleError(f"seq is {obj['seq']}, expected {i} (record missing or reordered)",
                              seq=i, line=i + 1, file=RECORDS_FILE)
        if obj["prev"] != prev:
            raise BundleError("prev does not match the previous record's hash (chain broken)",
                              seq=i, line=i + 1, file=RECORDS_FILE)
        if kind not in KINDS:
            raise BundleError(f"unknown record kind {kind!r}", seq=i, line=i + 1, file=RECORDS_FILE)
        if t < last_t:
            raise BundleError(f"time goes backwards ({t} after {last_t})", seq=i, line=i + 1, file=RECORDS_FILE)
        if validate:
            try:
                validate_data(kind, obj["data"])
            except ValueError as e:
                raise BundleError(f"{kind} data does not fit the schema: {e}", seq=i, line=i + 1,
                                  file=RECORDS_FILE) from None
        if kind == "end" and i != len(lines) - 1:
            raise BundleError("records after the end record", seq=i + 1, line=i + 2, file=RECORDS_FILE)
        records.append(Record(i, kind, t, obj["data"], prev, obj["hash"]))
        prev = obj["hash"]
        last_t = t
    return records


def _split(raw: bytes, sealed: bool) -> tuple[list[str], int]:
    """Lines of records.jsonl and the size of a torn tail (allowed only when unsealed)."""
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise BundleError(f"non-ASCII byte at offset {e.start}", line=line, seq=line - 1, file=RECORDS_FILE) from None
    lines = text.split("\n")
    tail = lines.pop()  # text after the last newline ("" when the file ends with one)
    torn = 0
    if tail:
        n = len(lines)
        try:
            obj, end = json.JSONDecoder().raw_decode(tail)
            whole = True
        except ValueError:
            whole = False
        if whole and end == len(tail):
            # a complete record missing only its newline: keep it (verified like the others)
            lines.append(tail)
        elif whole or sealed:
            raise BundleError("last line is damaged (no newline and not a cut-off record)" if whole
                              else "sealed bundle ends with a torn line", seq=n, line=n + 1, file=RECORDS_FILE)
        else:
            torn = len(tail)
    return lines, torn


def read_bundle(path: str | os.PathLike, *, validate: bool = True) -> Bundle:
    """Read and verify a bundle directory. Raises `BundleError` naming the first bad record."""
    path = Path(path)
    rec_path = path / RECORDS_FILE
    if not rec_path.is_file():
        raise BundleError(f"no {RECORDS_FILE} in {path}")
    man_path = path / MANIFEST_FILE
    sealed = man_path.exists()
    lines, torn = _split(rec_path.read_bytes(), sealed)
    records = _check_chain(lines, validate)
    head = records[-1].hash if records else GENESIS
    counts: dict[str, int] = {}
    for r in records:
        counts[r.kind] = counts.get(r.kind, 0) + 1
    final_t = records[-1].t if records else 0.0
    manifest = None
    if sealed:
        raw = man_path.read_bytes()
        try:
            manifest = Manifest.model_validate_json(raw)
        except ValueError as e:
            raise BundleError(f"manifest does not parse: {e.__class__.__name__}", file=MANIFEST_FILE) from None
        if manifest.to_json().encode("ascii") != raw:
            raise BundleError("manifest is not in canonical form", file=MANIFEST_FILE)
        if manifest.format != FORMAT:
            raise BundleError(f"unknown format {manifest.format!r}", file=MANIFEST_FILE)
        expect = make_manifest(manifest.n_records, manifest.head, manifest.counts, manifest.complete, manifest.final_t)
        if expect.digest != manifest.digest:
            raise BundleError("manifest digest does not match its content", file=MANIFEST_FILE)
        if manifest.n_records != len(records):
            bad = min(manifest.n_records, len(records))
            raise BundleError(f"manifest says {manifest.n_records} records, file has {len(records)}",
                              seq=bad, line=bad + 1, file=RECORDS_FILE)
        if manifest.head != head:
            raise BundleError("manifest head does not match the last record's hash", file=MANIFEST_FILE)
        if manifest.counts != dict(sorted(counts.items())) or manifest.final_t != final_t:
            raise BundleError("manifest counts or final time do not match the records", file=MANIFEST_FILE)
        if not records or records[-1].kind != "end":
            raise BundleError("sealed bundle does not end with an end record", file=RECORDS_FILE)
        if manifest.complete != (records[-1].data.get("reason") == "completed"):
            raise BundleError("manifest complete flag disagrees with the end record", file=MANIFEST_FILE)
        complete, digest = manifest.complete, manifest.digest
    else:
        complete = False
        digest = make_manifest(len(records), head, counts, False, final_t).digest
    meta = None
    if (path / META_FILE).is_file():
        try:
            meta = json.loads((path / META_FILE).read_text())
        except ValueError:
            meta = None
    return Bundle(records=records, complete=complete, digest=digest, manifest=manifest, path=path, meta=meta,
                  torn_tail_bytes=torn)


def verify_bundle(path: str | os.PathLike, *, validate: bool = True) -> VerifyReport:
    """Verify a bundle directory; never raises for a bad bundle."""
    try:
        b = read_bundle(path, validate=validate)
    except BundleError as e:
        return VerifyReport(ok=False, error=str(e), bad_seq=e.seq, bad_line=e.line, bad_file=e.file)
    return VerifyReport(ok=True, complete=b.complete, n_records=len(b.records), digest=b.digest,
                        counts=b.counts, final_t=b.final_t, torn_tail_bytes=b.torn_tail_bytes)
