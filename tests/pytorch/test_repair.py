"""``--repair``: a real host ET cut off mid-array at 30/50/70/90 %.

Without ``--repair``: one line naming ``--repair``, exit 2, no output. With
it: a sound ``.et`` holding every complete node before the cut, and a report
that counts what was recovered, the lost tail and the orphans."""

from __future__ import annotations

import gzip
from pathlib import Path

import msgspec
import pytest
from helpers import SAMPLE, assert_one_line_failure, run_cli

from pt2chakra.conversion.api import convert
from pt2chakra.errors import InputError
from pt2chakra.pytorch.host_trace import load_host_trace
from pt2chakra.pytorch.records import HostOp
from pt2chakra.pytorch.repair import close_truncated, hang_orphans_from_root
from pt2chakra.tools.validate import validate

CUTS = (0.3, 0.5, 0.7, 0.9)
# A host ET with a process group and NCCL collectives (schema 1.0.2, nested
# layout) and an old flat-layout one (schema 1.0.1).
SOURCES = ("chakra_pg_host/host_et.json.gz", "dlrm_8gpu/rank0.host_et.json.gz")


def _text(traces: Path, rel: str) -> bytes:
    return gzip.decompress((traces / rel).read_bytes())


class _Doc(msgspec.Struct):
    nodes: list[msgspec.Raw]


def _complete_ids_before(data: bytes, cut: int) -> set[int]:
    """Ids of the nodes whose whole text lies before ``cut`` (what a repair
    must recover): each node's exact text, found in file order."""
    ids, pos = set(), 0
    for raw in msgspec.json.decode(data, type=_Doc).nodes:
        text = bytes(raw)
        pos = data.index(text, pos) + len(text)
        if pos <= cut:
            ids.add(msgspec.json.decode(text, type=_Id).id)
    return ids


class _Id(msgspec.Struct):
    id: int


@pytest.mark.parametrize("fraction", CUTS)
@pytest.mark.parametrize("rel", SOURCES)
def test_cut_trace_is_refused_without_repair(traces, tmp_path, rel: str, fraction: float) -> None:
    data = _text(traces, rel)
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: int(len(data) * fraction)])
    out = tmp_path / "cut.et"
    proc = run_cli("convert", "--host-trace", cut, "-o", out)
    assert_one_line_failure(proc, "--repair", str(cut))
    assert proc.returncode == 2 and not out.exists()


@pytest.mark.parametrize("fraction", CUTS)
@pytest.mark.parametrize("rel", SOURCES)
def test_repair_recovers_every_complete_node(traces, tmp_path, rel: str, fraction: float) -> None:
    data = _text(traces, rel)
    n_cut = int(len(data) * fraction)
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[:n_cut])
    out = tmp_path / "cut.et"
    report = convert(cut, None, out, repair=True)
    expected = _complete_ids_before(data, n_cut)
    assert report.repair["ops_recovered"] == len(expected) == report.host_ops_in
    assert 0 < report.repair["tail_bytes_lost"] < n_cut
    recovered = load_host_trace(cut, repair=True)
    assert {op.id for op in recovered.ops} == expected
    ids = {op.id for op in recovered.ops}
    assert all(op.parent == 0 or op.parent in ids for op in recovered.ops)
    assert report.repair["orphans_to_root"] >= 1  # the root is written last: always cut
    assert report.accounted() and validate([str(out)]).sound


def test_repair_reads_a_cut_gzip_stream(traces, tmp_path) -> None:
    packed = (traces / SOURCES[0]).read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    proc = run_cli("convert", "--host-trace", cut, "-o", tmp_path / "a.et")
    assert_one_line_failure(proc, "truncated gzip", "--repair")
    report = convert(cut, None, tmp_path / "b.et", repair=True)
    assert report.repair["ops_recovered"] > 0 and validate([str(tmp_path / "b.et")]).sound


def test_repair_of_a_whole_trace_changes_nothing(traces, tmp_path) -> None:
    plain = convert(traces / SOURCES[0], None, tmp_path / "a.et")
    repaired = convert(traces / SOURCES[0], None, tmp_path / "b.et", repair=True)
    assert not repaired.repair
    assert (tmp_path / "a.et").read_bytes() == (tmp_path / "b.et").read_bytes()
    assert plain.nodes == repaired.nodes


def test_cut_before_the_nodes_has_nothing_to_recover() -> None:
    with pytest.raises(InputError, match="before its `nodes`"):
        close_truncated("x.json", b'{"schema": "1.1.0", "pid": 1')


def test_cut_right_after_the_array_opens_recovers_no_node() -> None:
    whole, tail = close_truncated("x.json", b'{"schema": "1.1.0", "nodes": [ {"id": 3, "na')
    assert whole.endswith(b"[]}") and tail == len(b' {"id": 3, "na')


def test_orphans_hang_from_the_root() -> None:
    ops = [HostOp(1, "a", 0, 1), HostOp(2, "b", 1, 1), HostOp(3, "c", 9, 1)]
    assert hang_orphans_from_root(ops) == 1
    assert [op.parent for op in ops] == [0, 1, 0]


def test_repair_needs_a_host_trace(tmp_path) -> None:
    proc = run_cli("convert", "--device-trace", f"{SAMPLE}.kineto.json.gz",
                   "--repair", "-o", tmp_path / "x.et")
    assert_one_line_failure(proc, "--repair", "--host-trace")
    assert proc.returncode == 2 and not (tmp_path / "x.et").exists()
