"""The --for astra-sim profile: no METADATA or CPU nodes, process groups in
the metadata, <prefix>.<rank>.et, communicator-group JSON, order kept."""

from __future__ import annotations

import json

from test_tools_fixtures import (  # noqa: F401  (fixtures)
    assert_one_line_failure,
    converted,
    run_cli,
)

from pt2chakra.astra_sim import convert_files, profile, write_astra_sim
from pt2chakra.jsonize import jsonize
from pt2chakra.model import ChakraNode, GlobalMetadata, NodeType
from pt2chakra.soundness import validate
from pt2chakra.tools_io import attr_dict, read


def test_dlrm_ranks_pass_astra_sim_validation(converted, tmp_path):  # noqa: F811
    files = [converted[f"dlrm_rank{r}"] for r in range(8)]
    assert not validate(files, profile="astra-sim").sound
    prefix = tmp_path / "dlrm"
    proc = run_cli("astra-sim", *files, "-o", prefix)
    assert proc.returncode == 0, proc.stderr
    outs = [tmp_path / f"dlrm.{r}.et" for r in range(8)]
    report = validate(outs, profile="astra-sim")
    assert report.sound and not report.problems, report.lines()
    for src, out in zip(files, outs):
        _, before = read(src)
        before = list(before)
        _, after = read(out)
        after = list(after)
        gpu_before = [n for n in before if not attr_dict(n.attrs)["is_cpu_op"]]
        assert [n.id for n in after] == [n.id for n in gpu_before]
        assert all(n.type != NodeType.METADATA_NODE for n in after)
        colls = [n for n in after if n.type == NodeType.COMM_COLL_NODE]
        assert len(colls) == 8
        # a collective still waits for the kernels its launch order implied
        assert all(n.data_deps for n in colls)


def test_process_groups_move_to_metadata_and_groups_json(converted, tmp_path):  # noqa: F811
    md, nodes = read(converted["chakra_pg_host"])
    written = write_astra_sim(md, nodes, tmp_path / "pg", rank=1)
    assert written == [str(tmp_path / "pg.1.et"), str(tmp_path / "pg.comm_groups.json")]
    assert json.loads((tmp_path / "pg.comm_groups.json").read_text()) == {"0": [0, 1]}
    out_md, out_nodes = read(written[0])
    assert "process_groups" in attr_dict(out_md.attrs)
    out_nodes = list(out_nodes)
    assert {n.type for n in out_nodes} == {NodeType.COMM_COLL_NODE}


def test_metadata_node_facts_recovered_when_metadata_lacks_them():
    pg_json = '[{"pg_name": "7", "ranks": [0, 2], "group_size": 2}]'
    nodes = [ChakraNode(id=1, name="## process_group:init ##", type=NodeType.METADATA_NODE,
                        inputs=(json.dumps([pg_json]), "[[]]", '["String"]')),
             ChakraNode(id=2, name="k", type=NodeType.COMP_NODE, data_deps=[1],
                        attrs=[("is_cpu_op", "bool_val", False)])]
    md, out = profile(GlobalMetadata(version=""), nodes)
    assert attr_dict(md.attrs)["process_groups"] == pg_json
    assert [n.id for n in out] == [2] and out[0].data_deps == []


def test_keep_mode_and_from_json_profile(converted, tmp_path):  # noqa: F811
    src = converted["hta_simple_add"]
    written = convert_files([src], tmp_path / "k", cpu="keep")
    report = validate(written, profile="astra-sim")
    assert any("CPU node" in p.message for p in report.errors)
    doc = tmp_path / "h.json"
    jsonize(src, doc)
    proc = run_cli("from-json", doc, "--for", "astra-sim", "--rank", "3", "-o", tmp_path / "j")
    assert proc.returncode == 0, proc.stderr
    assert validate([tmp_path / "j.3.et"], profile="astra-sim").sound


def test_unwritable_output_is_one_line(converted, tmp_path):  # noqa: F811
    proc = run_cli("astra-sim", converted["hta_simple_add"], "-o", tmp_path / "no" / "x")
    assert_one_line_failure(proc, "No such file or directory")
