"""PNG plots (matplotlib, Agg backend, imported lazily): the stage funnel per method, the lifecycle
outcome of every fault per method (stacked bars), and the timeline of one bundle (faults, alerts,
incidents and actions over sim time).

>>> import tempfile, os
>>> p = plot_funnel([{"method": "keep", "correlated": 60.0, "localised": 30.0, "repaired": 10.0}],
...                 os.path.join(tempfile.mkdtemp(), "f.png"))
>>> p.stat().st_size > 1000
True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

OUTCOME_COLOURS = {"handled": "#1a9850", "repaired_without_handling": "#91cf60", "acted_without_repair": "#fee08b",
                   "located_without_action": "#fc8d59", "correlated_only": "#d73027", "missed": "#bdbdbd"}


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_funnel(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Grouped bars: share of faults correlated, localised and repaired (percent) per method."""
    plt = _plt()
    import numpy as np

    methods = [r["method"] for r in rows]
    stages = [("correlated", "#4575b4"), ("localised", "#fdae61"), ("repaired", "#1a9850")]
    x = np.arange(len(methods))
    w = 0.26
    fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(methods) + 2), 4.0))
    for i, (k, c) in enumerate(stages):
        vals = [r.get(k) or 0.0 for r in rows]
        bars = ax.bar(x + (i - 1) * w, vals, w, label=k, color=c)
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v + 1, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, methods)
    ax.set_ylim(0, 110)
    ax.set_ylabel("% of injected faults")
    ax.set_title("Stage funnel per method")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_outcomes(runs: list[Any], path: str | Path) -> Path:
    """Stacked bars: the share of faults in each lifecycle outcome, per method (all its runs)."""
    from scoring import OUTCOMES
    from sremarathon_env.report.leaderboard import _method_key

    plt = _plt()
    counts: dict[str, dict[str, int]] = {}
    for r in runs:
        c = counts.setdefault(r.policy, {o: 0 for o in OUTCOMES})
        for f in r.report.faults:
            c[f.outcome] += 1
    methods = sorted(counts, key=_method_key)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(methods) + 3), 4.0))
    bottom = [0.0] * len(methods)
    for o in OUTCOMES:
        vals = []
        for m in methods:
            n = sum(counts[m].values())
            vals.append(100.0 * counts[m][o] / n if n else 0.0)
        ax.bar(methods, vals, bottom=bottom, label=o.replace("_", " "), color=OUTCOME_COLOURS[o])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("% of faults")
    ax.set_ylim(0, 100)
    ax.set_title("Fault lifecycle outcome per method")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def timeline_data(records: list[Any]) -> dict[str, Any]:
    """What the timeline shows, from a bundle's records: fault intervals with their outcome, alert
    firing intervals, incident operations and actions."""
    from scoring import score

    rep = score(records)
    outcome = {f.instance_id: f for f in rep.faults}
    faults, alerts, incidents, actions = [], {}, [], []
    final_t = 0.0
    for r in records:
        final_t = max(final_t, r.t)
        d = r.data
        if r.kind == "schedule":
            for f in d["faults"]:
                fs = outcome.get(f["instance_id"])
                faults.append({"id": f["instance_id"], "fault_id": f["fault_id"], "start": f["start_s"],
                               "end": f["end_s"], "outcome": fs.outcome if fs else "missed",
                               "correlated_t": fs.correlated_t if fs else None,
                               "localised_t": fs.localised_t if fs else None,
                               "repaired_t": fs.repaired_t if fs else None})
        elif r.kind == "alert":
            a = alerts.setdefault(d["fingerprint"], {"name": d["alertname"], "labels": d["labels"], "spans": [],
                                                     "open": None})
            if d["state"] == "firing" and a["open"] is None:
                a["open"] = r.t
            elif d["state"] == "resolved" and a["open"] is not None:
                a["spans"].append((a["open"], r.t))
                a["open"] = None
        elif r.kind == "incident":
            incidents.append({"t": r.t, "op": d["op"], "id": d["incident_id"], "title": d.get("title", ""),
                              "culprits": d.get("culprits", []), "artifact": d.get("artifact")})
        elif r.kind == "action":
            actions.append({"t": r.t, "tool": d["tool"], "targets": d.get("targets", []), "ok": d["ok"],
                            "incident": d.get("incident_id"), "in_scope": d.get("in_scope")})
    for a in alerts.values():
        if a["open"] is not None:
            a["spans"].append((a["open"], final_t))
        a.pop("open")
    return {"faults": faults, "alerts": alerts, "incidents": incidents, "actions": actions, "final_t": final_t,
            "report": rep}


def plot_timeline(bundle: str | Path, path: str | Path) -> Path:
    """One bundle's timeline: a row per fault (coloured by outcome, with the correlation, localisation
    and repair times marked), a row per alert fingerprint (firing spans), and incident and action
    markers along the bottom."""
    from sremarathon_env.bundle import read_bundle

    plt = _plt()
    data = timeline_data(read_bundle(bundle).records)
    faults, alerts = data["faults"], data["alerts"]
    n_rows = len(faults) + len(alerts) + 2
    fig, ax = plt.subplots(figsize=(12, max(4.0, 0.16 * n_rows + 1.5)))
    y = 0
    labels = []
    for f in sorted(faults, key=lambda f: f["start"]):
        ax.barh(y, f["end"] - f["start"], left=f["start"], height=0.7, color=OUTCOME_COLOURS[f["outcome"]],
                edgecolor="black", linewidth=0.3)
        for k, mk in (("correlated_t", "|"), ("localised_t", "x"), ("repaired_t", "*")):
            if f[k] is not None:
                ax.plot([f[k]], [y], marker=mk, color="black", markersize=5)
        labels.append(f["fault_id"][:38])
        y += 1
    for fp in sorted(alerts, key=lambda k: (alerts[k]["spans"][0][0] if alerts[k]["spans"] else 0, k)):
        a = alerts[fp]
        for s, e in a["spans"]:
            ax.barh(y, max(e - s, 5), left=s, height=0.5, color="#d6604d")
        svc = a["labels"].get("service") or a["labels"].get("node") or ""
        labels.append(f"{a['name']} {svc}"[:38])
        y += 1
    inc_t = [i["t"] for i in data["incidents"]]
    ax.scatter(inc_t, [y] * len(inc_t), marker="v", color="#4575b4", s=18, label="incident op")
    labels.append("incidents")
    y += 1
    act_ok = [a["t"] for a in data["actions"] if a["ok"]]
    act_bad = [a["t"] for a in data["actions"] if not a["ok"]]
    ax.scatter(act_ok, [y] * len(act_ok), marker="D", color="#1a9850", s=14, label="action")
    ax.scatter(act_bad, [y] * len(act_bad), marker="D", color="#d73027", s=14, label="refused action")
    labels.append("actions")
    ax.set_yticks(range(len(labels)), labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlim(0, max(data["final_t"], 1.0))
    ax.set_xlabel("sim time (s)")
    rep = data["report"]
    ax.set_title(f"Timeline (Marathon-Score {rep.marathon_score:.1f}; fault bars coloured by outcome; "
                 f"| correlated, x localised, * repaired)", fontsize=9)
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
