"""``sremarathon run | sweep | leaderboard | view``: baseline runs, sweeps, the leaderboard and the HTML view.

- ``sremarathon run --app online-boutique --seed 0 --policy runbook [--out DIR]``: one marathon with a
  progress bar; writes the bundle (to ``DIR/<policy>/<app>/seed-<n>``) and prints the score table.
- ``sremarathon sweep --apps all --seeds 0-19 --policies noop,random,runbook,keep,oracle [--out DIR]
  [--workers N] [--ray ADDRESS|auto]``: every combination, in local processes or as Ray tasks.
- ``sremarathon leaderboard DIR [--out DIR2]``: terminal table, leaderboard.md, leaderboard.csv and PNGs.
- ``sremarathon view BUNDLE [-o FILE]``: a self-contained HTML page of one run.

>>> import argparse
>>> p = argparse.ArgumentParser(); sub = p.add_subparsers(); add_parser(sub)
>>> p.parse_args(["run", "--policy", "keep", "--seed", "3"]).seed
3
"""

from __future__ import annotations

import argparse
import json
import sys

from sremarathon_env.cli_args import app_list, app_name, non_negative_int, policy_list, policy_spec, positive_int, \
    seed_list


def _policy_options(pairs: list[str] | None) -> dict:
    out = {}
    for p in pairs or []:
        k, sep, v = p.partition("=")
        if not sep:
            raise SystemExit(f"--option needs KEY=VALUE, got {p!r}")
        try:
            out[k] = json.loads(v)
        except ValueError:
            out[k] = v
    return out


def _marathon_config(args) -> dict:
    cfg = {}
    for k in ("injection_s", "observation_s"):
        v = getattr(args, k, None)
        if v is not None:
            cfg[k] = v
    if getattr(args, "no_noise", False):
        cfg["noise"] = False
    return cfg


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--injection-s", dest="injection_s", type=positive_int, default=None,
                   help="injection window (default 3600)")
    p.add_argument("--observation-s", dest="observation_s", type=non_negative_int, default=None,
                   help="observation window (default 1800)")
    p.add_argument("--no-noise", action="store_true", help="no benign noise events")


def cmd_run(args) -> int:
    from rich.console import Console

    from baselines import make_policy
    from baselines.runner import run_marathon

    try:
        pol = make_policy(args.policy, **_policy_options(args.option))
    except (ValueError, FileNotFoundError) as e:   # e.g. react without an endpoint, a ppo path without a module
        print(f"error: policy {args.policy}: {e}", file=sys.stderr)
        return 2
    report, path = run_marathon(args.app, args.seed, pol, out_dir=args.out, progress=not args.quiet,
                                **_marathon_config(args))
    console = Console()
    report.render(console, faults=args.faults)
    if path:
        console.print(f"bundle: {path}")
    return 0


def cmd_sweep(args) -> int:
    from rich.console import Console

    from baselines.sweep import run_sweep, sweep_jobs

    console = Console()
    jobs = sweep_jobs(args.apps, args.seeds, args.policies, **_marathon_config(args))
    console.print(f"{len(jobs)} runs -> {args.out}" + (f" on Ray ({args.ray})" if args.ray else
                                                       f" with {args.workers} local processes"))
    n_err = 0

    def show(r):
        nonlocal n_err
        if "error" in r:
            n_err += 1
            console.print(f"[red]FAILED[/] {r['policy']} {r['app']} seed {r['seed']}: {r['error']}")
        elif r.get("skipped"):
            console.print(f"skipped (exists) {r['policy']} {r['app']} seed {r['seed']}")
        else:
            console.print(f"{r['policy']:>8} {r['app']:<16} seed {r['seed']:>3}: {r['score']:6.2f}")

    run_sweep(jobs, args.out, workers=args.workers, ray_address=args.ray, on_done=show)
    console.print(f"done; see `sremarathon leaderboard {args.out}`")
    return 1 if n_err else 0


def cmd_leaderboard(args) -> int:
    from rich.console import Console

    from sremarathon_env.report import collect_runs, leaderboard_rows, leaderboard_table, per_app_rows, \
        write_leaderboard

    runs = collect_runs(args.dir)
    console = Console() if sys.stdout.isatty() else Console(width=200)
    if not runs:
        console.print(f"no verifiable bundles under {args.dir}")
        return 1
    console.print(leaderboard_table(leaderboard_rows(runs)))
    from rich.table import Table

    t = Table(title="Marathon-Score per app (mean over seeds)")
    for c in ("method", "app", "score", "min", "max", "seeds"):
        t.add_column(c, justify="left" if c in ("method", "app") else "right")
    for r in per_app_rows(runs):
        t.add_row(r["method"], r["app"], f"{r['score']:.1f}", f"{r['min']:.1f}", f"{r['max']:.1f}", str(r["seeds"]))
    console.print(t)
    paths = write_leaderboard(runs, args.out or args.dir, plots=not args.no_plots)
    for name, p in paths.items():
        console.print(f"{name}: {p}")
    return 0


def cmd_view(args) -> int:
    from sremarathon_env.bundle.recorder import BundleError
    from sremarathon_env.report.view import write_html

    try:
        out = write_html(args.bundle, args.output)
    except BundleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(out)
    return 0


def add_parser(sub) -> None:
    from baselines import POLICY_NAMES

    p = sub.add_parser("run", help="run one marathon with a baseline policy and score it")
    p.add_argument("--app", type=app_name, default="online-boutique")
    p.add_argument("--seed", type=non_negative_int, default=0)
    p.add_argument("--policy", type=policy_spec, default="runbook", help=f"{', '.join(POLICY_NAMES)} or ppo:PATH")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="policy option (e.g. model=gpt-4o-mini for react); repeatable")
    p.add_argument("--out", default=None, help="bundle root directory (default: in memory only)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--faults", action="store_true", help="also print the per-fault table")
    _add_common(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("sweep", help="run every app x seed x policy combination and write all bundles")
    p.add_argument("--apps", type=app_list, default="all", help="comma-separated app names or 'all'")
    p.add_argument("--seeds", type=seed_list, default="0-4", help="e.g. 0-19 or 0,3,5")
    p.add_argument("--policies", type=policy_list, default="noop,random,runbook,keep,oracle")
    p.add_argument("--out", default="runs", help="bundle root directory (default ./runs)")
    p.add_argument("--workers", type=positive_int, default=2, help="local processes (default 2)")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="run as Ray tasks on this cluster ('auto' to join the one Ray finds); needs the [rl] extra")
    _add_common(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("leaderboard", help="leaderboard of the bundles under DIR (table, Markdown, CSV, PNGs)")
    p.add_argument("dir")
    p.add_argument("--out", default=None, help="where to write leaderboard.{md,csv} and PNGs (default DIR)")
    p.add_argument("--no-plots", action="store_true")
    p.set_defaults(func=cmd_leaderboard)

    p = sub.add_parser("view", help="write a self-contained HTML page of one bundle")
    p.add_argument("bundle")
    p.add_argument("-o", "--output", default=None, help="output file (default BUNDLE/view.html)")
    p.set_defaults(func=cmd_view)


if __name__ == "__main__":  # pragma: no cover
    from sremarathon_env.cli import main

    sys.exit(main(["run", *sys.argv[1:]]))
