"""Small deterministic helpers for the twin: seeded generators, k8s-style names, time, math.

>>> rng = child_rng(7, "pods", "frontend")
>>> int(rng.integers(0, 100)) == int(child_rng(7, "pods", "frontend").integers(0, 100))
True
>>> iso(90.0)
'2026-01-01T00:01:30Z'
>>> round(float(norm_cdf(np.array([0.0]))[0]), 6)
0.5
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
import json
from datetime import datetime, timedelta, timezone

import numpy as np

#: The alphabet Kubernetes uses for generated name suffixes (no vowels, no confusable digits).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: Sim time 0 rendered as an ISO timestamp (objects and events show wall-like times).
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)


def key_ints(*keys: object) -> list[int]:
    """Stable 32-bit words from arbitrary keys (strings hashed with sha256, never Python's hash())."""
    return _words("\x1f".join(str(k) for k in keys))


def _words(joined: str) -> list[int]:
    """`key_ints` of the keys whose texts joined by U+001F are ``joined``."""
    h = hashlib.sha256(joined.encode()).digest()
    return [int.from_bytes(h[i:i + 4], "little") for i in range(0, 16, 4)]


def child_rng(seed: int, *keys: object) -> np.random.Generator:
    """A generator derived from the run seed and a path of names; independent per key path. (The entropy
    words go in as one uint32 array: a list of ints below 2**32 is coerced to that very array, one int at
    a time.)"""
    return _rng_of(seed, "\x1f".join(str(k) for k in keys))


def _rng_of(seed: int, joined: str) -> np.random.Generator:
    """`child_rng` of the seed and the keys whose texts joined by U+001F are ``joined``: the entropy words are the
    seed's low 32 bits and `_words` (`_rng_of_plain`'s array: the little-endian words read from the bytes at once)."""
    words = np.frombuffer((int(seed) & 0xFFFFFFFF).to_bytes(4, "little") + hashlib.sha256(joined.encode()).digest()[:16],
                          dtype="<u4")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))


def _rng_of_plain(seed: int, joined: str) -> np.random.Generator:
    """The definition of `_rng_of` (tests)."""
    words = np.array([int(seed) & 0xFFFFFFFF, *_words(joined)], dtype=np.uint32)
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))


class KeyedDraws:
    """The draws of ``child_rng(seed, *keys)`` (``uniform`` only), the same values, with a record of them in
    ``book``: a draw that the record holds as the same call at the same position (the same arguments after the
    same earlier calls) is served from it, anything else comes from the generator itself (built on the first
    such draw and advanced past the served ones by repeating their calls). ``keep``: this object's calls
    extend the record while they follow it from its start (a generator's sequence of calls and values is
    valid for anyone who makes the same calls). The twin keeps the record of a taped (reference) run in its
    tape, and a twin of the same seed that follows it builds no generator for the kubelet moments it meets
    there (`Cluster._draws`). A book maps (seed & 0xFFFFFFFF, the keys' texts joined as `child_rng` hashes
    them) to the flat tuple (low, high, value, ...) of the recorded calls (floats: nothing for the garbage
    collector to walk).

    >>> book = {}
    >>> x = KeyedDraws(book, True, 7, "kubelet", "p-1", 0, "start", 12.5).uniform(0.8, 1.2)
    >>> follower = KeyedDraws(book, False, 7, "kubelet", "p-1", 0, "start", 12.5)
    >>> follower.uniform(0.8, 1.2) == x == child_rng(7, "kubelet", "p-1", 0, "start", 12.5).uniform(0.8, 1.2)
    True
    """

    __slots__ = ("_seed", "_book", "_key", "_text", "_log", "_i", "_rng", "_own")

    def __init__(self, book: dict, keep: bool, seed: int, *keys: object):
        self._seed = seed
        self._book = book
        self._text = "\x1f".join(map(str, keys))   # (what `child_rng` hashes besides the seed)
        self._key = (int(seed) & 0xFFFFFFFF, self._text)
        #: (low, high, value) of each call of the record's sequence for this generator, flat
        self._log: tuple = book.get(self._key, ())
        self._i = 0         # calls made so far
        self._rng = None    # the generator, once a draw is not in the record
        self._own = bool(keep)   # the calls so far are the record's and this object keeps it: its calls extend it

    def uniform(self, low: float, high: float) -> float:
        j = 3 * self._i
        self._i += 1
        log = self._log
        if self._rng is None:
            if j < len(log) and log[j] == low and log[j + 1] == high:
                return log[j + 2]
            rng = self._rng = _rng_of(self._seed, self._text)
            for m in range(0, j, 3):   # the calls served so far: the generator's state after them
                rng.uniform(log[m], log[m + 1])
            self._own = self._own and j == len(log)
        v = self._rng.uniform(low, high)
        if self._own:   # the record's calls and this one: a sequence of this generator's
            self._log = self._book[self._key] = log + (low, high, v)
        return v


