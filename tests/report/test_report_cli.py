"""The run/sweep/leaderboard/view commands end to end on short marathons (local processes)."""

from sremarathon_env.cli import main


def test_cli_sweep_leaderboard_view(tmp_path, capsys):
    out = tmp_path / "runs"
    rc = main(["sweep", "--apps", "online-boutique", "--seeds", "0-1", "--policies", "noop,oracle",
               "--out", str(out), "--workers", "2", "--injection-s", "600", "--observation-s", "240"])
    assert rc == 0
    bundles = sorted(p.parent.relative_to(out).as_posix() for p in out.rglob("manifest.json"))
    assert bundles == ["noop/online-boutique/seed-0", "noop/online-boutique/seed-1",
                       "oracle/online-boutique/seed-0", "oracle/online-boutique/seed-1"]
    # a second sweep resumes: nothing rerun
    assert main(["sweep", "--apps", "online-boutique", "--seeds", "0-1", "--policies", "noop", "--out", str(out),
                 "--workers", "1", "--injection-s", "600", "--observation-s", "240"]) == 0
    assert "skipped (exists)" in capsys.readouterr().out
    assert main(["leaderboard", str(out)]) == 0
    text = capsys.readouterr().out
    assert "oracle" in text and "noop" in text and "Marathon-Score" in text
    md = (out / "leaderboard.md").read_text()
    assert "| noop | 0.0 |" in md
    csv = (out / "leaderboard.csv").read_text().splitlines()
    assert csv[0].startswith("method,score") and len(csv) == 3
    assert (out / "funnel.png").stat().st_size > 10_000 and (out / "outcomes.png").stat().st_size > 10_000
    bundle = out / "oracle" / "online-boutique" / "seed-0"
    assert main(["view", str(bundle), "-o", str(tmp_path / "v.html")]) == 0
    page = (tmp_path / "v.html").read_text()
    assert "<svg" in page and "handled" in page and "report_incident" in page
    # leaderboard of a single bundle adds its timeline
    assert main(["leaderboard", str(bundle), "--out", str(tmp_path / "one")]) == 0
    assert (tmp_path / "one" / "timeline.png").stat().st_size > 10_000


def test_cli_run_prints_score(tmp_path, capsys):
    rc = main(["run", "--app", "online-boutique", "--seed", "0", "--policy", "runbook", "--out", str(tmp_path),
               "--quiet", "--injection-s", "600", "--observation-s", "240"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "Marathon-Score" in out and "bundle:" in out
    assert (tmp_path / "runbook" / "online-boutique" / "seed-0" / "manifest.json").exists()
