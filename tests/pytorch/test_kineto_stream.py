"""The streaming Kineto loader gives the whole-file loader's trace, or steps aside."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import PAIRS, SAMPLE

from pt2chakra.errors import InputError
from pt2chakra.pytorch import json_slices, kineto_stream
from pt2chakra.pytorch.kineto_stream import load_streamed
from pt2chakra.pytorch.kineto_trace import load_kineto_trace
from pt2chakra.pytorch.records import KinetoTrace

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
    assert lean is not None and lean == _without_inputs(full)
    assert _whole(path, monkeypatch, inputs=False) == lean


@pytest.mark.parametrize("chunk", [300, 5000])
def test_many_slices_join_in_file_order(chunk: int, monkeypatch: pytest.MonkeyPatch,
                                        traces: Path) -> None:
    monkeypatch.setattr(json_slices, "READ_CHUNK", chunk)
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
