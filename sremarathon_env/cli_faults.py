"""CLI: ``sremarathon faults list|validate|detect`` and ``sremarathon schedule``.

Examples::

    sremarathon faults list --app online-boutique [--category code] [--json]
    sremarathon faults validate [--app online-boutique] [--category network] [--limit N]
    sremarathon faults detect [--app online-boutique] [--category config] [--limit N]
    sremarathon schedule --app online-boutique --seed 3 [--no-noise] [--json]
    sremarathon schedule --app train-ticket --stats --seeds 0-19

>>> import argparse
>>> p = argparse.ArgumentParser(); sub = p.add_subparsers(dest="command"); add_parser(sub)
>>> a = p.parse_args(["schedule", "--app", "train-ticket", "--stats", "--seeds", "0-3,7"])
>>> a.app, a.seeds
('train-ticket', [0, 1, 2, 3, 7])
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from sremarathon_env.cli_args import app_name, non_negative_float, non_negative_int, seed_list


def _apps(arg: str | None) -> list[str]:
    """The app given (argparse checked it with ``app_name``), else every app with a catalogue."""
    from faults.catalogue import catalogue_apps

    return catalogue_apps() if arg is None else [arg]


def _console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def cmd_list(args: argparse.Namespace) -> int:
    from faults.catalogue import CATALOGUE_VERSION, load_catalogue

    rows = []
    for app in _apps(args.app):
        for f in load_catalogue(app):
            if args.category and f.category != args.category:
                continue
            rows.append(f)
    if args.json:
        print(json.dumps({"catalogue_version": CATALOGUE_VERSION,
                          "faults": [f.model_dump(mode="json") for f in rows]}, indent=1, sort_keys=True))
        return 0
    print(f"fault catalogue {CATALOGUE_VERSION}: {len(rows)} faults")
    w = max((len(f.id) for f in rows), default=10)
    print(f"{'id':<{w}}  {'category':<10} {'mechanism':<11} {'target':<28} {'artifact':<48} {'probe':<44} repairs")
    for f in rows:
        print(f"{f.id:<{w}}  {f.category:<10} {f.mechanism:<11} {f.target:<28} {f.artifact.canonical:<48} "
              f"{f.probe.describe():<44} {','.join(sorted({r.tool for r in f.repairs}))}")
    counts = Counter((f.app, f.category) for f in rows)
    for app in sorted({f.app for f in rows}):
        per = ", ".join(f"{c} {n}" for (a, c), n in sorted(counts.items()) if a == app)
        print(f"{app}: {sum(n for (a, _), n in counts.items() if a == app)} faults ({per})")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from rich.table import Table

    from faults.catalogue import load_catalogue
    from faults.validate import summary, validate

    con = _console()
    outcomes = []
    total_s = 0.0
    for app in _apps(args.app):
        fs = [f for f in load_catalogue(app) if not args.category or f.category == args.category]
        if args.limit:
            fs = fs[: args.limit]
        outs, secs = validate(app, fs, seed=args.seed)
        total_s += secs
        outcomes.extend(outs)
        con.print(f"{app}: {len(outs)} faults validated in {secs:.1f} s")
    t = Table(title="fault validation")
    for c in ("app", "category", "passed", "total"):
        t.add_column(c)
    for (app, cat), (ok, n) in summary(outcomes).items():
        t.add_row(app, cat, str(ok), str(n), style=None if ok == n else "red")
    con.print(t)
    failed = [o for o in outcomes if not o.ok]
    for o in failed[: args.show]:
        con.print(f"[red]FAIL[/red] {o.fault_id}: {o.detail}")
    if len(failed) > args.show:
        con.print(f"... and {len(failed) - args.show} more failures")
    con.print(f"{len(outcomes) - len(failed)}/{len(outcomes)} passed in {total_s:.1f} s")
    return 1 if failed else 0


def cmd_detect(args: argparse.Namespace) -> int:
    """Each fault alone in a healthy twin with the rule pack: the first alert the scorer attributes to it."""
    from collections import defaultdict

    from rich.table import Table

    from faults.catalogue import load_catalogue
    from faults.detect import LIMIT_S, detect

    con = _console()
    found = []
    for app in _apps(args.app):
        fs = [f for f in load_catalogue(app) if not args.category or f.category == args.category]
        if args.limit:
            fs = fs[: args.limit]
        found.extend(detect(app, fs, seed=args.seed))
    agg: dict[tuple[str, str], list] = defaultdict(list)
    for d in found:
        agg[(d.app, d.category)].append(d)
    t = Table(title=f"detectability (an attributable alert within {LIMIT_S:.0f} s of injection)")
    for c in ("app", "category", "detectable", "total", "median s", "silent"):
        t.add_column(c)
    for (app, cat), ds in sorted(agg.items()):
        ok = sum(d.ok for d in ds)
        times = sorted(d.detect_s for d in ds if d.detect_s is not None)
        med = f"{times[len(times) // 2]:.0f}" if times else "-"
        t.add_row(app, cat, str(ok), str(len(ds)), med, str(sum(d.silent for d in ds)),
                  style=None if ok == len(ds) else "red")
    con.print(t)
    bad = [d for d in found if not d.ok]
    for d in bad[: args.show]:
        why = d.detail or f"first attributable alert {d.alertname} on {d.service} after {d.detect_s:.0f} s"
        con.print(f"[red]LATE[/red] {d.fault_id}: {why}")
    if len(bad) > args.show:
        con.print(f"... and {len(bad) - args.show} more")
    con.print(f"{len(found) - len(bad)}/{len(found)} detectable")
    return 1 if bad else 0


def cmd_schedule(args: argparse.Namespace) -> int:
    from faults.orchestrator import PAPER_TARGETS, build_schedule, calibration

    apps = _apps(args.app)
    con = _console()
    if args.stats:
        from rich.table import Table

        t = Table(title=f"calibration over seeds {args.seeds[0]}..{args.seeds[-1]} ({len(args.seeds)} runs)")
        for c in ("app", "faults/run", "avg active", "paper", "peak", "paper", "code+config"):
            t.add_column(c)
        rows = {}
        for app in apps:
            c = calibration(app, args.seeds)
            rows[app] = c
            pa, pp = PAPER_TARGETS.get(app, (float("nan"), float("nan")))
            t.add_row(app, f"{c['n_faults']:.1f}", f"{c['avg_active']:.2f}", f"{pa:g}", f"{c['peak_active']:.2f}",
                      f"{pp:g}", f"{c['share_code'] + c['share_config']:.0%}")
        if args.json:
            print(json.dumps(rows, indent=1, sort_keys=True))
        else:
            con.print(t)
        return 0
    if args.seed is None:
        raise SystemExit("error: --seed is required (or use --stats)")
    for app in apps:
        s = build_schedule(app, args.seed, noise=not args.no_noise, noise_rate=args.noise_rate)
        if args.json:
            print(s.canonical_json())
            continue
        print(f"{app} seed {args.seed} (catalogue {s.catalogue_version})")
        print(f"{'time':<6} {'instance':<8} {'fault':<64} {'target':<30} duration")
        for tm, inst, fid, tgt, dur in s.table():
            print(f"{tm:<6} {inst:<8} {fid:<64} {tgt:<30} {dur}")
        if s.noise and not args.no_noise:
            print(f"noise: {len(s.noise)} events (rate {s.noise_rate:g})")
            for e in s.noise:
                print(f"{e.start_s // 60:02d}:{e.start_s % 60:02d}  {e.id:<8} {e.kind:<14} "
                      f"{e.service or e.path or 'all':<30} until {e.end_s // 60:02d}:{e.end_s % 60:02d}")
        st = s.stats()
        print(f"{int(st['n_faults'])} faults, average active {st['avg_active']:.2f}, peak {int(st['peak_active'])}")
        print(f"digest {s.digest()}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    from faults.model import CATEGORIES

    p = sub.add_parser("faults", help="fault catalogue: list and validate")
    fs = p.add_subparsers(dest="faults_command", metavar="ACTION", required=True)
    pl = fs.add_parser("list", help="list the catalogue")
    pl.add_argument("--app", type=app_name, default=None)
    pl.add_argument("--category", choices=CATEGORIES)
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=cmd_list)
    for name, func, text, show in (
            ("validate", cmd_validate, "inject every fault alone into a healthy twin and check it", "failures to print"),
            ("detect", cmd_detect, "inject every fault alone with the rule pack: does an attributable alert fire?",
             "late or undetected faults to print")):
        pv = fs.add_parser(name, help=text)
        pv.add_argument("--app", type=app_name, default=None)
        pv.add_argument("--category", choices=CATEGORIES)
        pv.add_argument("--limit", type=non_negative_int, default=0, help="only the first N faults per app (0: all)")
        pv.add_argument("--seed", type=non_negative_int, default=0)
        pv.add_argument("--show", type=non_negative_int, default=40, help=show)
        pv.set_defaults(func=func)

    ps = sub.add_parser("schedule", help="print a marathon schedule and its digest, or calibration figures")
    ps.add_argument("--app", type=app_name, default=None)
    ps.add_argument("--seed", type=non_negative_int, default=None)
    ps.add_argument("--stats", action="store_true", help="calibration figures over --seeds")
    ps.add_argument("--seeds", type=seed_list, default=list(range(20)))
    ps.add_argument("--no-noise", action="store_true")
    ps.add_argument("--noise-rate", type=non_negative_float, default=1.0)
    ps.add_argument("--json", action="store_true")
    ps.set_defaults(func=cmd_schedule)


if __name__ == "__main__":  # pragma: no cover
    p = argparse.ArgumentParser(prog="sremarathon")
    add_parser(p.add_subparsers(dest="command"))
    a = p.parse_args()
    sys.exit(a.func(a))
