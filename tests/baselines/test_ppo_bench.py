"""`sremarathon train-bench`: RLlib sampling on the RL view vs the trivial env, wall and runner-CPU ratios."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("ray")
pytest.importorskip("torch")


@pytest.mark.slow
def test_sampling_bench_reports_wall_and_cpu_ratios():
    cmd = [sys.executable, "-m", "sremarathon_env.cli", "train-bench", "--app", "online-boutique", "--env-runners", "0",
           "--injection-s", "240", "--observation-s", "240", "--episodes", "1", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    import json

    r = json.loads(p.stdout[p.stdout.index("{\n"):])
    for k in ("trivial", "sremarathon"):
        row = r[k]
        assert row["env_steps"] >= r["steps_per_runner"] and row["cpu_s"] > 0
        assert row["cpu_ms_per_step"] == pytest.approx(1e3 * row["cpu_s"] / row["env_steps"], rel=1e-2, abs=1e-3)
    # the ratios are printed to 4 decimals (and the rates rounded too): a unit of the last place covers the rounding
    assert r["ratio"] == pytest.approx(r["sremarathon"]["steps_per_s"] / r["trivial"]["steps_per_s"], rel=1e-3,
                                       abs=1e-4)
    assert r["ratio_cpu"] == pytest.approx(r["sremarathon"]["steps_per_cpu_s"] / r["trivial"]["steps_per_cpu_s"],
                                           rel=1e-3, abs=1e-4)
    # the twin-backed env costs more per step than a constant-observation env
    assert r["sremarathon"]["cpu_ms_per_step"] > r["trivial"]["cpu_ms_per_step"]
