"""Record a small transformer under a parallel layout over gloo on CPU:
tensor parallel (TP), pipeline parallel (PP), and either with data parallel
(TP x DP, PP x DP), one process per rank.

The model is a stack of blocks, each LayerNorm + MLP (width -> 4 width ->
width, GELU) with a residual: small, yet every layout's communication has
the shape it has on a real transformer. TP splits each block's MLP pair over
the tp ranks with DTensor (``ColwiseParallel`` then ``RowwiseParallel``: one
all-reduce per block in forward and one in backward). PP gives each stage
``blocks / pp`` consecutive blocks (``torch.distributed.pipelining``: a
``PipelineStage`` run by ``ScheduleGPipe`` or ``Schedule1F1B`` over
micro-batches: a send and a receive per micro-batch and stage boundary, each
way). With dp > 1 every tp group or stage is replicated over a data-parallel
group (a device mesh, dp outside tp as torchtitan lays it out; pp outside
dp), sharded by FSDP2 ``fully_shard`` over the mesh's dp dimension (DDP
fails there in torch 2.13: it cannot bucket DTensor parameters, and its
bucket rebuild under a pipeline schedule trips an internal assert). Every
rank runs one torch thread. The ranks run, record and
store the real step with ``distributed.collect_gloo`` / ``collect_one_rank``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from pt2chakra.collect.distributed import LEARNING_RATE, SEED, step_names
from pt2chakra.collect.record import DEFAULT_TIMED

GPIPE, ONE_F_ONE_B = "gpipe", "1f1b"
SCHEDULES = (GPIPE, ONE_F_ONE_B)
TP, PP, TP_DP, PP_DP = "tp", "pp", "tp-dp", "pp-dp"
MLP_EXPANSION = 4  # the MLP's inner width, as in GPT-2 and Llama's FFN sizing
# The defaults: 4 blocks of width 512 (4 MB of weights each), 8 sequences of
# 32 tokens: on this project's 2-core machine a step of ~0.2-0.5 s per rank
# at one thread, whose TP all-reduces (512 KB each) and PP sends (128 KB per
# micro-batch) are a visible part of it on a 200 Mbit/s link.
DEFAULT_BLOCKS = 4
DEFAULT_WIDTH = 512
DEFAULT_SEQ = 32
DEFAULT_BATCH = 8
# Micro-batches per pipelined step: as many as the largest pipeline recorded
# (4 stages), the least Schedule1F1B accepts there.
DEFAULT_MICRO_BATCHES = 4
# PP's stage shapes are inferred and DDP's buckets rebuilt on the first
# steps, FSDP2 initialises lazily on the first: record a steady step.
DEFAULT_LAYOUT_WARMUP = 2


@dataclass(frozen=True)
class LayoutConfig:
    """One layout of the small transformer: the parallel degrees (world size
    tp x pp x dp), the pipeline's schedule and micro-batches (with pp > 1),
    the model's size, and the steps warmed up, timed and recorded."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    schedule: str = GPIPE  # one of SCHEDULES; with pp > 1
    micro_batches: int = DEFAULT_MICRO_BATCHES  # with pp > 1; the batch is split into them
    blocks: int = DEFAULT_BLOCKS
    width: int = DEFAULT_WIDTH
    seq: int = DEFAULT_SEQ
    batch: int = DEFAULT_BATCH  # sequences per data-parallel replica and step
    warmup: int = DEFAULT_LAYOUT_WARMUP
    timed: int = DEFAULT_TIMED  # steps timed without the profiler (meta.json: the real step)
    steps: int = 1  # recorded steps, one host ET + Kineto pair each

    def __post_init__(self) -> None:
        sizes = (self.tp, self.pp, self.dp, self.blocks, self.width, self.seq, self.batch,
                 self.steps, self.micro_batches)
        if min(sizes) < 1 or min(self.warmup, self.timed) < 0:
            raise ValueError(f"need positive degrees and sizes, got {self}")
        if self.tp > 1 and self.pp > 1:
            raise ValueError("tensor and pipeline parallel together are not recorded: "
                             "give tp or pp, with dp")
        if self.tp == self.pp == 1:
            raise ValueError("needs tp or pp above 1 (data parallel alone: collect --ddp)")
        if self.tp > 1 and MLP_EXPANSION * self.width % self.tp:
            raise ValueError(f"the MLP's {MLP_EXPANSION * self.width} inner features do not "
                             f"split over {self.tp} tensor-parallel ranks")
        if self.pp > 1:
            self._check_pipeline()

    def _check_pipeline(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, "
                             f"got {self.schedule!r}")
        if self.blocks % self.pp:
            raise ValueError(f"{self.blocks} blocks do not split into {self.pp} pipeline stages")
        if self.batch % self.micro_batches:
            raise ValueError(f"a batch of {self.batch} does not split into "
                             f"{self.micro_batches} micro-batches")
        if self.schedule == ONE_F_ONE_B and self.micro_batches < self.pp:
            raise ValueError(f"1F1B needs at least as many micro-batches as stages "
                             f"({self.pp}), got {self.micro_batches}")

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def kind(self) -> str:
        """``tp``, ``pp``, ``tp-dp`` or ``pp-dp``."""
        base = TP if self.tp > 1 else PP
        return f"{base}-dp" if self.dp > 1 else base

    @property
    def label(self) -> str:
        """A short name of the layout: ``tp2``, ``pp4-1f1b``, ``tp2xdp2``, ``pp2xdp2-gpipe``."""
        degrees = f"tp{self.tp}" if self.tp > 1 else f"pp{self.pp}"
        if self.dp > 1:
            degrees += f"xdp{self.dp}"
        return f"{degrees}-{self.schedule}" if self.pp > 1 else degrees

    def layout(self) -> dict[str, object]:
        """The layout as ``meta.json`` holds it (schedule and micro-batches: None without PP)."""
        piped = self.pp > 1
        return {"kind": self.kind, "tp": self.tp, "pp": self.pp, "dp": self.dp,
                "schedule": self.schedule if piped else None,
                "micro_batches": self.micro_batches if piped else None}

    def step_names(self, name: str, rank: int) -> list[str]:
        return step_names(name, rank, self.steps)

    def make_step(self, rank: int) -> Callable[[], None]:
        return _pp_step(self) if self.pp > 1 else _tp_step(self)

    def meta(self) -> dict[str, object]:
        return {"parallel": self.kind, "layout": self.layout(), "config": asdict(self)}


