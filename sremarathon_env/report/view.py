"""`sremarathon view BUNDLE`: one run as a self-contained static HTML page (inline CSS and SVG, no
scripts, no server): the score summary, an SVG timeline of faults, alerts, incidents and actions,
the per-fault outcome table, the incidents, and every invocation's tool calls with their results.

>>> from sremarathon_env.bundle import Recorder
>>> rec = Recorder(None)
>>> _ = rec.append("schedule", 0.0, {"faults": []})
>>> page = render_html(rec.records, title="empty <run>")
>>> page.startswith("<!DOCTYPE html>") and "empty &lt;run&gt;" in page
True
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from sremarathon_env.report.plots import OUTCOME_COLOURS, timeline_data

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4}.num{text-align:right}.ok{color:#1a7f37}.bad{color:#c62828}
details{margin:.25em 0;border:1px solid #e4e4e4;border-radius:4px;padding:.2em .6em}summary{cursor:pointer}
pre{white-space:pre-wrap;word-break:break-all;background:#fafafa;padding:.4em;font-size:.8em;max-height:24em;overflow:auto}
.chip{display:inline-block;padding:0 6px;border-radius:8px;font-size:.8em}
"""


def _fmt(x: Any, f: str = "{:.1f}") -> str:
    return "-" if x is None else f.format(x)


def _svg_timeline(data: dict[str, Any], width: int = 1300) -> str:
    faults, alerts = data["faults"], data["alerts"]
    T = max(data["final_t"], 1.0)
    left, row = 260, 14
    rows = len(faults) + len(alerts) + 2
    h = rows * row + 40
    sx = lambda t: left + (width - left - 10) * (t / T)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" font-size="10" '
           f'font-family="sans-serif">']
    for k in range(0, int(T) + 1, 600):
        out.append(f'<line x1="{sx(k):.1f}" y1="0" x2="{sx(k):.1f}" y2="{h - 20}" stroke="#eee"/>'
                   f'<text x="{sx(k):.1f}" y="{h - 6}" text-anchor="middle">{k}s</text>')
    y = 4
    for f in sorted(faults, key=lambda f: f["start"]):
        c = OUTCOME_COLOURS.get(f["outcome"], "#999")
        out.append(f'<text x="2" y="{y + 10}">{escape(f["fault_id"][:42])}</text>'
                   f'<rect x="{sx(f["start"]):.1f}" y="{y}" width="{max(sx(f["end"]) - sx(f["start"]), 1):.1f}" '
                   f'height="{row - 3}" fill="{c}" stroke="#333" stroke-width="0.3"><title>{escape(f["id"])} '
                   f'{escape(f["fault_id"])}: {f["outcome"]}</title></rect>')
        for k, sym in (("correlated_t", "|"), ("localised_t", "x"), ("repaired_t", "*")):
            if f[k] is not None:
                out.append(f'<text x="{sx(f[k]):.1f}" y="{y + 10}" text-anchor="middle" font-weight="bold">{sym}</text>')
        y += row
    for fp, a in sorted(alerts.items(), key=lambda kv: (kv[1]["spans"][0][0] if kv[1]["spans"] else 0, kv[0])):
        svc = a["labels"].get("service") or a["labels"].get("node") or ""
        out.append(f'<text x="2" y="{y + 10}" fill="#a33">{escape((a["name"] + " " + svc)[:42])}</text>')
        for s, e in a["spans"]:
            out.append(f'<rect x="{sx(s):.1f}" y="{y + 2}" width="{max(sx(e) - sx(s), 2):.1f}" height="{row - 6}" '
                       f'fill="#d6604d"><title>{escape(a["name"])} {escape(json.dumps(a["labels"], sort_keys=True))} '
                       f'{s:.0f}-{e:.0f}s</title></rect>')
        y += row
    out.append(f'<text x="2" y="{y + 10}">incidents</text>')
    for i in data["incidents"]:
        out.append(f'<circle cx="{sx(i["t"]):.1f}" cy="{y + 6}" r="3.5" fill="#4575b4"><title>{escape(i["op"])} '
                   f'{escape(i["id"])} {escape(str(i["culprits"]))} {escape(str(i["artifact"]))}</title></circle>')
    y += row
    out.append(f'<text x="2" y="{y + 10}">actions</text>')
    for a in data["actions"]:
        c = "#1a9850" if a["ok"] else "#d73027"
        out.append(f'<rect x="{sx(a["t"]) - 3:.1f}" y="{y + 3}" width="6" height="6" fill="{c}"><title>'
                   f'{escape(a["tool"])} {escape(str(a["targets"]))} cites {escape(str(a["incident"]))}</title></rect>')
    out.append("</svg>")
    return "".join(out)


