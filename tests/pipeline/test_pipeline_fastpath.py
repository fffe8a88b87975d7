"""`BuildPipeline.build_change` skips writing and applying the change's diff where `_round_trips` vouches that
applying it gives the changed tree: its results must be those of `build` on ``make_diff`` (the definition),
for every catalogue change of every app and for changes that stress the diff (no final newline, empty files,
carriage returns and other line boundaries, created files, odd paths, repetitive lines, big files)."""

import numpy as np
import pytest

from apps import load_app
from apps.sources import initial_tree
from faults.catalogue import catalogue_apps
from sremarathon_env.pipeline import BuildPipeline, apply_diff, make_diff
from sremarathon_env.pipeline import build as B
from tests.sourcecases import SourcesOf, deploy_changes


def _result(r):
    return (r.ok, r.stage_failed, r.log, r.changed, r.tests, list(r.files.items()))


def _both_ways(pipe, service, base, changed, monkeypatch):
    """build_change's result with the fast path allowed and with it refused (cache emptied before each)."""
    B._CHANGES.clear()
    fast = _result(pipe.build_change(SourcesOf(service, base), service, changed))
    with monkeypatch.context() as m:
        m.setattr(B, "_round_trips", lambda *a: False)
        B._CHANGES.clear()
        slow = _result(pipe.build_change(SourcesOf(service, base), service, changed))
    B._CHANGES.clear()
    direct = _result(pipe.build(service, base, make_diff(base, {**base, **changed})))
    assert slow == direct
    return fast, slow


#: (app, service, initial tree, the changed files' new texts) for every catalogue change
_CASES = [(app, s, tree, {p: changed[p] for p in set(paths)}) for app, s, tree, changed, paths in deploy_changes()]


def test_catalogue_changes_build_the_same_both_ways(monkeypatch):
    assert len({c[0].name for c in _CASES}) == len(catalogue_apps()) and len(_CASES) > 50
    vouched = 0
    for app, service, base, changed in _CASES:
        after = {**base, **changed}
        vouched += B._round_trips(base, after, B.changed_paths(base, after))
        fast, slow = _both_ways(BuildPipeline(app), service, base, changed, monkeypatch)
        assert fast == slow, (app.name, service)
    assert vouched > 0.9 * len(_CASES)


_ODD = ["\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "", "\n", "\n\n", " ", "(", "}", "x\n", "\\"]


def _odd_change(tree, rng):
    """One of the changes that stress the diff, on a random file of ``tree``."""
    paths = sorted(tree)
    p = paths[int(rng.integers(len(paths)))]
    text = tree[p]
    lines = text.split("\n")
    k = int(rng.integers(9))
    if k == 0:
        return {p: text.rstrip("\n")}                                     # drop the final newline
    if k == 1:
        return {p: ""}                                                    # empty the file
    if k == 2:
        i = int(rng.integers(len(text) + 1))                              # an odd character somewhere
        return {p: text[:i] + _ODD[int(rng.integers(len(_ODD)))] + text[i:]}
    if k == 3:
        return {p + ".new": text[: int(rng.integers(len(text) + 1))]}    # a created file (maybe empty)
    if k == 4:
        i = int(rng.integers(len(lines)))                                 # duplicate lines (repetitive text)
        return {p: "\n".join(lines[:i] + [lines[i]] * int(rng.integers(1, 6)) + lines[i:])}
    if k == 5:
        i, j = sorted(int(x) for x in rng.integers(len(lines), size=2))   # delete a block
        return {p: "\n".join(lines[:i] + lines[j:])}
    if k == 6:
        return {p: text, paths[0]: tree[paths[0]] + "\n"}                 # an unchanged entry beside a change
    if k == 7:
        return {p: text}                                                  # no change at all
    i = int(rng.integers(len(lines)))                                     # edit a line near the end
    return {p: "\n".join(lines[:i] + [lines[i] + " // x"] + lines[i + 1:])}


def test_odd_changes_build_the_same_both_ways(monkeypatch):
    rng = np.random.default_rng(3)
    for name in catalogue_apps():
        app = load_app(name)
        pipe = BuildPipeline(app)
        services = list(app.service_names)
        for n in range(120):
            service = services[int(rng.integers(len(services)))]
            base = initial_tree(app, service)
            if n % 3 == 0:                                                # a base without final newlines
                base = {p: t.rstrip("\n") for p, t in base.items()}
            changed = _odd_change(base, rng)
            if n % 5 == 0:
                changed = {**changed, **_odd_change(base, rng)}
            fast, slow = _both_ways(pipe, service, base, changed, monkeypatch)
            assert fast == slow, (name, service, changed)


@pytest.mark.parametrize("path", ["a b.go", "a\tb.go", "./a.go", "a//b.go", "../a.go", "/a.go", '"a.go"', "a\nb.go",
                                  "é.go", "a/./b.go"])
def test_odd_paths_are_not_vouched_for(path):
    base = {path: "x\n"}
    assert not B._round_trips(base, {path: "y\n"}, [path])


def test_round_trip_and_size_bound_on_random_texts():
    """Where `_round_trips` vouches, applying the diff gives the changed tree and the diff fits the limit."""
    rng = np.random.default_rng(4)
    alphabet = ["a", "b", "{", "}", " ", "\n", "\n", "\n"]
    vouched = refused = 0
    for n in range(1200):
        size = int(rng.choice([0, 1, 5, 40, 400])) if n % 40 else int(rng.choice([8000, 12000, 30000]))
        a = "".join(alphabet[i] for i in rng.integers(len(alphabet), size=size))
        lines = a.split("\n")
        for _ in range(int(rng.integers(1, 40 if size > 1000 else 4))):
            i = int(rng.integers(len(lines)))
            op = int(rng.integers(3))
            if op == 0:
                lines[i] = lines[i] + "z"
            elif op == 1:
                del lines[i]
                if not lines:
                    lines = [""]
            else:
                lines.insert(i, lines[i])
        b = "\n".join(lines) + ("\n" if rng.integers(2) else "")
        base, after = {"d/f.go": a, "g.go": "k\n"}, {"d/f.go": b, "g.go": "k\n"}
        paths = B.changed_paths(base, after)
        if not paths:
            continue
        diff = make_diff(base, after)
        if B._round_trips(base, after, paths):
            vouched += 1
            assert len(diff) <= B.MAX_DIFF_CHARS
            assert apply_diff(base, diff) == after
        else:
            refused += 1
    assert vouched > 500 and refused > 10


def test_odd_breaks_is_the_splitlines_definition():
    """`_odd_breaks` says whether str.splitlines breaks a text anywhere but at newlines."""
    for c in map(chr, range(0x3000)):
        for text in (f"ab{c}cd\n", f"é{c}\n", c):
            want = len(text.splitlines()) != len(text.split("\n")) - (1 if text.endswith("\n") else 0) or \
                any(x.splitlines() != [x] for x in text.split("\n") if x)
            assert B._odd_breaks(text) == want, repr(c)
