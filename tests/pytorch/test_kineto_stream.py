"""The streaming Kineto loader gives the whole-file loader's trace, or steps aside."""

from __future__ import annotations

import gzip
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers import PAIRS, SAMPLE
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.conversion.api import convert
from pt2chakra.errors import InputError
from pt2chakra.pytorch import json_slices, kineto_stream
from pt2chakra.pytorch.kineto_stream import load_streamed
from pt2chakra.pytorch.kineto_trace import load_kineto_trace
from pt2chakra.pytorch.records import CpuColumns, KinetoTrace

KINETO = sorted({k for _, k in PAIRS.values()} | {"resnet_kineto_only/kineto.json.gz",
                                                   "hta_kineto/alexnet.kineto.json.gz"})


def _whole(path: Path, monkeypatch: pytest.MonkeyPatch,
           ignored: Counter[str] | None = None, inputs: bool = True) -> KinetoTrace:
    with monkeypatch.context() as m:
        m.setattr(kineto_stream, "load_streamed", lambda _path, _ignored=None, **_kw: None)
        return load_kineto_trace(path, ignored, inputs=inputs)


@pytest.mark.parametrize("rel", KINETO)
def test_real_traces_stream_to_the_same_trace(traces: Path, rel: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    streamed_ignored: Counter[str] = Counter()
    whole_ignored: Counter[str] = Counter()
    streamed = load_streamed(traces / rel, streamed_ignored)
    assert streamed is not None, "the profiler's layout should stream"
    assert streamed == _whole(traces / rel, monkeypatch, whole_ignored)
    assert streamed_ignored == whole_ignored


def _without_inputs(trace: KinetoTrace) -> KinetoTrace:
    """What ``inputs=False`` leaves out: CPU events' inputs and the ids only
    a Kineto-only conversion reads."""
    for ev in [*trace.cpu_events, *trace.python_events]:
        ev.input_dims = ev.input_types = ev.concrete_inputs = None
        ev.external_id = ev.seq_num = ev.fwd_thread_id = -1
    return trace


@pytest.mark.parametrize("rel", ["dlrm_8gpu/rank0.kineto.json.gz", f"{SAMPLE}.kineto.json.gz"])
def test_without_inputs_only_what_linking_skips_is_left_out(traces: Path, rel: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = traces / rel  # (an absolute SAMPLE stays itself)
    full = load_kineto_trace(path)
    assert any(ev.input_dims is not None for ev in full.cpu_events)  # the test can fail
    assert any(ev.external_id >= 0 for ev in full.cpu_events)
    lean = load_streamed(path, inputs=False)
    assert lean is not None and isinstance(lean.cpu_events, CpuColumns)  # held as columns
    assert _whole(path, monkeypatch, inputs=False) == lean
    # the columns give back the events with what linking reads, the rest at defaults
    lean.cpu_events = list(lean.cpu_events)
    assert lean == _without_inputs(full)


@pytest.mark.parametrize("chunk", [300, 5000])
def test_many_slices_join_in_file_order(chunk: int, monkeypatch: pytest.MonkeyPatch,
                                        traces: Path) -> None:
    monkeypatch.setattr(json_slices, "JSON_READ_CHUNK", chunk)
    for path in (Path(f"{SAMPLE}.kineto.json.gz"), traces / "dlrm_8gpu/rank3.kineto.json.gz"):
        streamed = load_streamed(path)
        assert streamed is not None and streamed == _whole(path, monkeypatch)


def _profiler_text(events: list[dict[str, Any]], extra: str = "") -> bytes:
    """Events laid out as the profiler writes them: one block per event."""
    blocks = ",\n".join("  {\n    " + json.dumps(e)[1:-1] + "\n  }" for e in events)
    return (f'{{\n  "schemaVersion": 1,{extra}\n  "traceEvents": [\n{blocks}\n  ],'
            f'"traceName": "t.json" }}').encode()


EVENTS = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10.0,
           "dur": 2.0, "args": {"External id": 5}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 5.0,
           "dur": 1.0, "args": {"External id": 6}}]


