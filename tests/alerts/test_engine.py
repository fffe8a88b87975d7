"""PromQL engine: API shape, errors, limits, staleness and lookback, vector matching."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sremarathon_env.alerts import Limits, PromQLEngine, QueryError
from sremarathon_env.alerts.engine import _sort_key
from sremarathon_env.telemetry.store import MetricStore

from .synthetic import build_store


@pytest.fixture(scope="module")
def eng():
    return PromQLEngine(build_store())


def test_instant_vector_shape_matches_http_api(eng):
    res = eng.instant('up{job="api"}', 600)
    assert res["resultType"] == "vector"
    assert res["result"] == [
        {"metric": {"__name__": "up", "instance": "a:80", "job": "api"}, "value": [600, "1"]},
        {"metric": {"__name__": "up", "instance": "b:80", "job": "api"}, "value": [600, "1"]},
    ]
    assert eng.instant("1 + 2", 10.5) == {"resultType": "scalar", "result": [10.5, "3"]}
    assert eng.instant('"hi"', 1)["resultType"] == "string"
    assert eng.instant('up{instance="c:80"}[1m]', 600)["result"][0]["values"] == [[540, "1"], [555, "1"], [570, "1"], [585, "1"], [600, "1"]]


def test_range_query_is_matrix_and_agrees_with_instant(eng):
    res = eng.range('sum by (job) (rate(http_requests_total[5m]))', 600, 900, 60)
    assert res["resultType"] == "matrix"
    for series in res["result"]:
        for t, v in series["values"]:
            inst = eng.instant('sum by (job) (rate(http_requests_total[5m]))', t)["result"]
            assert {"metric": series["metric"], "value": [t, v]} in inst


def test_parse_errors_carry_the_parser_message(eng):
    with pytest.raises(QueryError) as e:
        eng.instant("sum(rate(x[5m])", 0)
    assert e.value.kind == "bad_data" and "unclosed left parenthesis" in e.value.message
    body = eng.query("foo(bar)", t=0)
    assert body["status"] == "error" and body["errorType"] == "bad_data" and "foo" in body["error"]
    assert eng.query("rate(up[5m])", start=0, end=10, step=0)["errorType"] == "bad_data"
    assert eng.query('up[5m]', start=0, end=60, step=15)["errorType"] == "bad_data"


def test_too_expensive_queries_are_refused():
    small = PromQLEngine(build_store(), Limits(max_series=3))
    with pytest.raises(QueryError) as e:
        small.instant("http_requests_total", 600)
    assert e.value.kind == "too_expensive"
    pts = PromQLEngine(build_store(), Limits(max_points=10))
    assert pts.query("up", start=0, end=600, step=15)["errorType"] == "too_expensive"
    steps = PromQLEngine(build_store(), Limits(max_steps=5))
    assert steps.query("up", start=0, end=600, step=15)["errorType"] == "bad_data"
    sub = PromQLEngine(build_store(), Limits(max_subquery_steps=100))
    assert sub.query("max_over_time(up[1h:1s])", t=600)["errorType"] == "too_expensive"


def test_execution_errors_for_many_to_many_matches(eng):
    body = eng.query("mem_bytes / on(app) pod_info", t=600)
    assert body["status"] == "error" and body["errorType"] == "execution"


def _one_series(values):
    st = MetricStore(step_s=15.0)
    fam = st.family("g", ("a",))
    rows = fam.rows([("x",)])
    for k, v in enumerate(values):
        st.write(fam, rows, k, np.array([v]))
    return st


def test_staleness_and_lookback():
    vals = [1.0, 2.0, np.nan, np.nan, 5.0] + [np.nan] * 30
    stale = PromQLEngine(_one_series(vals))
    gaps = PromQLEngine(_one_series(vals), Limits(stale_on_gap=False))
    # a missing sample after a present one is a staleness marker: nothing at t=30
    assert stale.instant("g", 30)["result"] == []
    assert gaps.instant("g", 30)["result"][0]["value"] == [30, "2"]
    # with gaps the last sample stays visible for exactly 5 minutes (inclusive), then disappears
    assert gaps.instant("g", 60 + 300)["result"][0]["value"][1] == "5"
    assert gaps.instant("g", 60 + 301)["result"] == []
    # beyond the last scraped tick, the lookback applies in both modes
    st = _one_series([1.0] * 5)
    e = PromQLEngine(st)
    assert e.instant("g", 60 + 300)["result"][0]["value"][1] == "1"
    assert e.instant("g", 60 + 300.5)["result"] == []


def test_rate_extrapolation_and_counter_reset():
    st = _one_series([0, 10, 20, 30, 5, 15, 25])  # reset at tick 4
    e = PromQLEngine(st)
    inc = float(e.instant("increase(g[90s])", 90)["result"][0]["value"][1])
    # raw increase 30 + 25 = 55 over 90 s of samples; Prometheus extrapolates to the zero point only
    assert inc == pytest.approx(55.0)
    assert e.instant("resets(g[90s])", 90)["result"][0]["value"][1] == "1"
    assert float(e.instant("irate(g[1m])", 90)["result"][0]["value"][1]) == pytest.approx(10 / 15)


def test_label_replace_derives_service_from_pod_name(eng):
    res = eng.instant('label_replace(mem_bytes, "service", "$1", "pod", '
                      '"(.+)-[bcdfghjklmnpqrstvwxz2456789]{10}-[bcdfghjklmnpqrstvwxz2456789]{5}")', 300)
    by_pod = {r["metric"]["pod"]: r["metric"].get("service") for r in res["result"]}
    assert by_pod["cart-7d9f8b6c5d-x2k4q"] == "cart"
    # 'a' and '3' are not in the ReplicaSet hash alphabet: no match, the label is not added
    assert by_pod["frontend-5c6d7f8b9c-ab3cd"] is None


def test_absent_and_scalar_and_vector(eng):
    assert eng.instant('absent(nope{job="x"})', 60)["result"] == [{"metric": {"job": "x"}, "value": [60, "1"]}]
    assert eng.instant("absent(up)", 60)["result"] == []
    assert eng.instant("scalar(up)", 60)["result"][1] == "NaN"
    assert eng.instant("vector(2) * 3", 60)["result"] == [{"metric": {}, "value": [60, "6"]}]


_LABEL_TEXT = st.text(alphabet=st.sampled_from(["a", "b", "z", "_", "\x00", "\x01", "\x02", "é", "\u4e2d"]), min_size=1, max_size=4)
_LABEL_SET = st.dictionaries(st.text(alphabet="abz_", min_size=1, max_size=3), _LABEL_TEXT, max_size=4).map(
    lambda d: tuple(sorted(d.items())))


@settings(max_examples=300, deadline=None)
@given(st.lists(_LABEL_SET, max_size=12))
def test_sort_key_orders_label_sets_as_their_tuples(label_sets):
    """Selectors sort series through ``_sort_key`` strings; the order must be the label tuples' order."""
    keys = [_sort_key(lb) for lb in label_sets]
    for lb, k in zip(label_sets, keys):
        assert (k is None) == any(c in "\x00\x01" for kv in lb for c in "".join(kv))
    ok = [i for i, k in enumerate(keys) if k is not None]
    assert sorted(ok, key=keys.__getitem__) == sorted(ok, key=label_sets.__getitem__)


