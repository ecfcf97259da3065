"""Decode a PyTorch host execution trace (ET) into ``HostOp``s: what the
whole-file reader (``host_trace``) and the sliced one (``host_stream``) share.

Schema differences are data: ``SCHEMA_LAYOUTS`` maps each known schema
version to the node layout it uses and the ``attrs`` it is known to carry.
Each layout decodes straight into private msgspec structs (no dicts per node)
and is then normalised into ``HostOp``; per-op Python work is kept to one
constructor call plus one pass over ``attrs`` because traces hold millions
of ops.

Structural checks (``InputError``): missing ``schema`` or ``nodes``, unknown
major version, negative ids, duplicate ids, a non-root op that is its own
parent. A parent id that names no op ("dangling") is tolerated: it is logged
as one warning per file and ``dangling_parents`` lists such ops. The root op
(``[pytorch|profiler|execution_trace|process]``) records itself as its own
parent; it is normalised to ``parent == 0`` ("no caller").
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from operator import attrgetter
from types import GenericAlias
from typing import Annotated, Any, NamedTuple

import msgspec

from pt2chakra.chakra import compiled
from pt2chakra.chakra.encode import ioinfo_body
from pt2chakra.chakra.wire import I64_MAX, I64_MIN
from pt2chakra.errors import InputError
from pt2chakra.names import OBSERVER_PREFIX, PROCESS_GROUP_INIT
from pt2chakra.pytorch.json_input import TOO_DEEP, decode
from pt2chakra.pytorch.records import HostOp, IOValues, ProcessGroup, op_field

log = logging.getLogger(__name__)

MAX_ID = 2**62
# Ids and parent ids come from one counter that starts at 1; a negative value
# can only be corruption, so msgspec rejects it with the JSON path.
# The upper bound leaves room above the host ids for the GPU nodes' ids
# (Chakra ids are uint64) and keeps every id inside int64 attributes.
NonNegative = Annotated[int, msgspec.Meta(ge=0, le=MAX_ID)]
# Header values written to the output's int64 metadata (pid, step window).
Int64 = Annotated[int, msgspec.Meta(ge=I64_MIN, le=I64_MAX)]

# How many offending ids a warning or error quotes before "...".
MAX_QUOTED_IDS = 5


# --------------------------------------------------------------------------
# Raw node layouts (private: only HostOp leaves this module)
# --------------------------------------------------------------------------


class _FlatNode(msgspec.Struct, gc=False):
    """Schema 1.0.1: every field top-level, parent in ``parent``."""

    id: NonNegative
    name: str
    parent: NonNegative
    rf_id: int | None = None
    fw_parent: int = 0
    seq_id: int = -1
    scope: int = 0
    tid: int = 0
    fw_tid: int = 0
    op_schema: str = ""
    # Kept as raw JSON (see IOValues): parsed only where needed.
    inputs: msgspec.Raw = msgspec.Raw()
    input_shapes: msgspec.Raw = msgspec.Raw()
    input_types: msgspec.Raw = msgspec.Raw()
    outputs: msgspec.Raw = msgspec.Raw()
    output_shapes: msgspec.Raw = msgspec.Raw()
    output_types: msgspec.Raw = msgspec.Raw()


class _Attr(msgspec.Struct, gc=False):
    # The attr's ``type`` ("uint64", "string") is not declared: msgspec skips
    # it, and the Python value already carries its type.
    name: str
    value: Any = None


class _RawIO(msgspec.Struct, gc=False, frozen=True):
    """``inputs``/``outputs`` of the nested layouts, left undecoded."""

    values: msgspec.Raw = msgspec.Raw()
    shapes: msgspec.Raw = msgspec.Raw()
    types: msgspec.Raw = msgspec.Raw()
    strides: msgspec.Raw = msgspec.Raw()


_NO_IO = _RawIO()


class _NestedNode(msgspec.Struct, gc=False):
    """Schema 1.0.2 and later: parent in ``ctrl_deps``, extras in ``attrs``."""

    id: NonNegative
    name: str
    ctrl_deps: NonNegative
    inputs: _RawIO = _NO_IO
    outputs: _RawIO = _NO_IO
    # Decoded per op in _nested_to_op: decoding all ops' attrs up front made
    # ten short-lived objects per op coexist, the peak of loading a trace.
    attrs: msgspec.Raw = msgspec.Raw()


class HostHeader(msgspec.Struct, gc=False):
    # ``nodes`` stays undecoded until ``schema`` has chosen the node layout.
    schema: str | None = None
    pid: Int64 = 0
    start_ts: Int64 = 0
    finish_ts: Int64 = 0
    nodes: msgspec.Raw = msgspec.Raw()


class _PgRecord(msgspec.Struct, gc=False):
    """One entry of the ``## process_group:init ##`` JSON string."""

    pg_name: str | Int64 = ""
    pg_desc: str = ""
    backend_config: str = ""
    ranks: list[Int64] = []
    group_size: Int64 = 0
    group_count: Int64 = 0