def _block(t: Any, width: int) -> Any:
    """LayerNorm, then the MLP pair (``fc1``, ``fc2``), with a residual."""

    class Block(t.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = t.nn.LayerNorm(width)
            self.fc1 = t.nn.Linear(width, MLP_EXPANSION * width)
            self.fc2 = t.nn.Linear(MLP_EXPANSION * width, width)

        def forward(self, x: Any) -> Any:
            return x + self.fc2(t.nn.functional.gelu(self.fc1(self.norm(x))))

    return Block()


def _data(t: Any, cfg: LayoutConfig, replica: int) -> tuple[Any, Any]:
    """One replica's batch and target: the same on every rank of a tp group
    or a pipeline, different across data-parallel replicas."""
    gen = t.Generator().manual_seed(SEED + replica)
    shape = (cfg.batch, cfg.seq, cfg.width)
    return t.randn(*shape, generator=gen), t.randn(*shape, generator=gen)


def _tp_step(cfg: LayoutConfig) -> Callable[[], None]:
    """Every block's MLP pair split over the tp ranks (a 1-D mesh, or the tp
    dimension of a (dp, tp) mesh whose dp dimension FSDP2 shards over)."""
    import torch as t
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    mesh = init_device_mesh("cpu", (cfg.dp, cfg.tp), mesh_dim_names=("dp", "tp"))
    t.manual_seed(SEED)  # the same weights on every rank before they are split
    blocks = [_block(t, cfg.width) for _ in range(cfg.blocks)]
    for block in blocks:
        parallelize_module(block, mesh["tp"], {"fc1": ColwiseParallel(),
                                               "fc2": RowwiseParallel()})
    model = _sharded(t.nn.Sequential(*blocks), blocks, mesh["dp"])
    opt = t.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    x, y = _data(t, cfg, mesh["dp"].get_local_rank())

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        t.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    return step


def _pp_step(cfg: LayoutConfig) -> Callable[[], None]:
    """This rank's stage of ``blocks / pp`` blocks, run by the schedule over
    the micro-batches: the first stage feeds the batch, the last takes the
    target and the loss; with dp > 1 the stage is replicated over its dp group
    (a (pp, dp) mesh)."""
    import torch as t
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    mesh = init_device_mesh("cpu", (cfg.pp, cfg.dp), mesh_dim_names=("pp", "dp"))
    stage_index = mesh["pp"].get_local_rank()
    per_stage = cfg.blocks // cfg.pp
    t.manual_seed(SEED)  # every stage builds the whole stack and keeps its part
    blocks = [_block(t, cfg.width) for _ in range(cfg.blocks)]
    mine = blocks[stage_index * per_stage:(stage_index + 1) * per_stage]
    module = _sharded(t.nn.Sequential(*mine), mine, mesh["dp"])
    stage = PipelineStage(module, stage_index, cfg.pp, t.device("cpu"),
                          group=mesh["pp"].get_group())
    kind = ScheduleGPipe if cfg.schedule == GPIPE else Schedule1F1B
    schedule = kind(stage, n_microbatches=cfg.micro_batches,
                    loss_fn=t.nn.functional.mse_loss)
    opt = t.optim.SGD(module.parameters(), lr=LEARNING_RATE)
    x, y = _data(t, cfg, mesh["dp"].get_local_rank())
    first, last = stage_index == 0, stage_index == cfg.pp - 1

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        inputs = (x,) if first else ()
        if last:
            schedule.step(*inputs, target=y, losses=[])
        else:
            schedule.step(*inputs)
        opt.step()

    return step


def _sharded(model: Any, blocks: list[Any], dp_mesh: Any) -> Any:
    """``model`` as is without dp; else sharded by FSDP2 over ``dp_mesh``
    (each block, then the whole, as ``collect --ddp --parallel fsdp2`` does)."""
    if dp_mesh.size() == 1:
        return model
    from torch.distributed.fsdp import fully_shard

    for block in blocks:
        fully_shard(block, mesh=dp_mesh)
    fully_shard(model, mesh=dp_mesh)
    return model