@lru_cache(maxsize=1 << 16)
def suffix(seed: int, *keys: object, n: int = 5) -> str:
    """``n`` name characters drawn deterministically from the seed and the keys."""
    h = hashlib.sha256(("%d\x1f" % seed + "\x1f".join(str(k) for k in keys)).encode()).digest()
    return "".join(NAME_ALPHABET[b % len(NAME_ALPHABET)] for b in h[:n])


def template_hash(template: dict) -> str:
    """A 10-character pod-template hash (as in a ReplicaSet name) of a JSON-able template."""
    h = hashlib.sha256(json.dumps(template, sort_keys=True, separators=(",", ":")).encode()).digest()
    return "".join(NAME_ALPHABET[b % len(NAME_ALPHABET)] for b in h[:10])


@lru_cache(maxsize=1 << 16)
def iso(t: float) -> str:
    """Sim seconds as an ISO-8601 UTC timestamp (second resolution, like the Kubernetes API)."""
    return (EPOCH + timedelta(seconds=int(np.floor(t)))).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_ms(t: float) -> str:
    return (EPOCH + timedelta(milliseconds=int(np.floor(t * 1000)))).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def norm_cdf(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF, vectorised (Abramowitz-Stegun 7.1.26 erf; |error| < 1.5e-7): `norm_cdf_plain`'s
    floats, computed in place (the same IEEE operations on the same operands, products and sums with their
    operands swapped where that saves a temporary: both are commutative)."""
    x = np.asarray(x, dtype=float)
    z = np.abs(x)
    z *= 0.7071067811865476
    t = np.multiply(z, 0.3275911)
    t += 1.0
    np.divide(1.0, t, out=t)
    poly = np.multiply(t, 1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += c
        poly *= t
    e = np.negative(z)
    e *= z
    np.exp(e, out=e)
    e *= poly
    np.subtract(1.0, e, out=e)                 # erf
    out = np.sign(x)
    out *= e
    out += 1.0
    out *= 0.5
    return out


def norm_cdf_plain(x: np.ndarray) -> np.ndarray:
    """The definition of `norm_cdf` (tests)."""
    z = np.abs(x) * 0.7071067811865476
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-z * z)
    return 0.5 * (1.0 + np.sign(x) * erf)


def parse_go_duration(text: str) -> float | None:
    """Milliseconds of a Go duration string ('5.5s', '300ms', '1m30s'); '' -> 0; invalid -> None."""
    import re

    text = text.strip()
    if text == "" or text == "0":
        return 0.0
    units = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0, "h": 3600000.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        return None
    return float(sum(float(a) * units[b] for a, b in parts))


def canonical(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def seqsum(start: np.ndarray, inc: np.ndarray) -> np.ndarray:
    """Running totals ``start + inc[0]``, ``+ inc[1]``... added one tick at a time (the same floats
    whatever the block size), with a leading tick axis: `seqsum_plain`'s floats. A few ticks, or wide
    rows, are added row by row (one contiguous addition per tick: numpy's cumsum along the leading axis
    of a wide array runs a short strided loop per column, ~10x slower for 3000 columns)."""
    K = len(inc)
    if K == 1:   # one tick: the single sum the running total makes
        return np.add(start, inc)
    if K > SEQSUM_ROWS and inc[0].size < SEQSUM_WIDTH:
        return seqsum_plain(start, inc)
    out = np.empty(inc.shape, dtype=np.result_type(start, inc))
    np.add(start, inc[0], out=out[0])
    for k in range(1, K):
        np.add(out[k - 1], inc[k], out=out[k])
    return out


#: `seqsum` adds row by row up to this many ticks, or rows of at least SEQSUM_WIDTH values (else cumsum)
SEQSUM_ROWS = 4
SEQSUM_WIDTH = 64


def seqsum_plain(start: np.ndarray, inc: np.ndarray) -> np.ndarray:
    """The definition of `seqsum`: a cumulative sum along the tick axis, ``start`` first."""
    return np.cumsum(np.concatenate([np.asarray(start)[None], inc], axis=0), axis=0)[1:]
