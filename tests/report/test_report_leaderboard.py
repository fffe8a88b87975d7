import csv
import io

from report_bundles import build_bundle

from sremarathon_env.report import collect_runs, leaderboard_csv, leaderboard_markdown, leaderboard_rows, \
    per_app_rows, write_leaderboard


def _runs(tmp_path):
    for policy, skill in (("noop", 0), ("runbook", 1), ("keep", 2), ("oracle", 3)):
        for seed in (0, 1):
            for app in ("online-boutique", "train-ticket"):
                build_bundle(tmp_path / policy / app / f"seed-{seed}", policy, seed=seed, app=app, skill=skill)
    return collect_runs(tmp_path)


def test_collect_scores_every_bundle_and_orders_methods(tmp_path):
    runs = _runs(tmp_path)
    assert len(runs) == 16
    rows = leaderboard_rows(runs)
    assert [r["method"] for r in rows] == ["noop", "runbook", "keep", "oracle"]
    by = {r["method"]: r for r in rows}
    # 2 faults: correlating one = 1 stage of 6; localising = 2 of 6; repairing = 3 of 6
    assert by["noop"]["score"] == 0.0
    assert abs(by["runbook"]["score"] - 100 / 6) < 1e-9
    assert abs(by["keep"]["score"] - 200 / 6) < 1e-9
    assert abs(by["oracle"]["score"] - 50.0) < 1e-9
    assert by["oracle"]["repaired"] == 50.0 and by["keep"]["repaired"] == 0.0
    assert by["runbook"]["correlated"] == 50.0 and by["runbook"]["localised"] == 0.0
    assert by["noop"]["mttd_s"] is None and by["runbook"]["mttd_s"] == 240.0 - 100.0
    assert by["oracle"]["risk"] == 0.0 and by["noop"]["risk"] is None
    assert by["oracle"]["degradation"] < by["noop"]["degradation"]
    assert by["oracle"]["apps"] == 2 and by["oracle"]["runs"] == 4
    assert by["oracle"]["model_calls"] == 3 * 7 and abs(by["oracle"]["cost_usd"] - 0.021) < 1e-9
    apps = per_app_rows(runs)
    assert {(a["method"], a["app"]) for a in apps} == {(m, a) for m in by for a in ("online-boutique", "train-ticket")}


def test_csv_and_markdown(tmp_path):
    rows = leaderboard_rows(_runs(tmp_path))
    parsed = list(csv.DictReader(io.StringIO(leaderboard_csv(rows))))
    assert [p["method"] for p in parsed] == ["noop", "runbook", "keep", "oracle"]
    assert float(parsed[3]["score"]) == 50.0 and parsed[0]["mttd_s"] == ""
    md = leaderboard_markdown(rows)
    lines = md.strip().splitlines()
    assert lines[0].startswith("| Method | Marathon-Score") and len(lines) == 2 + 4
    assert "| oracle | 50.0 |" in md


def test_write_leaderboard_makes_nontrivial_pngs(tmp_path):
    runs = _runs(tmp_path / "runs")
    paths = write_leaderboard(runs, tmp_path / "out")
    for name in ("csv", "markdown", "funnel", "outcomes"):
        assert paths[name].exists()
    for name in ("funnel", "outcomes"):
        data = paths[name].read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    one = write_leaderboard(runs[:1], tmp_path / "one")
    assert one["timeline"].read_bytes()[:4] == b"\x89PNG" and one["timeline"].stat().st_size > 10_000


def test_png_content_differs_with_results(tmp_path):
    from sremarathon_env.report.plots import plot_funnel

    a = plot_funnel([{"method": "x", "correlated": 10.0, "localised": 5.0, "repaired": 1.0}], tmp_path / "a.png")
    b = plot_funnel([{"method": "x", "correlated": 90.0, "localised": 50.0, "repaired": 40.0}], tmp_path / "b.png")
    assert a.read_bytes() != b.read_bytes()


def test_bad_bundle_is_skipped(tmp_path):
    build_bundle(tmp_path / "keep" / "online-boutique" / "seed-0", "keep", skill=2)
    bad = tmp_path / "keep" / "online-boutique" / "seed-1"
    build_bundle(bad, "keep", seed=1, skill=2)
    raw = (bad / "records.jsonl").read_bytes()
    (bad / "records.jsonl").write_bytes(raw.replace(b"cartservice:REDIS_ADDR", b"cartservice:REDIS_ADDX", 1))
    runs = collect_runs(tmp_path)
    assert [r.seed for r in runs] == [0]


def test_unsealed_prefix_is_left_out(tmp_path):
    from sremarathon_env.bundle import Recorder

    build_bundle(tmp_path / "keep" / "online-boutique" / "seed-0", "keep", skill=2)
    rec = Recorder(tmp_path / "keep" / "online-boutique" / "seed-1")
    rec.append("run", 0.0, {"app": "online-boutique", "seed": 1, "catalogue_version": "t", "rule_pack_version": "t"})
    rec.close()
    assert [r.seed for r in collect_runs(tmp_path)] == [0]
    assert sorted(r.seed for r in collect_runs(tmp_path, incomplete=True)) == [0, 1]
