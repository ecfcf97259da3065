"""Types of the compiled fast path (``_fast.c``)."""

from array import array
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any

from pt2chakra.chakra.records import Attr, ChakraNode, NodeType

def scan_frames(buf: bytes, pos: int, limit: int, /) -> tuple[list[int], list[int], int]: ...
def lean_nodes(
    buf: bytes,
    bodies: list[int],
    ends: list[int],
    wanted: tuple[bytes, ...],
    apart: bytes,
    node_cls: type[ChakraNode],
    types: tuple[NodeType, ...],
    no_deps: list[int],
    names: dict[str, str],
    lists: dict[bytes, list[Attr]],
    miss: Callable[[bytes], list[Attr]],
    /,
) -> tuple[list[ChakraNode], bytes] | None: ...
def encode_node(
    tables: tuple[dict[str, bytes], dict[int, bytes], tuple[Any, ...]],
    fallback: Callable[[Sequence[Any]], bytes],
    values: Sequence[Any],
    /,
) -> bytes: ...
def frame_nodes(
    tables: tuple[dict[str, bytes], dict[int, bytes], tuple[Any, ...]],
    fallback: Callable[[Sequence[Any]], bytes],
    rows: Iterable[Sequence[Any]],
    /,
) -> bytes: ...
def deps_in_order(
    ids: list[int],
    dsts: array[int],
    srcs: array[int],
    kinds: array[int],
    rest: dict[int, Any],
    kind_objs: tuple[Any, ...],
    at: int,
    /,
) -> tuple[list[Any], int] | None: ...
def link_children(
    parents: Any, base: int, shift: int, nwait: list[int], /,  # a prepare.Parents
) -> tuple[bytes, bytes, bytes] | None: ...
def shared_io(io: Any, cls: Callable[[bytes, int], Any], shared: dict[Any, Any], /) -> Any: ...
def host_ops(
    nodes: list[Any],
    start: int,
    ops: list[Any],
    shared: dict[Any, Any],
    io_cls: Callable[[bytes, int], Any],
    op_cls: Callable[..., Any],
    strings: dict[str, str],
    share: Callable[[str], str],
    no_extras: dict[str, Any],
    /,
) -> int: ...
def nested_ops(
    nodes: bytes | bytearray | memoryview,
    ops: list[Any],
    shared: dict[Any, Any],
    io_cls: Callable[[bytes, int], Any],
    op_cls: Callable[..., Any],
    strings: dict[str, str],
    share: Callable[[str], str],
    no_extras: dict[str, Any],
    /,
) -> int: ...
def parents_of(
    deps: list[list[int]],
    keys: list[int],
    index: dict[int, int] | array[int],
    lone: list[int | None],
    base: int,
    lone_code: Callable[[int], int],
    many: Callable[[int, list[int], int], tuple[tuple[int, int], ...]],
    /,
) -> tuple[bytes, bytes, bytes] | None: ...
def cpu_delays(
    ops: list[int],
    starts: list[int],
    dur: list[float],
    incl: list[float],
    parents: Any,  # a prepare.Parents
    base: int,
    t0: float,
    delay: list[float],
    /,
) -> tuple[float, float] | None: ...
def replay_plain(
    lane_free: list[float],
    waiting: list[int],
    ready_t: list[float],
    lane_of: list[int],
    order: list[int],
    child_start: Any,
    child: Any,
    child_kind: Any,
    dur: list[float],
    delay: list[float],
    start: array[float],
    end: array[float],
    bind_pred: array[int],
    bind_kind: array[int],
    bind_time: array[float],
    k_start: int,
    k_lane: int,
    /,
) -> bool | None: ...
def walk_back(
    cat: list[int],
    rank: list[int],
    start: array[float],
    end: array[float],
    bind_time: array[float],
    bind_kind: array[int],
    bind_pred: array[int],
    gate_pred: array[int],
    late: Container[int],
    last: int,
    multi: bool,
    n_types: int,
    n_kinds: int,
    t_gap: int,
    t_wait: int,
    cpu_op: int,
    k_gpu_sync: int,
    /,
) -> tuple[bytes, list[float | None], list[float | None], list[int], list[int], float, int] | None: ...
def shared_floats(values: array[float], absent: list[float] | None, /) -> list[float]: ...
def lane_cover(
    starts: array[float], ends: array[float], origin: float, predicted: float, /,
) -> tuple[float, int] | None: ...
def longest(
    nodes: list[int], start: array[float], end: array[float], count: int, /,
) -> list[int] | None: ...
def cpu_slices(
    ops: list[int], starts: list[int], incl: list[float], base: int, dur: list[float], /,
) -> bool | None: ...
def thread_order(
    ops: list[Any],  # one type with id, parent and tid fields (a HostOp)
    channels: dict[int, int],
    caller: int,
    thread: int,
    dsts: array[int],
    srcs: array[int],
    kinds: array[int],
    /,
) -> int | None: ...
def check_ops(ops: list[Any], prefix: str, limit: int, dangling: list[Any], /) -> bool | None: ...
def op_field(ops: list[Any], field: str, /) -> list[Any] | None: ...
