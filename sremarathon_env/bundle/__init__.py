"""Evidence bundles: record schema, recorder (hash chain, per-record flush, sealing), reader, verifier.

A run appends records (``run``, ``schedule``, ``reference``, then per tick/invocation ``tick``,
``alert``, ``invocation``, ``incident``, ``action``, ``usage``) and seals with an ``end`` record and a
manifest. Every record is hashed and chained to the previous one; the manifest digest covers the whole.
Same records give the same bytes and the same digest, on disk or in memory.

>>> import tempfile
>>> from sremarathon_env.bundle import Recorder, read_bundle
>>> d = tempfile.mkdtemp() + "/bundle"
>>> rec = Recorder(d)
>>> _ = rec.append("tick", 15.0, {"t": 15.0, "entry": {"total": 100, "failed": 2, "slow": 1, "degraded": 0}})
>>> digest = rec.seal().digest
>>> b = read_bundle(d)
>>> b.complete, b.digest == digest, [r.kind for r in b.records]
(True, True, ['tick', 'end'])
"""

from .canonical import GENESIS, CanonicalError, dumps, parse_line, record_line
from .reader import Bundle, VerifyReport, read_bundle, verify_bundle
from .recorder import (MANIFEST_FILE, META_FILE, RECORDS_FILE, BundleError, Manifest, Record, Recorder,
                       make_manifest, manifest_digest)
from .schema import (FORMAT, KINDS, RECORD_MODELS, ActionRecord, AlertRecord, ArtifactRef, EndRecord,
                     EntryCounts, FaultInstance, FaultProbe, IncidentRecord, InvocationRecord, LifecycleEvent,
                     NoiseEvent, ReferenceRecord, RunRecord, ScheduleRecord, TickRecord, ToolCall, UsageRecord,
                     validate_data)

__all__ = [
    "GENESIS", "CanonicalError", "dumps", "parse_line", "record_line",
    "Bundle", "VerifyReport", "read_bundle", "verify_bundle",
    "MANIFEST_FILE", "META_FILE", "RECORDS_FILE", "BundleError", "Manifest", "Record", "Recorder",
    "make_manifest", "manifest_digest",
    "FORMAT", "KINDS", "RECORD_MODELS", "ActionRecord", "AlertRecord", "ArtifactRef", "EndRecord", "EntryCounts",
    "FaultInstance", "FaultProbe", "IncidentRecord", "InvocationRecord", "LifecycleEvent", "NoiseEvent",
    "ReferenceRecord", "RunRecord", "ScheduleRecord", "TickRecord", "ToolCall", "UsageRecord", "validate_data",
]
