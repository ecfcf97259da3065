"""Every event of a Kineto file is accounted for: the counts a conversion
reports (``kineto_event_counts``) add up to the events in the file, however
it was laid out and read (whole or in slices)."""

from __future__ import annotations

import gzip
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.conversion.api import convert
from pt2chakra.conversion.kineto_only import kineto_event_counts
from pt2chakra.errors import InputError
from pt2chakra.pytorch import json_slices
from pt2chakra.pytorch.kineto_decode import REPEATED_FLOW_START
from pt2chakra.pytorch.kineto_trace import load_kineto_trace

pytestmark = pytest.mark.slow  # real traces, converted and replayed

REAL = ["dlrm_8gpu/rank3.kineto.json.gz", "hta_kineto/alexnet.kineto.json.gz",
        "hta_simple_add/kineto.json.gz"]
SAMPLES = sorted(ROOT.glob("samples/*/*.kineto.json.gz"))


def _events_in(path: Path) -> int:
    return len(json.loads(gzip.decompress(path.read_bytes()))["traceEvents"])


@pytest.mark.parametrize("rel", REAL)
def test_real_trace_counts_add_up_to_its_events(traces: Path, rel: str) -> None:
    ignored: Counter[str] = Counter()
    counts = kineto_event_counts(load_kineto_trace(traces / rel, ignored), ignored)
    assert sum(counts.values()) == _events_in(traces / rel)


@pytest.mark.parametrize("source", SAMPLES, ids=lambda p: p.name)
def test_reported_counts_add_up_to_the_events(source: Path, tmp_path: Path) -> None:
    report = convert(None, source, tmp_path / "out.et")
    assert sum(report.kineto_events.values()) == _events_in(source)


_EVENT = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "s", "f", "i", "M"]),
     "cat": st.sampled_from(["cpu_op", "python_function", "cuda_runtime", "kernel",
                             "cuda_sync", "ac2g", "Trace", ""]),
     "name": st.just("e"), "pid": st.just(1), "tid": st.just(1), "dur": st.integers(0, 3)},
    optional={"ts": st.integers(0, 9), "id": st.integers(0, 3)})


@given(events=st.lists(_EVENT, max_size=30), chunk=st.integers(64, 1024))
@settings(max_examples=100, deadline=None)
def test_every_event_is_counted_once(events: list[dict[str, Any]], chunk: int) -> None:
    blocks = ",\n".join("  {\n    " + json.dumps(e)[1:-1] + "\n  }" for e in events)
    text = f'{{\n  "traceEvents": [\n{blocks}\n  ]\n}}'
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as m:
        m.setattr(json_slices, "JSON_READ_CHUNK", chunk)  # many slices, each with its own flows
        path = Path(tmp, "k.json")
        path.write_text(text)
        ignored: Counter[str] = Counter()
        try:
            trace = load_kineto_trace(path, ignored)
        except InputError:  # a complete event without ts: refused, nothing to count
            assert any(e["ph"] == "X" and "ts" not in e for e in events)
            return
    assert sum(kineto_event_counts(trace, ignored).values()) == len(events)
    starts = Counter(e.get("id") for e in events if e["ph"] == "s" and e["cat"] == "ac2g"
                     and "ts" in e)
    assert ignored[REPEATED_FLOW_START] == sum(n - 1 for n in starts.values())
