"""`util.canonical` (made part by part, long texts escaped once) gives `canonical_plain`'s text (``json.dumps``) for
the objects the twin hashes (a deploy's commit body: the service's whole tree) and for anything else it is given."""

import math
import random

from sremarathon_env.backends.sim import util
from sremarathon_env.backends.sim.util import canonical, canonical_plain


class _Odd:
    def __str__(self) -> str:
        return "odd \u00e9 \"object\""


def _text(rng: random.Random, n: int) -> str:
    alphabet = 'ab \n\t"\\/\u00e9\u4e2d\U0001f600{}:,[]\x00\x1f'
    return "".join(rng.choice(alphabet) for _ in range(n))


def _value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(12 if depth < 3 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.randint(-10**12, 10**12)
    if kind == 3:
        return rng.choice([rng.uniform(-1e6, 1e6), 0.1, -0.0, 1e300, math.inf, -math.inf, math.nan, 3.0])
    if kind == 4:
        return _text(rng, rng.randrange(0, 40))
    if kind == 5:
        return _text(rng, rng.choice([util.LONG_TEXT - 1, util.LONG_TEXT, 2000]))
    if kind == 6:
        return _Odd()
    if kind == 7:
        return (rng.randrange(5), _text(rng, 3))   # a tuple: a JSON list, as json.dumps writes it
    if kind in (8, 9):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    if kind == 10:
        return {_text(rng, rng.randrange(0, 8)): _value(rng, depth + 1) for _ in range(rng.randrange(6))}
    return {rng.choice([1, 2.5, None, True]): _value(rng, depth + 1)}   # keys json.dumps turns into strings


def test_canonical_is_json_dumps():
    rng = random.Random(7)
    for _ in range(3000):
        obj = _value(rng)
        assert canonical(obj) == canonical_plain(obj)


def test_canonical_commit_body_twice_and_after_the_cache_clears(monkeypatch):
    """A deploy's body: the same long texts again (escaped once, then taken as kept), and past the cache's bound."""
    rng = random.Random(1)
    tree = {f"src/f{i}.go": _text(rng, 3000) for i in range(5)}
    body = ["0" * 40, "dev", "fix", 120.0, tree, {"A": "1", "B": "x"}, None]
    assert canonical(body) == canonical_plain(body)
    assert canonical(body) == canonical_plain(body)
    monkeypatch.setattr(util, "MAX_TEXT_JSON", 2)
    for i in range(6):
        tree[f"src/new{i}.go"] = _text(rng, 500)
        assert canonical(body) == canonical_plain(body)
    assert len(util._TEXT_JSON) <= 2
