"""``pt2chakra collect``: CLI wiring over :mod:`pt2chakra.collect`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeVar

from pt2chakra.cli import options
from pt2chakra.collect.distributed import (
    DDP,
    DEFAULT_WORLD_SIZE,
    FSDP2,
    PARALLEL_MODES,
    DdpConfig,
    RankJob,
    Rendezvous,
)
from pt2chakra.collect.layouts import GPIPE, SCHEDULES, LayoutConfig
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

T = TypeVar("T")
MAX_PORT = 65535  # TCP ports are 16 bits
# Profiled steps one recording may take: each is a session whose raw traces
# are held on disk until the median one is kept.
MAX_PROFILED = 100
# A layout's degrees, micro-batches too: each rank is a process of its own on
# one machine, and recordings of more than this many are not what collect is for.
MAX_DEGREE = 256

EPILOG = """examples:
  pt2chakra collect --out-dir out/gpt                          (the tiny GPT, one process)
  pt2chakra collect --ddp gloo --world-size 4 --out-dir out/ddp
  pt2chakra collect --tp 2 --out-dir out/tp2                   (tensor parallel, 2 ranks)
  pt2chakra collect --pp 4 --schedule 1f1b --micro-batches 8 --out-dir out/pp4
  pt2chakra collect --tp 2 --dp 2 --out-dir out/tp2dp2         (2 tp groups, FSDP2 across)
  pt2chakra collect --pp 2 --dp 2 --rank 3 --master-addr 10.0.0.1 --master-port 29500 \\
      --out-dir out/pp2dp2                                     (rank 3 alone; others elsewhere)
