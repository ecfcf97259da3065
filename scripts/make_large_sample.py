#!/usr/bin/env python3
"""Record a LARGE host ET + Kineto pair (>= 100,000 host ops, one step) for benchmarks.

Output goes to ``bench_data/`` (git-ignored; never commit it). Run with a
Python that has torch:
    .venv-torch/bin/python scripts/make_large_sample.py [--out-dir DIR] [--layers N]
The op count grows by about 758 per layer (CPU, torch 2.13, AdamW foreach=False),
so the default depth lands just above 100,000 with narrow layers to keep it fast.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pt2chakra.collect.record import record_training_step, summarize_recording
from pt2chakra.collect.sample_model import GPTConfig, make_training_step

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT_DIR = ROOT / "bench_data"
NAME = "gpt_large_cpu"
DEFAULT_LAYERS = 134
D_MODEL = 32
HEADS = 4
SEQ_LEN = 8
BATCH = 2
MIN_HOST_OPS = 100_000
MIB = 1 << 20


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    p.add_argument("--layers", type=int, default=DEFAULT_LAYERS)
    args = p.parse_args(argv)
    cfg = GPTConfig(layers=args.layers, d_model=D_MODEL, heads=HEADS, seq_len=SEQ_LEN, batch=BATCH)

    t0 = time.perf_counter()
    step = make_training_step(cfg, "cpu")
    t1 = time.perf_counter()
    host, kineto = record_training_step(step, args.out_dir, warmup=1, name=NAME)
    t2 = time.perf_counter()
    summary = summarize_recording(host, kineto)

    print(f"config: {cfg}")
    print(f"model build {t1 - t0:.1f} s; warm-up + recorded step + write {t2 - t1:.1f} s")
    for path in (host, kineto):
        print(f"{path}: {path.stat().st_size / MIB:.1f} MiB")
    print("\n".join(summary.lines()))
    if summary.host_ops < MIN_HOST_OPS:
        print(f"WARNING: only {summary.host_ops} host ops; raise --layers", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
