"""The recorder's plain-data path for alert and tick records gives exactly what the pydantic models dump (same
values, same key order, same canonical line), and leaves everything it cannot vouch for to the models."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from sremarathon_env.bundle import Recorder
from sremarathon_env.bundle.canonical import PLAIN_JSON, CanonicalError, dumps
from sremarathon_env.bundle.schema import PLAIN_WITH_JSON, dump_plain, validate_data

text = st.text(max_size=8)
num = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5), st.booleans(), text, st.none())
exact_float = st.floats(allow_nan=True, allow_infinity=True)


def _maybe(d: dict, extra) -> dict:
    """Sometimes drop a key or add an unknown one."""
    d = dict(d)
    if extra == "drop" and d:
        d.pop(sorted(d)[0])
    elif extra == "add":
        d["unexpected"] = 1
    return d


mods = st.sampled_from([None] * 30 + ["drop", "add"])


def mostly(valid, invalid=num):
    """``valid`` about 19 times in 20, else ``invalid``."""
    return st.integers(0, 19).flatmap(lambda i: invalid if i == 0 else valid)


s_text = mostly(text)
f_num = mostly(exact_float)
b_num = mostly(st.booleans(), st.one_of(st.integers(0, 1), st.none()))
alerts = st.builds(
    lambda t, name, labels, fp, state, sev, m: _maybe(
        {"t": t, "alertname": name, "labels": labels, "fingerprint": fp, "state": state,
         **({} if sev == "absent" else {"severity": sev})}, m),
    f_num, s_text, st.dictionaries(text, s_text, max_size=3),
    s_text, mostly(st.sampled_from(["pending", "firing", "resolved"]), st.sampled_from(["inactive", 1])),
    st.sampled_from(["absent", None, "warning", "warning", 3]), mods)
probe = st.builds(lambda a, b, c, m: _maybe({"active": a, "probe_ok": b, "artifact_ok": c}, m),
                  b_num, b_num, b_num, mods)
event = st.builds(
    lambda iid, ev, detail, aliases, m: _maybe(
        {"instance_id": iid, "event": ev, **({} if detail is None else {"detail": detail}),
         **({} if aliases is None else {"aliases": aliases})}, m),
    s_text, mostly(st.sampled_from(["injected", "reverted", "ended_repaired", "noise_start", "noise_end"]),
                   st.sampled_from(["other", 1])),
    st.one_of(st.none(), s_text), st.one_of(st.none(), mostly(st.lists(s_text, max_size=2), st.tuples(text))), mods)
ticks = st.builds(
    lambda t, entry, faults, events, m: _maybe({"t": t, "entry": entry, **faults, **events}, m),
    f_num,
    st.builds(lambda a, b, c, d, m: _maybe({"total": a, "failed": b, "slow": c, "degraded": d}, m),
              f_num, f_num, f_num, f_num, mods),
    st.one_of(st.just({}), st.builds(lambda f: {"faults": f}, st.dictionaries(text, probe, max_size=3))),
    st.one_of(st.just({}), st.builds(lambda e: {"events": e}, st.lists(event, max_size=3))), mods)

invocations = st.builds(
    lambda idx, t, calls, used, err, m: _maybe({"index": idx, "t": t, "calls": calls, "budget_used_s": used,
                                                "error": err}, m),
    mostly(st.integers(0, 50), st.one_of(st.booleans(), st.floats(0, 3))), f_num,
    mostly(st.just([]), st.one_of(st.just([{"tool": "x", "ok": True}]), st.just(()))),
    mostly(exact_float, st.integers(0, 3)), mostly(st.one_of(st.none(), text)), mods)


def _same(a, b) -> bool:
    """Equal values (NaN equal to NaN) in the same key order, recursively."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


def _check_one_pass(kind: str, data, plain, text) -> None:
    """The recorder's one-pass path (`PLAIN_WITH_JSON`) gives the plain data and its text exactly when both the
    plain path and its encoder do (None otherwise), the same values in the same key order, fresh containers."""
    got = PLAIN_WITH_JSON[kind](data)
    if plain is None or text is None:
        assert got is None, (data, got)
        return
    assert got is not None, data
    assert _same(got[0], plain) and got[1] == text, (got, plain, text)
    assert got[0] == plain and type(got[1]) is str
    assert all(got[0][k] is not data[k] for k in got[0] if isinstance(got[0][k], (dict, list)) and k in data)
    if kind == "tick":
        for k, p in got[0]["faults"].items():
            assert p is not data["faults"][k]
        for e, e_in in zip(got[0]["events"], data.get("events", [])):
            assert e is not e_in and e["aliases"] is not e_in.get("aliases")


