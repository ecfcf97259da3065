"""The compiled fast path (``_fast.c``) gives what the pure-Python path
gives: the same nodes, the same held-apart column, or the same error, for
any bytes a node frame may hold, and the same framing of any buffer."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import metadata
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pt2chakra.chakra import compiled, decode
from pt2chakra.chakra.encode import encode_metadata, uvarint
from pt2chakra.chakra.lean_read import read_et_apart, read_et_lean
from pt2chakra.errors import InputError
from pt2chakra.simulation.prepare import SIM_ATTRS

pytestmark = pytest.mark.skipif(compiled.FAST is None,
                                reason="the compiled fast path is not built here")

INCL = "inclusive_duration_micros"
META = metadata(rank=0)
WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32 = 0, 1, 2, 5

u64 = st.one_of(st.integers(0, 300), st.integers(0, (1 << 64) - 1))


def _field(number: int, wire: int, payload: bytes) -> bytes:
    return uvarint(number << 3 | wire) + payload


def _len_field(number: int, payload: bytes) -> bytes:
    return _field(number, WIRE_LEN, uvarint(len(payload)) + payload)


# AttributeProto members: (field number, wire type, payload strategy).
_members = st.one_of(
    st.tuples(st.sampled_from([7, 9, 11, 13, 15, 17, 27]), st.just(WIRE_VARINT), u64.map(uvarint)),
    st.tuples(st.sampled_from([3, 21, 25]), st.just(WIRE_I64), st.binary(min_size=8, max_size=8)),
    st.tuples(st.sampled_from([5, 19, 23]), st.just(WIRE_I32), st.binary(min_size=4, max_size=4)),
    st.tuples(st.sampled_from([29, 31]), st.just(WIRE_LEN),
              st.text(max_size=8).map(lambda t: uvarint(len(t.encode())) + t.encode())),
)
_attr_names = st.sampled_from(sorted(SIM_ATTRS) + [INCL, INCL, "rf_id", "op_schema", "x"])


@st.composite
def attr_bodies(draw: st.DrawFn) -> bytes:
    """Named bodies (most), unnamed-first ones, two names, garbage."""
    kind = draw(st.sampled_from(["named", "named", "named", "value_first", "two_names", "raw"]))
    if kind == "raw":
        return draw(st.binary(max_size=12))
    name = draw(_attr_names).encode()
    number, wire, payload = draw(_members)
    value = _field(number, wire, payload)
    named = _len_field(1, name)
    if kind == "value_first":
        return value + named
    if kind == "two_names":
        return named + value + _len_field(1, draw(_attr_names).encode())
    return named + value


_node_fields = st.one_of(
    u64.map(lambda v: _field(1, WIRE_VARINT, uvarint(v))),  # id
    st.text(max_size=6).map(lambda t: _len_field(2, t.encode())),  # name
    st.binary(max_size=4).map(lambda b: _len_field(2, b)),  # name, maybe not UTF-8
    st.integers(-2, 9).map(lambda t: _field(3, WIRE_VARINT, uvarint(t % (1 << 64)))),  # type
    u64.map(lambda v: _field(5, WIRE_VARINT, uvarint(v))),  # data_deps, unpacked
    st.lists(u64, max_size=4).map(lambda vs: _len_field(5, b"".join(map(uvarint, vs)))),
    u64.map(lambda v: _field(6, WIRE_VARINT, uvarint(v))),  # start
    u64.map(lambda v: _field(7, WIRE_VARINT, uvarint(v))),  # duration
    st.lists(u64, max_size=3).map(lambda vs: _len_field(4, b"".join(map(uvarint, vs)))),  # ctrl
    st.binary(max_size=6).map(lambda b: _len_field(8, b)),  # inputs
    attr_bodies().map(lambda b: _len_field(10, b)),
    attr_bodies().map(lambda b: _len_field(10, b)),
    st.tuples(st.integers(1, 40), st.sampled_from([WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32]),
              st.binary(max_size=9)).map(lambda f: _field(*f)),  # anything, even malformed
)


@st.composite
def node_frames(draw: st.DrawFn) -> bytes:
    return b"".join(draw(st.lists(_node_fields, max_size=10)))


def _outcome(path: Path, names: frozenset[str], apart: bool) -> str:
    """What one read gives, as text (NaN-safe): nodes and column, or the error."""
    try:
        if apart:
            md, nodes = read_et_apart(path, names, INCL)
            return repr((md, list(nodes), list(nodes.apart)))
        md, lazy = read_et_lean(path, names)
        return repr((md, list(lazy)))
    except InputError as exc:
        return f"InputError: {exc}"


def _both(path: Path, names: frozenset[str], apart: bool, monkeypatch: pytest.MonkeyPatch,
          ) -> tuple[str, str]:
    fast = _outcome(path, names, apart)
    with monkeypatch.context() as m:
        m.setattr(compiled, "FAST", None)
        python = _outcome(path, names, apart)
    return fast, python


@pytest.mark.slow  # a long property run
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(frames=st.lists(node_frames(), min_size=1, max_size=6), apart=st.booleans())
def test_any_node_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, frames: list[bytes],
                        apart: bool) -> None:
    path = tmp_path / "n.et"
    path.write_bytes(b"".join(uvarint(len(m)) + m for m in [encode_metadata(META), *frames]))
    fast, python = _both(path, SIM_ATTRS, apart, monkeypatch)
    assert fast == python


def test_a_body_renamed_to_the_held_apart_one(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """First named ``category`` (wanted), last named as the attribute held
    apart (protobuf keeps the last name): the value goes to the column, as
    the Python path puts it (found by this file's hypothesis test in CI)."""
    body = (_len_field(1, b"category") + _field(3, WIRE_I64, bytes(8))
            + _len_field(1, INCL.encode()))
    path = tmp_path / "n.et"
    path.write_bytes(b"".join(uvarint(len(m)) + m for m in
                              [encode_metadata(META), _len_field(10, body)]))
    fast, python = _both(path, SIM_ATTRS, True, monkeypatch)
    assert fast == python and fast.endswith("[0.0])")


def test_many_names_take_the_python_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More wanted names than the compiled filter holds: the same nodes."""
    body = _len_field(1, b"n70") + _field(9, WIRE_VARINT, uvarint(5))
    node = _field(1, WIRE_VARINT, uvarint(1)) + _len_field(10, body)
    path = tmp_path / "n.et"
    path.write_bytes(b"".join(uvarint(len(m)) + m for m in [encode_metadata(META), node]))
    names = frozenset(f"n{k}" for k in range(100))
    fast, python = _both(path, names, False, monkeypatch)
    assert fast == python and "'n70', 'int64_val', 5" in fast


@st.composite
def frame_buffers(draw: st.DrawFn) -> bytes:
    """Frames with 1-, 2- and longer length varints, non-canonical and zero
    lengths, truncation and random bytes."""
    parts = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["short", "two", "long", "zero", "padded", "raw"]))
        size = draw(st.integers(0, 300 if kind != "long" else 20000))
        if kind == "zero":
            parts.append(b"\x00")
        elif kind == "padded":  # a non-canonical length: 0x80 0x00, or 0x85 0x80 0x00
            parts.append(draw(st.sampled_from([b"\x80\x00", b"\x85\x80\x00"])) + b"x" * 5)
        elif kind == "raw":
            parts.append(draw(st.binary(max_size=6)))
        else:
            parts.append(uvarint(size) + b"y" * size)
    return b"".join(parts)


@pytest.mark.slow  # a long property run
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(buf=frame_buffers(), limit_back=st.integers(0, 12))
def test_frame_scan(monkeypatch: pytest.MonkeyPatch, buf: bytes, limit_back: int) -> None:
    def scan() -> tuple[object, ...]:
        got = decode._scan_frames(buf, 0, len(buf) - limit_back, 0, 1, "byte", "f.et")
        past = (got.body, got.end, got.length) if got.end > len(buf) else None
        return got.bodies, got.ends, got.pos, past, str(got.error)

    fast = scan()
    with monkeypatch.context() as m:
        m.setattr(compiled, "FAST", None)
        python = scan()
    assert fast == python
