"""Inputs and a quiet in-process runner shared by the reliability families
(issue 25): tiny traces that convert and replay in milliseconds, so that
hypothesis can try many output/input layouts."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from pathlib import Path

from builders import comm_node, comp_node, host_doc, kineto_doc, write_json, write_rank


def make_inputs(d: Path) -> dict[str, Path]:
    """A host ET + Kineto pair, and two sound ranks of one job."""
    d.mkdir(parents=True, exist_ok=True)
    return {
        "host": write_json(d / "host.json", host_doc()),
        "kineto": write_json(d / "kineto.json", kineto_doc()),
        "r0": write_rank(d / "r0.et", [comp_node(1), comm_node(2, [1])], rank=0, world_size=2),
        "r1": write_rank(d / "r1.et", [comp_node(1), comm_node(2, [1])], rank=1, world_size=2),
    }


def run_quietly(*argv: object) -> tuple[int, str, str]:
    """``pt2chakra ARGV`` in this process: (exit status, stdout, stderr)."""
    from pt2chakra.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse
            rc = int(exc.code or 0)
    return rc, out.getvalue(), err.getvalue()


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (links as what they point to) with its bytes."""
    found = {}
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            found[str(path.relative_to(folder))] = path.read_bytes() if path.exists() else b"?"
    return found


def temps(folder: Path) -> list[str]:
    """Temp files of pt2chakra.atomic left anywhere under ``folder``."""
    return [name for name in snapshot(folder) if ".tmp" in Path(name).name]


def fresh(folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder
