"""CLI: ``sremarathon bundle verify|show PATH`` and ``sremarathon score BUNDLE [--json]``.

Exit status: 0 when the bundle verifies (and is scored), 1 when it does not verify (the first bad
record is named on stderr), 2 for a missing path.

>>> import argparse
>>> p = argparse.ArgumentParser(); sub = p.add_subparsers(dest="command"); add_parser(sub)
>>> p.parse_args(["score", "some/bundle", "--json"]).json
True
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(sub) -> None:
    b = sub.add_parser("bundle", help="verify or summarise an evidence bundle")
    bsub = b.add_subparsers(dest="bundle_command", metavar="ACTION")
    v = bsub.add_parser("verify", help="verify hashes, chain and manifest; name the first bad record")
    v.add_argument("path")
    v.add_argument("--json", action="store_true", help="machine-readable output")
    v.set_defaults(func=cmd_verify)
    s = bsub.add_parser("show", help="summarise a bundle (run, schedule, counts, time span)")
    s.add_argument("path")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_show)
    b.set_defaults(func=lambda args: (b.print_help(), 2)[1])

    sc = sub.add_parser("score", help="score a bundle (Marathon-Score and the full report)")
    sc.add_argument("path")
    sc.add_argument("--json", action="store_true", help="print the ScoreReport as JSON")
    sc.add_argument("--no-faults", action="store_true", help="omit the per-fault table")
    sc.set_defaults(func=cmd_score)


def _exists(path: str) -> bool:
    if not Path(path).is_dir():
        print(f"error: {path} is not a bundle directory", file=sys.stderr)
        return False
    return True


def cmd_verify(args: argparse.Namespace) -> int:
    from sremarathon_env.bundle import verify_bundle

    if not _exists(args.path):
        return 2
    rep = verify_bundle(args.path)
    if args.json:
        print(json.dumps(rep.to_dict(), indent=2, sort_keys=True))
    elif rep.ok:
        state = "complete" if rep.complete else "INCOMPLETE (unsealed prefix)"
        torn = f", torn tail of {rep.torn_tail_bytes} bytes ignored" if rep.torn_tail_bytes else ""
        print(f"OK: {rep.n_records} records, {state}, final t={rep.final_t:g} s{torn}\ndigest {rep.digest}")
    else:
        print(f"BAD: {rep.error}", file=sys.stderr)
    return 0 if rep.ok else 1


def _summary(b) -> dict:
    run = b.first("run")
    sched = b.first("schedule")
    out = {"path": str(b.path), "complete": b.complete, "digest": b.digest, "n_records": len(b.records),
           "counts": b.counts, "final_t": b.final_t, "torn_tail_bytes": b.torn_tail_bytes}
    if run:
        d = run.data
        out["run"] = {k: d[k] for k in ("app", "seed", "backend", "catalogue_version", "rule_pack_version",
                                        "cadence_s", "tick_s", "n_invocations", "hold_s", "grace_s",
                                        "penalty_per_forbidden")}
        out["versions"] = d["versions"]
    if sched:
        faults = sched.data["faults"]
        cats: dict[str, int] = {}
        for f in faults:
            cats[f["category"]] = cats.get(f["category"], 0) + 1
        out["schedule"] = {"faults": len(faults), "noise": len(sched.data["noise"]),
                           "by_category": dict(sorted(cats.items())),
                           "first_start_s": min((f["start_s"] for f in faults), default=None),
                           "last_end_s": max((f["end_s"] for f in faults), default=None)}
    if b.meta:
        out["meta"] = b.meta
    return out


def cmd_show(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from sremarathon_env.bundle import BundleError, read_bundle

    if not _exists(args.path):
        return 2
    try:
        b = read_bundle(args.path)
    except BundleError as e:
        print(f"BAD: {e}", file=sys.stderr)
        return 1
    s = _summary(b)
    if args.json:
        print(json.dumps(s, indent=2, sort_keys=True, default=str))
        return 0
    t = Table(title=f"bundle {args.path}", show_header=False)
    t.add_column("field")
    t.add_column("value")
    t.add_row("state", "complete" if s["complete"] else "incomplete (unsealed prefix)")
    t.add_row("digest", s["digest"])
    t.add_row("records", f"{s['n_records']}  " + ", ".join(f"{k}={v}" for k, v in s["counts"].items()))
    t.add_row("final t", f"{s['final_t']:g} s")
    for k, v in s.get("run", {}).items():
        t.add_row(k, str(v))
    if "schedule" in s:
        sc = s["schedule"]
        t.add_row("faults", f"{sc['faults']} ({', '.join(f'{k}={v}' for k, v in sc['by_category'].items())})")
        t.add_row("noise events", str(sc["noise"]))
    Console().print(t)
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from scoring import score_bundle
    from sremarathon_env.bundle import BundleError

    if not _exists(args.path):
        return 2
    try:
        rep = score_bundle(args.path)
    except BundleError as e:
        print(f"BAD: bundle does not verify: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(rep.to_json())
    else:
        rep.render(faults=not args.no_faults)
    return 0
