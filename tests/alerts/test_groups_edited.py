"""The group index of a long label list recorded as made from an earlier one (rows removed, then inserted) is taken by
editing the earlier list's index (``vectorops._groups_edited``); it equals the definition (keys in order of first
appearance, each row's key's number) on random edits: removed first members, new keys before old ones, groups
emptied, duplicates, and chains of edits."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.alerts import vectorops as VO
from sremarathon_env.alerts.values import Vec, note_grown


def _definition(labels, without, grouping):
    gset = set(grouping)
    index: dict = {}
    gid = []
    for lb in labels:
        k = (tuple(x for x in lb if x[0] != "__name__" and x[0] not in gset) if without
             else tuple(x for x in lb if x[0] in gset))
        gid.append(index.setdefault(k, len(index)))
    return list(index), gid


@pytest.mark.parametrize("without", [False, True])
def test_edited_group_index_equals_definition(without):
    rng = np.random.default_rng(11 + without)
    grouping = ("svc",)
    used = {"edited": 0}
    real = VO._groups_edited

    def spy(*a):
        out = real(*a)
        used["edited"] += out is not None
        return out

    VO._groups_edited = spy
    try:
        for chain in range(30):
            n0 = int(rng.integers(VO.GROUPS_EDIT_MIN, VO.GROUPS_EDIT_MIN + 60))
            G = int(rng.integers(1, 12))
            labels = [(("__name__", "m"), ("pod", f"c{chain}-{i}"), ("svc", f"s{int(rng.integers(G))}"))
                      for i in range(n0)]
            tag = int(rng.integers(1 << 30))
            for step in range(12):
                keys, gid = VO.groups_of(labels, without, grouping)
                want_k, want_g = _definition(labels, without, grouping)
                assert keys == want_k and gid.tolist() == want_g and gid.dtype == np.intp, (chain, step)
                keep = (rng.random(len(labels)) > rng.choice([0.0, 0.05, 0.3])).tolist() if rng.random() < 0.6 else None
                kept = list(labels) if keep is None else [lb for lb, k in zip(labels, keep) if k]
                n_new = int(rng.integers(0, 8))
                pos = sorted(rng.choice(len(kept) + n_new, size=n_new, replace=False).tolist()) if n_new else []
                new = list(kept)
                for j, p in enumerate(pos):
                    r = rng.random()
                    svc = f"s{int(rng.integers(G + 3))}" if r < 0.8 else f"new{tag}-{step}-{j}"
                    if r > 0.95 and kept:
                        new.insert(p, kept[int(rng.integers(len(kept)))])   # a duplicate label set
                    else:
                        new.insert(p, (("__name__", "m"), ("pod", f"c{chain}-{step}-{j}"), ("svc", svc)))
                note_grown(new, labels, pos, keep)
                labels = new
    finally:
        VO._groups_edited = real
    assert used["edited"] > 100


def test_short_lists_take_the_loop():
    labels = [(("svc", f"s{i % 3}"),) for i in range(VO.GROUPS_EDIT_MIN - 1)]
    keys, gid = VO.groups_of(labels, False, ("svc",))
    grown = labels + [(("svc", "s9"),)]
    note_grown(grown, labels, [len(labels)])
    assert VO._groups_edited(grown, False, ("svc",), ("groups", False, ("svc",))) is not None
    k2, g2 = VO.groups_of(grown, False, ("svc",))
    assert (k2, g2.tolist()) == _definition(grown, False, ("svc",))
    assert VO.aggregate("count", Vec(grown, np.ones((len(grown), 1)), np.ones((len(grown), 1), bool)), None, False,
                        ("svc",)).labels == k2