def _check(kind: str, data: dict) -> bool:
    """True when the plain path took the record."""
    snapshot = json.dumps(data, sort_keys=True, default=repr)
    plain = dump_plain(kind, data)
    try:
        model = validate_data(kind, data).model_dump(mode="json")
    except ValueError:
        assert plain is None, f"the model refuses what the plain path took: {data!r}"
        assert PLAIN_WITH_JSON[kind](data) is None
        return False
    assert json.dumps(data, sort_keys=True, default=repr) == snapshot  # the input is not changed
    if plain is None:
        assert PLAIN_WITH_JSON[kind](data) is None
        return False
    assert _same(plain, model), (plain, model)
    try:
        line = dumps(model)
    except CanonicalError:
        line = None
    if line is not None:
        assert dumps(plain) == line
    # the recorder's encoder of the plain data writes what the canonical encoder writes (None where it refuses)
    try:
        want = dumps(plain)
    except CanonicalError:
        want = None
    assert PLAIN_JSON[kind](plain) == want, plain
    _check_one_pass(kind, data, plain, want)
    # fresh containers: changing the input afterwards does not reach the dump
    assert all(plain[k] is not data[k] for k in plain if isinstance(plain[k], (dict, list)) and k in data)
    return True


@settings(max_examples=400, deadline=None)
@given(alerts)
def test_alert_plain_dump_equals_model(data):
    _check("alert", data)


@settings(max_examples=400, deadline=None)
@given(ticks)
def test_tick_plain_dump_equals_model(data):
    _check("tick", data)


@settings(max_examples=400, deadline=None)
@given(invocations)
def test_invocation_plain_dump_equals_model(data):
    _check("invocation", data)


def test_plain_path_is_taken_for_run_loop_shapes_and_refuses_coercions():
    alert = {"t": 30.0, "alertname": "HighErrorRate", "labels": {"service": "cart", "alertname": "HighErrorRate"},
             "fingerprint": "ab12", "state": "firing", "severity": "warning"}
    tick = {"t": 15.0, "entry": {"total": 3.5, "failed": 0.0, "slow": 1e-9, "degraded": 0.0},
            "faults": {"F001": {"active": True, "probe_ok": False, "artifact_ok": True}},
            "events": [{"instance_id": "F001", "event": "injected", "detail": "x", "aliases": ["abc"]},
                       {"instance_id": "F001", "event": "reverted"}]}
    assert _check("alert", alert) and _check("tick", tick)
    assert dump_plain("tick", {**tick, "t": 15}) is None                     # an int the model makes a float
    assert dump_plain("tick", {**tick, "events": tuple(tick["events"])}) is None
    assert dump_plain("alert", {**alert, "state": "inactive"}) is None
    inv = {"index": 3, "t": 360.0, "calls": [], "budget_used_s": 0.0, "error": None}
    assert _check("invocation", inv)                                          # a no-op step's invocation
    assert dump_plain("invocation", {**inv, "budget_used_s": 0}) is None      # an int the model makes a float
    assert dump_plain("invocation", {**inv, "calls": [{"tool": "x"}]}) is None   # calls: the model's path
    assert dump_plain("incident", {"t": 1.0}) is None


def test_recorder_bytes_equal_with_and_without_the_plain_path(monkeypatch):
    import sremarathon_env.bundle.recorder as R

    recs = [("alert", 30.0, {"t": 30.0, "alertname": "X", "labels": {"pod": "caf\u00e9-1"}, "fingerprint": "f",
                              "state": "pending"}),
            ("tick", 30.0, {"t": 30.0, "entry": {"total": 1.0, "failed": 0.5, "slow": 0.0, "degraded": -0.0}}),
            ("alert", 45.0, {"t": 45, "alertname": "X", "labels": {}, "fingerprint": "f", "state": "firing"}),
            ("alert", 45.0, {"t": 45.0, "alertname": "Y\"\n", "labels": {"z": "1", "a": "\u2603", "alertname": "Y"},
                             "fingerprint": "g", "state": "resolved", "severity": "critical"}),
            ("tick", 60.0, {"t": 60.0, "entry": {"total": 1e22, "failed": 1e-7, "slow": 0.1, "degraded": 3.0},
                            "faults": {"F002": {"active": True, "probe_ok": False, "artifact_ok": True},
                                       "F001": {"active": False, "probe_ok": True, "artifact_ok": False}},
                            "events": [{"instance_id": "F002", "event": "injected", "detail": "d\u00e9",
                                        "aliases": ["abc", "x@2"]}, {"instance_id": "F001", "event": "reverted"}]})]

    def chain() -> list[tuple[str, dict]]:
        rec = Recorder(None)
        for kind, t, data in recs:
            rec.append(kind, t, data)
        rec.seal()
        return [(r.hash, r.data) for r in rec.records]

    fast = chain()
    for path in ("one pass", "plain", "model"):
        try:
            Recorder(None).append("alert", 30.0, {**recs[0][2], "t": 31.0})
        except R.BundleError as e:
            assert "data t=31.0 differs from record t=30.0" in str(e)
        else:
            raise AssertionError("a data t other than the record's was accepted")
        if path == "one pass":
            monkeypatch.setattr(R, "PLAIN_WITH_JSON", {})
        else:
            monkeypatch.setattr(R, "dump_plain", lambda kind, data: None)
    monkeypatch.setattr(R, "PLAIN_WITH_JSON", {})
    mid = chain()
    monkeypatch.setattr(R, "dump_plain", lambda kind, data: None)
    slow = chain()
    assert fast == mid == slow and all(_same(a[1], b[1]) and _same(a[1], c[1]) for a, b, c in zip(fast, mid, slow))
    assert [type(x) for a in fast for x in a[1].values()] == [type(x) for a in slow for x in a[1].values()]


