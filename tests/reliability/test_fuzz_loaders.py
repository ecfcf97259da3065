"""Fuzzing the three readers of user files with mutated real files: the host
ET loader, the Kineto loader and the ``.et`` reader either succeed or raise
``InputError`` (the CLI's one line), never another exception.

Inputs are small real files (the bundled sample's first ops, a small shared
Kineto trace, a converted ``.et``), cut to a few kilobytes so that each
example is quick, then damaged: bytes flipped, spans deleted or repeated,
tokens replaced by extreme values, the whole gzipped and truncated.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from builders import host_doc, kineto_doc, sound_et, write_json
from helpers import SAMPLE, TRACES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pt2chakra.chakra.io import read_et
from pt2chakra.errors import InputError
from pt2chakra.pytorch.host_trace import load_host_trace
from pt2chakra.pytorch.kineto_trace import load_kineto_trace

EXAMPLES = 60  # per fuzzer: enough to hit each damage kind, quick in CI
OPS_KEPT = 40  # ops / events of a real file kept as the seed
EXTREMES = [b"18446744073709551616", b"-9223372036854775809", b"1e999", b"NaN", b"null",
            b"[[[[[[[[", b'"\\ud800"', b"{}", b"[]", b'"x"', b"true", b"-1", b"0"]
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def _host_seed() -> bytes:
    doc = json.loads(gzip.decompress(Path(f"{SAMPLE}.host_et.json.gz").read_bytes()))
    doc["nodes"] = doc["nodes"][:OPS_KEPT]
    return json.dumps(doc).encode()


def _kineto_seed() -> bytes:
    source = TRACES / "hta_kineto" / "cuda_event_sync.kineto.json.gz"
    if source.exists():
        doc = json.loads(gzip.decompress(source.read_bytes()))
        doc["traceEvents"] = doc["traceEvents"][:OPS_KEPT]
        return json.dumps(doc).encode()
    return json.dumps(kineto_doc()).encode()


@st.composite
def damaged(draw: st.DrawFn, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "delete", "repeat", "extreme", "number"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 64))]
        elif kind == "repeat":
            data[at:at] = data[at:at + draw(st.integers(1, 64))]
        elif kind == "extreme":
            data[at:at + draw(st.integers(0, 8))] = draw(st.sampled_from(EXTREMES))
        else:  # replace the next number by an extreme one
            digits = next((i for i in range(at, len(data)) if 48 <= data[i] <= 57), None)
            if digits is not None:
                end = digits
                while end < len(data) and 48 <= data[end] <= 57:
                    end += 1
                data[digits:end] = draw(st.sampled_from(EXTREMES))
    blob = bytes(data)
    if draw(st.booleans()):
        blob = gzip.compress(blob)
        if draw(st.booleans()):
            blob = blob[: draw(st.integers(0, len(blob)))]
    return blob


def _only_input_errors(load, path: Path) -> None:
    try:
        load(path)
    except InputError as exc:
        assert "\n" not in str(exc)


HOST_SEED = _host_seed()
KINETO_SEED = _kineto_seed()


@FUZZ
@given(blob=damaged(HOST_SEED))
def test_host_loader_fuzz(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "h.json"
    path.write_bytes(blob)
    _only_input_errors(load_host_trace, path)


@FUZZ
@given(blob=damaged(json.dumps(host_doc()).encode()))
def test_host_loader_fuzz_small_doc(tmp_path: Path, blob: bytes) -> None:
    path = write_json(tmp_path / "h.json", blob)
    _only_input_errors(load_host_trace, path)


@FUZZ
@given(blob=damaged(KINETO_SEED))
def test_kineto_loader_fuzz(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "k.json"
    path.write_bytes(blob)
    _only_input_errors(load_kineto_trace, path)


def _read_all(path: Path) -> None:
    _metadata, nodes = read_et(path)
    for _ in nodes:
        pass


@pytest.fixture(scope="module")
def et_seed(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return sound_et(tmp_path_factory.mktemp("seed") / "s.et").read_bytes()


@FUZZ
@given(data=st.data())
def test_et_reader_fuzz(tmp_path: Path, et_seed: bytes, data: st.DataObject) -> None:
    path = tmp_path / "s.et"
    path.write_bytes(data.draw(damaged(et_seed)))
    _only_input_errors(_read_all, path)
