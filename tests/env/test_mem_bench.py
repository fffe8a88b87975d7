"""`sremarathon bench --sections memory`: opt-in, and its rows measure growth between warm-up and the last episode."""

from __future__ import annotations

import argparse

from sremarathon_env import bench
from sremarathon_env.mem_bench import memory_section, print_memory


def test_memory_section_runs_only_when_named(monkeypatch):
    ran = []
    fake = [(title, (lambda apps, repeat, t=title: ran.append(t) or []), (lambda rows: None))
            for title, _, _ in bench.SECTIONS]
    monkeypatch.setattr(bench, "SECTIONS", fake)
    bench.run(argparse.Namespace(apps=["online-boutique"], repeat=1, sections=None))
    assert "memory" not in ran and {"twin", "alerts", "env"} <= set(ran)
    ran.clear()
    bench.run(argparse.Namespace(apps=["online-boutique"], repeat=1, sections=["memory"]))
    assert ran == ["memory"]


def test_memory_rows_and_print(capsys):
    rows = memory_section(["online-boutique"], episodes=2, warmup=1, injection_s=240, observation_s=120)
    (r,) = rows
    assert r["episodes"] == 2 and r["warmup"] == 1
    assert r["rss_warm_mb"] > 50 and r["rss_last_mb"] > 50 and r["objects_warm"] > 1000
    assert abs(r["mb_per_episode"] - (r["rss_last_mb"] - r["rss_warm_mb"]) / 2) < 1e-9
    print_memory(rows)
    assert "MB/episode" in capsys.readouterr().out
