"""``tape.KernelSpec.of_parts`` (a plan's kernel group: the spec found per kernel range node) held to its definition,
``KernelSpec`` of the same rows listed one by one: every field equal (values, dtype, shape) on random part lists
(empty parts, windows repeated or not, so runs both pay and do not) and on every kernel group of a plan's builds
over a twin run; the fields kept per windows tuple (``tape._part_fields``) serve parts of other sizes."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.alerts import plan as P
from sremarathon_env.alerts.tape import CODES, KernelSpec

FIELDS = ("slots", "range_ms", "offset_ms", "codes", "rs", "rs_row", "counter", "window_ms", "col")


def per_row(parts: list, windows: list) -> KernelSpec:
    """The definition: the rows one by one, each with its part's window."""
    n = [len(p) for p in parts]
    return KernelSpec(np.concatenate(parts) if parts else np.zeros(0, dtype=np.intp),
                      np.repeat(np.asarray([w[0] for w in windows], dtype=np.int64), n),
                      np.repeat(np.asarray([w[1] for w in windows], dtype=np.int64), n),
                      np.repeat(np.asarray([w[2] for w in windows], dtype=np.int8), n))


def assert_same(a: KernelSpec, b: KernelSpec) -> None:
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and x.shape == y.shape, f
        assert x.tobytes() == y.tobytes(), f
    assert a.present == b.present and [type(c) for c in a.present] == [type(c) for c in b.present]
    for f in ("ext", "has_counter", "has_rate", "only_ext"):
        assert bool(getattr(a, f)) == bool(getattr(b, f)), f
    assert list(a.rows_of) == list(b.rows_of)
    for c in a.rows_of:
        assert a.rows_of[c].dtype == b.rows_of[c].dtype and np.array_equal(a.rows_of[c], b.rows_of[c]), c
    assert (a.runs is None) == (b.runs is None)
    if a.runs is not None:
        for x, y in zip(a.runs, b.runs):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


@pytest.mark.parametrize("seed", range(40))
def test_of_parts_equals_the_rows_one_by_one(seed):
    rng = np.random.default_rng(seed)
    ranges = [60_000, 120_000, 300_000, 300_500, 3_600_000, 86_400_000, 999, 1_001]
    K = int(rng.integers(1, 30))
    parts, windows = [], []
    for _ in range(K):
        if windows and rng.random() < 0.5:   # the same window as the part before (runs)
            w = windows[-1] if rng.random() < 0.5 else (windows[-1][0], windows[-1][1], int(rng.integers(0, len(CODES))))
        else:
            w = (int(rng.choice(ranges)), int(rng.choice([0, 0, 60_000, 30_500])), int(rng.integers(0, len(CODES))))
        n = int(rng.choice([0, 1, 2, 5, 30, 120])) if rng.random() < 0.9 else 0
        parts.append(rng.integers(0, 500, n).astype(np.intp))
        windows.append(w)
    assert_same(KernelSpec.of_parts(parts, windows), per_row(parts, windows))
    # the same windows again, other part sizes (the per-window fields kept from the call before, ``tape._part_fields``)
    parts = [rng.integers(0, 500, int(rng.choice([0, 1, 3, 40]))).astype(np.intp) for _ in windows]
    assert_same(KernelSpec.of_parts(parts, windows), per_row(parts, windows))


def test_of_parts_edge_cases():
    w = (300_000, 0, CODES["rate"])
    e = np.zeros(0, dtype=np.intp)
    for parts, windows in (([e], [w]), ([e, e], [w, (60_000, 0, 3)]), ([np.arange(3)], [w]),
                           ([np.arange(8), np.arange(8)], [w, w]), ([np.arange(2), e, np.arange(2)], [w, (1, 0, 5), w])):
        assert_same(KernelSpec.of_parts(parts, windows), per_row(parts, windows))


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket"])
def test_every_kernel_group_of_a_twin_run_equals_the_definition(app, monkeypatch):
    """Recorded inputs: every kernel group a plan makes over a faulted twin run advanced call by call."""
    from apps import load_app
    from faults.effects import Effect
    from sremarathon_env.alerts import AlertEngine, load_rule_pack
    from sremarathon_env.backends.sim import SimBackend

    seen = []
    real = KernelSpec.of_parts.__func__

    def checked(cls, parts, windows):
        spec = real(cls, parts, windows)
        assert_same(spec, per_row(parts, windows))
        seen.append(len(spec.slots))
        return spec

    monkeypatch.setattr(KernelSpec, "of_parts", classmethod(checked))
    spec = load_app(app)
    sim = SimBackend(spec, seed=3)
    eng = AlertEngine(load_rule_pack(), sim.store)
    for k in range(1, 13):
        sim.advance_to(k * 120.0)
        if k == 3:
            sim.apply_effect(Effect(kind="crash", service=spec.services[1].name))
        if k in (4, 5, 8, 9):   # (new ReplicaSets: new pods, rules over grown families rebuilt)
            for s in spec.services[2:5]:
                sim.deploy(s.name, image_tag=f"v{k}", message="bump", author="dev")
        eng.evaluate_until(k * 120.0)
    assert eng._plan.builds >= 4 and len(seen) >= 4 and max(seen) > 0
    assert isinstance(eng._plan._kernel, P._KernelGroup)
