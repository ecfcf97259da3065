"""Types of the simulator's compiled fast path (``simulation/_fast.c``)."""

from array import array
from collections.abc import Callable, Container
from typing import Any

def link_children(
    parents: Any, base: int, shift: int, nwait: list[int], /,  # a prepare.Parents
) -> tuple[bytes, bytes, bytes] | None: ...
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
