"""Recording: one training step as a host ET plus a Kineto trace, from one
profiler session (so ET ``rf_id`` equals Kineto ``Record function id``).

torch is imported lazily so that pt2chakra imports without it.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from pt2chakra.collect.record import (
    DEFAULT_PROFILED,
    DEFAULT_TIMED,
    RecordingSummary,
    record_training_step,
    summarize_recording,
    time_steps,
    write_real_step,
)
from pt2chakra.errors import InputError

__all__ = ["RecordingSummary", "collect_sample", "record_training_step", "summarize_recording"]


def collect_sample(out_dir: Path | str, *, layers: int, d_model: int, heads: int, seq_len: int,
                   batch: int, warmup: int, device: str = "cpu",
                   name: str = "trace", timed: int = DEFAULT_TIMED,
                   profiled: int = DEFAULT_PROFILED) -> tuple[Path, Path]:
    """Record one step of the built-in tiny GPT; returns (host ET, Kineto) paths.
    First ``timed`` steps run without the profiler: their times go to
    ``meta.json`` beside the traces (the real step). Of ``profiled`` profiled
    steps the one of median wall time is kept. ``InputError`` when torch (or
    the asked-for device) is missing."""
    try:
        import torch
    except ImportError:
        raise InputError("collect", "needs torch: pip install 'pt2chakra[collect]'") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda", "no CUDA device is available")
    from pt2chakra.collect.sample_model import GPTConfig, make_training_step

    cfg = GPTConfig(layers, d_model, heads, seq_len, batch)
    step = make_training_step(cfg, device)
    times = time_steps(step, warmup, timed)
    walls: list[float] = []
    pair = record_training_step(step, out_dir, warmup=0, name=name, profiled=profiled,
                                profiled_s=walls)
    if times:
        write_real_step(out_dir, times, {"job": name, "device": device, "warmup": warmup,
                                         "config": asdict(cfg), "profiled_step_s": walls})
    return pair