# --------------------------------------------------------------------------
# Schema table
# --------------------------------------------------------------------------

# attrs lifted into HostOp's own fields (present in every nested schema).
LIFTED_ATTRS = frozenset({"rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid", "op_schema"})
KERNEL_ATTRS = frozenset({"kernel_backend", "kernel_file"})  # 1.0.4: torch.compile / Triton
COMM_ATTRS = frozenset(
    {
        "pg_name",
        "pg_desc",
        "collective_name",
        "dtype",
        "in_msg_nelems",
        "out_msg_nelems",
        "in_split_size",
        "out_split_size",
        "global_rank_start",
        "global_rank_stride",
        "pg_size",
    }
)  # 1.1.0: record_param_comms metadata
# Added by later torch releases without a schema bump; known in every version.
UNVERSIONED_ATTRS = frozenset({"tensor_range", "is_asynchronized_op"})


class Layout(NamedTuple):
    name: str
    fields: str  # how nodes look, quoted in errors when they do not
    node_type: type[Any]
    to_op: Callable[[Any, SharedIO], tuple[HostOp, dict[str, Any]]]
    known_attrs: frozenset[str]


# One IOValues per distinct value while a trace loads: ops repeat each
# other's inputs and outputs (a million-op GPT trace has 0.37M distinct
# outputs and 0.72M distinct inputs), so sharing them keeps about 120 bytes
# less per op. A loader makes one and drops it with the last node decoded.
SharedIO = dict[IOValues, IOValues]


def _flat_to_op(n: _FlatNode, shared: SharedIO) -> tuple[HostOp, dict[str, Any]]:
    # Positional arguments: HostOp field order (id, name, parent, tid, rf_id,
    # fw_parent, seq_id, scope, fw_tid, op_schema, inputs, outputs, attrs).
    op = HostOp(
        n.id,
        n.name,
        n.parent,
        n.tid,
        n.rf_id,
        n.fw_parent,
        n.seq_id,
        n.scope,
        n.fw_tid,
        n.op_schema,
        _shared_io(shared, IOValues.from_json(n.inputs, n.input_shapes, n.input_types)),
        _shared_io(shared, IOValues.from_json(n.outputs, n.output_shapes, n.output_types)),
        {},
    )
    return op, op.attrs


def _nested_to_op(n: _NestedNode, shared: SharedIO) -> tuple[HostOp, dict[str, Any]]:
    # One dict comprehension then pops: measured ~1.5x faster than an
    # if/else loop over attrs; what stays in ``extras`` becomes HostOp.attrs.
    # Empty strings (kernel_backend, kernel_file, tensor_range on every op of
    # an eager trace) say nothing and are dropped; ops left with no extras
    # share one empty dict, and repeated names and schemas share one string:
    # on large traces that halves the memory the ops take. Runs once per op:
    # module-level lookups are bound as locals.
    raw = n.attrs
    try:  # _observer_attrs' first try, inlined
        known = _SHAPE_DECODERS[0](raw)
    except msgspec.MsgspecError:
        known = _observer_attrs(raw, 1) if len(raw) else None
    if known is not None:  # most ops: their attrs as the observer writes them
        rf_id, fw_parent, seq_id, scope, tid, fw_tid, schema = (
            known[0].value, known[1].value, known[2].value, known[3].value, known[4].value,
            known[5].value, known[6].value)
        appended = known[_LIFTED_COUNT:]
        extras = ({_TAG_OF[type(a)]: a.value for a in appended if a.value}
                  if any(map(_value, appended)) else {})
    else:
        extras = {a.name: a.value for a in (_decode_attr_list(raw) if len(raw) else ())
                  if a.value != ""}
        pop = extras.pop
        schema, tid, rf_id = pop("op_schema", ""), pop("tid", 0), pop("rf_id", None)
        fw_parent, seq_id, scope, fw_tid = (
            pop("fw_parent", 0), pop("seq_id", -1), pop("scope", 0), pop("fw_tid", 0))
    name = n.name
    name = _SHARED_STRINGS.get(name) or _shared(name)
    if type(schema) is str:  # anything else is refused, naming the field, by the checks
        schema = _SHARED_STRINGS.get(schema) or _shared(schema)
    # IO text is copied out of the decode buffer so that it can be freed: it
    # is a fraction of the trace (attrs dominate). IOValues.from_json inlined,
    # or the compiled path's same steps where built.
    fast = compiled.FAST
    if fast is not None:
        inputs = fast.shared_io(n.inputs, IOValues, shared)
        outputs = fast.shared_io(n.outputs, IOValues, shared)
    else:
        io = n.inputs
        strides = io.strides
        body = ioinfo_body(io.values, io.shapes, io.types, strides)
        inputs = IOValues(body, len(body) - len(strides))
        inputs = shared.setdefault(inputs, inputs)
        io = n.outputs
        strides = io.strides
        body = ioinfo_body(io.values, io.shapes, io.types, strides)
        outputs = IOValues(body, len(body) - len(strides))
        outputs = shared.setdefault(outputs, outputs)
    op = HostOp(
        n.id,
        name,
        n.ctrl_deps,
        tid,
        rf_id,
        fw_parent,
        seq_id,
        scope,
        fw_tid,
        schema,
        inputs,
        outputs,
        extras or _NO_EXTRAS,
    )
    return op, extras


_decode_attr_list = msgspec.json.Decoder(list[_Attr]).decode


# The attrs the observer writes on every op, in its order: the lifted ones,
# then what later releases appended (1.0.4: kernel_*; later, tensor_range).
# A trace's ops carry one prefix of it, so each prefix is a fixed tuple of
# structs tagged by ``name``: decoded with the types checked, about half the
# time of a list of ``_Attr`` turned into a dict and popped. An op whose
# attrs are not one of them (a collective's extra attrs, another order, a
# value of another type) raises, and takes the ``_Attr`` list.
_OBSERVER_ATTRS: tuple[tuple[str, type], ...] = (
    ("rf_id", int), ("fw_parent", int), ("seq_id", int), ("scope", int), ("tid", int),
    ("fw_tid", int), ("op_schema", str), ("kernel_backend", str), ("kernel_file", str),
    ("tensor_range", str))
_LIFTED_COUNT = 7  # the first seven: HostOp's own fields
_OBSERVER_SHAPES = (10, 9, 7)  # the prefixes torch writes, newest first
_TAGGED = tuple(msgspec.defstruct(f"_Tagged_{name}", [("value", kind)], tag_field="name",
                                  tag=name, gc=False) for name, kind in _OBSERVER_ATTRS)
assert tuple(name for name, _ in _OBSERVER_ATTRS[:_LIFTED_COUNT]) == (
    "rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid", "op_schema")
assert {name for name, _ in _OBSERVER_ATTRS} <= LIFTED_ATTRS | KERNEL_ATTRS | UNVERSIONED_ATTRS
_TAG_OF = {cls: name for cls, (name, _) in zip(_TAGGED, _OBSERVER_ATTRS)}
_value = attrgetter("value")
# The shapes' decoders, the last one that fitted first (a trace has one shape).
_SHAPE_DECODERS = [msgspec.json.Decoder(GenericAlias(tuple, _TAGGED[:size])).decode
                   for size in _OBSERVER_SHAPES]


