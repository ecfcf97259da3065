#!/usr/bin/env python3
"""Regenerate the shipped CPU sample ``samples/gpt_tiny_cpu/`` and check it.

Run with a Python that has torch, from anywhere:
    .venv-torch/bin/python scripts/record_sample.py
The size is fixed here (not on the command line) so the sample is always
recorded the same way; it stays a few hundred KB.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pt2chakra.collect.record import record_training_step, summarize_recording
from pt2chakra.collect.sample_model import GPTConfig, make_training_step

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_NAME = "gpt_tiny_cpu"
SAMPLE_DIR = ROOT / "samples" / SAMPLE_NAME
SAMPLE_CONFIG = GPTConfig(layers=2, d_model=64, heads=4, seq_len=32, batch=2)
WARMUP_STEPS = 1
MAX_TOTAL_BYTES = 300_000
EXPECTED_SCHEMA = "1.1.1-chakra.0.0.4"


def main() -> int:
    start = time.perf_counter()
    step = make_training_step(SAMPLE_CONFIG, "cpu")
    host, kineto = record_training_step(step, SAMPLE_DIR, warmup=WARMUP_STEPS, name=SAMPLE_NAME)
    elapsed = time.perf_counter() - start
    summary = summarize_recording(host, kineto)
    total = host.stat().st_size + kineto.stat().st_size
    for line in [f"wrote {host} and {kineto} in {elapsed:.1f} s", *summary.lines()]:
        print(line)
    print(f"total size: {total / 1024:.0f} KiB")
    problems = []
    if summary.schema != EXPECTED_SCHEMA:
        problems.append(f"schema {summary.schema!r}, expected {EXPECTED_SCHEMA!r}")
    if total > MAX_TOTAL_BYTES:
        problems.append(f"sample is {total} bytes, over {MAX_TOTAL_BYTES}")
    if summary.match_fraction < 1.0:
        problems.append("some Kineto host events have no matching ET rf_id")
    for p in problems:
        print(f"WARNING: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
