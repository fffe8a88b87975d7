"""The alert JSON texts' fast paths against their definitions: `go_float`'s digits from ``repr`` against those of a
``Decimal`` (its path for anything but a float), `_ann_pieces` against
rendering the annotations and encoding them, and every alert's ``json_text`` against ``dumps`` of its dict rendered
afresh from its annotation source, over real marathons (Train Ticket, Online Boutique)."""

from __future__ import annotations

import copy
import json
import math
import random
import struct

import gymnasium as gym
import pytest

import sremarathon_env  # noqa: F401
from sremarathon_env.alerts import load_rule_pack
from sremarathon_env.alerts import state as ST
from sremarathon_env.alerts import rulepack
from sremarathon_env.alerts.rulepack import go_float, go_float_cached, template_parts
from sremarathon_env.registration import IDS


def _dumps(d: dict) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def _floats(n: int, seed: int) -> list[float]:
    """Edge values, decimal-looking values around the format's thresholds, and random bit patterns."""
    rng = random.Random(seed)
    out = [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
           0.1, 0.2 + 0.1, 1 / 3, 2 / 3, 100.0, 123.0, 1234567.0, 1e21, 1e22, 1e16, 1e15, 123456789012345678.0]
    for e in range(-8, 9):
        for m in (1.0, 9.99999, 9.999999, 1.5, 999999.0, 999999.5, 0.999999, 1.000001):
            out += [m * 10.0 ** e, -m * 10.0 ** e]
    for _ in range(n):
        out.append(struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0])   # any double
        out.append(round(rng.uniform(-1e7, 1e7), rng.randint(0, 9)))                      # metric-like values
        out.append(rng.random() * 10.0 ** rng.randint(-12, 25))
    return out


class _F(float):
    """A float that is not exactly ``float``: `go_float` reads its digits through ``Decimal(repr(v))``."""


def test_go_float_digits_from_repr_are_those_of_the_decimal():
    for v in _floats(30000, 1):
        assert go_float(v) == go_float(_F(v)), repr(v)
        assert go_float_cached(v) == go_float(_F(v)), repr(v)
        assert go_float_cached(v) == go_float(_F(v)), repr(v)   # again, from the cache


def test_text_caches_are_bounded():
    for v in _floats(3000, 2):
        go_float_cached(v)
    for ms in range(0, 15000 * (ST.TEXT_CACHE_MAX + 50), 15000):
        assert ST._ms_text(ms) == ST._num(ms / 1000)
    assert len(rulepack._GO_FLOAT) <= rulepack.GO_FLOAT_MAX + 1 and len(ST._MS_TEXT) <= ST.TEXT_CACHE_MAX + 1
    assert ST._ms_text(None) == "null"


def test_annotation_pieces_are_the_encoded_rendering_for_every_rule():
    """Joined at the value's Go text, the pieces are the encoder's text of the rendered annotations, for every rule of
    the pack, labels present or missing (``<no value>``), with characters JSON escapes, and any value."""
    rng = random.Random(3)
    chars = 'ab"\\\u00e9\u2603\n\t\x00\x1f/<>&\' {}$.\U0001f600'
    values = _floats(40, 4)
    pack = load_rule_pack()
    names = sorted({x for r in pack.rules for _, t in r.annotations for x in template_parts(t) if x[0] == 2},
                   key=str)
    for rule in pack.rules:
        for _ in range(20):
            sample = {n[1]: "".join(rng.choice(chars) for _ in range(rng.randint(0, 6)))
                      for n in names if rng.random() < 0.7}
            pieces = ST._ann_pieces(rule, sample)
            assert pieces is not None
            for v in rng.sample(values, 8):
                want = json.dumps(rule.render_annotations(sample, v), sort_keys=True, separators=(",", ":"),
                                  ensure_ascii=True)
                assert go_float_cached(v).join(pieces) == want
            if not any(x[0] == 1 for _, t in rule.annotations for x in template_parts(t)):
                assert len(pieces) == 1   # no value shown: one constant text
    # anything but string label values: no pieces (the caller renders and encodes)
    rule = next(r for r in pack.rules if any(x[0] == 2 for _, t in r.annotations for x in template_parts(t)))
    label = next(x[1] for _, t in rule.annotations for x in template_parts(t) if x[0] == 2)
    assert ST._ann_pieces(rule, {label: 3}) is None


def _definition(a) -> str:
    """``dumps`` of the alert's dict with its annotations rendered afresh from their source (a copy: nothing of the
    alert itself is touched)."""
    b = copy.copy(a)
    if b.ann_src is None and b._ann_from is not None and b.annotations is b._ann_obj:
        b.ann_src = b._ann_from
    return _dumps(b.to_dict())


