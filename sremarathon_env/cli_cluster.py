"""CLI: ``sremarathon cluster build|up|down|status`` — a real Kubernetes API for the live backend.

Examples::

    sremarathon cluster build                      # build or reuse the cached control plane (Go modules)
    sremarathon cluster up --provider kwok         # etcd + apiserver + controllers + scheduler + kwok, loopback
    sremarathon cluster status
    sremarathon cluster down                       # stops every process it started
    sremarathon cluster up --provider kind --dry-run   # print the kind config and the commands (needs Docker to run)

>>> import argparse
>>> p = argparse.ArgumentParser(); sub = p.add_subparsers(dest="command"); add_parser(sub)
>>> a = p.parse_args(["cluster", "up", "--provider", "kind", "--dry-run"])
>>> a.action, a.provider, a.dry_run
('up', 'kind', True)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from sremarathon_env.cli_args import app_name


def _local(args: argparse.Namespace):
    from sremarathon_env.backends.kubernetes.cluster import LocalCluster
    return LocalCluster(name=args.name, workdir=args.workdir)


def _kind(args: argparse.Namespace):
    from sremarathon_env.backends.kubernetes.cluster import cache_root
    from sremarathon_env.backends.kubernetes.kind import KindPlan
    workdir = args.workdir or str(cache_root() / "kind" / args.name)
    return KindPlan(name=args.name, workdir=workdir, app_name=args.app)


def cmd_build(args: argparse.Namespace) -> int:
    from sremarathon_env.backends.kubernetes.cluster import build_script, find_bin_dir
    script = build_script()
    if script is None:
        d = find_bin_dir()
        if d is not None:
            print(d)
            return 0
        print("error: live/build_control_plane.sh is only in a source checkout; no cached binaries found",
              file=sys.stderr)
        return 1
    return subprocess.run(["bash", str(script)]).returncode


def cmd_up(args: argparse.Namespace) -> int:
    if args.provider == "kind":
        plan = _kind(args)
        files = plan.write_files()
        ok, why = plan.available()
        if args.dry_run or not ok:
            for f in files:
                print(f"wrote {f}")
            print(" ".join(plan.create_command()))
            print(" ".join(plan.nodes_command()))
            print("# then, per worker, tc netem commands from the node IPs and pod CIDRs (docker exec <node> tc ...)")
            for c in plan.apply_commands():
                print(" ".join(c))
            if not ok and not args.dry_run:
                print(f"error: {why}", file=sys.stderr)
                return 1
            return 0
        plan.up()
        print(f"kubeconfig: {plan.kubeconfig_path}")
        return 0
    from sremarathon_env.backends.kubernetes.cluster import ClusterError
    c = _local(args)
    try:
        timings = c.up(app=args.app, timeout_s=args.timeout)
    except ClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"kubeconfig": c.kubeconfig_path, "timings_s": timings, "pids": c.running()}, sort_keys=True))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    if args.provider == "kind":
        plan = _kind(args)
        ok, why = plan.available()
        if not ok:
            print(f"error: {why}", file=sys.stderr)
            return 1
        plan.down()
        return 0
    c = _local(args)
    stopped = c.down()
    left = c.running()
    print(json.dumps({"stopped": stopped, "still_running": left}, sort_keys=True))
    return 1 if left else 0


def cmd_status(args: argparse.Namespace) -> int:
    c = _local(args)
    st = c.state()
    print(json.dumps({"running": c.running(), "kubeconfig": c.kubeconfig_path if os.path.exists(c.kubeconfig_path) else None,
                      "timings_s": st.get("timings", {}), "bin_dir": st.get("bin_dir")}, sort_keys=True))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("cluster", help="local Kubernetes control plane for the live backend (kwok) or kind")
    p.add_argument("action", choices=["build", "up", "down", "status"])
    p.add_argument("--provider", choices=["kwok", "kind"], default="kwok")
    p.add_argument("--name", default="sre")
    p.add_argument("--workdir", default=None, help="cluster directory (default ~/.cache/sremarathon/clusters/NAME)")
    p.add_argument("--app", type=app_name, default="online-boutique", help="app whose topology gives the nodes and zones")
    p.add_argument("--timeout", type=float, default=240.0)
    p.add_argument("--dry-run", action="store_true", help="kind: write the files and print the commands only")
    p.set_defaults(func=lambda a: {"build": cmd_build, "up": cmd_up, "down": cmd_down, "status": cmd_status}[a.action](a))