def _observer_attrs(raw: msgspec.Raw, first: int = 0) -> tuple[Any, ...] | None:
    """``raw`` (an op's attrs) as one of the observer's shapes, or None;
    ``first``: the decoders before it were tried."""
    decoders = _SHAPE_DECODERS
    for i in range(first, len(decoders)):
        try:
            found = decoders[i](raw)
        except msgspec.MsgspecError:
            continue
        if i:
            decoders.insert(0, decoders.pop(i))
        return found
    return None


def _shared_io(shared: SharedIO, io: IOValues) -> IOValues:
    return shared.setdefault(io, io)


# Shared by ops without extra attrs; HostOp.attrs is read-only by convention.
_NO_EXTRAS: dict[str, Any] = {}
_SHARED_STRINGS: dict[str, str] = {}
_SHARED_STRINGS_MAX = 1 << 20  # distinct op names/schemas; bounds the cache


def _shared(text: str) -> str:
    shared = _SHARED_STRINGS.get(text)
    if shared is None:
        if len(_SHARED_STRINGS) >= _SHARED_STRINGS_MAX:
            _SHARED_STRINGS.clear()
        _SHARED_STRINGS[text] = shared = text
    return shared


FLAT = Layout("flat", "`parent`, `inputs` as a list", _FlatNode, _flat_to_op, frozenset())
_NESTED_BASE = LIFTED_ATTRS | UNVERSIONED_ATTRS
_NESTED_FIELDS = "`ctrl_deps`, `inputs` as {values, shapes, types}, `attrs`"

SCHEMA_LAYOUTS: dict[tuple[int, int, int], Layout] = {
    (1, 0, 1): FLAT,
    (1, 0, 2): Layout("nested", _NESTED_FIELDS, _NestedNode, _nested_to_op, _NESTED_BASE),
    (1, 0, 3): Layout("nested", _NESTED_FIELDS, _NestedNode, _nested_to_op, _NESTED_BASE),
    (1, 0, 4): Layout("nested", _NESTED_FIELDS, _NestedNode, _nested_to_op, _NESTED_BASE | KERNEL_ATTRS),
    (1, 1, 0): Layout("nested", _NESTED_FIELDS, _NestedNode, _nested_to_op, _NESTED_BASE | KERNEL_ATTRS | COMM_ATTRS),
    (1, 1, 1): Layout("nested", _NESTED_FIELDS, _NestedNode, _nested_to_op, _NESTED_BASE | KERNEL_ATTRS | COMM_ATTRS),
}
SUPPORTED_MAJOR = 1

# "1.1.0" or "1.1.0-chakra.0.0.4": the chakra suffix names the converter's
# version, not the layout, so it is ignored.
_SCHEMA_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:-chakra\.\d+\.\d+\.\d+)?$")


def schema_version(where: str, schema: str) -> tuple[int, int, int]:
    """Parse ``major.minor.patch[-chakra.X.Y.Z]``; InputError otherwise."""
    m = _SCHEMA_RE.match(schema.strip())
    if m is None:
        raise InputError(where, f"field `schema` is {schema!r}, expected a version like 1.1.0 or 1.0.2-chakra.0.0.4")
    major, minor, patch = (int(g) for g in m.groups())
    return major, minor, patch


