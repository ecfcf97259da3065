"""Record a multi-rank CPU job over gloo, one process per rank.

Each rank records its own host ET + Kineto pair with ``record_training_step``
(``<name>.rank<N>.host_et.json.gz`` / ``.kineto.json.gz``), so a gloo
collective appears in both files exactly as a user's torch.distributed job
writes it. Here the data-parallel MLP: replicated (DDP) or sharded (FSDP2
``fully_shard`` per block and on the whole model); ``collect/layouts.py``
adds tensor and pipeline parallel jobs, run by the same rank entry point.
``collect_gloo`` spawns every rank on localhost; ``collect_one_rank`` runs
one rank of a job whose other ranks a launcher starts elsewhere (e.g. each
in its own network namespace). torch is imported lazily (in the spawned
processes too).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from pt2chakra.collect.link_cost import LinkProbe, probe_link_cost
from pt2chakra.collect.record import (
    DEFAULT_TIMED,
    HOST_ET_SUFFIX,
    KINETO_SUFFIX,
    record_training_step,
    time_steps,
    write_real_step,
)
from pt2chakra.errors import InputError

DEFAULT_WORLD_SIZE = 2
DEFAULT_HIDDEN = 256
DEFAULT_DDP_LAYERS = 3
DEFAULT_DDP_BATCH = 16
# Small DDP buckets (MB) so that one step holds several all_reduce calls,
# not one: the sample then shows the overlap of backward and communication.
DDP_BUCKET_MB = 0.25
LOCALHOST = "127.0.0.1"
SEED = 0
LEARNING_RATE = 1e-2
# Spawned ranks give up on a peer that never joins after this long.
RENDEZVOUS_TIMEOUT_S = 120
# How the model is spread over the ranks: replicated with DistributedDataParallel,
# or sharded with FSDP2 (``fully_shard`` on each block, then on the whole model).
DDP, FSDP2 = "ddp", "fsdp2"
PARALLEL_MODES = (DDP, FSDP2)


@dataclass(frozen=True)
class DdpConfig:
    """Size of the DDP sample; every field changes the recorded ops."""

    world_size: int = DEFAULT_WORLD_SIZE
    hidden: int = DEFAULT_HIDDEN
    layers: int = DEFAULT_DDP_LAYERS
    batch: int = DEFAULT_DDP_BATCH
    warmup: int = 2  # DDP rebuilds its buckets on the 2nd step: record a steady one
    bucket_mb: float = DDP_BUCKET_MB
    steps: int = 1  # recorded steps, one host ET + Kineto pair each
    # Micro-batches per step (gradient accumulation: all but the last under
    # ``no_sync``): the same ops K times, the communication unchanged; a
    # compute change whose factor is known before measuring.
    accumulate: int = 1
    parallel: str = DDP  # one of PARALLEL_MODES
    # Steps timed without the profiler after the warm-up (meta.json: the real step)
    timed: int = DEFAULT_TIMED

    def __post_init__(self) -> None:
        if self.world_size < 2 or \
                min(self.hidden, self.layers, self.batch, self.steps, self.accumulate) < 1 \
                or min(self.warmup, self.timed) < 0 or not self.bucket_mb > 0:
            raise ValueError(f"need world_size >= 2 and positive sizes, got {self}")
        if self.parallel not in PARALLEL_MODES:
            raise ValueError(f"parallel must be one of {', '.join(PARALLEL_MODES)}, "
                             f"got {self.parallel!r}")

    def step_names(self, name: str, rank: int) -> list[str]:
        return step_names(name, rank, self.steps)

    def make_step(self, rank: int) -> Callable[[], None]:
        return _dp_step(self, rank)

    def meta(self) -> dict[str, object]:
        return {"parallel": self.parallel, "config": asdict(self)}


class RankJob(Protocol):
    """What the rank entry point needs of a job's config (``DdpConfig``,
    ``layouts.LayoutConfig``); a config is pickled into every spawned rank."""

    @property
    def world_size(self) -> int: ...
    @property
    def warmup(self) -> int: ...
    @property
    def timed(self) -> int: ...

    def step_names(self, name: str, rank: int) -> list[str]:
        """This rank's recording names, one per recorded step."""

    def make_step(self, rank: int) -> Callable[[], None]:
        """Build this rank's model (its process group joined) and return one training step."""

    def meta(self) -> dict[str, object]:
        """What ``meta.json`` says about the job besides its timed steps."""


