"""Label sets made from store rows (``PromQLEngine._row_info``), by ``label_replace`` and by vector matching
(``vectorops._pairs``) hold one kept object per distinct (name, value) pair (``values.intern_pairs``): the label
sets equal their definitions (the sorted pairs without empty values; ``tuple(sorted(d.items()))``), equal pairs
are one object, and the record is bounded (``PAIRS_MAX``); the value-by-value lookup of store rows' label sets
(``values.intern_values``) equals ``intern_pairs`` of the zipped pairs on random rows of families sharing values,
across the record's restarts."""

from __future__ import annotations

import numpy as np

from sremarathon_env.alerts import PromQLEngine
from sremarathon_env.alerts import values as V
from sremarathon_env.alerts.values import intern_pairs
from sremarathon_env.telemetry.store import MetricStore


def test_row_label_sets_equal_their_definition_and_share_pairs():
    rng = np.random.default_rng(0)
    store = MetricStore(step_s=15.0)
    fam = store.family("kube_pod_info", ("namespace", "pod", "node", "created_by"))
    rows = [(str(rng.choice(["ob", "tt"])), f"p{int(rng.integers(50))}", str(rng.choice(["n1", "n2", ""])),
             str(rng.choice(["rs-a", "rs-b"]))) for _ in range(200)]
    rows = list(dict.fromkeys(rows))
    fam.rows(rows)
    eng = PromQLEngine(store)
    info, _ = eng._row_info(fam, len(fam))
    names = ("__name__",) + fam.label_names
    by_pair = {}
    for (va, lb, _), lv in zip(info, rows):
        want = tuple(sorted((n, v) for n, v in zip(names, (fam.name,) + lv) if v != ""))
        assert lb == want
        for p in lb:
            assert by_pair.setdefault(p, p) is p   # (one object per distinct pair)


def test_label_replace_and_matching_results_equal_their_definitions():
    eng = PromQLEngine(MetricStore(step_s=15.0))
    labels = [(("__name__", "m"), ("pod", f"svc{i % 3}-abc{i}"), ("x", "1")) for i in range(30)]
    out = eng._label_replace(labels, "service", "$1", "pod", "(svc[0-9])-.*")
    for lb, o in zip(labels, out):
        d = dict(lb)
        d["service"] = lb[1][1].split("-")[0]
        assert o == tuple(sorted(d.items()))
    assert len({id(p) for o in out for p in o if p[0] == "service"}) == 3


def test_intern_record_is_bounded(monkeypatch):
    monkeypatch.setattr(V, "PAIRS_MAX", 50)
    for i in range(500):
        lb = intern_pairs([("a", str(i)), ("b", "x")])
        assert lb == (("a", str(i)), ("b", "x"))
        assert len(V._PAIRS) <= 51 + 2


def test_intern_values_equal_intern_pairs_across_restarts(monkeypatch):
    monkeypatch.setattr(V, "PAIRS_MAX", 60)
    rng = np.random.default_rng(3)
    shapes = [("__name__", "container", "namespace", "pod"), ("__name__", "namespace", "node", "pod", "resource"),
              ("__name__", "pod")]
    made = restarts = 0
    for step in range(400):
        names = shapes[int(rng.integers(len(shapes)))]
        by = V.value_pairs(names)
        assert by == V.value_pairs(names) and all(a is b for a, b in zip(by, V.value_pairs(names)))
        values = tuple(f"{nm}-{int(rng.integers(40 if nm == 'pod' else 4))}" for nm in names)
        before = len(V._PAIRS)
        sd = V.pairs_table().setdefault   # (starts the record again where it is full)
        restarts += len(V._PAIRS) < before
        got = V.intern_values(names, by, values, sd)
        assert got == tuple(zip(names, values))
        for d, v, p in zip(by, values, got):
            assert d[v] is p is V._PAIRS[p]   # (the kept pairs: one object per distinct pair)
        if len(V._PAIRS) <= V.PAIRS_MAX:   # (intern_pairs does not start the record again: the same objects)
            assert all(a is b for a, b in zip(got, intern_pairs(list(zip(names, values)))))
        made += 1
    assert restarts   # (the record started again, the per-name dicts with it)
    assert sum(map(len, V._PAIRS_BY_NAME.values())) <= len(V._PAIRS)
