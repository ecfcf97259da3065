"""A Kineto trace whose device is an accelerator pt2chakra does not convert
(MTIA, HPU): ``convert`` says in one line that the device side is not in the
``.et`` instead of only listing its categories as "not used"."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers import run_cli

from pt2chakra.conversion.api import (
    UNCONVERTED_ACCELERATOR_PREFIXES,
    convert,
    unconverted_accelerator_events,
)

# Categories as libkineto names MTIA's activity, one instant event besides.
MTIA_EVENTS = {"mtia_runtime": 3, "mtia_ccp_events": 2, "MTIA_INSIGHT": 1}


def _with_mtia(traces: Path, tmp_path: Path) -> Path:
    """hta_simple_add's Kineto trace with MTIA activity added (same process)."""
    doc = json.loads(gzip.decompress((traces / "hta_simple_add" / "kineto.json.gz").read_bytes()))
    ts = min(e["ts"] for e in doc["traceEvents"] if "ts" in e)
    for cat, n in MTIA_EVENTS.items():
        doc["traceEvents"] += [{"ph": "X", "cat": cat, "name": f"{cat}_{k}", "pid": 1, "tid": 2,
                                "ts": ts + k, "dur": 1} for k in range(n)]
    doc["traceEvents"].append({"ph": "i", "cat": "mtia_runtime", "name": "mark", "pid": 1,
                               "tid": 2, "ts": ts, "s": "t"})
    path = tmp_path / "mtia.kineto.json"
    path.write_text(json.dumps(doc))
    return path


def _notes(summary: str) -> list[str]:
    return [line.strip() for line in summary.splitlines() if line.strip().startswith("note:")]


@pytest.mark.parametrize("with_host", [False, True])
def test_mtia_device_side_is_said_not_converted(traces: Path, tmp_path: Path,
                                                with_host: bool) -> None:
    kineto = _with_mtia(traces, tmp_path)
    host = traces / "hta_simple_add" / "host_et.json.gz" if with_host else None
    report = convert(host, kineto, tmp_path / "o.et")
    total = sum(MTIA_EVENTS.values()) + 1
    assert report.unconverted_accelerator == {"mtia_*": total}
    assert _notes(report.summary()) == [
        f"note: {total} events of an accelerator pt2chakra does not convert (mtia_*): "
        "the device side is not in the .et"]
    args = ["convert", "--device-trace", kineto, "-o", tmp_path / "cli.et",
            "--report", tmp_path / "r.json"]
    proc = run_cli(*args, *(["--host-trace", host] if host else []))
    assert proc.returncode == 0, proc.stderr
    assert _notes(proc.stdout) == _notes(report.summary())
    assert json.loads((tmp_path / "r.json").read_text())["unconverted_accelerator"] == \
        {"mtia_*": total}


def test_gpu_traces_have_no_note(traces: Path, tmp_path: Path) -> None:
    report = convert(None, traces / "hta_simple_add" / "kineto.json.gz", tmp_path / "o.et")
    assert report.unconverted_accelerator == {} and _notes(report.summary()) == []


def test_prefixes_and_phases_are_grouped() -> None:
    assert "mtia_" in UNCONVERTED_ACCELERATOR_PREFIXES
    ignored = {"mtia_runtime": 4, "mtia_ccp_events:ph=i": 1, "hpu_op": 2, "xpu_driver": 7,
               "Trace": 1}
    assert unconverted_accelerator_events(ignored) == {"hpu_*": 2, "mtia_*": 5}
