"""``pt2chakra simulate``: CLI wiring for the simulator (see simulate.py)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("simulate", parents=[common], help="replay .et files and report step time")
    p.add_argument("traces", nargs="+", help=".et files (one per rank)")
    p.set_defaults(func=_cmd_simulate)


def short_report(paths: Sequence[str]) -> str:
    """What ``convert --simulate`` prints."""
    from pt2chakra.simulate import simulate_files

    return simulate_files(list(paths)).summary()


def _cmd_simulate(args: argparse.Namespace) -> int:
    print(short_report(args.traces))
    return 0