def step_names(name: str, rank: int, steps: int) -> list[str]:
    """One recording per step: ``NAME.rankN`` alone, else ``NAME.stepS.rankN``."""
    if steps == 1:
        return [f"{name}.rank{rank}"]
    return [f"{name}.step{s}.rank{rank}" for s in range(steps)]


def rank_paths(out_dir: Path, name: str, rank: int) -> tuple[Path, Path]:
    base = out_dir / f"{name}.rank{rank}"
    return Path(f"{base}{HOST_ET_SUFFIX}"), Path(f"{base}{KINETO_SUFFIX}")


def recording_paths(out_dir: Path, name: str, cfg: RankJob) -> list[tuple[Path, Path]]:
    """Every (host ET, Kineto) pair a collection writes: step by step, rank by rank."""
    per_rank = [cfg.step_names(name, r) for r in range(cfg.world_size)]
    return [(Path(f"{out_dir / n}{HOST_ET_SUFFIX}"), Path(f"{out_dir / n}{KINETO_SUFFIX}"))
            for step in zip(*per_rank) for n in step]


@dataclass(frozen=True)
class Rendezvous:
    """Where the ranks meet: rank 0's address and a port (``MASTER_ADDR/PORT``)."""

    addr: str
    port: int


def collect_gloo_ddp(out_dir: Path | str, cfg: DdpConfig = DdpConfig(),
                     name: str = "gloo_ddp") -> list[tuple[Path, Path]]:
    """The data-parallel MLP, every rank spawned here (``collect_gloo``)."""
    return collect_gloo(out_dir, cfg, name)


def collect_gloo(out_dir: Path | str, cfg: RankJob, name: str) -> list[tuple[Path, Path]]:
    """Record ``cfg``'s steps per rank over gloo, every rank spawned here on
    localhost; returns each recording's (host ET, Kineto), step by step, rank by rank."""
    out = _prepared(out_dir)
    from torch.multiprocessing.spawn import spawn

    meet = Rendezvous(LOCALHOST, _free_port())
    spawn(_rank_main, args=(cfg, str(out), name, meet), nprocs=cfg.world_size, join=True)
    return recording_paths(out, name, cfg)


def collect_one_rank(out_dir: Path | str, cfg: RankJob, rank: int, meet: Rendezvous,
                     name: str = "gloo_ddp") -> list[tuple[Path, Path]]:
    """Run and record rank ``rank`` of ``cfg.world_size`` in this process (a
    launcher starts the others, all meeting at ``meet``); returns this rank's
    (host ET, Kineto) per recorded step."""
    if not 0 <= rank < cfg.world_size:
        raise InputError("--rank", f"must be in 0..{cfg.world_size - 1}, got {rank}")
    out = _prepared(out_dir)
    _rank_main(rank, cfg, str(out), name, meet)
    return [(Path(f"{out / n}{HOST_ET_SUFFIX}"), Path(f"{out / n}{KINETO_SUFFIX}"))
            for n in cfg.step_names(name, rank)]


def _prepared(out_dir: Path | str) -> Path:
    """The output folder, created, once torch with gloo is known to be here."""
    try:
        import torch.distributed as dist
    except ImportError:
        raise InputError("collect", "needs torch: pip install 'pt2chakra[collect]'") from None
    if not dist.is_available() or not dist.is_gloo_available():
        raise InputError("collect", "this torch build has no gloo backend")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOCALHOST, 0))
        return int(s.getsockname()[1])