def layout_for(where: str, schema: str) -> Layout:
    """Pick the layout for ``schema``: exact match, else nearest older known.

    A version this table lacks but with the supported major (e.g. 1.1.5,
    1.2.0) is read with the newest known layout not newer than it, with one
    warning, because minor bumps so far only added optional fields.
    """
    version = schema_version(where, schema)
    if version in SCHEMA_LAYOUTS:
        return SCHEMA_LAYOUTS[version]
    known = sorted(SCHEMA_LAYOUTS)
    if version[0] != SUPPORTED_MAJOR:
        newest = ".".join(map(str, known[-1]))
        raise InputError(where, f"field `schema` is {schema!r}: major version {version[0]} is not supported (newest known {newest})")
    older = [v for v in known if v <= version]
    chosen = older[-1] if older else known[0]
    log.warning(
        "%s: unknown host ET schema %s; reading it as %s (the newest known layout not newer than it)",
        where,
        schema,
        ".".join(map(str, chosen)),
    )
    return SCHEMA_LAYOUTS[chosen]


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------


# torch writes ``schema`` first; peeking at the head picks the node layout so
# the whole file is decoded in one pass (a header pre-pass scans it twice and
# keeps a second copy of the nodes alive).
SCHEMA_PEEK = re.compile(rb'"schema"\s*:\s*"([^"\\]{0,64})"')
SCHEMA_PEEK_BYTES = 4096


_DOC_TYPES: dict[type[Any], type[Any]] = {}


def _doc_type(node_type: type[Any]) -> type[Any]:
    """A whole-file struct whose ``nodes`` use ``node_type``."""
    doc = _DOC_TYPES.get(node_type)
    if doc is None:
        doc = msgspec.defstruct(
            f"_Doc{node_type.__name__}",
            [("schema", str | None, None), ("pid", Int64, 0), ("start_ts", Int64, 0),
             ("finish_ts", Int64, 0), ("nodes", list[node_type] | None, None)],  # type: ignore[valid-type]
            gc=False)
        _DOC_TYPES[node_type] = doc
    return doc


# Decode errors that suggest the nodes have another schema's layout (as
# opposed to a bad value in the right place).
_LAYOUT_MISMATCH_SIGNS = ("missing required field", "Expected `object`", "Expected `array`")


def decode_doc(where: str, data: bytes, layout: Layout) -> Any:
    try:
        return decode(where, data, _doc_type(layout.node_type))
    except InputError as e:
        if "$.nodes" not in e.problem or not any(
                shape in e.problem for shape in _LAYOUT_MISMATCH_SIGNS):
            raise
        hint = f"; that schema uses the {layout.name} node layout ({layout.fields})"
        raise InputError(where, e.problem + hint) from None


def decode_nodes(where: str, nodes: msgspec.Raw | memoryview | bytes, schema: str, layout: Layout,
                  ) -> list[Any]:
    try:
        return decode(where, nodes, GenericAlias(list, (layout.node_type,)), where="$.nodes")
    except InputError as e:
        if not e.problem.startswith("unexpected content"):
            raise
        hint = f"; schema {schema} uses the {layout.name} node layout ({layout.fields})"
        raise InputError(where, e.problem + hint) from None


def normalise(where: str, raw_nodes: list[Any], layout: Layout,
               shared: SharedIO | None = None) -> list[HostOp]:
    """The raw nodes as ops; ``shared``: see ``SharedIO`` (pass one per
    trace when its nodes come in several lists)."""
    to_op = layout.to_op
    if shared is None:
        shared = {}
    ops: list[HostOp] = []
    append = ops.append
    extra_names: set[str] = set()
    # getattr: an extension built before host_ops (an editable install not
    # rebuilt) still loads, and its users take the twin.
    host_ops = getattr(compiled.FAST, "host_ops", None) if to_op is _nested_to_op else None
    count = len(raw_nodes)
    i = 0
    try:
        while i < count:
            if host_ops is not None:  # runs of plain ops (see _fast.c's host_ops)
                i = host_ops(raw_nodes, i, ops, shared, IOValues, HostOp,
                             _SHARED_STRINGS, _shared, _NO_EXTRAS)
                if i == count:
                    break
            op, extras = to_op(raw_nodes[i], shared)
            i += 1
            append(op)
            if extras:
                extra_names.update(extras)
                _check_counts(where, op, extras)
    except msgspec.MsgspecError as e:  # attrs are decoded per op, here
        detail = " ".join(str(e).split()).replace("$", f"$.nodes[{len(ops)}].attrs")
        raise InputError(where, f"unexpected content: {detail}") from None
    unknown = extra_names - layout.known_attrs
    if unknown:
        log.info("%s: attrs not in the %s schema table (kept in HostOp.attrs): %s", where, layout.name, ", ".join(sorted(unknown)))
    return ops


