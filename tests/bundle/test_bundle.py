"""Bundle recorder, reader and verifier: determinism, tamper detection, crash safety."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sremarathon_env.bundle import (MANIFEST_FILE, META_FILE, RECORDS_FILE, BundleError, Recorder, dumps,
                                    parse_line, read_bundle, verify_bundle)

RUN = {"app": "online-boutique", "seed": 7, "catalogue_version": "1", "rule_pack_version": "1"}
SCHEDULE = {"faults": [{
    "instance_id": "f0", "fault_id": "cart-leak", "category": "resource", "mechanism": "direct",
    "start_s": 60.0, "end_s": 400.0, "target": "cartservice", "culprits": ["cartservice"],
    "artifact": {"kind": "resource_spec", "canonical": "cartservice:memory", "aliases": ["cart memory"]},
    "scope": ["cartservice", "frontend"]}]}


def fill(rec: Recorder, n_ticks: int = 4) -> None:
    rec.append("run", 0.0, RUN)
    rec.append("schedule", 0.0, SCHEDULE)
    for i in range(1, n_ticks + 1):
        t = 15.0 * i
        rec.append("tick", t, {"t": t, "entry": {"total": 100.0, "failed": float(i), "slow": 0.5, "degraded": 0.0},
                               "faults": {"f0": {"active": True, "probe_ok": i % 2 == 0, "artifact_ok": False}}})
        if i == 2:
            rec.append("alert", t, {"t": t, "alertname": "HighErrorRate", "labels": {"service": "cartservice"},
                                    "fingerprint": "fp1", "state": "firing"})
    rec.append("incident", 60.0, {"t": 60.0, "invocation": 0, "op": "report", "incident_id": "inc-1",
                                  "alerts": ["fp1"], "culprits": ["cartservice"], "artifact": "caf\u00e9"})


def make_bundle(path: Path | None, seal: bool = True, **kw) -> Recorder:
    rec = Recorder(path, **kw)
    fill(rec)
    if seal:
        rec.seal()
    else:
        rec.close()
    return rec


def test_round_trip_and_memory_digest_equal(tmp_path):
    disk = make_bundle(tmp_path / "a")
    mem = make_bundle(None)
    assert disk.digest == mem.digest
    b = read_bundle(tmp_path / "a")
    assert b.complete and b.digest == disk.digest
    assert [r.hash for r in b.records] == [r.hash for r in mem.records]
    assert [r.data for r in b.records] == [r.data for r in mem.records]
    assert b.records[-1].kind == "end" and b.records[-1].data["n_records"] == len(b.records) - 1
    assert b.first("incident").data["artifact"] == "caf\u00e9"


def test_same_records_give_identical_bytes_and_digest_meta_not_hashed(tmp_path):
    a = make_bundle(tmp_path / "a", meta={"started": "2024-01-01T00:00:00", "host": "x"})
    b = make_bundle(tmp_path / "b", meta={"started": "2031-05-05T12:00:00", "host": "y"})
    for f in (RECORDS_FILE, MANIFEST_FILE):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert (tmp_path / "a" / META_FILE).read_bytes() != (tmp_path / "b" / META_FILE).read_bytes()
    assert a.digest == b.digest == read_bundle(tmp_path / "b").digest
    # any change of content changes the digest
    c = Recorder(None)
    fill(c)
    c.append("usage", 60.0, {"t": 60.0, "invocation": 0, "model_calls": 1})
    c.seal()
    assert c.digest != a.digest


def test_dict_order_does_not_matter():
    a, b = Recorder(None), Recorder(None)
    a.append("alert", 1.0, {"t": 1.0, "alertname": "A", "labels": {"x": "1", "y": "2"}, "fingerprint": "f",
                            "state": "firing"})
    b.append("alert", 1.0, {"state": "firing", "fingerprint": "f", "labels": {"y": "2", "x": "1"},
                            "alertname": "A", "t": 1.0})
    assert a.digest == b.digest


@pytest.mark.parametrize("seal", [True, False])
def test_every_single_flipped_byte_is_detected(tmp_path, seal):
    make_bundle(tmp_path / "b", seal=seal)
    assert verify_bundle(tmp_path / "b").ok
    files = [RECORDS_FILE] + ([MANIFEST_FILE] if seal else [])
    checked = 0
    for name in files:
        p = tmp_path / "b" / name
        orig = p.read_bytes()
        for i in range(len(orig)):
            for mask in (0x01, 0x20, 0x80):
                bad = bytearray(orig)
                bad[i] ^= mask
                p.write_bytes(bytes(bad))
                rep = verify_bundle(tmp_path / "b")
                assert not rep.ok, f"{name} byte {i} ^ {mask:#x} not detected"
                assert rep.error
                checked += 1
        p.write_bytes(orig)
    assert checked > 3 * 2000
    assert verify_bundle(tmp_path / "b").ok
    with pytest.raises(BundleError, match="record 3"):
        p = tmp_path / "b" / RECORDS_FILE
        orig = p.read_bytes()
        third = sum(len(x) for x in orig.splitlines(keepends=True)[:3])
        p.write_bytes(orig[:third + 20] + bytes([orig[third + 20] ^ 1]) + orig[third + 21:])
        read_bundle(tmp_path / "b")


def test_first_bad_record_is_named(tmp_path):
    make_bundle(tmp_path / "b")
    p = tmp_path / "b" / RECORDS_FILE
    lines = p.read_text().splitlines(keepends=True)
    # tamper record 3's data, keep its (now wrong) hash
    obj = json.loads(lines[3])
    obj["data"]["entry"]["failed"] = 0.0
    lines3 = lines[:3] + [dumps(obj) + "\n"] + lines[4:]
    p.write_text("".join(lines3))
    rep = verify_bundle(tmp_path / "b")
    assert not rep.ok and rep.bad_seq == 3 and rep.bad_line == 4 and "hash" in rep.error
    # re-hash the tampered record: the chain breaks at the next one instead
    from sremarathon_env.bundle import record_line
    line, _ = record_line(3, obj["kind"], obj["t"], obj["data"], obj["prev"])
    p.write_text("".join(lines[:3] + [line + "\n"] + lines[4:]))
    rep = verify_bundle(tmp_path / "b")
    assert not rep.ok and rep.bad_seq == 4 and "chain" in rep.error
    # a dropped record
    p.write_text("".join(lines[:2] + lines[3:]))
    rep = verify_bundle(tmp_path / "b")
    assert not rep.ok and rep.bad_seq == 2 and "seq" in rep.error
    # records appended after sealing
    p.write_text("".join(lines) + lines[-1])
    rep = verify_bundle(tmp_path / "b")
    assert not rep.ok and "end record" in rep.error
    # truncated sealed bundle
    p.write_text("".join(lines[:-2]))
    rep = verify_bundle(tmp_path / "b")
    assert not rep.ok and "manifest says" in rep.error


def test_unsealed_prefix_and_torn_tail(tmp_path):
    rec = make_bundle(tmp_path / "b", seal=False)
    b = read_bundle(tmp_path / "b")
    assert not b.complete and b.digest == rec.digest and len(b.records) == len(rec.records)
    p = tmp_path / "b" / RECORDS_FILE
    full = p.read_bytes()
    # a torn final write: a cut-off record without newline is ignored and reported
    extra = full.splitlines(keepends=True)[3]
    p.write_bytes(full + extra[: len(extra) // 2])
    rep = verify_bundle(tmp_path / "b")
    assert rep.ok and not rep.complete and rep.torn_tail_bytes == len(extra) // 2
    assert rep.n_records == len(rec.records) and rep.digest == rec.digest
    # the same torn tail after a manifest is an error
    make_bundle(tmp_path / "s")
    ps = tmp_path / "s" / RECORDS_FILE
    ps.write_bytes(ps.read_bytes() + extra[:10])
    assert not verify_bundle(tmp_path / "s").ok


def test_recorder_refuses_bad_input_without_writing(tmp_path):
    rec = Recorder(tmp_path / "b")
    rec.append("tick", 30.0, {"t": 30.0, "entry": {"total": 1, "failed": 0, "slow": 0, "degraded": 0}})
    size = (tmp_path / "b" / RECORDS_FILE).stat().st_size
    with pytest.raises(BundleError, match="backwards"):
        rec.append("tick", 15.0, {"t": 15.0, "entry": {"total": 1, "failed": 0, "slow": 0, "degraded": 0}})
    with pytest.raises(BundleError, match="invalid alert"):
        rec.append("alert", 30.0, {"t": 30.0, "alertname": "A", "labels": {}, "fingerprint": "f", "state": "on"})
    with pytest.raises(BundleError, match="unknown record kind"):
        rec.append("bogus", 30.0, {})
    with pytest.raises(BundleError, match="differs"):
        rec.append("usage", 45.0, {"t": 60.0, "invocation": 0})
    with pytest.raises(BundleError, match="seal"):
        rec.append("end", 30.0, {"n_records": 1, "final_t": 30.0})
    with pytest.raises(BundleError, match="not canonical"):
        Recorder(None, validate=False).append("tick", 0.0, {"x": float("nan")})
    assert (tmp_path / "b" / RECORDS_FILE).stat().st_size == size
    rec.seal()
    with pytest.raises(BundleError, match="sealed"):
        rec.append("usage", 60.0, {"t": 60.0, "invocation": 0})
    with pytest.raises(BundleError, match="already holds"):
        Recorder(tmp_path / "b")
    assert verify_bundle(tmp_path / "b").ok


def test_closed_run_seals_incomplete(tmp_path):
    rec = Recorder(tmp_path / "b")
    fill(rec)
    m = rec.seal(reason="closed")
    assert not m.complete
    b = read_bundle(tmp_path / "b")
    assert not b.complete and b.manifest is not None and b.digest == m.digest


def test_listeners_see_every_record():
    seen = []
    rec = Recorder(None, listeners=[seen.append])
    fill(rec)
    rec.seal()
    assert [r.seq for r in seen] == list(range(len(rec.records)))


CHILD = textwrap.dedent("""
    import sys
    from sremarathon_env.bundle import Recorder
    rec = Recorder(sys.argv[1])
    rec.append("run", 0.0, {"app": "online-boutique", "seed": 1, "catalogue_version": "1",
                            "rule_pack_version": "1"})
    i = 0
    while True:
        i += 1
        t = 15.0 * i
        rec.append("tick", t, {"t": t, "entry": {"total": 1000.0, "failed": i % 7, "slow": 1.0, "degraded": 0.0},
                               "faults": {f"f{k}": {"active": True, "probe_ok": (i + k) % 3 > 0,
                                                    "artifact_ok": False} for k in range(40)}})
        if i == 50:
            print("ready", flush=True)
""")


def test_sigkill_mid_run_leaves_verifiable_incomplete_prefix(tmp_path):
    path = tmp_path / "b"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    rep = verify_bundle(path)
    assert rep.ok, rep.error
    assert not rep.complete and rep.n_records >= 51
    b = read_bundle(path)
    assert [r.kind for r in b.records[:2]] == ["run", "tick"]
    assert [r.t for r in b.records[1:]] == [15.0 * i for i in range(1, len(b.records))]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**60, 2**60) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(data=st.dictionaries(st.text(max_size=6), json_values, max_size=5), t=st.floats(0, 1e6))
def test_canonical_lines_round_trip(data, t):
    rec = Recorder(None, validate=False)
    r = rec.append("run", t, data)
    from sremarathon_env.bundle import record_line
    line, h = record_line(0, "run", r.t, data, r.prev)
    obj = parse_line(line)
    assert obj["data"] == data and obj["hash"] == h == r.hash
    assert record_line(0, "run", obj["t"], obj["data"], obj["prev"])[0] == line