def test_one_pass_alert_heads_are_content_keyed_and_bounded(monkeypatch):
    import sremarathon_env.bundle.schema as S

    a = {"t": 1.0, "alertname": "X", "labels": {"b": "2", "a": "1"}, "fingerprint": "f", "state": "firing"}
    variants = [a, {**a, "labels": {"a": "1", "b": "2"}}, {**a, "labels": {"a": "1", "b": "3"}},
                {**a, "severity": "warning"}, {**a, "severity": None}, {**a, "alertname": "Y"},
                {**a, "fingerprint": "g"}, {**a, "state": "resolved", "t": 2.5}]
    monkeypatch.setattr(S, "ALERT_HEAD_MAX", 3)
    S._ALERT_HEAD.clear()
    for _ in range(3):
        for d in variants:
            p = dump_plain("alert", d)
            assert S.plain_alert_json(d) == (p, dumps(p))
            assert len(S._ALERT_HEAD) <= 3


def test_label_texts_are_content_keyed_and_bounded(monkeypatch):
    import sremarathon_env.bundle.canonical as C

    a = {"t": 1.0, "alertname": "X", "labels": {"b": "2", "a": "1"}, "fingerprint": "f", "state": "firing",
         "severity": None}
    b = {**a, "labels": {"a": "1", "b": "2"}}          # the same labels in another order: the same text
    c = {**a, "labels": {"a": "1", "b": "3"}}          # other content: its own text
    assert C.alert_json(a) == C.alert_json(b) == dumps(a) and C.alert_json(c) == dumps(c) != dumps(a)
    monkeypatch.setattr(C, "LABELS_JSON_MAX", 3)
    C._LABELS_JSON.clear()
    for i in range(10):
        d = {**a, "labels": {"i": str(i), "a": "1"}}
        assert C.alert_json(d) == dumps(d) and C.alert_json(a) == dumps(a)
        assert len(C._LABELS_JSON) <= 3
    assert C.alert_json({**a, "t": float("inf")}) is None
    assert C.tick_json({"t": 1.0, "entry": {"total": float("nan"), "failed": 0.0, "slow": 0.0, "degraded": 0.0},
                        "faults": {}, "events": []}) is None


def test_one_pass_alert_takes_exactly_the_plain_key_sets():
    """Every key set from the required five, "severity" and an unknown key: the one pass takes a dict exactly when
    `_plain_alert` does (its key test by count and look-ups equals the subset test)."""
    from itertools import combinations

    from sremarathon_env.bundle.schema import _plain_alert, plain_alert_json

    full = {"t": 1.0, "alertname": "X", "labels": {"a": "1"}, "fingerprint": "f", "state": "firing",
            "severity": "info", "unexpected": "y"}
    names = list(full)
    for r in range(len(names) + 1):
        for keys in combinations(names, r):
            d = {k: full[k] for k in keys}
            p = _plain_alert(d)
            got = plain_alert_json(d)
            assert (got is None) == (p is None), keys
            if p is not None:
                assert got == (p, dumps(p))


def test_one_pass_tick_probe_key_sets_and_fault_id_texts(monkeypatch):
    """A probe is taken exactly when its keys are the three of the model (three keys with an unknown one among
    them, two, four: the former path); the fault ids' texts are content-keyed and bounded."""
    import sremarathon_env.bundle.schema as S

    probe = {"active": True, "probe_ok": False, "artifact_ok": True}
    base = {"t": 15.0, "entry": {"total": 2.0, "failed": 0.5, "slow": 0.0, "degraded": 0.0}, "events": []}
    variants = [probe, {"active": True, "probe_ok": False, "unexpected": True}, {"active": True, "probe_ok": False},
                {**probe, "unexpected": True}, {"artifact_ok": True, "active": True, "probe_ok": False}]
    for p in variants:
        d = {**base, "faults": {"F2": dict(probe), "F1\u00e9": p}}
        plain = dump_plain("tick", d)
        got = S.plain_tick_json(d)
        assert (got is None) == (plain is None), p
        if plain is not None:
            assert got == (plain, dumps(plain))
    monkeypatch.setattr(S, "KEY_JSON_MAX", 3)
    S._KEY_JSON.clear()
    for i in range(12):
        d = {**base, "faults": {f"F{i}": dict(probe), "F\"x": dict(probe), f"F{i % 2}": dict(probe)}}
        plain = dump_plain("tick", d)
        assert S.plain_tick_json(d) == (plain, dumps(plain))
        assert len(S._KEY_JSON) <= 3
