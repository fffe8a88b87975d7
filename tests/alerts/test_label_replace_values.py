"""``PromQLEngine._label_replace`` keeps the regex's expansion per source value (``engine._LR_VALUES``): on random
label sets (matching and not, empty expansions that remove the destination, destination present or absent, values
seen before in other label sets) it equals the definition, label set by label set, on first and on repeated calls."""

from __future__ import annotations

import re

import numpy as np
import pytest

from sremarathon_env.alerts import engine as EN
from sremarathon_env.alerts.engine import PromQLEngine, _go_expand
from sremarathon_env.alerts.values import get


def _definition(labels, dst, repl, src, rx):
    pat = re.compile(rx, re.DOTALL)
    out = []
    for lb in labels:
        m = pat.fullmatch(get(lb, src))
        if m is None:
            out.append(lb)
            continue
        d = dict(lb)
        val = _go_expand(repl, m)
        if val:
            d[dst] = val
        else:
            d.pop(dst, None)
        out.append(tuple(sorted(d.items())))
    return out


CASES = [
    ("service", "$1", "pod", "(.+)-[bcdfghjklmnpqrstvwxz2456789]{10}-[bcdfghjklmnpqrstvwxz2456789]{5}"),
    ("service", "$1", "deployment", "(.+)"),
    ("x", "${1}-$2$$", "a", "(a*)(b?)"),
    ("a", "", "b", ".*"),          # an empty expansion removes the destination
    ("b", "$name", "a", "(?P<name>a+)|c"),
    ("new", "$9", "a", "(a)"),     # an unknown group expands to ''
]


@pytest.mark.parametrize("dst,repl,src,rx", CASES)
def test_label_replace_by_value_equals_definition(dst, repl, src, rx):
    rng = np.random.default_rng(abs(hash((dst, repl, src, rx))) % (1 << 31))
    alphabet = ["a", "aa", "ab", "b", "c", "", "\n", "svc-bcdfghjklm-bcdfg", "cart-7d9fbbcc52-xbcd2",
                "cart-7d9fbbcc52-xbcd", "frontend"]
    EN._LR_VALUES.clear()
    for rnd in range(40):
        labels = []
        for _ in range(int(rng.integers(0, 30))):
            d = {}
            for name in ("__name__", "a", "b", "deployment", "pod", "service", "x"):
                if rng.random() < 0.6:
                    v = alphabet[int(rng.integers(len(alphabet)))]
                    if v:
                        d[name] = v
            labels.append(tuple(sorted(d.items())))
        assert PromQLEngine._label_replace(labels, dst, repl, src, rx) == _definition(labels, dst, repl, src, rx), rnd


def test_value_record_is_bounded(monkeypatch):
    monkeypatch.setattr(EN, "LR_VALUES_MAX", 5)
    EN._LR_VALUES.clear()
    labels = [(("pod", f"p{i}"),) for i in range(50)]
    out = PromQLEngine._label_replace(labels, "s", "$1", "pod", "p(.*)")
    assert out == _definition(labels, "s", "$1", "pod", "p(.*)")
    assert all(len(v) <= 5 for v in EN._LR_VALUES.values())
