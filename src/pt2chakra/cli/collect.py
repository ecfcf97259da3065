"""``pt2chakra collect``: CLI wiring over :mod:`pt2chakra.collect`."""

from __future__ import annotations

import argparse
from pathlib import Path

from pt2chakra.collect.record import DEFAULT_NAME, DEFAULT_WARMUP
from pt2chakra.collect.sample_model import (
    DEFAULT_BATCH,
    DEFAULT_D_MODEL,
    DEFAULT_HEADS,
    DEFAULT_LAYERS,
    DEFAULT_SEQ_LEN,
)
from pt2chakra.errors import InputError


def _cmd_collect(args: argparse.Namespace) -> int:
    from pt2chakra.collect import collect_sample

    try:
        host, kineto = collect_sample(
            args.out_dir, layers=args.layers, d_model=args.d_model, heads=args.heads,
            seq_len=args.seq_len, batch=args.batch, warmup=args.steps_warmup,
            device=args.device, name=args.name)
    except ValueError as exc:  # a model size the tiny GPT cannot take
        raise InputError("collect", str(exc)) from None
    if not args.quiet:
        print(host)
        print(kineto)
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``collect`` to the ``pt2chakra`` parser."""
    p = sub.add_parser("collect", parents=[common],
                       help="record an ET + Kineto pair of one training step",
                       description="Record one training step of a built-in tiny GPT as host "
                       "ET + Kineto traces (needs torch).")
    p.add_argument("--out-dir", type=Path, required=True, help="folder for the two .json.gz files")
    p.add_argument("--layers", type=int, default=DEFAULT_LAYERS)
    p.add_argument("--d-model", type=int, default=DEFAULT_D_MODEL)
    p.add_argument("--heads", type=int, default=DEFAULT_HEADS)
    p.add_argument("--seq-len", type=int, default=DEFAULT_SEQ_LEN)
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH)
    p.add_argument("--steps-warmup", type=int, default=DEFAULT_WARMUP, help="untraced steps first")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--name", default=DEFAULT_NAME, help="file name prefix")
    p.set_defaults(func=_cmd_collect)