def _real_step(dist: Any, times: list[float], cfg: RankJob, rank: int, out_dir: str,
               name: str, probe: LinkProbe | None = None) -> None:
    """Rank 0 writes the timed steps beside the traces: each step's time is
    the slowest rank's (the job's step), as in the h200 traces' meta.json."""
    if not times:
        return
    every: list[list[float] | None] = [None] * cfg.world_size
    dist.all_gather_object(every, times)
    if rank == 0:
        from pt2chakra.simulation.profiler_overhead import (
            META_LINK_CPU_FIELD,
            META_RANK_LINK_CPU_FIELD,
        )

        ranks = [t for t in every if t]
        cost: dict[str, object] = {} if probe is None else {"link_cpu_probe": probe.meta()}
        if probe is not None and probe.ns_per_byte is not None:
            cost[META_LINK_CPU_FIELD] = probe.ns_per_byte
        if probe is not None and probe.rank_ns_per_byte is not None:
            cost[META_RANK_LINK_CPU_FIELD] = probe.rank_ns_per_byte
        write_real_step(out_dir, [max(col) for col in zip(*ranks)],
                        {"job": name, "world_size": cfg.world_size, **cfg.meta(), **cost,
                         "ranks": [{"rank": r, "timed_s": t} for r, t in enumerate(ranks)]})


def _rank_main(rank: int, cfg: RankJob, out_dir: str, name: str, meet: Rendezvous) -> None:
    """One rank: join the group, build the model, record one step."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = meet.addr
    os.environ["MASTER_PORT"] = str(meet.port)
    torch.set_num_threads(1)  # ranks share the machine's cores
    dist.init_process_group("gloo", rank=rank, world_size=cfg.world_size,
                            timeout=timedelta(seconds=RENDEZVOUS_TIMEOUT_S))
    try:
        step = cfg.make_step(rank)
        dist.barrier()
        times = time_steps(step, cfg.warmup, cfg.timed)
        probe = probe_link_cost(dist, torch, cfg.world_size, rank) if times else None
        _real_step(dist, times, cfg, rank, out_dir, name, probe)
        for step_name in cfg.step_names(name, rank):
            dist.barrier()  # every recorded step starts with both ranks ready
            record_training_step(step, out_dir, warmup=0, name=step_name)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _dp_step(cfg: DdpConfig, rank: int) -> Callable[[], None]:
    """A small MLP, replicated (DDP) or sharded (FSDP2), one broadcast of a
    flag and one all_gather of the loss per step: the collectives a CPU
    training loop typically runs. DDP: small buckets, so several all-reduces
    overlap backward. FSDP2: ``fully_shard`` on each block (a Linear and its
    ReLU), then on the whole model, so each step all-gathers every block's
    parameters (forward, and again in backward) and reduce-scatters its
    gradients, prefetched under the neighbouring blocks' compute. With
    ``cfg.accumulate`` K > 1, K forward/backward passes per step, the
    gradients synchronised on the last one only."""
    import torch as t
    import torch.distributed as dist

    t.manual_seed(SEED)
    blocks = [t.nn.Sequential(t.nn.Linear(cfg.hidden, cfg.hidden), t.nn.ReLU())
              for _ in range(cfg.layers)]
    model, sync = _data_parallel(t.nn.Sequential(*blocks), cfg)
    opt = t.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    gen = t.Generator().manual_seed(SEED + rank)
    x = t.randn(cfg.batch, cfg.hidden, generator=gen)
    y = t.randn(cfg.batch, cfg.hidden, generator=gen)
    flag = t.zeros(1)
    losses = [t.zeros(1) for _ in range(cfg.world_size)]

    def step() -> None:
        dist.broadcast(flag, src=0)
        opt.zero_grad(set_to_none=True)
        for micro in range(cfg.accumulate):
            with sync(micro == cfg.accumulate - 1):
                loss = t.nn.functional.mse_loss(model(x), y)
                loss.backward()
        opt.step()
        dist.all_gather(losses, loss.detach().reshape(1))

    return step


def _data_parallel(model: Any, cfg: DdpConfig) -> tuple[Any, Callable[[bool], Any]]:
    """``model`` wrapped as ``cfg.parallel`` says, and the context a backward
    runs in: ``sync(False)`` holds its gradients back (accumulation)."""
    from contextlib import contextmanager, nullcontext

    if cfg.parallel == DDP:
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(model, bucket_cap_mb=cfg.bucket_mb)
        return ddp, lambda last: nullcontext() if last else ddp.no_sync()
    from torch.distributed.fsdp import fully_shard

    for block in model:
        fully_shard(block)
    fully_shard(model)

    @contextmanager
    def sync(last: bool) -> Any:
        model.set_requires_gradient_sync(last)
        yield

    return model, sync
