"""The ``sremarathon`` command. Each subcommand lives in its own module and is imported lazily.

Run ``sremarathon --help`` for the list. A subcommand module defines ``add_parser(subparsers)``
which registers its parser with ``func`` set to a callable taking the parsed args and returning an
exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: subcommand modules, in help order. Each must define add_parser(subparsers).
SUBCOMMAND_MODULES = [
    "sremarathon_env.bench",
    "sremarathon_env.cli_faults",
    "sremarathon_env.cli_bundle",
    "sremarathon_env.cli_run",
    "sremarathon_env.cli_train",
    "sremarathon_env.cli_cluster",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sremarathon", description="SRE-Marathon Gym command line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in SUBCOMMAND_MODULES:
        importlib.import_module(mod).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from wrappers.gc_policy import tune_process

    tune_process()   # a CLI process only steps marathons: rollout GC and allocator settings (wrappers.gc_policy; same results)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