"""


def _cmd_collect(args: argparse.Namespace) -> int:
    from pt2chakra.collect import collect_sample

    if (args.tp, args.pp, args.dp) != (None, None, None):
        return _collect_ranks(args, _layout_config(args))
    if args.ddp:
        return _collect_ranks(args, _ddp_config(args))
    try:
        host, kineto = collect_sample(
            args.out_dir, layers=_given(args.layers, DEFAULT_LAYERS), d_model=args.d_model,
            heads=args.heads, seq_len=_given(args.seq_len, DEFAULT_SEQ_LEN),
            batch=_given(args.batch, DEFAULT_BATCH),
            warmup=DEFAULT_WARMUP if args.steps_warmup is None else args.steps_warmup,
            device=args.device, name=args.name, timed=args.timed_steps,
            profiled=args.profiled_steps)
    except ValueError as exc:  # a model size the tiny GPT cannot take
        raise InputError("collect", str(exc)) from None
    if not args.quiet:
        print(host)
        print(kineto)
    return 0


def _ddp_config(args: argparse.Namespace) -> DdpConfig:
    try:
        return DdpConfig(world_size=_given(args.world_size, DEFAULT_WORLD_SIZE),
                         warmup=_given(args.steps_warmup, DdpConfig.warmup),
                         hidden=_given(args.hidden, DdpConfig.hidden),
                         layers=_given(args.layers, DdpConfig.layers),
                         batch=_given(args.batch, DdpConfig.batch),
                         bucket_mb=_given(args.bucket_mb, DdpConfig.bucket_mb),
                         steps=args.steps, accumulate=_given(args.accumulate, 1),
                         parallel=_given(args.parallel, DDP), timed=args.timed_steps)
    except ValueError as exc:
        raise InputError("collect --ddp", str(exc)) from None


# Options of the data-parallel MLP alone, refused with a layout rather than ignored.
DDP_ONLY = (("ddp", "--ddp"), ("bucket_mb", "--bucket-mb"), ("accumulate", "--accumulate"))


def _layout_config(args: argparse.Namespace) -> LayoutConfig:
    """The layout ``--tp/--pp/--dp`` ask for; one line for what cannot be recorded."""
    where = "collect " + " ".join(f"--{k} {v}" for k, v in
                                  (("tp", args.tp), ("pp", args.pp), ("dp", args.dp)) if v)
    for field, option in DDP_ONLY:
        if getattr(args, field) is not None:
            raise InputError(where, f"{option} is for the data-parallel MLP (collect --ddp), "
                             "not a layout")
    if args.parallel == DDP:
        raise InputError(where, "a layout's data parallel is FSDP2 (torch's DDP takes neither "
                         "DTensor parameters nor a pipeline schedule's backward)")
    pp = _given(args.pp, 1)
    if pp == 1 and (args.schedule, args.micro_batches) != (None, None):
        raise InputError(where, "--schedule and --micro-batches need --pp above 1")
    try:
        cfg = LayoutConfig(tp=_given(args.tp, 1), pp=pp, dp=_given(args.dp, 1),
                           schedule=_given(args.schedule, GPIPE),
                           micro_batches=_given(args.micro_batches, LayoutConfig.micro_batches),
                           blocks=_given(args.layers, LayoutConfig.blocks),
                           width=_given(args.hidden, LayoutConfig.width),
                           seq=_given(args.seq_len, LayoutConfig.seq),
                           batch=_given(args.batch, LayoutConfig.batch),
                           warmup=_given(args.steps_warmup, LayoutConfig.warmup),
                           timed=args.timed_steps, steps=args.steps)
    except ValueError as exc:
        raise InputError(where, str(exc)) from None
    if args.world_size is not None and args.world_size != cfg.world_size:
        raise InputError(where, f"--world-size {args.world_size} is not tp x pp x dp = "
                         f"{cfg.world_size}")
    return cfg


def _collect_ranks(args: argparse.Namespace, cfg: RankJob) -> int:
    """Every rank spawned here, or ``--rank`` alone (a launcher starts the others)."""
    from pt2chakra.collect.distributed import collect_gloo, collect_one_rank

    if args.rank is None:
        pairs = collect_gloo(args.out_dir, cfg, args.name)
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


def _given(value: T | None, default: T) -> T:
    """--layers/--batch... size every model; each has its own default."""
    return default if value is None else value


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``collect`` to the ``pt2chakra`` parser."""
    p = sub.add_parser("collect", parents=[common],
                       description="Record one training step of a built-in tiny GPT as host "
                       "ET + Kineto traces (needs torch); with --ddp gloo a data-parallel MLP, "
                       "with --tp/--pp (and --dp) a small transformer under that layout, "
                       "one process per rank over gloo: NAME.rankN.* per rank.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", type=Path, required=True, help="folder for the two .json.gz files")
    p.add_argument("--layers", type=int, default=None,
                   help=f"default {DEFAULT_LAYERS}; with --ddp {DdpConfig.layers}; "
                   f"with a layout {LayoutConfig.blocks} blocks")
    p.add_argument("--d-model", type=int, default=DEFAULT_D_MODEL)
    p.add_argument("--heads", type=int, default=DEFAULT_HEADS)
    p.add_argument("--seq-len", type=int, default=None,
                   help=f"default {DEFAULT_SEQ_LEN}; with a layout {LayoutConfig.seq}")
    p.add_argument("--batch", type=int, default=None,
                   help=f"default {DEFAULT_BATCH}; with --ddp {DdpConfig.batch}; with a "
                   f"layout {LayoutConfig.batch} sequences per data-parallel replica")
    p.add_argument("--steps-warmup", type=int, default=None,
                   help=f"untraced steps first (default {DEFAULT_WARMUP}; with --ddp "
                        f"{DdpConfig.warmup}, as DDP rebuilds its buckets on step 2; with a "
                        f"layout {LayoutConfig.warmup})")
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
    p.add_argument("--world-size", type=int, default=None,
                   help=f"with --ddp: number of ranks (processes; default {DEFAULT_WORLD_SIZE}); "
                   "with a layout it must be tp x pp x dp")
    p.add_argument("--hidden", type=int, default=None,
                   help=f"with --ddp: width of the MLP's square layers (default "
                   f"{DdpConfig.hidden}; gradients: layers x hidden^2 floats); with a layout "
                   f"the model's width (default {LayoutConfig.width})")
    p.add_argument("--bucket-mb", type=float, default=None,
                   help=f"with --ddp: DDP gradient bucket size in MB (default "
                   f"{DdpConfig.bucket_mb})")
    p.add_argument("--steps", type=int, default=DdpConfig.steps,
                   help="with --ddp or a layout: recorded steps, one pair per step and rank "
                        "(NAME.stepS.rankN.* when more than one)")
    p.add_argument("--accumulate", type=int, default=None, metavar="K",
                   help="with --ddp: micro-batches per step (gradient accumulation; the "
                        "gradients are all-reduced once; default 1)")
    p.add_argument("--parallel", choices=PARALLEL_MODES, default=None,
                   help=f"with --ddp: replicate the model (DistributedDataParallel, the "
                        f"default) or shard it (FSDP2: fully_shard on each block and on the "
                        f"whole model); a layout's --dp is always {FSDP2}")
    layout = p.add_argument_group(
        "layouts", "a small transformer (blocks of LayerNorm + MLP width -> 4 width -> width)\n"
        "over tp x pp x dp ranks on gloo: give --tp or --pp, and --dp for data parallel\n"
        "beside it (FSDP2 over each tp group or stage); docs/RECORDING.md")
    layout.add_argument("--tp", type=options.int_range(1, MAX_DEGREE), default=None, metavar="N",
                        help="tensor parallel: each block's MLP split over N ranks (DTensor "
                        "ColwiseParallel + RowwiseParallel)")
    layout.add_argument("--pp", type=options.int_range(1, MAX_DEGREE), default=None, metavar="N",
                        help="pipeline parallel: N stages of layers/N blocks "
                        "(torch.distributed.pipelining)")
    layout.add_argument("--dp", type=options.int_range(1, MAX_DEGREE), default=None, metavar="N",
                        help="data parallel beside --tp or --pp: N replicas, each sharded by FSDP2")
    layout.add_argument("--schedule", choices=SCHEDULES, default=None,
                        help=f"with --pp: the pipeline schedule (default {GPIPE})")
    layout.add_argument("--micro-batches", type=options.int_range(1, MAX_DEGREE), default=None,
                        metavar="K", help=f"with --pp: micro-batches per step (default "
                        f"{LayoutConfig.micro_batches}; 1f1b needs at least --pp)")
    p.add_argument("--rank", type=options.rank, default=None,
                   help="with --ddp or a layout: run only this rank here (a launcher starts the "
                        "others, e.g. each in its own network namespace); needs --master-port")
    p.add_argument("--master-addr", default="127.0.0.1",
                   help="with --rank: rank 0's address (MASTER_ADDR)")
    p.add_argument("--master-port", type=options.int_range(1, MAX_PORT), default=None,
                   help="with --rank: rank 0's port (MASTER_PORT)")
    p.set_defaults(func=_cmd_collect)
