"""Label sets made from store rows (``PromQLEngine._row_info``), by ``label_replace`` and by vector matching
(``vectorops._pairs``) hold one kept object per distinct (name, value) pair (``values.intern_pairs``): the label
sets equal their definitions (the sorted pairs without empty values; ``tuple(sorted(d.items()))``), equal pairs
are one object, and the record is bounded (``PAIRS_MAX``)."""

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
