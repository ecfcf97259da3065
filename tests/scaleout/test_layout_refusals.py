"""Scale-out refuses every job that is not data parallel in one line naming
its layout and the evidence (rules/layout.py through scaleout/plan.py):
tensor parallel over the whole world (once taken for DDP), pipeline
parallel, expert parallel, a group of mixed roles, and TP x DP / PP x DP
naming both dimensions; for extrapolate, simulate --world-size and
astra-sim --world-size alike, nothing written. Data-parallel jobs still
plan, with their layout in the plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import write_layout_job
from helpers import assert_one_line_failure, layout_recording, run_cli

from pt2chakra.errors import InputError
from pt2chakra.scaleout.plan import DDP, FSDP2, plan

REFUSED = [
    ("tp", 2, ["tensor parallel 2 over process group '0' (default_pg)",
               "8 activation collectives on 2 ranks (4 forward, 4 backward, 8 via DTensor)",
               "tensor-parallel degree at M ranks is not in the trace"]),
    ("tp_dp", 4, ["tensor parallel 2 over process groups '3', '4' (mesh_tp)",
                  " x data parallel 2 (sharded)",
                  "growing only its data-parallel dimension is not supported"]),
    ("pp", 2, ["pipeline parallel, 2 stages over process group '0' (default_pg)",
               "4 sends and 4 receives", "pipeline degree at M ranks is not in the trace"]),
    ("pp_dp", 4, ["pipeline parallel, 2 stages", " x data parallel 2 (sharded)",
                  "growing only its data-parallel dimension"]),
    ("ep", 2, ["expert parallel 2 over process group '0'", "2 all-to-all"]),
    ("mixed", 2, ["mixed roles over process group '0'", "2 gradient all-reduces in backward",
                  "2 activation collectives"]),
]


@pytest.mark.parametrize(("kind", "world", "needles"), REFUSED)
def test_plan_refuses_with_the_layout(tmp_path: Path, kind: str, world: int,
                                      needles: list[str]) -> None:
    with pytest.raises(InputError) as err:
        plan(write_layout_job(tmp_path, kind, world), 8)
    text = str(err.value)
    assert "\n" not in text and "data parallel (replicated)" not in text
    for needle in needles:
        assert needle in text, text
    assert text.rstrip().endswith("only data-parallel jobs scale out")


@pytest.mark.parametrize(("kind", "kind_name", "layout"), [
    ("ddp", DDP, "data parallel 2 (replicated) over process group '0'"),
    ("ddp_orphan", DDP, "4 gradient all-reduces in backward"),
    ("fsdp2", FSDP2, "data parallel 2 (sharded) over process group '0'"),
    ("fsdp2_norm", FSDP2, "data parallel 2 (sharded)"),
])
def test_data_parallel_still_plans(tmp_path: Path, kind: str, kind_name: str,
                                   layout: str) -> None:
    p = plan(write_layout_job(tmp_path, kind, 2), 8)
    assert p.job_kind == kind_name and layout in p.layout
    assert p.sources == [0, 1, 1, 1, 1, 1, 1, 1]


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["extrapolate", "--world-size", "8", "-o", "{out}/job"],
    ["simulate", "--world-size", "8"],
    ["astra-sim", "--world-size", "8", "-o", "{out}/job"],
])
def test_every_scale_out_command_refuses_tp(tmp_path: Path, command: list[str]) -> None:
    """The bug: TP over a 1-D mesh of the whole world runs on the default
    group, which every rank uses, and was written out as 8 DDP ranks."""
    files = write_layout_job(tmp_path / "in", "tp", 2)
    out = tmp_path / "out"
    out.mkdir()
    proc = run_cli(command[0], *files, *[a.format(out=out) for a in command[1:]])
    assert proc.returncode == 2
    assert_one_line_failure(proc, "tensor parallel 2 over process group '0'",
                            "only data-parallel jobs scale out")
    assert list(out.iterdir()) == []


# The real recordings (torch 2.13 over gloo) and the start of each refusal.
REAL = {
    "tp2": "tensor parallel 2 over process group '0' (default_pg)",
    "tp2xdp2": "tensor parallel 2 over process groups '3', '4' (mesh_tp)",
    "pp2-gpipe": "pipeline parallel, 2 stages",
    "pp2-1f1b": "pipeline parallel, 2 stages",
    "pp2xdp2-1f1b": "pipeline parallel, 2 stages",
}


@pytest.mark.slow
@pytest.mark.parametrize("job", sorted(REAL))
def test_real_recordings_are_refused(job: str) -> None:
    files = layout_recording(job)
    with pytest.raises(InputError) as err:
        plan(files, 8)
    text = str(err.value)
    assert REAL[job] in text and "data parallel (replicated)" not in text
    if "xdp2" in job:
        assert "x data parallel 2 (sharded)" in text
