"""``inspect`` prints each process group's role (rules/layout.py): the layout
one rank sees, a line per group, the ops run on shards; ``--json`` holds the
same under ``layout``."""

from __future__ import annotations

import json
from pathlib import Path

from builders import LayoutTrace, write_layout_job
from helpers import run_cli

from pt2chakra.chakra.io import write_et
from pt2chakra.chakra.records import GlobalMetadata
from pt2chakra.tools.inspect import inspect


def test_tp_rank(tmp_path: Path) -> None:
    path = write_layout_job(tmp_path, "tp", 2)[0]
    info = inspect(path)
    assert [(g.name, g.role.value) for g in info.layout.groups] == [("0", "tensor")]
    text = info.text()
    assert ("  process groups: tensor parallel 2 over process group '0' (default_pg), with 4 "
            "activation collectives on 1 rank (2 forward, 2 backward, 4 via DTensor)") in text
    assert ("    '0' default_pg, every rank (2): tensor, 4 activation collectives "
            "(2 forward, 2 backward, 4 via DTensor)") in text
    assert "  sharded ops (run on a DTensor's local shard): aten::addmm x1 (1/2)" in text


def test_each_group_of_a_mesh(tmp_path: Path) -> None:
    text = inspect(write_layout_job(tmp_path, "tp_dp", 4)[3]).text()
    assert "'4' mesh_tp, ranks [2, 3] (2): tensor" in text
    assert "unnamed: data, 4 sharded collectives" in text
    assert "'2' mesh_dp, ranks [1, 3] (2): no collective in the ranks read" in text
    assert "x data parallel 2 (sharded)" in text


def test_pipeline_and_ddp_ranks(tmp_path: Path) -> None:
    pp = inspect(write_layout_job(tmp_path / "pp", "pp", 2)[1]).text()
    assert "'0' default_pg, every rank (2): pipeline, 2 stages, 2 sends and 2 receives" in pp
    ddp = inspect(write_layout_job(tmp_path / "ddp", "ddp", 2)[0]).text()
    assert "data parallel 2 (replicated)" in ddp and "gradient all-reduces in backward" in ddp


def test_no_process_group_no_line(tmp_path: Path) -> None:
    trace = LayoutTrace()
    trace.op("aten::mm")
    path = tmp_path / "one.et"
    write_et(path, GlobalMetadata(version="0.0.4"), trace.nodes)
    info = inspect(path)
    assert info.layout.groups == [] and "process groups:" not in info.text()


def test_cli_text_and_json(tmp_path: Path) -> None:
    """The last stage of a pipeline whose group the trace does not name: its
    peers say there are two stages at least, no more (nor data parallel's degree)."""
    path = write_layout_job(tmp_path, "pp_dp", 4)[2]
    proc = run_cli("inspect", path)
    assert proc.returncode == 0, proc.stderr
    assert ("process groups: pipeline parallel, at least 2 stages over a group the trace does "
            "not name, with 2 sends and 2 receives on 1 rank x data parallel (sharded)"
            ) in proc.stdout
    proc = run_cli("inspect", path, "--json")
    assert proc.returncode == 0, proc.stderr
    layout = json.loads(proc.stdout)["layout"]
    assert (layout["pp"], layout["dp"], layout["world_size"]) == (0, 0, 4)
    roles = {(g["name"], g["role"]) for g in layout["groups"] if g["users"]}
    assert roles == {("", "data"), ("", "pipeline")}