def slice_ops(where: str, nodes: memoryview | bytes, layout: Layout,
              shared: SharedIO) -> list[HostOp]:
    """The ops of a slice of ``nodes`` (a JSON array's text): ``decode_nodes``
    then ``normalise``. Where compiled, the nested layout's plain nodes go
    from the text straight to ops in one pass (``_fast.nested_ops``: about
    half the time of a decode into node structs and a second pass over
    them); from the first node it does not take, the rest go the same way
    as the whole slice would."""
    ops: list[HostOp] = []
    nested_ops = getattr(compiled.FAST, "nested_ops", None) if layout.to_op is _nested_to_op \
        else None
    if nested_ops is not None:
        taken_to = nested_ops(nodes, ops, shared, IOValues, HostOp, _SHARED_STRINGS, _shared,
                              _NO_EXTRAS)
        if taken_to < 0:
            return ops
        if taken_to:
            nodes = b"[" + bytes(nodes[taken_to:])
    ops += normalise(where, decode_nodes(where, nodes, "", layout), layout, shared)
    return ops


# record_param_comms attrs read as integers (message sizes, group layout):
# they become int64 comm_size / group attributes of the output.
COUNT_ATTRS = ("in_msg_nelems", "out_msg_nelems", "global_rank_start", "global_rank_stride",
               "pg_size")


def _check_counts(where: str, op: HostOp, extras: dict[str, Any]) -> None:
    """Integer attrs of collectives: integers within int64 (only ops with
    extra attrs get here: collectives, not the millions of plain ops)."""
    for name in COUNT_ATTRS:
        value = extras.get(name)
        if value is not None and (type(value) is not int or not I64_MIN <= value <= I64_MAX):
            _bad_attr(where, op, name, "an integer within int64", value)


def check_structure(where: str, ops: list[HostOp]) -> None:
    """The ops' structure (see the module) checked, each parent that is an
    op made to share that op's id object (a million ops kept about 26 MB of
    equal ints), the root's self-parent made 0, dangling parents warned of
    once: the compiled pass (``_fast.check_ops``) where nothing is wrong,
    else the twin (``_check_ops_python``), which raises the error."""
    check = getattr(compiled.FAST, "check_ops", None)
    dangling: list[HostOp] = []
    later_parent = None if check is None else check(ops, OBSERVER_PREFIX, MAX_ID, dangling)
    if later_parent is None:
        later_parent, dangling = _check_ops_python(where, ops)
    if later_parent:  # ids follow op start, so only then can parents loop
        _check_parent_cycles(where, ops)
    if dangling:
        quoted = ", ".join(f"{op.id}->{op.parent}" for op in dangling[:MAX_QUOTED_IDS])
        more = " ..." if len(dangling) > MAX_QUOTED_IDS else ""
        log.warning("%s: %d ops name a parent that is not in the trace (op->parent: %s%s); treated as top-level", where, len(dangling), quoted, more)


def _check_ops_python(where: str, ops: list[HostOp]) -> tuple[bool, list[HostOp]]:
    """``check_structure``'s pass over the ops: whether some parent id is
    above its op's, and the ops whose parent is no op."""
    # id -> the op's own id object: a parent that is an op then shares it.
    ids = {op.id: op.id for op in ops}
    if len(ids) != len(ops):
        raise InputError(where, f"duplicate op id {_first_duplicate(ops)} in `nodes`")
    dangling: list[HostOp] = []
    later_parent = False
    for op in ops:  # one pass: this loop runs once per op on million-op traces
        parent = op.parent
        if parent == op.id:
            if not op.name.startswith(OBSERVER_PREFIX):
                raise InputError(where, f"op {op.id} ({op.name!r}) is its own parent")
            op.parent = 0
        elif parent:
            shared = ids.get(parent)
            if shared is None:
                dangling.append(op)
            else:
                op.parent = shared
                later_parent = later_parent or parent > op.id
        tid, rf_id = op.tid, op.rf_id
        if type(tid) is not int or not -MAX_ID <= tid <= MAX_ID:
            _bad_attr(where, op, "tid", "an integer", tid)
        if rf_id is not None and (type(rf_id) is not int or not -MAX_ID <= rf_id <= MAX_ID):
            _bad_attr(where, op, "rf_id", "an integer", rf_id)
        if type(op.op_schema) is not str:
            _bad_attr(where, op, "op_schema", "a string", op.op_schema)
    return later_parent, dangling


