"""The streaming host ET loader gives the whole-file loader's trace, or steps aside."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from builders import EXTRAS_BY_VERSION, nested_et
from helpers import HOST_ONLY, PAIRS, SAMPLE

from pt2chakra.errors import InputError
from pt2chakra.pytorch import host_stream, json_slices
from pt2chakra.pytorch.host_stream import load_streamed
from pt2chakra.pytorch.host_trace import load_host_trace
from pt2chakra.pytorch.records import HostTrace

HOST_TRACES = sorted({host for host, _ in {**PAIRS, **HOST_ONLY}.values()})


def _whole(path: Path, monkeypatch: pytest.MonkeyPatch) -> HostTrace:
    """The whole-file loader alone."""
    with monkeypatch.context() as m:
        m.setattr(host_stream, "load_streamed", lambda _path: None)
        return load_host_trace(path)


def _observer_text(doc: dict[str, Any], indent: int = 4) -> bytes:
    """``doc`` laid out as torch's observer writes it: header, then one node
    per block at ``indent`` spaces, each node's fields on one line."""
    head = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in doc.items()
                     if k not in ("nodes", "finish_ts"))
    pad = " " * indent
    nodes = ",\n".join(f"{pad}{{\n{pad}  {json.dumps(n)[1:-1]}\n{pad}}}" for n in doc["nodes"])
    return (f'{{\n  {head},\n  "nodes": [\n{nodes}\n  ],\n'
            f'  "finish_ts": {doc["finish_ts"]}\n}}').encode()


@pytest.mark.parametrize("rel", HOST_TRACES)
def test_real_traces_stream_to_the_same_trace(traces: Path, rel: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    streamed = load_streamed(traces / rel)
    assert streamed is not None, "the observer's layout should stream"
    assert streamed == _whole(traces / rel, monkeypatch)


def test_small_chunks_and_a_node_longer_than_a_chunk(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path(f"{SAMPLE}.host_et.json.gz")
    monkeypatch.setattr(json_slices, "JSON_READ_CHUNK", 700)  # many slices; some nodes span chunks
    streamed = load_streamed(path)
    assert streamed is not None and streamed == _whole(path, monkeypatch)


@pytest.mark.parametrize("version", sorted(EXTRAS_BY_VERSION))
@pytest.mark.parametrize("indent", [4, 6])
def test_observer_layout_of_each_schema(tmp_path: Path, version: str, indent: int,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    doc = nested_et(f"{version}-chakra.0.0.4", EXTRAS_BY_VERSION[version])
    path = tmp_path / "et.json.gz"
    path.write_bytes(gzip.compress(_observer_text(doc, indent)))
    streamed = load_streamed(path)
    assert streamed is not None
    assert streamed == _whole(path, monkeypatch)
    assert streamed.finish_ts == 200 and streamed.pid == 42 and len(streamed.ops) == 3


def test_minified_json_is_left_to_the_whole_file_loader(tmp_path: Path) -> None:
    path = tmp_path / "et.json"
    path.write_text(json.dumps(nested_et("1.0.3-chakra.0.0.4")))
    assert load_streamed(path) is None
    assert len(load_host_trace(path).ops) == 3


@pytest.mark.parametrize("damage", [
    lambda t: t[: len(t) // 2],  # truncated
    lambda t: t.replace(b'"id": 3', b'"id": "x"', 1),  # a field of the wrong type
    lambda t: t.replace(b'"id": 3', b'"id": 2', 1),  # a duplicate id
    lambda t: t + b"garbage",  # trailing content
])
def test_bad_input_gets_the_whole_file_loaders_error(tmp_path: Path, damage: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "et.json"
    path.write_bytes(damage(_observer_text(nested_et("1.0.3-chakra.0.0.4"))))
    assert load_streamed(path) is None
    with pytest.raises(InputError) as streamed_first:
        load_host_trace(path)
    with pytest.raises(InputError) as whole:
        _whole(path, monkeypatch)
    assert str(streamed_first.value) == str(whole.value)


def test_a_second_nodes_key_is_left_to_the_whole_file_loader(tmp_path: Path) -> None:
    text = _observer_text(nested_et("1.0.3-chakra.0.0.4"))
    path = tmp_path / "et.json"
    path.write_bytes(text[:-2] + b',\n  "nodes": []\n}')
    assert load_streamed(path) is None
    assert load_host_trace(path).ops == []


@pytest.mark.parametrize("keep_views", [False, True])
def test_slices_are_the_array_in_order_even_when_a_view_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_views: bool) -> None:
    # Slices are views of the read buffer; one still held when the buffer
    # moves on (as a decoded msgspec.Raw would hold it) makes it be copied.
    doc = {"schema": "1.1.1", "pid": 1, "finish_ts": 2,
           "nodes": [{"id": i, "name": f"op{i}", "text": "x" * (i % 50)} for i in range(300)]}
    path = tmp_path / "et.json"
    path.write_bytes(_observer_text(doc))
    monkeypatch.setattr(json_slices, "JSON_READ_CHUNK", 500)
    kept: list[memoryview] = []
    nodes: list[Any] = []

    def on_slice(view: memoryview) -> None:
        nodes.extend(json.loads(bytes(view)))
        if keep_views:
            kept.append(view)

    head, trailer = json_slices.read_sliced(str(path), b"nodes", lambda _first: None, on_slice)
    assert nodes == doc["nodes"]
    assert (len(kept) > 1) == keep_views
    # A view kept is left as it was handed out: the buffer moved on as a copy.
    assert [n for view in kept for n in json.loads(bytes(view))] == (nodes if keep_views else [])
    assert json.loads(head + b'"nodes": []' + trailer) == {**doc, "nodes": []}
