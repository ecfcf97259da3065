"""``pt2chakra collect``: CLI wiring over :mod:`pt2chakra.collect`."""

from __future__ import annotations

import argparse
from pathlib import Path

from pt2chakra.cli import options
from pt2chakra.collect.distributed import (
    DDP,
    DEFAULT_WORLD_SIZE,
    PARALLEL_MODES,
    DdpConfig,
    Rendezvous,
)
from pt2chakra.collect.record import (
    DEFAULT_NAME,
    DEFAULT_PROFILED,
    DEFAULT_TIMED,
    DEFAULT_WARMUP,
)
from pt2chakra.collect.sample_model import (
    DEFAULT_BATCH,
    DEFAULT_D_MODEL,
    DEFAULT_HEADS,
    DEFAULT_LAYERS,
    DEFAULT_SEQ_LEN,
)
from pt2chakra.errors import InputError

MAX_PORT = 65535  # TCP ports are 16 bits
# Profiled steps one recording may take: each is a session whose raw traces
# are held on disk until the median one is kept.
MAX_PROFILED = 100


def _cmd_collect(args: argparse.Namespace) -> int:
    from pt2chakra.collect import collect_sample

    if args.ddp:
        return _collect_ddp(args)
    try:
        host, kineto = collect_sample(
            args.out_dir, layers=_given(args.layers, DEFAULT_LAYERS), d_model=args.d_model,
            heads=args.heads, seq_len=args.seq_len, batch=_given(args.batch, DEFAULT_BATCH),
            warmup=DEFAULT_WARMUP if args.steps_warmup is None else args.steps_warmup,
            device=args.device, name=args.name, timed=args.timed_steps,
            profiled=args.profiled_steps)
    except ValueError as exc:  # a model size the tiny GPT cannot take
        raise InputError("collect", str(exc)) from None
    if not args.quiet:
        print(host)
        print(kineto)
    return 0


def _collect_ddp(args: argparse.Namespace) -> int:
    from pt2chakra.collect.distributed import collect_gloo_ddp, collect_one_rank

    try:
        cfg = DdpConfig(world_size=args.world_size,
                        warmup=_given(args.steps_warmup, DdpConfig.warmup),
                        hidden=args.hidden, layers=_given(args.layers, DdpConfig.layers),
                        batch=_given(args.batch, DdpConfig.batch), bucket_mb=args.bucket_mb,
                        steps=args.steps, accumulate=args.accumulate, parallel=args.parallel,
                        timed=args.timed_steps)
    except ValueError as exc:
        raise InputError("collect --ddp", str(exc)) from None
    if args.rank is None:
        pairs = collect_gloo_ddp(args.out_dir, cfg, name=args.name)
    else:
        if args.master_port is None:
            raise InputError("collect --rank", "needs --master-port (rank 0's port)")
        pairs = collect_one_rank(args.out_dir, cfg, args.rank,
                                 Rendezvous(args.master_addr, args.master_port), name=args.name)
    if not args.quiet:
        for host, kineto in pairs:
            print(host)
            print(kineto)
    return 0


def _given(value: int | None, default: int) -> int:
    """--layers/--batch size both models; each has its own default."""
    return default if value is None else value


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``collect`` to the ``pt2chakra`` parser."""
    p = sub.add_parser("collect", parents=[common],
                       description="Record one training step of a built-in tiny GPT as host "
                       "ET + Kineto traces (needs torch).")
    p.add_argument("--out-dir", type=Path, required=True, help="folder for the two .json.gz files")
    p.add_argument("--layers", type=int, default=None,
                   help=f"default {DEFAULT_LAYERS}; with --ddp {DdpConfig.layers}")
    p.add_argument("--d-model", type=int, default=DEFAULT_D_MODEL)
    p.add_argument("--heads", type=int, default=DEFAULT_HEADS)
    p.add_argument("--seq-len", type=int, default=DEFAULT_SEQ_LEN)
    p.add_argument("--batch", type=int, default=None,
                   help=f"default {DEFAULT_BATCH}; with --ddp {DdpConfig.batch}")
    p.add_argument("--steps-warmup", type=int, default=None,
                   help=f"untraced steps first (default {DEFAULT_WARMUP}; with --ddp "
                        f"{DdpConfig.warmup}, as DDP rebuilds its buckets on step 2)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--timed-steps", type=options.count, default=DEFAULT_TIMED, metavar="N",
                   help=f"steps timed without the profiler after the warm-up, before recording "
                   f"(default {DEFAULT_TIMED}; 0: none): their median, the real step, goes to "
                   "meta.json beside the traces for simulate --without-profiler")
    p.add_argument("--profiled-steps", type=options.int_range(1, MAX_PROFILED), default=DEFAULT_PROFILED,
                   metavar="K",
                   help=f"profiled steps recorded, each in its own profiler session; the one "
                   f"of median wall time is kept (default {DEFAULT_PROFILED}): one profiled step "
                   "is one sample, and on a busy machine it can run long")
    p.add_argument("--name", default=DEFAULT_NAME, help="file name prefix")
    p.add_argument("--ddp", choices=("gloo",),
                   help="record a small MLP under DistributedDataParallel instead, one process "
                        "per rank on localhost over this backend (CPU): NAME.rankN.* per rank")
    p.add_argument("--world-size", type=int, default=DEFAULT_WORLD_SIZE,
                   help="with --ddp: number of ranks (processes)")
    p.add_argument("--hidden", type=int, default=DdpConfig.hidden,
                   help="with --ddp: width of the MLP's square layers (gradients: "
                        "layers x hidden^2 floats)")
    p.add_argument("--bucket-mb", type=float, default=DdpConfig.bucket_mb,
                   help="with --ddp: DDP gradient bucket size in MB")
    p.add_argument("--steps", type=int, default=DdpConfig.steps,
                   help="with --ddp: recorded steps, one pair per step and rank "
                        "(NAME.stepS.rankN.* when more than one)")
    p.add_argument("--accumulate", type=int, default=DdpConfig.accumulate, metavar="K",
                   help="with --ddp: micro-batches per step (gradient accumulation; the "
                        "gradients are all-reduced once)")
    p.add_argument("--parallel", choices=PARALLEL_MODES, default=DDP,
                   help="with --ddp: replicate the model (DistributedDataParallel) or shard it "
                        "(FSDP2: fully_shard on each block and on the whole model)")
    p.add_argument("--rank", type=options.rank, default=None,
                   help="with --ddp: run only this rank here (a launcher starts the others, "
                        "e.g. each in its own network namespace); needs --master-port")
    p.add_argument("--master-addr", default="127.0.0.1",
                   help="with --rank: rank 0's address (MASTER_ADDR)")
    p.add_argument("--master-port", type=options.int_range(1, MAX_PORT), default=None,
                   help="with --rank: rank 0's port (MASTER_PORT)")
    p.set_defaults(func=_cmd_collect)
