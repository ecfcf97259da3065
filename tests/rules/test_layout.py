"""The layout read from a trace (rules/layout.py): each collective's purpose,
each process group's role, the dimensions' degrees and the sharded ops, on
tiny jobs built as PyTorch records each layout, and on real recordings where
they are at hand (``PT2CHAKRA_LAYOUT_RECORDINGS``, else ../shared/traces/layouts:
``<job>/<job>.<rank>.et``, as ``collect --tp/--pp/--dp`` then ``convert
--ranks`` leave them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import LayoutTrace, layout_rank, write_layout_job
from helpers import layout_recording

from pt2chakra.chakra.records import CollectiveType, GlobalMetadata, NodeType
from pt2chakra.errors import InputError
from pt2chakra.rules.layout import (
    SCALAR_BYTES,
    UNNAMED,
    Evidence,
    Layout,
    Purpose,
    Role,
    job_layout,
    purpose_of,
    rank_layout,
    read_layout,
)

AR, AG, A2A = int(CollectiveType.ALL_REDUCE), int(CollectiveType.ALL_GATHER), int(
    CollectiveType.ALL_TO_ALL)
COLL, SEND = int(NodeType.COMM_COLL_NODE), int(NodeType.COMM_SEND_NODE)
FUNCTIONAL, DTENSOR, BACKWARD, FSDP = 1, 2, 4, 8  # the rule's context flags


def _job(kind: str, world: int) -> Layout:
    return job_layout([rank_layout(*layout_rank(kind, r, world), f"{kind}.{r}.et")
                       for r in range(world)])


@pytest.mark.parametrize(("flags", "call", "node_type", "ctype", "size", "purpose"), [
    (BACKWARD, "allreduce_", COLL, AR, 8192, Purpose.GRADIENT),  # DDP's reducer
    (0, None, COLL, AR, 8192, Purpose.GRADIENT),  # a plain all-reduce, caller unknown
    (FUNCTIONAL | DTENSOR, "all_reduce", COLL, AR, 8192, Purpose.ACTIVATION),  # TP forward
    (FUNCTIONAL | BACKWARD, None, COLL, AR, 8192, Purpose.ACTIVATION),  # TP backward
    (FUNCTIONAL, "all_reduce", COLL, AR, SCALAR_BYTES, Purpose.OTHER),  # a norm, a loss
    (FSDP, "_allgather_base_", COLL, AG, 8192, Purpose.SHARD),  # FSDP2
    (0, "_allgather_base_", COLL, AG, 8192, Purpose.SHARD),  # ZeRO: no annotation
    (FSDP | BACKWARD, None, COLL, AR, 8192, Purpose.SHARD),  # gloo's reduce-scatter
    (0, "allgather_", COLL, AG, 64, Purpose.OTHER),  # a metric gathered per rank
    (0, "alltoall_base_", COLL, A2A, 8192, Purpose.EXCHANGE),  # expert parallel
    (FUNCTIONAL | DTENSOR, "all_to_all_single", COLL, A2A, 8192, Purpose.ACTIVATION),
    (0, "send", SEND, -1, 8192, Purpose.TRANSFER),
])
def test_purpose_of_a_collective(flags: int, call: str | None, node_type: int, ctype: int,
                                 size: int, purpose: Purpose) -> None:
    assert purpose_of(flags, call, node_type, ctype, size) is purpose


@pytest.mark.parametrize(("kind", "world", "roles", "dims", "words"), [
    ("ddp", 2, {"0": Role.DATA}, (1, 1, 1, 2), "data parallel 2 (replicated) over process "
     "group '0' (default_pg), with 4 gradient all-reduces in backward on 2 ranks"),
    ("ddp_orphan", 2, {"0": Role.DATA}, (1, 1, 1, 2), "4 gradient all-reduces in backward"),
    ("fsdp2", 2, {"0": Role.DATA}, (1, 1, 1, 2), "data parallel 2 (sharded)"),
    ("fsdp2_norm", 2, {"0": Role.DATA}, (1, 1, 1, 2), "with 8 sharded collectives on 2 ranks"),
    ("tp", 2, {"0": Role.TENSOR}, (2, 1, 1, 1), "tensor parallel 2 over process group '0' "
     "(default_pg), with 8 activation collectives on 2 ranks (4 forward, 4 backward, "
     "8 via DTensor)"),
    ("tp", 4, {"0": Role.TENSOR}, (4, 1, 1, 1), "tensor parallel 4"),
    ("pp", 2, {"0": Role.PIPELINE}, (1, 2, 1, 1), "pipeline parallel, 2 stages over process "
     "group '0' (default_pg), with 4 sends and 4 receives on 2 ranks"),
    ("pp", 4, {"0": Role.PIPELINE}, (1, 4, 1, 1), "pipeline parallel, 4 stages"),
    ("ep", 2, {"0": Role.EXPERT}, (1, 1, 2, 1), "expert parallel 2 over process group '0' "
     "(default_pg), with 2 all-to-all on 2 ranks"),
    ("mixed", 2, {"0": Role.MIXED}, (1, 1, 1, 1), "mixed roles over process group '0'"),
])
def test_each_layout(kind: str, world: int, roles: dict[str, Role],
                     dims: tuple[int, int, int, int], words: str) -> None:
    layout = _job(kind, world)
    assert {g.name: g.role for g in layout.groups if g.users} == roles
    assert (layout.tp, layout.pp, layout.ep, layout.dp) == dims
    assert words in layout.describe() and "\n" not in layout.describe()


def test_tp_x_dp_names_both_dimensions() -> None:
    """A (dp, tp) mesh over gloo: the gloo ops name no group; the functional
    collective's ``group_name`` input names the TP group, FSDP's calls stay
    unnamed, and data parallel's degree is what TP leaves of the world."""
    layout = _job("tp_dp", 4)
    tensor = layout.groups_of(Role.TENSOR)
    assert [(g.name, g.desc, g.ranks, g.users) for g in tensor] == [
        ("3", "mesh_tp", [0, 1], [0, 1]), ("4", "mesh_tp", [2, 3], [2, 3])]
    data = layout.groups_of(Role.DATA)
    assert [(g.name, g.evidence.sharded) for g in data] == [(UNNAMED, 16)]
    assert (layout.tp, layout.dp) == (2, 2)
    text = layout.describe()
    assert text.startswith("tensor parallel 2 over process groups '3', '4' (mesh_tp), with 8 "
                           "activation collectives on 4 ranks (4 forward, 4 backward")
    assert " x data parallel 2 (sharded) over a group the trace does not name" in text
    unused = {g.name: g.role for g in layout.groups if not g.users}
    assert unused == {"0": Role.UNKNOWN, "1": Role.UNKNOWN, "2": Role.UNKNOWN}


