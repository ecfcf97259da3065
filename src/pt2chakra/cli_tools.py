"""Companion-tool subcommands (inspect, validate, jsonize, ...): CLI wiring."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the companion tools' subcommands to the ``pt2chakra`` parser."""
    del sub, common