def test_selector_keeps_its_result_when_new_series_do_not_match():
    store = MetricStore(step_s=15.0)
    fam = store.family("kube_pod_status_phase", ("pod", "phase"))
    store.write(fam, fam.rows([("b", "Running"), ("a", "Running")]), 0, np.array([1.0, 1.0]))
    eng = PromQLEngine(store)
    sel = eng.compile('kube_pod_status_phase{phase="Running"}')
    ctx = eng.new_context(np.array([0], dtype=np.int64), 15000)
    parts, labels = eng._select(sel, ctx)
    assert [dict(lb)["pod"] for lb in labels] == ["a", "b"]  # sorted by label set
    store.write(fam, fam.rows([("c", "Pending")]), 1, np.array([1.0]))
    assert eng._select(sel, ctx)[1] is labels  # a series it does not match: the same objects
    store.write(fam, fam.rows([("0", "Running")]), 1, np.array([1.0]))
    parts2, labels2 = eng._select(sel, ctx)
    assert [dict(lb)["pod"] for lb in labels2] == ["0", "a", "b"]
    assert eng.instant('kube_pod_status_phase{phase="Running"}', 15)["result"][0]["metric"]["pod"] == "0"


def test_select_growth_merges_new_rows_like_a_fresh_sort():
    """A selector whose family keeps gaining rows (before, between and after the existing ones, several per
    call) gives the labels and row order of a selection made from scratch, and records the new rows' places."""
    from sremarathon_env.alerts.plan import _flatten
    from sremarathon_env.alerts.values import grown_from

    def rows_in_order(parts):
        flat, perm = _flatten(parts)
        rows = np.concatenate([r for _, r in flat]) if flat else np.zeros(0, dtype=np.intp)
        return (rows if perm is None else rows[perm]).tolist()

    rng = np.random.default_rng(8)
    store = MetricStore(step_s=15.0)
    fam = store.family("m", ("pod", "phase"))
    eng = PromQLEngine(store)
    exprs = ['m{phase="Running"}', 'm', 'm{pod=~"b.*|z.*"}']
    ctx = eng.new_context(np.zeros(1, dtype=np.int64), 15000)
    seen = set()
    for step in range(40):
        for _ in range(int(rng.integers(0, 4))):
            pod = "".join(rng.choice(list("abz09-"), size=int(rng.integers(1, 5))))
            for phase in ("Running", "Pending")[: int(rng.integers(1, 3))]:
                if (pod, phase) not in seen:
                    seen.add((pod, phase))
                    fam.row((pod, phase))
        fresh = PromQLEngine(store)
        for e in exprs:
            before = eng._sel_result.get(tuple((m.name, m.op, m.value) for m in eng.compile(e).matchers))
            parts, labels = eng._select(eng.compile(e), ctx)
            fparts, flabels = fresh._select(fresh.compile(e), ctx)
            assert labels == flabels == sorted(flabels), (e, step)
            assert rows_in_order(parts) == rows_in_order(fparts), (e, step)
            g = grown_from(labels)
            if before is not None and labels is not before[2]:
                assert g is not None and g[0] is before[2]
                rest = [lb for i, lb in enumerate(labels) if i not in set(g[1])]
                assert rest == before[2] and len(labels) == len(before[2]) + len(g[1])
        ctx.series = 0


