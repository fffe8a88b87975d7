"""`Recorder.append_tick` / `append_alert` (records built from pre-encoded parts, the run loop's path) give exactly the
record `Recorder.append` gives for the same data (same seq, data, prev, hash; the same line on disk), or the same
error, on random sequences of plain and not plain parts; and marathons recorded through them give the bundles that
the definition gives."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sremarathon_env.bundle import Recorder, recorder as recorder_mod
from sremarathon_env.bundle.recorder import BundleError

ids = st.sampled_from(["F1", "F2", "F3", "\u00e9", 'q"'])
verdict = st.one_of(st.booleans(), st.booleans(), st.booleans(), st.sampled_from([1, None, np.bool_(True)]))
probe = st.one_of(
    st.builds(lambda a, p, r: {"active": a, "probe_ok": p, "artifact_ok": r}, verdict, verdict, verdict),
    st.sampled_from([{"active": True, "probe_ok": True}, {"active": True, "probe_ok": True, "artifact_ok": True,
                                                           "x": 1}, "p"]))
faults = st.dictionaries(ids, probe, max_size=4)
count = st.one_of(*[st.floats(0, 1e6)] * 6, st.sampled_from([math.nan, math.inf, 3, -0.0, np.float64(2.5)]))
event = st.one_of(
    st.builds(lambda i, e: {"instance_id": i, "event": e}, ids, st.sampled_from(["injected", "reverted"])),
    st.builds(lambda i, a: {"instance_id": i, "event": "injected", "detail": "", "aliases": a}, ids,
              st.lists(st.sampled_from(["abc1234", "svc@r2"]), max_size=2)),
    st.sampled_from([{"instance_id": "F1", "event": "other"}, {"event": "noise_end"}]))
labels = st.dictionaries(st.sampled_from(["alertname", "service", "severity", "\u00e9"]),
                         st.one_of(*[st.sampled_from(["a", "page", "w\u00e9"])] * 8, st.just(3)), max_size=3)
state = st.one_of(*[st.sampled_from(["pending", "firing", "resolved"])] * 8, st.sampled_from(["inactive", 1]))
fp = st.one_of(*[st.sampled_from(["fp1", "fp2", "fp3"])] * 8, st.just(7))
step_t = st.one_of(*[st.sampled_from([0.0, 15.0, 15.0, 30.0])] * 8, st.sampled_from([-30.0, math.nan, 15]))
tick = st.tuples(st.just("tick"), step_t, count, count, count, count, faults,
                 st.one_of(st.just([]), st.just([]), st.lists(event, max_size=2)))
alert = st.tuples(st.just("alert"), step_t, st.sampled_from(["A", "B", 1]), labels, fp, state,
                  st.sampled_from([None, "page", 2]))
# a tick repeating the previous tick's faults (equal content, another dict), or one verdict flipped
repeat = st.tuples(st.just("repeat"), st.booleans(), st.sampled_from([0, 1, 2]))
# the previous alert again under its fingerprint: the same, another label value, name or severity, or another state
realert = st.tuples(st.just("realert"), st.sampled_from(["same", "label", "name", "severity", "state"]))
ops = st.lists(st.one_of(tick, alert, repeat, realert, realert), max_size=30)


def _definition(kind: str, t, a: tuple) -> dict:
    if kind == "tick":
        tot, fail, slow, deg, f, ev = a
        return {"t": t, "entry": {"total": tot, "failed": fail, "slow": slow, "degraded": deg}, "faults": f,
                "events": ev}
    name, lb, fp_, st_, sev = a
    return {"t": t, "alertname": name, "labels": lb, "fingerprint": fp_, "state": st_, "severity": sev}


def _same(a, b) -> bool:
    """Equal values of the same types (NaN equal to NaN), recursively."""
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return type(b) is list and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return type(b) is float and math.isnan(b)
    return type(a) is type(b) and a == b


def _run(seq: list, fast: Recorder, slow: Recorder) -> None:
    last_faults = last_alert = None
    step_t = 0.0
    for op in seq:
        kind = op[0]
        if kind == "realert":
            if last_alert is None:
                continue
            name, lb, fp_, st_, sev = copy.deepcopy(last_alert)
            if op[1] == "label":
                lb["service"] = lb.get("service", "") + "x"
            elif op[1] == "name":
                name = str(name) + "x"
            elif op[1] == "severity":
                sev = "page" if sev is None else None
            elif op[1] == "state":
                st_ = "resolved" if st_ != "resolved" else "firing"
            op = ("alert", step_t, name, lb, fp_, st_, sev)
            kind = "alert"
        if kind == "repeat":
            if last_faults is None:
                continue
            flip, which = op[1], op[2]
            f = copy.deepcopy(last_faults)
            if flip and f:
                k = sorted(f, key=str)[which % len(f)]
                if isinstance(f[k], dict) and "probe_ok" in f[k]:
                    f[k]["probe_ok"] = not f[k]["probe_ok"]
            op = ("tick", step_t, 1.0, 0.0, 0.0, 0.0, f, [])
            kind = "tick"
        t, args = op[1], op[2:]
        if t == t and not isinstance(t, int):
            step_t = max(step_t, t)
        d = _definition(kind, t, copy.deepcopy(args))
        try:
            want = slow.append(kind, t, d)
        except BundleError as e:
            want = e
        a = copy.deepcopy(args)
        try:
            got = fast.append_tick(t, *a) if kind == "tick" else fast.append_alert(t, *a)
        except BundleError as e:
            got = e
        if isinstance(want, BundleError):
            assert isinstance(got, BundleError) and str(got) == str(want), (op, got, want)
            continue
        assert not isinstance(got, BundleError), (op, got)
        assert (got.seq, got.kind, got.t, got.prev, got.hash) == (want.seq, want.kind, want.t, want.prev, want.hash)
        assert _same(got.data, want.data), (got.data, want.data)
        if kind == "tick":
            last_faults = args[4]
        else:
            last_alert = args
    assert fast.head == slow.head and fast.counts == slow.counts and fast.final_t == slow.final_t


@settings(max_examples=300, deadline=None)
@given(ops)
def test_encoded_appends_give_the_records_of_append(seq):
    _run(seq, Recorder(None), Recorder(None))


@settings(max_examples=40, deadline=None)
@given(seq=ops)
def test_encoded_appends_write_the_lines_of_append(tmp_path_factory, seq):
    a, b = tmp_path_factory.mktemp("fast") / "b", tmp_path_factory.mktemp("slow") / "b"
    fast, slow = Recorder(a), Recorder(b)
    _run(seq, fast, slow)
    fast.seal()
    slow.seal()
    assert (a / "records.jsonl").read_bytes() == (b / "records.jsonl").read_bytes()
    assert fast.manifest == slow.manifest


def test_a_repeated_faults_text_is_taken_only_for_equal_faults():
    """The previous tick's faults text is reused for equal faults only (a flipped verdict is encoded anew)."""
    probes = {"F1": {"active": True, "probe_ok": True, "artifact_ok": True}}
    fast, slow = Recorder(None), Recorder(None)
    for k, ok in enumerate([True, True, False, False, True]):
        f = {"F1": dict(probes["F1"], probe_ok=ok)}
        got = fast.append_tick(15.0 * k, 1.0, 0.0, 0.0, 0.0, f, [])
        want = slow.append("tick", 15.0 * k, {"t": 15.0 * k, "entry": {"total": 1.0, "failed": 0.0, "slow": 0.0,
                                                                      "degraded": 0.0}, "faults": copy.deepcopy(f)})
        assert got == want