def _check_marathon(app: str, seed: int, **kw) -> dict:
    """Steps a no-op marathon; after every step each alert's text (the env's cached one where it read it) equals its
    definition; every other step the dicts are read first (annotations rendered: the texts of alerts that then change
    only in state come from the rendered source). Returns counts of the paths taken."""
    env = gym.make(IDS[app], **kw).unwrapped
    env.reset(seed=seed)
    eng = env.marathon.alert_engine
    seen = {"pending_source": 0, "rendered_source": 0, "texts": 0}
    orig = ST._Alert.json_text

    def counting(a):
        if a._j_rev != a.rev:
            if a.ann_src is not None:
                seen["pending_source"] += 1
            elif a.annotations is a._ann_obj and a._ann_from is not None:
                seen["rendered_source"] += 1
        return orig(a)

    ST._Alert.json_text = counting
    try:
        k = 0
        while True:
            if k % 2:
                eng.history()
            done = env.step("[]")[3]
            k += 1
            for a in eng._history.values():
                assert a.json_text() == _definition(a), (app, seed, k, a.labels)
                seen["texts"] += 1
            if done:
                break
    finally:
        ST._Alert.json_text = orig
    return seen


@pytest.mark.parametrize("app,seed,kw", [("train-ticket", 1, {}), ("online-boutique", 2, {}),
                                         ("train-ticket", 3, dict(injection_s=1200, observation_s=240,
                                                                  reference_run=False))])
def test_json_text_equals_the_fresh_definition_over_marathons(app, seed, kw):
    seen = _check_marathon(app, seed, **kw)
    assert seen["texts"] > 100 and seen["pending_source"] > 10 and seen["rendered_source"] > 10, seen


def test_a_planted_bug_fails_the_marathon_check(monkeypatch):
    """The marathon check sees a wrong value text and wrong annotation pieces."""
    kw = dict(injection_s=1200, observation_s=240, reference_run=False)
    with monkeypatch.context() as m:
        m.setattr(ST, "go_float_cached", lambda v: go_float(v) + ("0" if v == v and v and abs(v) > 1 else ""))
        with pytest.raises(AssertionError):
            _check_marathon("train-ticket", 3, **kw)
    real = ST._ann_pieces
    with monkeypatch.context() as m:
        m.setattr(ST, "_ann_pieces", lambda rule, sample: None if real(rule, sample) is None
                  else tuple(p.replace("\\u", "\\U") for p in real(rule, sample)) if len(rule.annotations) == 1
                  else real(rule, {k: v + " " for k, v in sample.items()}))
        with pytest.raises(AssertionError):
            _check_marathon("online-boutique", 2, **kw)


def test_annotations_set_from_outside_are_the_ones_encoded():
    """Once rendered, the annotation source stands for the annotations only while they are that render: a dict set
    from outside is what `to_dict` shows, and so what the text shows."""
    pack = load_rule_pack()
    rule = next(r for r in pack.rules if any("$value" in t for _, t in r.annotations))
    sample = {"service": "cart", "pod": "p1"}
    a = ST._Alert(0, {"alertname": rule.name, "service": "cart"}, "00ff", "pending", 15000, 2.5, {}, 15000,
                  sample_labels=sample, ann_src=(rule, sample, 2.5))
    assert a.json_text() == _dumps(a.to_dict())   # from the pending source
    a.state = "firing"
    a.rev += 1
    assert a.json_text() == _dumps(a.to_dict())   # from the rendered source
    a.annotations = {"summary": "set \u00e9"}
    a.rev += 1
    assert '"summary":"set \\u00e9"' in a.json_text() and a.json_text() == _dumps(a.to_dict())


def test_label_text_and_annotation_piece_caches_are_exact_and_bounded(monkeypatch):
    """`_labels_text` / `_ann_pieces_cached` give what `_encode_str_dict` / `_ann_pieces` give, for label sets met
    again (equal items in another dict), in another order, for another rule object of equal content, for unhashable
    values (no cache), and across the caches' restarts (a small bound)."""
    monkeypatch.setattr(ST, "TEXT_CACHE_MAX", 5)
    rng = random.Random(11)
    pack = load_rule_pack()
    rules = list(pack.rules) + [copy.copy(r) for r in pack.rules[:3]]   # equal rules, other objects
    chars = 'ab"\\\u00e9 $.{}'
    names = ["pod", "service", "namespace", "severity", "alertname"]
    pool = [{n: "".join(rng.choice(chars) for _ in range(rng.randint(0, 4))) for n in rng.sample(names, 3)}
            for _ in range(12)]
    for _ in range(400):
        d = dict(rng.choice(pool))
        if rng.random() < 0.3:
            d = dict(reversed(list(d.items())))
        assert ST._labels_text(d) == ST._encode_str_dict(d)
        rule = rng.choice(rules)
        assert ST._ann_pieces_cached(rule, d) == ST._ann_pieces(rule, d)
        assert len(ST._LABELS_TEXT) <= 5 and len(ST._ANN_PIECES) <= 5
    bad = {"pod": ["p"]}   # unhashable: computed every time
    assert ST._labels_text(bad) == ST._encode_str_dict(bad)
    assert ST._ann_pieces_cached(rules[0], bad) == ST._ann_pieces(rules[0], bad)
