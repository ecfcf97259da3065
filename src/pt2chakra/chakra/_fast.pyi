"""Types of the formats' compiled fast path (``chakra/_fast.c``)."""

from array import array
from collections.abc import Callable, Iterable, Sequence
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