def test_memo_keeps_entries_in_use_and_drops_stale_ones():
    """The identity memo has two generations: an entry hit in every generation stays (its function is not run
    again), one never used again is gone after two turns, and results never depend on which."""
    from sremarathon_env.alerts import values as VA

    calls = []
    hot = [("a",)]
    def f(x):
        calls.append(x)
        return len(x)
    assert VA.memo(("t-hot",), (hot,), lambda: f(hot)) == 1
    cold = [[("c", str(i))] for i in range(3)]
    for c in cold:
        VA.memo(("t-cold",), (c,), lambda c=c: f(c))
    fill = [[("f", str(i))] for i in range(2 * VA.MEMO_GENERATION + 10)]
    for k, x in enumerate(fill):
        VA.memo(("t-fill",), (x,), lambda x=x: 0)
        if k % 100 == 0:   # the hot entry is used all along
            assert VA.memo(("t-hot",), (hot,), lambda: f(hot)) == 1
    assert calls.count(hot) == 1
    assert VA.memo_get(("t-cold",), (cold[0],)) is VA._NONE       # not used for two generations: dropped
    assert len(VA._MEMO) + len(VA._MEMO_OLD) <= 2 * VA.MEMO_GENERATION + 2
    assert VA.memo(("t-cold",), (cold[0],), lambda: f(cold[0])) == 1 and calls.count(cold[0]) == 2


