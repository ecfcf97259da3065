"""A host op's inputs/outputs by the compiled path (``_fast.shared_io``) are
the ones the Python lines of ``_nested_to_op`` build: same body, same size,
same sharing; and whole real traces load to equal ops either way."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from helpers import TRACES
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra import compiled
from pt2chakra.pytorch.host_decode import _NestedNode
from pt2chakra.pytorch.host_trace import load_host_trace
from pt2chakra.pytorch.records import IOValues

pytestmark = pytest.mark.skipif(compiled.FAST is None,
                                reason="the compiled fast path is not built here")

_NODE = msgspec.json.Decoder(_NestedNode)
_json_values = st.recursive(st.one_of(st.integers(), st.text(max_size=5), st.none()),
                            lambda inner: st.lists(inner, max_size=4), max_leaves=12)
_texts = st.one_of(st.just([]), _json_values, st.just(["x" * 20000]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries({}, optional={
    "values": _texts, "shapes": _texts, "types": _texts, "strides": _texts}), max_size=4))
@pytest.mark.slow
def test_same_io_values(ios: list[dict[str, Any]]) -> None:
    fast = compiled.FAST
    assert fast is not None
    shared_fast: dict[IOValues, IOValues] = {}
    shared_python: dict[IOValues, IOValues] = {}
    for io in ios:
        raw = _NODE.decode(json.dumps({"id": 1, "name": "op", "ctrl_deps": 0,
                                       "inputs": io}).encode()).inputs
        got = fast.shared_io(raw, IOValues, shared_fast)
        want = IOValues.from_json(raw.values, raw.shapes, raw.types, raw.strides)
        want = shared_python.setdefault(want, want)
        assert got == want
        assert got is shared_fast[got]  # the first equal one is kept
    assert list(shared_fast) == list(shared_python)


@pytest.mark.parametrize("name", ["dlrm_8gpu/rank0.host_et.json.gz", "gpt2_host/host_et.json.gz",
                                  "linear_1gpu/host_et.json.gz", "resnet_2gpu_host/host_et.json.gz"])
@pytest.mark.slow
def test_real_trace_loads_the_same(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{path} is not here")
    fast = load_host_trace(str(path))
    monkeypatch.setattr(compiled, "FAST", None)
    python = load_host_trace(str(path))
    assert msgspec.msgpack.encode(fast.ops) == msgspec.msgpack.encode(python.ops)