def _bad_attr(where: str, op: HostOp, name: str, expected: str, value: Any) -> None:
    raise InputError(where, f"op {op.id} ({op.name!r}): `{name}` should be {expected}, "
                     f"got {value!r}"[:300])


def _check_parent_cycles(where: str, ops: list[HostOp]) -> None:
    """Callers that loop (A calls B calls A) cannot come from a real run."""
    parent_of = {op.id: op.parent for op in ops}
    state: dict[int, bool] = {}  # id -> finished (False: on the walk in progress)
    for op in ops:
        walk: list[int] = []
        cur = op.id
        while cur in parent_of and cur not in state:
            state[cur] = False
            walk.append(cur)
            cur = parent_of[cur]
        if cur in state and not state[cur]:
            loop = walk[walk.index(cur):]
            raise InputError(where, "ops call each other in a loop (op -> caller): "
                             + " -> ".join(map(str, loop + [cur])))
        for node in walk:
            state[node] = True


def _first_duplicate(ops: list[HostOp]) -> int:
    seen: set[int] = set()
    for op in ops:
        if op.id in seen:
            return op.id
        seen.add(op.id)
    raise AssertionError("no duplicate")  # caller saw len(ids) != len(ops)


def dangling_parents(ops: list[HostOp], ids: set[int] | None = None) -> list[HostOp]:
    """Ops whose ``parent`` is neither 0 (no caller) nor an op in ``ops``."""
    known = ids if ids is not None else {op.id for op in ops}
    return [op for op in ops if op.parent != 0 and op.parent not in known]


def process_groups_of(where: str, ops: list[HostOp]) -> list[ProcessGroup]:
    """Parse the JSON string held by the ``## process_group:init ##`` node."""
    try:  # the names read at once, then searched in C: a generator step an op cost more
        node = ops[op_field(ops, "name").index(PROCESS_GROUP_INIT)]
    except ValueError:
        return []
    what = f"op {node.id} ({PROCESS_GROUP_INIT})"
    try:
        values = node.inputs.values
    except RecursionError:
        raise InputError(where, f"{what}: inputs {TOO_DEEP}") from None
    except msgspec.DecodeError as e:
        raise InputError(where, f"{what}: inputs are not JSON ({' '.join(str(e).split())})") from None
    if not values:
        return []
    if not isinstance(values, list):
        raise InputError(where, f"{what}: inputs `values` should be a list, got {type(values).__name__}")
    text = values[0]
    if not isinstance(text, str):
        raise InputError(where, f"{what}: first input should be a JSON string, got {type(text).__name__}")
    try:
        records = msgspec.json.decode(text, type=list[_PgRecord])
    except RecursionError:
        raise InputError(where, f"{what}: process-group JSON {TOO_DEEP}") from None
    except msgspec.DecodeError as e:
        detail = " ".join(str(e).split())
        raise InputError(where, f"{what}: bad process-group JSON ({detail})") from None
    return [
        ProcessGroup(
            pg_name=str(r.pg_name),
            pg_desc=r.pg_desc,
            ranks=r.ranks,
            group_size=r.group_size,
            backend=r.backend_config,
        )
        for r in records
    ]


__all__ = [
    "SCHEMA_LAYOUTS",
    "Layout",
    "dangling_parents",
    "layout_for",
    "schema_version",
]