def _expand_by_definition(template, m):
    """Go regexp's Expand, as its documentation states it, by one regular-expression substitution (independent of
    the engine's template parser): ``$$`` is a literal ``$``; ``${name}`` and ``$name`` (the longest run of letters,
    digits and underscores) are the group of that number or name, or "" where there is none; any other ``$`` is
    itself."""
    import re

    def group(name):
        try:
            return (m.group(int(name)) if name.isdigit() else m.group(name)) or ""
        except (IndexError, KeyError, re.error):
            return ""

    return re.sub(r"\$(?:(\$)|\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))",
                  lambda x: "$" if x.group(1) else group(x.group(2) or x.group(3)), template)


def test_memo_answers_like_a_cache_keyed_by_identity(monkeypatch):
    """The memo (integer keys of one-input entries, tuple keys past TAGS_MAX or for several inputs, results and
    held inputs in parallel generations) gives what a plain cache keyed by (tag, input identities) gives, while
    entries are dropped by generation turnover and new lists take the identities of dropped ones."""
    import random

    from sremarathon_env.alerts import values as VA
    for name, value in (("_MEMO", {}), ("_MEMO_OLD", {}), ("_MEMO_HELD", {}), ("_MEMO_HELD_OLD", {}),
                        ("_TAG_NO", {}), ("TAGS_MAX", 3), ("MEMO_GENERATION", 25)):
        monkeypatch.setattr(VA, name, value)
    rnd = random.Random(7)
    tags = [("t", i, ("a", "b")[i % 2]) for i in range(6)]   # 3 numbered tags, 3 with tuple keys
    lists: list = [[("x", str(i))] for i in range(20)]
    calls = 0
    for step in range(3000):
        if rnd.random() < 0.05:   # drop a list and make a new one (it may reuse a dropped identity)
            lists[rnd.randrange(len(lists))] = [("x", str(step))]
        tag = rnd.choice(tags)
        ins = tuple(rnd.sample(lists, rnd.choice((1, 1, 1, 2))))
        want = (tag, tuple(map(tuple, ins)))   # a pure function of the tag and the inputs' contents

        def fn(tag=tag, ins=ins):
            nonlocal calls
            calls += 1
            return None if tag[1] == 5 else (tag, tuple(map(tuple, ins)))
        got = VA.memo(tag, ins, fn)
        assert got == (None if tag[1] == 5 else want)
        assert VA.memo_get(tag, ins) == got
        assert len(VA._MEMO) <= VA.MEMO_GENERATION and len(VA._MEMO_OLD) <= VA.MEMO_GENERATION
        assert VA._MEMO.keys() == VA._MEMO_HELD.keys() and VA._MEMO_OLD.keys() == VA._MEMO_HELD_OLD.keys()
    assert len(VA._TAG_NO) == 3 and 0 < calls < 3000
    assert VA.memo_get(("never",), (lists[0],)) is VA._NONE


def test_template_expansion_equals_its_definition():
    import re

    from sremarathon_env.alerts.engine import _go_expand

    rng = np.random.default_rng(9)
    pieces = ["$", "$$", "${", "}", "{", "1", "2", "0", "01", "x", "svc", "_", "-", "a$", "${1}", "${svc}", "$svc",
              "${9}", "$1x", "é", " "]
    rx = re.compile(r"(?P<svc>[a-z]+)-(\d)?(x*)", re.DOTALL)
    for value in ["cart-1xx", "ads-", "frontend-7"]:
        m = rx.fullmatch(value)
        assert m is not None
        for _ in range(400):
            template = "".join(rng.choice(pieces, size=int(rng.integers(0, 7))).tolist())
            assert _go_expand(template, m) == _expand_by_definition(template, m), repr(template)
            assert _go_expand(template, m) == _expand_by_definition(template, m), repr(template)   # parsed once


