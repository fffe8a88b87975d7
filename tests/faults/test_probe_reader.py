"""`faults.probes.probe_reader` (a probe's check specialised once, what `realise.check_at` runs per tick) gives what
`probe_ok` (the definition) gives: every probe of the three catalogues and one of every kind, on random health reads
that mix plain floats, the threshold itself, zero, negative, NaN, infinite, numpy, integer, string, None and missing
values, random serving revisions and rollout revisions, both artifact verdicts; the memo (``restarts_stable``) ends
the same."""

import math
from typing import get_args

import numpy as np
import pytest

from faults.catalogue import load_catalogue
from faults.model import Probe, ProbeKind
from faults.probes import probe_ok, probe_reader

KEYS = ("rate", "total", "error_ratio", "own_error_ratio", "p95_ms", "own_p95_ms", "degraded_ratio", "ready",
        "desired", "cpu_util", "mem_util", "memory_util", "lag", "queue_lag", "consumer_lag", "restarts")


def _value(rng, threshold):
    pick = int(rng.integers(13))
    if pick == 0:
        return threshold
    if pick == 1:
        return 0.0
    if pick == 2:
        return -float(rng.random())
    if pick == 3:
        return math.nan
    if pick == 4:
        return math.inf
    if pick == 5:
        return np.float64(threshold)
    if pick == 6:
        return int(rng.integers(0, 4))
    if pick == 7:
        return str(threshold)
    if pick == 8:
        return "n/a"
    if pick == 9:
        return None
    if pick == 10:
        return math.nextafter(threshold, math.inf)
    return float(rng.random() * 2 * max(threshold, 1.0))


class _Reads:
    """A backend whose health reads are drawn at random (the same draw for the definition and the reader)."""

    def __init__(self, rng, threshold):
        self.h = {k: _value(rng, threshold) for k in KEYS if rng.random() < 0.8}
        self.serving = {int(r): int(rng.integers(0, 4)) for r in rng.integers(1, 5, size=int(rng.integers(0, 3)))}

    def path_health(self, path):
        return dict(self.h)

    def edge_health(self, caller, callee):
        return dict(self.h)

    def service_health(self, service):
        return dict(self.h)

    def serving_revisions(self, service):
        return dict(self.serving)

    def deployment_spec(self, service):
        return {"revision": 2}


def _probes():
    out = {}
    for app in ("online-boutique", "astronomy-shop", "train-ticket"):
        for f in load_catalogue(app):
            out[f.probe] = None
    for kind in get_args(ProbeKind):
        out[Probe(kind=kind, threshold=1.0, service="s", caller="a", callee="b")] = None
    return list(out)


@pytest.mark.parametrize("seed", [0, 1])
def test_reader_matches_probe_ok(seed):
    rng = np.random.default_rng(seed)
    probes = _probes()
    assert {p.kind for p in probes} == set(get_args(ProbeKind))
    seen = set()
    for p in probes:
        read = probe_reader(p)
        memo_def, memo = {}, {}
        for _ in range(60):
            b = _Reads(rng, p.threshold)
            art = bool(rng.random() < 0.5)
            rev = [None, (None,), (int(rng.integers(1, 5)),), ("2",)][int(rng.integers(4))]
            want = probe_ok(p, b, memo_def, artifact_ok=lambda: art, rollout_rev=rev)
            assert read(b, memo, art, rev) == want, (p, b.h, b.serving, art, rev)
            seen.add((p.kind, want))
        assert memo == memo_def
    assert {k for k, ok in seen if ok} == {k for k, ok in seen if not ok} == set(get_args(ProbeKind))