def test_an_alert_head_is_taken_only_for_the_same_name_labels_and_severity():
    """Heads are kept per fingerprint with what they were made for: another name, label set or severity under the
    same fingerprint is encoded anew."""
    fast, slow = Recorder(None), Recorder(None)
    for name, lb, sev in [("A", {"s": "1"}, None), ("A", {"s": "1"}, None), ("B", {"s": "1"}, None),
                          ("B", {"s": "2"}, None), ("B", {"s": "2"}, "page"), ("A", {"s": "1"}, None)]:
        got = fast.append_alert(30.0, name, dict(lb), "fp", "firing", sev)
        want = slow.append("alert", 30.0, {"t": 30.0, "alertname": name, "labels": dict(lb), "fingerprint": "fp",
                                           "state": "firing", "severity": sev})
        assert got == want


@pytest.mark.parametrize("app,policy,seed", [("online-boutique", "noop", 3), ("astronomy-shop", "random", 5),
                                             ("train-ticket", "runbook", 2)])
def test_marathons_through_the_encoded_appends_give_the_definitions_bundles(app, policy, seed, monkeypatch):
    """Marathons (no-op and intervening policies) give the same bundle digest and score with the run loop's encoded
    appends as with `append` of the definition's data; every encoded record is checked against its definition on
    the way (`CHECK_ENCODED`), and most of them took the encoded path."""
    from baselines.runner import run_marathon

    taken = {"tick": 0, "alert": 0}
    add = Recorder._add_encoded

    def counting(self, kind, *a):
        taken[kind] += 1
        return add(self, kind, *a)

    monkeypatch.setattr(recorder_mod, "CHECK_ENCODED", True)
    monkeypatch.setattr(Recorder, "_add_encoded", counting)
    fast = run_marathon(app, seed, policy, injection_s=900, observation_s=300)[0]
    monkeypatch.setattr(Recorder, "append_tick", lambda self, t, *a: self.append("tick", t, _definition("tick", t, a)))
    monkeypatch.setattr(Recorder, "append_alert",
                        lambda self, t, *a: self.append("alert", t, _definition("alert", t, (a[0], dict(a[1]))
                                                                                 + a[2:])))
    slow = run_marathon(app, seed, policy, injection_s=900, observation_s=300)[0]
    assert (fast.digest, fast.marathon_score) == (slow.digest, slow.marathon_score)
    assert taken["tick"] >= 60 and taken["alert"] >= 10, taken


