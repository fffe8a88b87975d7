"""End to end: `sremarathon train` (2 iterations, 2 env runners, RLlib) then the checkpoint as a policy."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytest.importorskip("ray")
pytest.importorskip("torch")


@pytest.mark.slow
def test_tiny_training_end_to_end(tmp_path):
    out = tmp_path / "ppo"
    cmd = [sys.executable, "-m", "sremarathon_env.cli", "train", "--app", "online-boutique", "--iterations", "2",
           "--env-runners", "2", "--injection-s", "240", "--observation-s", "240", "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("iteration ")]
    assert [ln.split(":")[0] for ln in lines] == ["iteration 1", "iteration 2"]
    rets = [float(m.group(1)) for ln in lines if (m := re.search(r"mean return ([-\d.]+) over (\d+) episodes", ln))]
    assert len(rets) == 2 and all(0.0 <= r <= 100.0 for r in rets)
    ckpt = out / "checkpoint-0002"
    assert (ckpt / "sremarathon.json").exists()
    assert (ckpt / "learner_group" / "learner" / "rl_module" / "default_policy").is_dir()
    assert f"ppo:{ckpt}" in p.stdout

    from baselines import make_policy
    from baselines.runner import run_marathon

    policy = make_policy(f"ppo:{ckpt}")
    a, _ = run_marathon("online-boutique", 3, policy, injection_s=240, observation_s=240, reference_run=False)
    b, _ = run_marathon("online-boutique", 3, policy, injection_s=240, observation_s=240, reference_run=False)
    assert a.marathon_score == b.marathon_score  # greedy checkpoint policy is deterministic
    assert a.digest == b.digest