def test_distributed_info_is_read(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    path.write_bytes(_profiler_text(EVENTS, ' "distributedInfo": {"rank": 3, "world_size": 8},'))
    trace = load_streamed(path)
    assert trace is not None and (trace.rank, trace.world_size) == (3, 8)
    assert [e.name for e in trace.cpu_events] == ["aten::mul", "aten::add"]  # by time


def test_array_format_is_left_to_the_whole_file_loader(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    path.write_text(json.dumps(EVENTS, indent=2))
    assert load_streamed(path) is None
    assert len(load_kineto_trace(path).cpu_events) == 2


@pytest.mark.parametrize("damage", [
    lambda t: t[: len(t) // 2],
    lambda t: t.replace(b'"ts": 10.0', b'"ts": "x"'),
    lambda t: t.replace(b'"dur": 2.0, ', b""),  # a complete event without dur
])
def test_bad_input_gets_the_whole_file_loaders_error(tmp_path: Path, damage: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "k.json"
    path.write_bytes(damage(_profiler_text(EVENTS)))
    ignored: Counter[str] = Counter()
    assert load_streamed(path, ignored) is None
    assert not ignored  # nothing counted for a trace not returned
    with pytest.raises(InputError) as streamed_first:
        load_kineto_trace(path)
    with pytest.raises(InputError) as whole:
        _whole(path, monkeypatch)
    assert str(streamed_first.value) == str(whole.value)


# --------------------------------------------------------------------------
# Any layout, any slicing: the same trace (issue 20: python_function events
# were lost when a trace was read in slices).
# --------------------------------------------------------------------------

# Small enough that a real trace is read in many slices, so joining them is tested.
SMALL_CHUNK = 1 << 14
# Real traces re-serialised in every layout: the small ones (the two large
# ones cost seconds per layout and slice no differently).
LAYOUT_SIZE_LIMIT = 200_000


def _layout_traces() -> list[Path]:
    from helpers import ROOT, TRACES

    found = [*TRACES.glob("*/*kineto*.json.gz"), *ROOT.glob("samples/*/*.kineto.json.gz")]
    return sorted(p for p in found if p.stat().st_size < LAYOUT_SIZE_LIMIT)


def _minified(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _pretty(doc: Any) -> bytes:
    """Pretty-printed, but not as torch does it (two-space steps, one key a line)."""
    return json.dumps(doc, indent=2).encode()


def _at(trace: KinetoTrace, path: Path) -> KinetoTrace:
    """``trace`` as if read from ``path`` (the only field naming the file)."""
    return msgspec.structs.replace(trace, path=str(path))


@pytest.mark.parametrize("source", _layout_traces(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_layout_loads_the_same_trace(source: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_slices, "JSON_READ_CHUNK", SMALL_CHUNK)
    expected_ignored: Counter[str] = Counter()
    expected = _whole(source, monkeypatch, expected_ignored)
    assert load_streamed(source) is not None  # torch's own layout is read in slices
    doc = json.loads(gzip.decompress(source.read_bytes()))
    layouts = {"torch.json.gz": source.read_bytes(), "minified.json": _minified(doc),
               "pretty.json": _pretty(doc)}
    for name, text in layouts.items():
        path = tmp_path / name
        path.write_bytes(text)
        for load in (lambda p, i: load_kineto_trace(p, i),
                     lambda p, i: _whole(p, monkeypatch, i)):
            ignored: Counter[str] = Counter()
            assert load(path, ignored) == _at(expected, path), name
            assert ignored == expected_ignored, name


def _et_bytes(source: Path, out: Path) -> bytes:
    convert(None, source, out)
    return out.read_bytes()


@pytest.mark.parametrize("rel", ["hta_kineto/alexnet.kineto.json.gz",
                                 "dlrm_8gpu/rank3.kineto.json.gz"])
def test_every_layout_converts_to_the_same_bytes(traces: Path, rel: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_slices, "JSON_READ_CHUNK", SMALL_CHUNK)
    source = traces / rel
    doc = json.loads(gzip.decompress(source.read_bytes()))
    expected = _et_bytes(source, tmp_path / "torch.et")
    for name, text in {"minified": _minified(doc), "pretty": _pretty(doc)}.items():
        (tmp_path / f"{name}.json").write_bytes(text)
        assert _et_bytes(tmp_path / f"{name}.json", tmp_path / f"{name}.et") == expected, name


# Events as a profiler could write them: every category the loader sorts (and
# one it does not), phases with and without a duration, ids as ints or
# strings, repeated flow ids, ties in time.
_CATS = st.sampled_from(["cpu_op", "user_annotation", "python_function", "cuda_runtime",
                         "kernel", "gpu_memcpy", "cuda_sync", "ac2g", "Trace", ""])
_IDS = st.integers(0, 5) | st.integers(0, 5).map(str)
_ARGS = st.fixed_dictionaries({}, optional={
    "External id": st.integers(0, 9), "correlation": st.integers(0, 9),
    "stream": st.integers(0, 3) | st.sampled_from(["0x0", "7"]), "device": st.integers(0, 1),
    "bytes": st.integers(0, 1 << 40), "Python id": st.integers(0, 9),
    "cuda_sync_kind": st.sampled_from(["Stream Sync", "Event Sync"])})
_EVENT = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "X", "s", "f", "i"]), "cat": _CATS,
     "name": st.sampled_from(["aten::mm", "k", "nn.Module: Linear", "x\\n\"y"]),
     "pid": _IDS, "tid": _IDS, "ts": st.integers(0, 20) | st.floats(0, 20)},
    optional={"dur": st.integers(0, 5) | st.floats(0, 5), "id": st.integers(0, 3),
              "args": _ARGS})


@pytest.mark.slow
@given(events=st.lists(_EVENT, max_size=40), chunk=st.integers(64, 2048))
@settings(max_examples=150, deadline=None)
def test_torch_layout_and_minified_load_alike(events: list[dict[str, Any]], chunk: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as m:
        m.setattr(json_slices, "JSON_READ_CHUNK", chunk)
        torch_path, minified_path = Path(tmp, "torch.json"), Path(tmp, "minified.json")
        torch_path.write_bytes(_profiler_text(events))
        minified_path.write_bytes(_minified({"traceEvents": events, "traceName": "t.json"}))
        loaded: list[Any] = []
        for path in (torch_path, minified_path):
            ignored: Counter[str] = Counter()
            try:
                loaded.append((_at(load_kineto_trace(path, ignored), Path("t")), ignored))
            except InputError as e:  # (a complete event without dur): alike too
                loaded.append(e.problem)
        assert loaded[0] == loaded[1]
        if events and isinstance(loaded[0], tuple):
            assert load_streamed(torch_path) is not None  # the slices were joined
