"""A gloo collective of a functional collective (DTensor's, torch.compile's)
gets the functional collective's group as its ``pg_name``: gloo names no
group, and on a 2-D mesh (TP x DP) the rank set could not tell the tensor
group's all-reduces from the replica group's gathers."""

from __future__ import annotations

from pt2chakra.conversion.collective import tensor_ids
from pt2chakra.conversion.graph_builder import (
    CommContext,
    _functional_pg,
    functional_tensor_groups,
)
from pt2chakra.names import functional_group
from pt2chakra.pytorch.records import HostOp, IOValues


def tensor(tid: int, storage: int = 1) -> list[object]:
    return [tid, storage, 0, 1024, 4, "cpu"]


def op(oid: int, name: str, parent: int = 0, values: list[object] | None = None,
       types: list[str] | None = None, out: list[object] | None = None) -> HostOp:
    return HostOp(oid, name, parent, 1, inputs=IOValues.of(values or [], types=types or []),
                  outputs=IOValues.of(out or [], types=["Tensor(float)"] * len(out or [])))


FUNCTIONAL = op(10, "_c10d_functional::all_reduce", 0, [tensor(5), "sum", "3"],
                ["Tensor(float)", "String", "String"], [tensor(6)])
ALLREDUCE_ = op(11, "c10d::allreduce_", 10, [[tensor(6)]], ["GenericList[Tensor(float)]"])
UNDER_CALL = op(12, "gloo:all_reduce", 11, [tensor(6)], ["Tensor(float)"])
WAIT = op(20, "_c10d_functional::wait_tensor", 0, [tensor(6)], ["Tensor(float)"])
UNDER_WAIT = op(21, "gloo:all_reduce", 20, [tensor(6)], ["Tensor(float)"])
FSDP_GATHER = op(30, "gloo:all_gather", 0, [tensor(9)], ["Tensor(float)"])


def context() -> CommContext:
    ops = [FUNCTIONAL, ALLREDUCE_, UNDER_CALL, WAIT, UNDER_WAIT, FSDP_GATHER]
    return CommContext({o.id: o for o in ops}, frozenset(), "", 4,
                       functional=functional_tensor_groups(ops))


def test_the_group_is_the_last_string_input_of_a_functional_collective() -> None:
    assert functional_group(FUNCTIONAL.name, FUNCTIONAL.inputs.values,
                            FUNCTIONAL.inputs.types) == "3"
    assert functional_group(WAIT.name, WAIT.inputs.values, WAIT.inputs.types) is None
    assert functional_group("c10d::allreduce_", ["x", "3"], ["String", "String"]) is None


def test_a_backend_op_takes_its_functional_collectives_group() -> None:
    comm = context()
    assert _functional_pg(UNDER_CALL, comm) == "3"  # by its caller
    assert _functional_pg(UNDER_WAIT, comm) == "3"  # run at wait_tensor: by its tensor
    assert _functional_pg(FSDP_GATHER, comm) == ""  # a plain c10d call's: unnamed


def test_no_functional_collective_names_nothing() -> None:
    ops = [FSDP_GATHER]
    comm = CommContext({o.id: o for o in ops}, frozenset(), "", 2,
                       functional=functional_tensor_groups(ops))
    assert comm.functional == {} and _functional_pg(FSDP_GATHER, comm) == ""


def test_tensor_ids_reach_into_tensor_lists() -> None:
    assert tensor_ids([[tensor(1), tensor(2)], tensor(3), "sum", 4, [1, 2]]) == [1, 2, 3]