def test_pp_x_dp_stages_from_the_peers() -> None:
    """Unnamed sends and receives: the stages are the group ranks they name."""
    layout = _job("pp_dp", 4)
    (pipe,) = layout.groups_of(Role.PIPELINE)
    assert (pipe.name, pipe.stages, pipe.evidence.sends, pipe.evidence.receives) == (
        UNNAMED, 2, 8, 8)
    assert (layout.pp, layout.dp) == (2, 2)
    assert layout.describe().startswith("pipeline parallel, 2 stages over a group the trace "
                                        "does not name")


def test_a_lone_functional_group_names_unattached_transfers() -> None:
    """TP's backward gloo op hangs under ``wait_tensor`` with no c10d call to
    name its group: the rank's one functional group does."""
    part = rank_layout(*layout_rank("tp_dp", 2, 4), "r2.et")
    assert part.evidence[("4", None)].activation_backward == 1
    assert part.evidence[("4", None)].activation_forward == 1
    assert (UNNAMED, Role.TENSOR) not in part.evidence


def test_scalar_reductions_say_nothing() -> None:
    """clip_grad_norm_ on FSDP2's DTensor parameters reduces a scalar through
    Redistribute: the group stays data parallel."""
    layout = _job("fsdp2_norm", 2)
    (group,) = [g for g in layout.groups if g.users]
    assert group.role is Role.DATA and group.evidence.other == 2
    assert group.evidence.activation_forward == 0


def test_sharded_ops_and_their_degree() -> None:
    """DTensor's local addmm on half the weight counts, degree 2; a
    replicated op dispatched the same way (equal shapes) does not."""
    layout = _job("tp", 2)
    assert [(o.name, o.count, o.degree) for o in layout.sharded_ops] == [("aten::addmm", 2, 2)]
    assert [(o.name, o.degree) for o in _job("tp", 4).sharded_ops] == [("aten::addmm", 4)]
    assert _job("ddp", 2).sharded_ops == []


