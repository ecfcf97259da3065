"""Recording: one training step as a host ET plus a Kineto trace, from one
profiler session (so ET ``rf_id`` equals Kineto ``Record function id``).

torch is imported lazily so that pt2chakra imports without it.
"""

from __future__ import annotations

from pathlib import Path

from pt2chakra.collect.record import (
    RecordingSummary,
    record_training_step,
    summarize_recording,
)
from pt2chakra.errors import InputError

__all__ = ["RecordingSummary", "collect_sample", "record_training_step", "summarize_recording"]


def collect_sample(out_dir: Path | str, *, layers: int, d_model: int, heads: int, seq_len: int,
                   batch: int, warmup: int, device: str = "cpu",
                   name: str = "trace") -> tuple[Path, Path]:
    """Record one step of the built-in tiny GPT; returns (host ET, Kineto) paths.
    ``InputError`` when torch (or the asked-for device) is missing."""
    try:
        import torch
    except ImportError:
        raise InputError("collect", "needs torch: pip install 'pt2chakra[collect]'") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda", "no CUDA device is available")
    from pt2chakra.collect.sample_model import GPTConfig, make_training_step

    cfg = GPTConfig(layers, d_model, heads, seq_len, batch)
    step = make_training_step(cfg, device)
    return record_training_step(step, out_dir, warmup=warmup, name=name)
