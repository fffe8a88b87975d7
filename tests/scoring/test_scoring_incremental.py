"""IncrementalScorer equals the batch scorer on every prefix; rewards sum to the score; speed."""

from __future__ import annotations

import time

import pytest

from scoring import IncrementalScorer, score, score_bundle
from scoring_builders import synthetic_marathon
from sremarathon_env.bundle import RECORDS_FILE, BundleError, Recorder


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incremental_equals_batch_at_every_prefix(seed):
    recs = synthetic_marathon(seed, n_faults=14, n_ticks=120).records
    inc = IncrementalScorer()
    assert inc.report().model_dump() == score([]).model_dump()
    for k, r in enumerate(recs, start=1):
        inc.feed(r)
        batch = score(recs[:k])
        assert inc.score == batch.marathon_score, f"prefix {k}"
        assert inc.report().model_dump() == batch.model_dump(), f"prefix {k}"
    final = score(recs)
    # the prefix bundles exercise the interesting paths
    assert final.stages_total > 0 and final.n_forbidden >= 0 and final.complete


@pytest.mark.parametrize("seed", [3, 4])
def test_incremental_equals_batch_on_full_marathons(seed):
    recs = synthetic_marathon(seed).records
    inc = IncrementalScorer()
    rewards = []
    prev = 0.0
    for k, r in enumerate(recs, start=1):
        inc.feed(r)
        if r.kind == "usage" or k == len(recs):  # end of a step
            assert inc.score == score(recs[:k]).marathon_score
            rewards.append(inc.score - prev)
            prev = inc.score
    final = score(recs)
    assert inc.report().model_dump() == final.model_dump()
    assert sum(rewards) == pytest.approx(final.marathon_score, abs=1e-9)
    assert final.n_invocations == 45 and final.n_faults == 60
    o = final.outcomes
    assert o["acted_without_repair"] > 0 and o["correlated_only"] > 0
    assert final.stage_shares.localised > 0 and final.mttd_s is not None


def test_synthetic_exercises_every_outcome_somewhere():
    seen = set()
    for seed in range(6):
        seen |= {k for k, v in score(synthetic_marathon(seed).records).outcomes.items() if v}
    assert seen == {"handled", "repaired_without_handling", "acted_without_repair", "located_without_action",
                    "correlated_only", "missed"}


def test_scoring_is_deterministic_and_bundle_backed(tmp_path):
    a, b = synthetic_marathon(5), synthetic_marathon(5)
    assert a.digest == b.digest
    disk = Recorder(tmp_path / "b")
    for r in a.records[:-1]:
        disk.append(r.kind, r.t, r.data)
    disk.seal()
    assert disk.digest == a.digest
    rep = score_bundle(tmp_path / "b")
    assert rep.digest == a.digest and rep.complete
    assert rep.model_dump(exclude={"digest"}) == score(a.records).model_dump(exclude={"digest"})
    p = tmp_path / "b" / RECORDS_FILE
    raw = bytearray(p.read_bytes())
    raw[len(raw) // 2] ^= 1
    p.write_bytes(bytes(raw))
    with pytest.raises(BundleError):
        score_bundle(tmp_path / "b")


def test_scoring_speed():
    rec = synthetic_marathon(2)
    n_alerts = sum(r.kind == "alert" for r in rec.records)
    assert n_alerts >= 1800
    best = min(_timed(lambda: score(rec.records)) for _ in range(5))
    inc_total = min(_timed(lambda: IncrementalScorer().feed_all(rec.records)) for _ in range(3))
    per_step = inc_total / 45
    print(f"\nbatch score: {best * 1e3:.1f} ms for {len(rec.records)} records ({n_alerts} alerts, 360 ticks, "
          f"60 faults, 45 invocations); incremental: {inc_total * 1e3:.1f} ms total, {per_step * 1e6:.0f} us/step")
    assert best < 0.5          # target 50 ms; generous bound for a loaded CI machine
    assert per_step < 0.005    # target 0.5 ms (10% of a 5 ms step)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t