def test_one_rank_alone_is_its_own_view() -> None:
    """``inspect`` reads one file: the world and the groups are its metadata's."""
    layout = job_layout([rank_layout(*layout_rank("tp_dp", 1, 4), "r1.et")])
    assert layout.world_size == 4 and layout.ranks_read == [1]
    assert [g.name for g in layout.groups_of(Role.TENSOR)] == ["3"]
    assert (layout.tp, layout.dp) == (2, 2)
    assert [g.describe() for g in layout.groups] == [
        "'3' mesh_tp, ranks [0, 1] (2): tensor, 2 activation collectives "
        "(1 forward, 1 backward, 2 via DTensor)",
        "unnamed: data, 4 sharded collectives",
        "'0' default_pg, every rank (4): no collective in the ranks read",
        "'2' mesh_dp, ranks [1, 3] (2): no collective in the ranks read"]


def test_no_collective() -> None:
    trace = LayoutTrace()
    trace.op("aten::mm")
    layout = job_layout([rank_layout(GlobalMetadata(version="0.0.4"), trace.nodes, "x.et")])
    assert layout.describe() == "no collective" and layout.groups == []
    assert (layout.tp, layout.pp, layout.ep, layout.dp) == (1, 1, 1, 1)
    only_broadcast = LayoutTrace()
    only_broadcast.broadcast("0")
    md, _ = layout_rank("ddp", 0, 2)
    layout = job_layout([rank_layout(md, only_broadcast.nodes, "b.et")])
    assert layout.groups[0].role is Role.UNKNOWN
    assert layout.describe().startswith("no layout in the trace")


def test_malformed_groups_are_refused_in_one_line() -> None:
    md = GlobalMetadata(version="0.0.4", attrs=[
        ("process_groups", "string_val", '[{"pg_name": "0", "ranks": ["a"]}]')])
    with pytest.raises(InputError, match="is not a rank") as err:
        rank_layout(md, [], "bad.et")
    assert "\n" not in str(err.value)


def test_evidence_sums_and_words() -> None:
    a = Evidence(gradient_backward=2, sends=1)
    total = a.plus(Evidence(gradient_backward=1, receives=3))
    assert (total.gradient_backward, total.sends, total.receives) == (3, 1, 3)
    assert total.role() is Role.MIXED
    assert total.text(Role.PIPELINE) == "1 send and 3 receives"
    assert Evidence(sharded=1).text(Role.DATA) == "1 sharded collective"
    assert Evidence().role() is Role.UNKNOWN


def test_read_layout_reads_files(tmp_path: Path) -> None:
    layout = read_layout(write_layout_job(tmp_path, "pp", 2))
    assert layout.ranks_read == [0, 1] and layout.pp == 2


# The real recordings (torch 2.13 over gloo): what each layout must read as.
REAL = {
    "tp2": "tensor parallel 2 over process group '0' (default_pg)",
    "tp4": "tensor parallel 4 over process group '0' (default_pg)",
    "tp2xdp2": "tensor parallel 2 over process groups '3', '4' (mesh_tp)",
    "pp2-gpipe": "pipeline parallel, 2 stages",
    "pp2-1f1b": "pipeline parallel, 2 stages",
    "pp4-gpipe": "pipeline parallel, 4 stages",
    "pp2xdp2-gpipe": "pipeline parallel, 2 stages",
}


@pytest.mark.slow
@pytest.mark.parametrize("job", sorted(REAL))
def test_real_recordings(job: str) -> None:
    files = layout_recording(job)
    layout = read_layout(files)
    assert layout.describe().startswith(REAL[job]), layout.describe()
    if "xdp2" in job:
        assert "x data parallel 2 (sharded)" in layout.describe()
        assert layout.dp == 2
    if job.startswith("tp"):
        counts = layout.groups_of(Role.TENSOR)[0].evidence
        assert counts.activation_forward == counts.activation_backward > 0
        assert int(job[2]) in {o.degree for o in layout.sharded_ops if o.name == "aten::addmm"}