def test_match_rows_equals_matching_each_row_by_definition():
    """``match_rows`` (a ``__name__`` matcher decided once per family, the others per row on the label values)
    selects the rows whose name and labels pass every matcher, read one by one (a missing label reads "")."""
    import re

    from sremarathon_env.alerts import engine as EN
    from sremarathon_env.alerts.syntax import Matcher

    rng = np.random.default_rng(5)
    values = ["a", "", "b", "pod-1", "pod-2"]
    for case in range(80):
        names = tuple(rng.choice(["pod", "zeta", "le", "container"], size=int(rng.integers(1, 4)), replace=False).tolist())
        store = MetricStore(step_s=15.0)
        fname = str(rng.choice(["up", "kube_pod_info", "m_total"]))
        fam = store.family(fname, names)
        fam.rows(sorted({tuple(rng.choice(values, size=len(names)).tolist()) for _ in range(int(rng.integers(1, 12)))}))
        info, pos = PromQLEngine(store)._row_info(fam, len(fam))
        ms = []
        for _ in range(int(rng.integers(0, 4))):
            lname = str(rng.choice(["__name__", "pod", "zeta", "absent"]))
            op = str(rng.choice(["=", "!=", "=~", "!~"]))
            val = str(rng.choice(["up", "kube_.*", "a", "", "pod-.*", "m_total"]))
            ms.append(Matcher(lname, op, val, re.compile(val) if "~" in op else None))
        lo = int(rng.integers(0, len(fam)))
        rows, lbs, keys = [], [], []
        EN.match_rows(info, pos, ms, lo, len(fam), rows, lbs, keys, fam.name)
        want = []
        for r in range(lo, len(fam)):
            d = dict(zip(("__name__",) + names, (fam.name,) + tuple(fam._label_values[r])))
            if all(m.matches(d.get(m.name, "")) for m in ms):
                want.append(r)
        assert rows == want and lbs == [info[r][1] for r in want] and keys == [info[r][2] for r in want]


def test_row_items_equal_their_definition():
    """``_row_info`` makes each row's (label values, label set, sort key) with a per-family template; the
    items equal the definition: the sorted non-empty (name, value) pairs and ``_sort_key`` of them (None where a
    value holds \\x00 or \\x01), for label names with ``%`` and values with format characters."""
    from sremarathon_env.alerts import engine as EN

    rng = np.random.default_rng(11)
    values = ["a", "", "b%s", "%", "x\x00", "y\x01z", "pod-1", "%%d", "{0}", "\\", "é"]
    for case in range(60):
        names = tuple(rng.choice(["pod", "a%s", "zeta", "le", "container", "b%"], size=int(rng.integers(1, 4)),
                                 replace=False).tolist())
        store = MetricStore(step_s=15.0)
        fam = store.family(f"m{case}", names)
        rows = {tuple(rng.choice(values, size=len(names)).tolist()) for _ in range(int(rng.integers(1, 12)))}
        fam.rows(sorted(rows))
        EN._ROW_ITEMS.clear()
        EN._ROW_ITEMS_OLD.clear()
        info, pos = PromQLEngine(store)._row_info(fam, len(fam))
        for lv, (vals, lb, key) in zip(fam._label_values, info):
            assert vals == tuple(lv)
            want = tuple(sorted((k, v) for k, v in zip(("__name__",) + names, (fam.name,) + vals) if v != ""))
            assert lb == want and key == _sort_key(want)
        assert all(vals[pos[n]] == vals[i] for vals, _, _ in info for i, n in enumerate(names))
        assert "__name__" not in pos
