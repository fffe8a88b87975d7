"""The leaderboard: per method, averaged over apps (each app first averaged over its seeds), like the
paper's main table: Marathon-Score, stage shares, intervention risk, degradation, MTTD/MTTL/MTTR and
model cost. Rendered as a rich terminal table, Markdown and CSV.

Averages skip undefined values (an MTTR is undefined for a run that repaired nothing); a cell whose
values are all undefined shows ``-``.

>>> from types import SimpleNamespace as NS
>>> from scoring import ScoreReport, StageShares
>>> rep = ScoreReport(marathon_score=40.0, n_faults=3, stages_total=4, credit_mean=0.4,
...                   stage_shares=StageShares(correlated=0.6, localised=0.4, repaired=0.2))
>>> rows = leaderboard_rows([NS(policy="keep", app="online-boutique", seed=0, report=rep)])
>>> rows[0]["method"], rows[0]["score"], rows[0]["runs"]
('keep', 40.0, 1)
"""

from __future__ import annotations

import csv
import io
import statistics
from pathlib import Path
from typing import Any, Iterable

#: (key, header, format) of the leaderboard's columns, in order
LEADERBOARD_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("method", "Method", "{}"),
    ("score", "Marathon-Score", "{:.1f}"),
    ("score_sd", "sd", "{:.1f}"),
    ("correlated", "Corr %", "{:.1f}"),
    ("localised", "Loc %", "{:.1f}"),
    ("repaired", "Rep %", "{:.1f}"),
    ("risk", "Risk %", "{:.1f}"),
    ("degradation", "Degr. ratio", "{:.3f}"),
    ("mttd_s", "MTTD s", "{:.0f}"),
    ("mttl_s", "MTTL s", "{:.0f}"),
    ("mttr_s", "MTTR s", "{:.0f}"),
    ("model_calls", "Model calls", "{:.0f}"),
    ("tokens", "Tokens", "{:.0f}"),
    ("cost_usd", "Cost $", "{:.4f}"),
    ("apps", "Apps", "{}"),
    ("runs", "Runs", "{}"),
)

METHOD_ORDER = ("noop", "random", "runbook", "keep", "react", "oracle")


def _metrics(rep: Any) -> dict[str, float | None]:
    s = rep.stage_shares
    u = rep.usage
    return {"score": rep.marathon_score, "correlated": 100 * s.correlated, "localised": 100 * s.localised,
            "repaired": 100 * s.repaired,
            "risk": None if rep.intervention_risk is None else 100 * rep.intervention_risk,
            "degradation": rep.degradation.ratio, "mttd_s": rep.mttd_s, "mttl_s": rep.mttl_s, "mttr_s": rep.mttr_s,
            "model_calls": float(u.model_calls), "tokens": float(u.prompt_tokens + u.completion_tokens),
            "cost_usd": float(u.cost_usd)}


def _mean(xs: Iterable[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return float(statistics.fmean(v)) if v else None


def _method_key(m: str) -> tuple:
    return (METHOD_ORDER.index(m) if m in METHOD_ORDER else len(METHOD_ORDER), m)


def leaderboard_rows(runs: list[Any]) -> list[dict[str, Any]]:
    """One row per method: every metric averaged over apps of the per-app mean over seeds. ``score_sd``
    is the standard deviation of the per-run scores."""
    by: dict[str, dict[str, list]] = {}
    for r in runs:
        by.setdefault(r.policy, {}).setdefault(r.app, []).append(_metrics(r.report))
    rows = []
    for method in sorted(by, key=_method_key):
        apps = by[method]
        keys = [k for k, _, _ in LEADERBOARD_COLUMNS if k not in ("method", "score_sd", "apps", "runs")]
        per_app = {a: {k: _mean(m[k] for m in ms) for k in keys} for a, ms in apps.items()}
        row: dict[str, Any] = {"method": method}
        for k in keys:
            row[k] = _mean(per_app[a][k] for a in sorted(per_app))
        scores = [m["score"] for ms in apps.values() for m in ms]
        row["score_sd"] = statistics.stdev(scores) if len(scores) > 1 else 0.0
        row["apps"] = len(apps)
        row["runs"] = len(scores)
        rows.append(row)
    return rows


def per_app_rows(runs: list[Any]) -> list[dict[str, Any]]:
    """Marathon-Score per method and app (mean over seeds, with the seed count)."""
    by: dict[tuple[str, str], list[float]] = {}
    for r in runs:
        by.setdefault((r.policy, r.app), []).append(r.report.marathon_score)
    return [{"method": m, "app": a, "score": statistics.fmean(v), "min": min(v), "max": max(v), "seeds": len(v)}
            for (m, a), v in sorted(by.items(), key=lambda kv: (_method_key(kv[0][0]), kv[0][1]))]


def _cell(v: Any, fmt: str) -> str:
    if v is None:
        return "-"
    return fmt.format(v)


def leaderboard_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([k for k, _, _ in LEADERBOARD_COLUMNS])
    for r in rows:
        w.writerow(["" if r.get(k) is None else (f"{r[k]:.6g}" if isinstance(r[k], float) else r[k])
                    for k, _, _ in LEADERBOARD_COLUMNS])
    return buf.getvalue()


def leaderboard_markdown(rows: list[dict[str, Any]], app_rows: list[dict[str, Any]] | None = None) -> str:
    head = [h for _, h, _ in LEADERBOARD_COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(_cell(r.get(k), f) for k, _, f in LEADERBOARD_COLUMNS) + " |")
    if app_rows:
        apps = sorted({x["app"] for x in app_rows})
        methods = sorted({x["method"] for x in app_rows}, key=_method_key)
        cell = {(x["method"], x["app"]): x for x in app_rows}
        lines += ["", "| Method | " + " | ".join(apps) + " |", "|---|" + "---:|" * len(apps)]
        for m in methods:
            vals = []
            for a in apps:
                x = cell.get((m, a))
                vals.append("-" if x is None else f"{x['score']:.1f} ({x['min']:.1f}-{x['max']:.1f}, n={x['seeds']})")
            lines.append(f"| {m} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def leaderboard_table(rows: list[dict[str, Any]], title: str = "SRE-Marathon leaderboard"):
    """A rich `Table` of the rows."""
    from rich.table import Table

    t = Table(title=title)
    for k, h, _ in LEADERBOARD_COLUMNS:
        t.add_column(h, justify="left" if k == "method" else "right")
    for r in rows:
        t.add_row(*(_cell(r.get(k), f) for k, _, f in LEADERBOARD_COLUMNS))
    return t


def write_leaderboard(runs: list[Any], out_dir: str | Path, plots: bool = True) -> dict[str, Path]:
    """Write leaderboard.csv, leaderboard.md and (with ``plots``) the PNG plots to ``out_dir``;
    returns the written paths by name."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = leaderboard_rows(runs)
    app_rows = per_app_rows(runs)
    paths = {"csv": out / "leaderboard.csv", "markdown": out / "leaderboard.md"}
    paths["csv"].write_text(leaderboard_csv(rows))
    paths["markdown"].write_text(leaderboard_markdown(rows, app_rows))
    if plots and runs:
        from sremarathon_env.report.plots import plot_funnel, plot_outcomes, plot_timeline

        paths["funnel"] = plot_funnel(rows, out / "funnel.png")
        paths["outcomes"] = plot_outcomes(runs, out / "outcomes.png")
        if len(runs) == 1:
            paths["timeline"] = plot_timeline(runs[0].path, out / "timeline.png")
    return paths
