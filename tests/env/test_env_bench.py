"""`sremarathon bench` section env: one short marathon per app gives consistent wall and CPU figures."""

from __future__ import annotations

from sremarathon_env.env_bench import PARTS, env_section, print_env


def test_env_section_rows_and_print(capsys):
    rows = env_section(["online-boutique"], repeat=1, injection_s=600, observation_s=240)
    (r,) = rows
    assert r["steps"] == 7 and r["step_ms"] > 0 and r["marathon_s"] >= r["reset_s"] > 0
    assert set(r["share"]) == set(PARTS) and abs(sum(r["share"].values()) - 1.0) < 0.05
    c = r["cpu"]
    assert c["step_ms"] > 0 and c["marathon_s"] >= c["reset_s"] > 0
    print_env(rows)
    out = capsys.readouterr().out
    assert "online-boutique" in out and "CPU time: reset" in out and "reward replay share" in out