def render_html(records: list[Any], title: str = "SRE-Marathon run", meta: dict[str, Any] | None = None) -> str:
    data = timeline_data(records)
    rep = data["report"]
    run = next((r.data for r in records if r.kind == "run"), {})
    p: list[str] = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                    f"<title>{escape(title)}</title><style>{CSS}</style></head><body>", f"<h1>{escape(title)}</h1>"]
    s = rep.stage_shares
    summary = [("app", run.get("app", "-")), ("seed", run.get("seed", "-")),
               ("policy", (meta or {}).get("policy", "-")), ("Marathon-Score", _fmt(rep.marathon_score, "{:.2f}")),
               ("faults", rep.n_faults),
               ("correlated / localised / repaired", f"{s.correlated:.1%} / {s.localised:.1%} / {s.repaired:.1%}"),
               ("intervention risk", _fmt(rep.intervention_risk, "{:.1%}") + f" of {rep.n_actions} actions"),
               ("degradation ratio", _fmt(rep.degradation.ratio, "{:.3f}")),
               ("MTTD / MTTL / MTTR (s)", f"{_fmt(rep.mttd_s, '{:.0f}')} / {_fmt(rep.mttl_s, '{:.0f}')} / "
                                          f"{_fmt(rep.mttr_s, '{:.0f}')}"),
               ("forbidden attempts", rep.n_forbidden),
               ("model calls / tokens / cost", f"{rep.usage.model_calls} / "
                                               f"{rep.usage.prompt_tokens + rep.usage.completion_tokens} / "
                                               f"${rep.usage.cost_usd:.4f}"),
               ("complete", "yes" if rep.complete else "no (prefix)"), ("digest", rep.digest or "-")]
    p.append("<h2>Summary</h2><table>" + "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>"
                                                 for k, v in summary) + "</table>")
    p.append("<h2>Timeline</h2>" + _svg_timeline(data))
    p.append("<p>" + " ".join(f'<span class="chip" style="background:{c}">{escape(o.replace("_", " "))}</span>'
                              for o, c in OUTCOME_COLOURS.items()) + " &nbsp; | correlated, x localised, * repaired</p>")
    p.append("<h2>Faults</h2><table><tr><th>instance</th><th>fault</th><th>category</th><th>start</th><th>end</th>"
             "<th>correlated</th><th>localised</th><th>repaired</th><th>credit</th><th>outcome</th></tr>")
    for f in rep.faults:
        p.append(f"<tr><td>{escape(f.instance_id)}</td><td>{escape(f.fault_id)}</td><td>{escape(f.category)}</td>"
                 f'<td class="num">{f.start_s:.0f}</td><td class="num">{f.end_s:.0f}</td>'
                 f'<td class="num">{_fmt(f.correlated_t, "{:.0f}")}</td><td class="num">{_fmt(f.localised_t, "{:.0f}")}</td>'
                 f'<td class="num">{_fmt(f.repaired_t, "{:.0f}")}</td><td class="num">{f.credit:.2f}</td>'
                 f'<td><span class="chip" style="background:{OUTCOME_COLOURS[f.outcome]}">{escape(f.outcome)}</span></td></tr>')
    p.append("</table>")
    p.append("<h2>Incidents</h2><table><tr><th>t</th><th>op</th><th>id</th><th>title</th><th>culprits</th>"
             "<th>artifact</th><th>alerts</th><th>status</th></tr>")
    for r in records:
        if r.kind == "incident":
            d = r.data
            p.append(f'<tr><td class="num">{r.t:.0f}</td><td>{escape(d["op"])}</td><td>{escape(d["incident_id"])}</td>'
                     f'<td>{escape(d.get("title", ""))}</td><td>{escape(", ".join(d.get("culprits", [])))}</td>'
                     f'<td>{escape(str(d.get("artifact") or ""))}</td><td class="num">{len(d.get("alerts", []))}</td>'
                     f'<td>{escape(d.get("status", ""))}</td></tr>')
    p.append("</table>")
    p.append("<h2>Invocations</h2>")
    usage = {r.data["invocation"]: r.data for r in records if r.kind == "usage"}
    for r in records:
        if r.kind != "invocation":
            continue
        d = r.data
        calls = d.get("calls", [])
        u = usage.get(d["index"])
        head = (f"#{d['index']} t={r.t:.0f}s: {len(calls)} calls, {d.get('budget_used_s', 0):.0f}s of budget"
                + (f", {u.get('model_calls', 0)} model calls" if u else "")
                + (f" — error: {d['error']}" if d.get("error") else ""))
        p.append(f"<details><summary>{escape(head)}</summary>")
        for c in calls:
            cls = "ok" if c.get("ok") else "bad"
            p.append(f'<details><summary><span class="{cls}">{escape(c["tool"])}</span> '
                     f'{escape(json.dumps(c.get("args", {}), sort_keys=True)[:160])} [{escape(c.get("policy", ""))}, '
                     f'{c.get("cost_s", 0):g}s]</summary>')
            if c.get("error"):
                p.append(f'<pre class="bad">{escape(c["error"])}</pre>')
            p.append(f"<pre>args: {escape(json.dumps(c.get('args', {}), sort_keys=True, indent=1))}</pre>")
            if c.get("result"):
                p.append(f"<pre>{escape(c['result'])}</pre>")
            p.append("</details>")
        p.append("</details>")
    p.append("</body></html>")
    return "\n".join(p)


def write_html(bundle: str | Path, out: str | Path | None = None) -> Path:
    """Render a bundle directory to ``out`` (default ``<bundle>/view.html``)."""
    from sremarathon_env.bundle import read_bundle

    b = read_bundle(bundle)
    meta = b.meta or {}
    run = b.first("run")
    title = "SRE-Marathon run" + (f": {meta.get('policy', '?')} on {run.data.get('app')} seed {run.data.get('seed')}"
                                  if run else "")
    page = render_html(b.records, title=title, meta=meta)
    out = Path(out) if out else Path(bundle) / "view.html"
    out.write_text(page, encoding="utf-8")
    return out
