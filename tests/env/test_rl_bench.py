"""`sremarathon bench --sections rl`: the RL view as training runs it, timed per step, reset and episode."""

from __future__ import annotations

import argparse

from sremarathon_env import bench, rl_bench


def test_rows_time_every_episode_and_shares_add_up():
    rows = rl_bench.rl_section(["online-boutique", "astronomy-shop"], repeat=2, episodes=2, injection_s=360,
                               observation_s=120)
    assert [r["app"] for r in rows] == ["online-boutique", "astronomy-shop"]
    for r in rows:
        assert r["steps"] == 4   # (360 + 120) s / 120 s
        assert set(r["share"]) == set(rl_bench.PARTS)
        assert abs(sum(r["share"].values()) - 1.0) < 1e-9
        assert all(v >= 0.0 for v in r["share"].values())
        assert r["share"]["twin"] > 0 and r["share"]["alerts"] > 0
        # a step's reset share: (reset + steps) / steps lies between the step median and the step + reset
        assert r["cpu_reset_ms"] > 0 and r["cpu_step_ms"] > 0
        assert r["cpu_episode_s"] * 1e3 >= r["cpu_reset_ms"]


def test_section_is_listed_and_runs_from_the_command(monkeypatch, capsys):
    assert "rl" in [title for title, _, _ in bench.SECTIONS] and "rl" not in bench.OPT_IN
    monkeypatch.setattr(rl_bench, "EPISODES", 1)
    calls = []
    real = rl_bench.rl_section

    def small(apps, repeat=3, episodes=rl_bench.EPISODES, injection_s=None, observation_s=None):
        calls.append((tuple(apps), repeat, episodes))
        return real(apps, repeat, episodes, injection_s=240, observation_s=120)

    monkeypatch.setattr(rl_bench, "rl_section", small)
    bench.run(argparse.Namespace(apps=["online-boutique"], repeat=1, sections=["rl"]))
    out = capsys.readouterr().out
    assert calls == [(("online-boutique",), 1, 1)]
    assert "RL view as training runs it" in out and "online-boutique" in out
