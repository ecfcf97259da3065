"""Collective semantics: which collective an op is, and how many bytes it moves.

Pure functions over names and metadata, so each rule is testable alone. The
reference converter took ``comm_size`` as the sum of all input tensors, which is
wrong for all-gather, reduce-scatter and all-to-all with splits; here the size
is the collective's *total* payload as ASTRA-sim expects it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pt2chakra.chakra.records import CollectiveType, NodeType
from pt2chakra.names import C10D_P2P_PEER_INPUT, nccl_kernel_word, strip_collective_prefix
from pt2chakra.pytorch.records import CollectiveInfo, HostOp

# Point-to-point pseudo types (Chakra has no CollectiveCommType for them; they
# become COMM_SEND / COMM_RECV nodes instead).
SEND = "send"
RECV = "recv"

# Normalised collective names (lower case, alphanumerics only) -> type. Order
# matters: longer, more specific keys are tried first.
_NAME_TABLE: tuple[tuple[str, CollectiveType | str], ...] = (
    ("reducescatterblock", CollectiveType.REDUCE_SCATTER_BLOCK),
    ("reducescatter", CollectiveType.REDUCE_SCATTER),
    ("allreduce", CollectiveType.ALL_REDUCE),
    ("allgather", CollectiveType.ALL_GATHER),
    ("alltoall", CollectiveType.ALL_TO_ALL),
    ("broadcast", CollectiveType.BROADCAST),
    ("barrier", CollectiveType.BARRIER),
    ("gather", CollectiveType.GATHER),
    ("scatter", CollectiveType.SCATTER),
    ("reduce", CollectiveType.REDUCE),
    ("sendrecv", "sendrecv"),
    ("send", SEND),
    ("recv", RECV),
)

_NON_ALNUM = re.compile(r"[^a-z0-9]")

DTYPE_BYTES: dict[str, int] = {
    "float": 4, "float32": 4, "fp32": 4, "Float": 4,
    "double": 8, "float64": 8, "Double": 8,
    "half": 2, "float16": 2, "fp16": 2, "Half": 2, "c10::Half": 2,
    "bfloat16": 2, "bf16": 2, "BFloat16": 2, "c10::BFloat16": 2,
    "int": 4, "int32": 4, "Int": 4,
    "long int": 8, "int64": 8, "long": 8, "Long": 8,
    "short int": 2, "int16": 2, "Short": 2,
    "signed char": 1, "int8": 1, "Char": 1,
    "unsigned char": 1, "uint8": 1, "Byte": 1,
    "bool": 1, "Bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1,
}


def collective_from_name(name: str) -> CollectiveType | str | None:
    """Map a collective or op name (``allreduce``, ``nccl:all_to_all``,
    ``c10d::reduce_scatter_``, ``all_gather_into_tensor``) to its type.

    Returns a ``CollectiveType``, ``SEND``/``RECV``, ``"sendrecv"`` (needs
    context to resolve) or ``None`` when the name is no collective.
    """
    if not name:
        return None
    key = _NON_ALNUM.sub("", strip_collective_prefix(name).lower())
    for pattern, ctype in _NAME_TABLE:
        if key.startswith(pattern):
            return ctype
    return None


def collective_from_kernel(kernel_name: str) -> CollectiveType | str | None:
    """The collective an NCCL/RCCL kernel implements, or None for non-NCCL
    kernels. ``SendRecv`` kernels serve all-to-all and point-to-point alike
    and return ``"sendrecv"``: the launching op decides."""
    word = nccl_kernel_word(kernel_name)
    return None if word is None else collective_from_name(word)


def node_type_for(ctype: CollectiveType | str) -> NodeType:
    if ctype == SEND:
        return NodeType.COMM_SEND_NODE
    if ctype == RECV:
        return NodeType.COMM_RECV_NODE
    return NodeType.COMM_COLL_NODE


def dtype_size(dtype: str) -> int:
    """Bytes per element of a Kineto/ET dtype name; 0 when unknown."""
    if not dtype:
        return 0
    if dtype in DTYPE_BYTES:
        return DTYPE_BYTES[dtype]
    # ET tensor types look like "Tensor(float)" / "GenericList[Tensor(c10::Half)]".
    inner = dtype
    if "(" in inner:
        inner = inner[inner.rfind("(") + 1:].rstrip(")]")
    return DTYPE_BYTES.get(inner, 0)


def comm_size_from_info(ctype: CollectiveType | str, info: CollectiveInfo) -> int:
    """Total payload in bytes from Kineto/ET message element counts.

    All-gather moves its *output* (every rank's shard); everything else is
    sized by its input (reduce-scatter and all-to-all inputs already hold the
    whole payload).
    """
    elem = dtype_size(info.dtype)
    if elem == 0:
        return 0
    if ctype == CollectiveType.ALL_GATHER or ctype == CollectiveType.GATHER:
        nelems = info.out_msg_nelems or info.in_msg_nelems * max(info.group_size, 1)
    else:
        nelems = info.in_msg_nelems or info.out_msg_nelems
    return nelems * elem


# An ET tensor value: ``[id, storage, offset, numel, itemsize, device]``.
TENSOR_FIELDS = 6


def is_tensor_value(value: Any) -> bool:
    return isinstance(value, list) and len(value) == TENSOR_FIELDS \
        and isinstance(value[5], str) and all(isinstance(v, int) for v in value[:5])


def tensor_ids(values: Sequence[Any]) -> list[int]:
    """The ids of the tensors among an op's values (in lists for a tensor
    list)."""
    out: list[int] = []
    for v in values:
        if is_tensor_value(v):
            out.append(v[0])
        elif isinstance(v, list):
            out += tensor_ids(v)
    return out


def _tensor_bytes(value: Any) -> int:
    """Bytes of an ET tensor value or a (nested) list of them."""
    if is_tensor_value(value):
        return int(value[3] * value[4])
    if isinstance(value, list):
        return sum(_tensor_bytes(v) for v in value if isinstance(v, list))
    return 0


def _first_tensor_bytes(values: list[Any], types: list[str]) -> int:
    for value, vtype in zip(values, types):
        if "Tensor" in vtype:
            size = _tensor_bytes(value)
            if size:
                return size
    return 0


def _count(value: Any) -> int:
    """A non-negative element count from an ET attr; 0 (unknown, so the size
    falls back to the tensors) for anything else."""
    if type(value) is int and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return 0


def p2p_peer(op: HostOp | None) -> int:
    """The peer rank of a c10d send/receive op from its inputs (an int in the
    ET, the text of one in Kineto's ``Concrete Inputs``); -1 when unknown."""
    if op is None or op.name not in C10D_P2P_PEER_INPUT:
        return -1
    values = op.inputs.values
    k = C10D_P2P_PEER_INPUT[op.name]
    value = values[k] if len(values) > k else None
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    return value if type(value) is int and value >= 0 else -1


def _is_gather(ctype: CollectiveType | str) -> bool:
    return ctype == CollectiveType.ALL_GATHER or ctype == CollectiveType.GATHER


def comm_size_from_host_op(ctype: CollectiveType | str, op: HostOp, group_size: int = 0) -> int:
    """Payload in bytes from a host op's ET attributes or tensors, used when
    Kineto carries no collective metadata (traces before torch 2.3).

    The tensors are the ET's values (numel x itemsize) or, where only shapes
    were recorded (Kineto ``Input Dims``), shapes x dtype. An all-gather
    known only by its input (a backend op such as ``gloo:all_gather`` records
    its own shard) moves ``group_size`` shards."""
    attrs = op.attrs
    if "in_msg_nelems" in attrs and "dtype" in attrs:
        info = CollectiveInfo(
            dtype=str(attrs.get("dtype", "")),
            in_msg_nelems=_count(attrs.get("in_msg_nelems")),
            out_msg_nelems=_count(attrs.get("out_msg_nelems")),
            group_size=_count(attrs.get("pg_size")) or group_size,
        )
        size = comm_size_from_info(ctype, info)
        if size:
            return size
    if _is_gather(ctype):
        size = _first_tensor_bytes(op.outputs.values, op.outputs.types)
        if size:
            return size
    size = _first_tensor_bytes(op.inputs.values, op.inputs.types)
    if not size:
        size = _first_tensor_bytes(op.outputs.values, op.outputs.types)
        if size:
            return size
        size = shapes_bytes(op.inputs.shapes, op.inputs.types)
    if size and _is_gather(ctype) and not op.outputs.values_json.strip(b"[] ") and group_size > 1:
        return size * group_size
    return size


def shapes_bytes(shapes: list[Any], types: list[str]) -> int:
    """Bytes of the first tensor argument from its shape and dtype name
    (Kineto ``Input Dims`` / ``Input type``, or the ET's shapes and types);
    0 when no argument has both."""
    for shape, dtype in zip(shapes, types):
        if not isinstance(dtype, str):
            continue
        elem = dtype_size(dtype)
        numel = _numel(shape)
        if elem and numel:
            return elem * numel
    return 0


def _numel(shape: Any) -> int:
    """Elements of a shape ``[d0, d1, ...]``, or the sum over a list of
    shapes (a TensorList); 0 for anything else or a scalar's ``[]``."""
    if not isinstance(shape, list) or not shape:
        return 0
    if all(type(d) is int and d >= 0 for d in shape):
        numel = 1
        for d in shape:
            numel *= d
        return numel
    return sum(_numel(s) for s in shape if isinstance(s, list))