def _containers(x, out: list) -> None:
    if isinstance(x, (dict, list)):
        out.append(id(x))
        for v in (x.values() if isinstance(x, dict) else x):
            _containers(v, out)


@pytest.mark.parametrize("app,policy", [("online-boutique", "random"), ("train-ticket", "noop")])
def test_records_of_a_marathon_share_no_containers(app, policy):
    """The run loop hands the driver's probes and events and the transitions' labels over to the records (no copies):
    like the definition's copies, no dict or list is shared between two records (or within one), so a record's data
    is its own. (A driver that hands the same probe dicts to several ticks would fail this.)"""
    from baselines import make_policy
    from sremarathon_env.marathon import Marathon, MarathonConfig

    m = Marathon(MarathonConfig(app=app, seed=6, injection_s=900, observation_s=300))
    pol = make_policy(policy)
    m.start()
    pol.reset(m.app, 6)
    while True:
        m.end_invocation(usage=pol.act(m))
        if not m.advance_to_next_invocation():
            break
    m.finish()
    ids: list[int] = []
    for r in m.recorder.records:
        _containers(r.data, ids)
    assert len(ids) == len(set(ids)) and len(ids) > 500


def test_the_same_faults_dict_handed_over_twice_is_copied():
    """A faults dict handed to two tick records (the same object) leaves each record its own."""
    fast = Recorder(None)
    f = {"F1": {"active": True, "probe_ok": True, "artifact_ok": True}}
    a = fast.append_tick(15.0, 1.0, 0.0, 0.0, 0.0, f, [])
    b = fast.append_tick(30.0, 1.0, 0.0, 0.0, 0.0, f, [])
    assert a.data["faults"] == b.data["faults"] and a.data["faults"] is not b.data["faults"]
    assert a.data["faults"]["F1"] is not b.data["faults"]["F1"]


def test_alert_heads_shared_by_recorders_are_exact_and_bounded(monkeypatch):
    """The alert heads are shared by the recorders of a process (`recorder._HEADS`): a later recorder takes a head
    only for the same name, labels and severity under a fingerprint (another one is encoded anew), a record's labels
    changed after the fact change no head, and the table starts again past its bound; every record equals
    `append`'s."""
    from sremarathon_env.bundle import recorder as R

    monkeypatch.setattr(R, "_HEADS", {})
    monkeypatch.setattr(R, "HEADS_MAX", 3)
    cases = [("A", {"s": "1"}, None, "fp"), ("A", {"s": "1"}, None, "fp"), ("B", {"s": "1"}, None, "fp"),
             ("B", {"s": "2"}, "page", "fp"), ("A", {"s": "1"}, None, "fp2"), ("C", {"s": "3"}, None, "fp3"),
             ("D", {"s": "4"}, None, "fp4"), ("A", {"s": "1"}, None, "fp2"), ("B", {"s": "2"}, "page", "fp")]
    for rnd in range(3):
        fast, slow = Recorder(None), Recorder(None)
        for name, lb, sev, fp in cases:
            got = fast.append_alert(30.0, name, dict(lb), fp, "firing", sev)
            want = slow.append("alert", 30.0, {"t": 30.0, "alertname": name, "labels": dict(lb), "fingerprint": fp,
                                               "state": "firing", "severity": sev})
            assert got == want, (rnd, name, lb, sev, fp)
            got.data["labels"]["s"] = "mutated"   # (a caller's change to a record)
        assert len(R._HEADS) <= R.HEADS_MAX
