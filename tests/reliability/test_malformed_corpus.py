"""The malformed-input corpus: every command fed hostile files and options.

The promise for every failure (docs/ERRORS.md): exactly one line on stderr naming the
user's file (or option) and the problem, exit status 2 (1 for ``validate``'s
verdict), nothing on stdout, no output file and no temp file left behind,
no traceback, no hang. Each case below is one command line run as its own
process through the real entry point (see ``cli_batch``); the cases are
built in one folder each and run in one batch, then checked one test each.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from builders import (
    PID,
    comm_node,
    comp_node,
    host_doc,
    host_node,
    kineto_doc,
    kineto_event,
    sound_et,
    write_json,
    write_rank,
)
from cli_batch import TIMED_OUT, Call, run_batch
from helpers import SAMPLE, TRACES, gzip_bomb

pytestmark = pytest.mark.slow  # processes of their own, or a browser, or torch

BIG = 2**63  # one past int64
HUGE = 2**70
# Inflates ~1000x, past the ratio-free allowance: a small gzip bomb.
BOMB_BYTES = 160 << 20


class Case(NamedTuple):
    family: str
    build: Callable[[Path, Path], Call]  # (case folder, shared folder) -> command line
    needles: tuple[str, ...]  # each must be in the error line
    rc: int = 2
    must_not_exist: tuple[str, ...] = ("out.et", "out.json", "out.0.et", "report.json")


CASES: dict[str, Case] = {}


def case(family: str, *needles: str, rc: int = 2, name: str | None = None,
         must_not_exist: tuple[str, ...] | None = None) -> Callable[[Callable[..., Any]], None]:
    def register(build: Callable[..., Any]) -> None:
        key = f"{family}-{name or build.__name__.lstrip('_').replace('_', '-')}"
        assert key not in CASES, key
        extra = {} if must_not_exist is None else {"must_not_exist": must_not_exist}
        CASES[key] = Case(family, build, needles, rc, **extra)
    return register


def _call(*argv: Any, stdin: Path | None = None, timeout: float = 30) -> Call:
    return Call([str(a) for a in argv], str(stdin) if stdin else None, timeout)


def _host(d: Path, doc: Any = None, gz: bool = False, name: str = "h.json") -> Path:
    return write_json(d / name, host_doc() if doc is None else doc, gz)


def _kineto(d: Path, doc: Any = None, gz: bool = False) -> Path:
    return write_json(d / "k.json", kineto_doc() if doc is None else doc, gz)


def _convert_host(d: Path, doc: Any) -> Call:
    return _call("convert", "--host-trace", _host(d, doc), "-o", d / "out.et")


def _convert_pair(d: Path, kdoc: Any, hdoc: Any = None, *extra: Any) -> Call:
    return _call("convert", "--host-trace", _host(d, hdoc), "--device-trace", _kineto(d, kdoc),
                 "-o", d / "out.et", *extra)


def _op(**extra: Any) -> dict[str, Any]:
    return host_node(5, "aten::sub", 2, 12, **extra)


def _attr_op(name: str, value: Any, type_: str = "uint64") -> dict[str, Any]:
    return _op(attrs=[{"name": name, "type": type_, "value": value}])


def _with_attr(doc: dict[str, Any], node: int, name: str, value: Any) -> dict[str, Any]:
    for a in doc["nodes"][node]["attrs"]:
        if a["name"] == name:
            a["value"] = value
    return doc


def _kernel(**args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "pid": 0, "tid": 7,
            "ts": 1003.0, "dur": 2, "args": {"device": 0, "stream": 7, "correlation": 99, **args}}


def _bad_crc(data: bytes) -> bytes:
    blob = bytearray(gzip.compress(data))
    blob[-8] ^= 0xFF  # the CRC-32 of the trailer
    return bytes(blob)


def _cut(data: bytes) -> bytes:
    blob = gzip.compress(data)
    return blob[: len(blob) * 2 // 3]


def _deep(depth: int = 200_000) -> str:
    return "[" * depth + "]" * depth


def _raw_host_with(d: Path, marker: str, text: str) -> Path:
    """A host ET whose JSON text has ``text`` spliced in where ``marker`` is."""
    body = json.dumps(host_doc(_attr_op("deep", marker, "string")))
    return write_json(d / "h.json", body.replace(f'"{marker}"', text).encode())


def _et_bytes(d: Path) -> bytes:
    return sound_et(d / "good.et").read_bytes()


def _pg_init(values: Any) -> dict[str, Any]:
    return host_node(6, "## process_group:init ##", 2, 13,
                     inputs={"values": values, "shapes": [[]], "types": ["String"]})


def _rpc(values: Any, types: Any = None, attrs: Any = ()) -> dict[str, Any]:
    return host_node(7, "record_param_comms", 3, 14,
                     inputs={"values": values, "shapes": [[]] * 6,
                             "types": types or ["Tensor(float)", "Int", "String", "Int",
                                                "String", "Int"]},
                     attrs=list(attrs))


# == int64: values that reach the wire ======================================


@case("int64", "h.json", "pid")
def _host_pid(d: Path, s: Path) -> Call:
    return _convert_host(d, host_doc(pid=BIG))


@case("int64", "h.json", "start_ts")
def _host_start_ts(d: Path, s: Path) -> Call:
    return _convert_host(d, {**host_doc(), "start_ts": HUGE})


@case("int64", "h.json", "id")
def _host_op_id(d: Path, s: Path) -> Call:
    return _convert_host(d, host_doc(host_node(HUGE, "aten::x", 2, 12)))


@case("int64", "h.json", "rf_id")
def _host_rf_id(d: Path, s: Path) -> Call:
    return _convert_host(d, _with_attr(host_doc(), 2, "rf_id", BIG))


@case("int64", "h.json", "tid")
def _host_tid(d: Path, s: Path) -> Call:
    return _convert_host(d, _with_attr(host_doc(), 2, "tid", HUGE))




@case("int64", "h.json", "in_msg_nelems")
def _record_param_comms_numel(d: Path, s: Path) -> Call:
    rpc = _rpc([[1, 2, 3, 4, 5, 6], 0, "0", 0, "allreduce", 0],
               attrs=[{"name": "collective_name", "type": "string", "value": "allreduce"},
                      {"name": "dtype", "type": "string", "value": "Float"},
                      {"name": "in_msg_nelems", "type": "uint64", "value": HUGE},
                      {"name": "out_msg_nelems", "type": "uint64", "value": 1},
                      {"name": "pg_name", "type": "string", "value": "0"}])
    return _convert_host(d, host_doc(rpc, host_node(8, "nccl:all_reduce", 7, 15)))


@case("int64", "h.json", "tid")
def _flat_schema_tid(d: Path, s: Path) -> Call:
    nodes = [{"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "parent": 1},
             {"id": 2, "name": "aten::add", "parent": 1, "tid": HUGE, "rf_id": 3}]
    return _convert_host(d, {"schema": "1.0.1", "pid": 1, "nodes": nodes})


@case("int64", "k.json", "pid")
def _kineto_pid(d: Path, s: Path) -> Call:
    return _convert_pair(d, kineto_doc(pid=HUGE))





@case("int64", "k.json", "Seq")
def _kineto_seq(d: Path, s: Path) -> Call:
    return _convert_pair(d, kineto_doc(_kernel(**{"Collective name": "allreduce", "Seq": HUGE})))


@case("int64", "k.json", "stream")
def _kineto_stream(d: Path, s: Path) -> Call:
    return _convert_pair(d, kineto_doc(_kernel(stream=BIG)))


@case("int64", "k.json", "In msg nelems")
def _kineto_numel(d: Path, s: Path) -> Call:
    return _convert_pair(d, kineto_doc(_kernel(**{"Collective name": "allreduce",
                                                  "In msg nelems": str(HUGE)})))


@case("int64", "k.json", "rank")
def _kineto_distributed_rank(d: Path, s: Path) -> Call:
    return _convert_pair(d, kineto_doc(distributedInfo={"rank": HUGE}))


@case("int64", "--rank")
def _convert_rank_huge(d: Path, s: Path) -> Call:
    return _call("convert", "--host-trace", _host(d), "-o", d / "out.et", "--rank", BIG)


@case("int64", "--rank")
def _convert_rank_negative(d: Path, s: Path) -> Call:
    return _call("convert", "--host-trace", _host(d), "-o", d / "out.et", "--rank", -1)


@case("int64", "--rank")
def _from_json_rank_huge(d: Path, s: Path) -> Call:
    return _call("from-json", d / "x.json", "--consumer", "astra-sim", "-o", d / "out", "--rank", BIG)


@case("int64", "--size")
def _microbench_size_huge(d: Path, s: Path) -> Call:
    return _call("microbench", "--size", BIG, "--npus", 2, "-o", d / "out")


@case("int64", "--compute")
def _microbench_compute_huge(d: Path, s: Path) -> Call:
    return _call("microbench", "--size", 8, "--npus", 2, "--compute", BIG, "-o", d / "out")


@case("int64", "x.json", "id")
def _from_json_id_huge(d: Path, s: Path) -> Call:
    doc = {"metadata": {"version": "0.0.4", "attrs": []},
           "nodes": [{"id": 2**64, "name": "n", "type": "COMP_NODE"}]}
    return _call("from-json", write_json(d / "x.json", doc), "-o", d / "out.et")


@case("int64", "x.json", "int64")
def _from_json_attr_huge(d: Path, s: Path) -> Call:
    doc = {"metadata": {"version": "0.0.4", "attrs": []},
           "nodes": [{"id": 1, "name": "n", "type": "COMP_NODE",
                      "attrs": [{"name": "a", "int64_val": BIG}]}]}
    return _call("from-json", write_json(d / "x.json", doc), "-o", d / "out.et")


@case("int64", "w.txt", "line")
def _from_text_size_huge(d: Path, s: Path) -> Call:
    (d / "w.txt").write_text(f"MICRO\n1\nl1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE {HUGE} 5\n")
    return _call("from-text", d / "w.txt", "--npus", 2, "-o", d / "out")


# == types of the fields the code reads ====================================


@case("types", "h.json", "process_group:init")
def _pg_init_values_object(d: Path, s: Path) -> Call:
    return _convert_host(d, host_doc(_pg_init({"0": "x"})))


@case("types", "h.json", "process_group:init")
def _pg_init_values_number(d: Path, s: Path) -> Call:
    return _convert_host(d, host_doc(_pg_init([5])))


@case("types", "h.json", "process_group:init")
def _pg_init_ranks_strings(d: Path, s: Path) -> Call:
    return _convert_host(d, host_doc(_pg_init([json.dumps([{"pg_name": "0", "ranks": "01"}])])))


@case("types", "h.json", "process_group:init")
def _pg_init_not_a_list(d: Path, s: Path) -> Call:
    return _convert_host(d, host_doc(_pg_init([json.dumps({"pg_name": "0"})])))


@case("types", "h.json", "process_group:init")
def _pg_init_group_size_huge(d: Path, s: Path) -> Call:
    return _convert_host(d, host_doc(_pg_init([json.dumps([{"pg_name": "0",
                                                             "group_size": HUGE}])])))




@case("types", "h.json", "in_msg_nelems")
def _record_param_comms_numel_string(d: Path, s: Path) -> Call:
    rpc = _rpc([[1, 2, 3, 4, 5, 6], 0, "0", 0, "allreduce", 0],
               attrs=[{"name": "collective_name", "type": "string", "value": "allreduce"},
                      {"name": "dtype", "type": "string", "value": "Float"},
                      {"name": "in_msg_nelems", "type": "uint64", "value": "many"},
                      {"name": "pg_name", "type": "string", "value": "0"}])
    return _convert_host(d, host_doc(rpc, host_node(8, "nccl:all_reduce", 7, 15)))



@case("types", "h.json", "tid")
def _host_tid_string(d: Path, s: Path) -> Call:
    return _convert_host(d, _with_attr(host_doc(), 2, "tid", "seven"))


@case("types", "h.json", "attrs")
def _host_attrs_object(d: Path, s: Path) -> Call:
    doc = host_doc()
    doc["nodes"][2]["attrs"] = {"tid": 1}
    return _convert_host(d, doc)


@case("types", "h.json", "nodes")
def _host_nodes_object(d: Path, s: Path) -> Call:
    return _convert_host(d, {**host_doc(), "nodes": {"a": 1}})


@case("types", "k.json", "traceEvents")
def _kineto_events_object(d: Path, s: Path) -> Call:
    return _convert_pair(d, {"traceEvents": {"a": 1}})


@case("types", "k.json", "distributedInfo")
def _kineto_distributed_list(d: Path, s: Path) -> Call:
    return _convert_pair(d, kineto_doc(distributedInfo=[0, 1]))


@case("types", "k.json", "ts")
def _kineto_ts_string(d: Path, s: Path) -> Call:
    doc = kineto_doc()
    doc["traceEvents"][0]["ts"] = "soon"
    return _convert_pair(d, doc)



@case("types", "x.json", "metadata")
def _from_json_metadata_list(d: Path, s: Path) -> Call:
    doc = {"metadata": [1, 2], "nodes": []}
    return _call("from-json", write_json(d / "x.json", doc), "-o", d / "out.et")


@case("types", "x.json", "nodes[0]")
def _from_json_deps_strings(d: Path, s: Path) -> Call:
    doc = {"metadata": {"version": "0.0.4", "attrs": []},
           "nodes": [{"id": 1, "name": "n", "type": "COMP_NODE", "data_deps": ["a"]}]}
    return _call("from-json", write_json(d / "x.json", doc), "-o", d / "out.et")


# == nesting depth ==========================================================


@case("depth", "h.json", "nested")
def _host_attr_deep(d: Path, s: Path) -> Call:
    return _call("convert", "--host-trace", _raw_host_with(d, "MARK", _deep()), "-o", d / "out.et")


@case("depth", "h.json", "nested")
def _host_inputs_deep(d: Path, s: Path) -> Call:
    body = json.dumps(host_doc(_op(inputs={"values": "MARK", "shapes": [], "types": []})))
    path = write_json(d / "h.json", body.replace('"MARK"', _deep()).encode())
    return _call("convert", "--host-trace", path, "-o", d / "out.et")


@case("depth", "h.json", "nested")
def _pg_init_deep(d: Path, s: Path) -> Call:
    body = json.dumps(host_doc(_pg_init("MARK")))
    path = write_json(d / "h.json", body.replace('"MARK"', _deep()).encode())
    return _call("convert", "--host-trace", path, "-o", d / "out.et")


@case("depth", "k.json", "nested")
def _kineto_args_deep(d: Path, s: Path) -> Call:
    body = json.dumps(kineto_doc(_kernel(**{"Collective name": "MARK"})))
    path = write_json(d / "k.json", body.replace('"MARK"', _deep()).encode())
    return _call("convert", "--host-trace", _host(d), "--device-trace", path, "-o", d / "out.et")


@case("depth", "k.json", "nested")
def _kineto_unknown_key_deep(d: Path, s: Path) -> Call:
    body = json.dumps(kineto_doc(extra="MARK"))
    path = write_json(d / "k.json", body.replace('"MARK"', _deep()).encode())
    return _call("convert", "--host-trace", _host(d), "--device-trace", path, "-o", d / "out.et")


@case("depth", "x.json")
def _from_json_deep(d: Path, s: Path) -> Call:
    text = '{"metadata": {"version": "0.0.4", "attrs": []}, "nodes": [' + _deep(5000) + "]}"
    return _call("from-json", write_json(d / "x.json", text.encode()), "-o", d / "out.et")


# == size: decompressed-size guard and endless inputs ======================


@case("size", "h.json", "gzip bomb")
def _host_bomb(d: Path, s: Path) -> Call:
    os.link(s / "bomb.gz", d / "h.json")
    return _call("convert", "--host-trace", d / "h.json", "-o", d / "out.et")


@case("size", "k.json", "gzip bomb")
def _kineto_bomb(d: Path, s: Path) -> Call:
    os.link(s / "bomb.gz", d / "k.json")
    return _call("convert", "--host-trace", _host(d), "--device-trace", d / "k.json",
                 "-o", d / "out.et")


@case("size", "b.et")
def _et_bomb_inspect(d: Path, s: Path) -> Call:
    os.link(s / "bomb.gz", d / "b.et")
    return _call("inspect", d / "b.et")


@case("size", "b.et", "gzip bomb")
def _et_bomb_jsonize(d: Path, s: Path) -> Call:
    claim = bytes([0x80, 0x80, 0x80, 0x80, 0x07])  # a message "of 1.75 GiB": then zeros
    blob = gzip.compress(_et_bytes(d) + claim + b"\0" * BOMB_BYTES, 9)
    (d / "b.et").write_bytes(blob)
    return _call("jsonize", d / "b.et", "-o", d / "out.json")


@case("size", "x.json", "gzip bomb")
def _from_json_bomb(d: Path, s: Path) -> Call:
    os.link(s / "bomb.gz", d / "x.json")
    return _call("from-json", d / "x.json", "-o", d / "out.et")


@case("size", "/dev/zero", "device")
def _dev_zero_host(d: Path, s: Path) -> Call:
    return _call("convert", "--host-trace", "/dev/zero", "-o", d / "out.et")


@case("size", "/dev/urandom", "device")
def _dev_urandom_from_json(d: Path, s: Path) -> Call:
    return _call("from-json", "/dev/urandom", "-o", d / "out.et")


@case("size", "/dev/zero", "device")
def _dev_zero_simulate(d: Path, s: Path) -> Call:
    return _call("simulate", "/dev/zero")


@case("size", "h.json", "--max-input-size")
def _limit_plain(d: Path, s: Path) -> Call:
    return _call("--max-input-size", "1K", "convert", "--host-trace", _host(d), "-o", d / "out.et")


@case("size", "k.json", "--max-input-size")
def _limit_gzip(d: Path, s: Path) -> Call:
    big = kineto_doc(*[kineto_event("aten::z", 2000.0 + i, 100 + i) for i in range(200)])
    return _call("--max-input-size", "4K", "convert", "--host-trace", _host(d), "--device-trace",
                 _kineto(d, big, gz=True), "-o", d / "out.et")


@case("size", "s.et", "--max-input-size")
def _limit_et(d: Path, s: Path) -> Call:
    return _call("--max-input-size", "100", "validate", sound_et(d / "s.et"))


@case("size", "--max-input-size")
def _limit_zero(d: Path, s: Path) -> Call:
    return _call("--max-input-size", "0", "inspect", sound_et(d / "s.et"))


@case("size", "--max-input-size")
def _limit_garbage(d: Path, s: Path) -> Call:
    return _call("--max-input-size", "lots", "inspect", sound_et(d / "s.et"))


# == files: regular files only ==============================================


@case("files", "fifo", "FIFO")
def _fifo_host(d: Path, s: Path) -> Call:
    os.mkfifo(d / "fifo")
    return _call("convert", "--host-trace", d / "fifo", "-o", d / "out.et", timeout=10)


@case("files", "fifo", "FIFO")
def _fifo_kineto(d: Path, s: Path) -> Call:
    os.mkfifo(d / "fifo")
    return _call("convert", "--host-trace", _host(d), "--device-trace", d / "fifo",
                 "-o", d / "out.et", timeout=10)


@case("files", "fifo", "FIFO")
def _fifo_et(d: Path, s: Path) -> Call:
    os.mkfifo(d / "fifo")
    return _call("simulate", d / "fifo", timeout=10)


@case("files", "fifo", "FIFO")
def _fifo_from_text(d: Path, s: Path) -> Call:
    os.mkfifo(d / "fifo")
    return _call("from-text", d / "fifo", "--npus", 2, "-o", d / "out", timeout=10)


@case("files", "sub", "directory")
def _directory_input(d: Path, s: Path) -> Call:
    (d / "sub").mkdir()
    return _call("validate", d / "sub")


@case("files", "missing.et", "no such file")
def _missing_input(d: Path, s: Path) -> Call:
    return _call("timeline", d / "missing.et", "-o", d / "out.json")


@case("files", "-", "JSON")
def _stdin_garbage(d: Path, s: Path) -> Call:
    (d / "in").write_bytes(b"{not json")
    return _call("convert", "--host-trace", "-", "-o", d / "out.et", stdin=d / "in")


@case("files", "--device-trace", "standard input")
def _stdin_twice(d: Path, s: Path) -> Call:
    return _call("convert", "--host-trace", "-", "--device-trace", "-", "-o", d / "out.et")


# == damaged gzip ===========================================================


@case("gzip", "h.json", "truncated gzip")
def _host_cut_gzip(d: Path, s: Path) -> Call:
    return _convert_host(d, _cut(json.dumps(host_doc()).encode()))


@case("gzip", "h.json", "gzip")
def _host_bad_crc(d: Path, s: Path) -> Call:
    return _convert_host(d, _bad_crc(json.dumps(host_doc()).encode()))


@case("gzip", "k.json", "truncated gzip")
def _kineto_cut_gzip(d: Path, s: Path) -> Call:
    return _convert_pair(d, _cut(json.dumps(kineto_doc()).encode()))


@case("gzip", "k.json", "gzip")
def _kineto_bad_crc(d: Path, s: Path) -> Call:
    return _convert_pair(d, _bad_crc(json.dumps(kineto_doc()).encode()))


@case("gzip", "b.et", "gzip")
def _et_cut_gzip_inspect(d: Path, s: Path) -> Call:
    (d / "b.et").write_bytes(_cut(_et_bytes(d)))
    return _call("inspect", d / "b.et")


@case("gzip", "b.et", "gzip")
def _et_bad_crc_jsonize(d: Path, s: Path) -> Call:
    (d / "b.et").write_bytes(_bad_crc(_et_bytes(d)))
    return _call("jsonize", d / "b.et", "-o", d / "out.json")


@case("gzip", "b.et", "gzip")
def _et_bad_crc_timeline(d: Path, s: Path) -> Call:
    (d / "b.et").write_bytes(_bad_crc(_et_bytes(d)))
    return _call("timeline", d / "b.et", "-o", d / "out.json")


@case("gzip", "b.et", "gzip")
def _et_bad_crc_simulate(d: Path, s: Path) -> Call:
    (d / "b.et").write_bytes(_bad_crc(_et_bytes(d)))
    return _call("simulate", d / "b.et")


@case("gzip", "b.et", "gzip")
def _et_bad_crc_astra_sim(d: Path, s: Path) -> Call:
    (d / "b.et").write_bytes(_bad_crc(_et_bytes(d)))
    return _call("astra-sim", d / "b.et", "-o", d / "out")


@case("gzip", "x.json", "gzip")
def _from_json_cut_gzip(d: Path, s: Path) -> Call:
    (d / "x.json").write_bytes(_cut(b'{"metadata": {"version": "0.0.4", "attrs": []}, "nodes": ['
                                    + b'{"id": 1, "name": "n", "type": "COMP_NODE"},' * 50))
    return _call("from-json", d / "x.json", "-o", d / "out.et")


@case("gzip", "x.json", "gzip")
def _from_json_bad_crc(d: Path, s: Path) -> Call:
    (d / "x.json").write_bytes(_bad_crc(b'{"metadata": {"version": "0.0.4", "attrs": []}, '
                                        b'"nodes": []}'))
    return _call("from-json", d / "x.json", "-o", d / "out.et")


@case("gzip", "x.json", "gzip", must_not_exist=("out.0.et", "out.comm_groups.json"))
def _from_json_astra_sim_bad_crc(d: Path, s: Path) -> Call:
    (d / "x.json").write_bytes(_bad_crc(b'{"metadata": {"version": "0.0.4", "attrs": []}, '
                                        b'"nodes": []}'))
    return _call("from-json", d / "x.json", "--consumer", "astra-sim", "-o", d / "out")


@case("gzip", "w.txt", "gzip")
def _from_text_bad_crc(d: Path, s: Path) -> Call:
    (d / "w.txt").write_bytes(_bad_crc(b"MICRO\n1\nl1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 100 5\n"))
    return _call("from-text", d / "w.txt", "--npus", 2, "-o", d / "out")


# == encoding: errors name the user's file =================================


@case("encoding", "h.json")
def _host_latin1(d: Path, s: Path) -> Call:
    return _convert_host(d, json.dumps(host_doc()).replace("aten::add", "aten::\xe9").encode("latin-1"))


@case("encoding", "h.json", "surrogate")
def _host_lone_surrogate(d: Path, s: Path) -> Call:
    return _convert_host(d, json.dumps(host_doc()).replace("aten::add", "aten::\\ud800").encode())


@case("encoding", "k.json")
def _kineto_latin1(d: Path, s: Path) -> Call:
    return _convert_pair(d, json.dumps(kineto_doc()).replace("aten::add", "aten::\xe9").encode("latin-1"))


@case("encoding", "x.json")
def _from_json_latin1(d: Path, s: Path) -> Call:
    text = '{"metadata": {"version": "0.0.4", "attrs": []}, "nodes": [{"id": 1, "name": "\xe9"}]}'
    return _call("from-json", write_json(d / "x.json", text.encode("latin-1")), "-o", d / "out.et")


@case("encoding", "x.json")
def _from_json_lone_surrogate(d: Path, s: Path) -> Call:
    text = ('{"metadata": {"version": "0.0.4", "attrs": []}, "nodes": [{"id": 1, '
            '"name": "\\ud800", "type": "COMP_NODE"}]}')
    return _call("from-json", write_json(d / "x.json", text.encode()), "-o", d / "out.et")


@case("encoding", "w.txt")
def _from_text_latin1(d: Path, s: Path) -> Call:
    (d / "w.txt").write_bytes("MICRO\n1\nl\xe9 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 100 5\n".encode("latin-1"))
    return _call("from-text", d / "w.txt", "--npus", 2, "-o", d / "out")


# == options: finite, positive, bounded ====================================


def _simulate_with(d: Path, *options: Any) -> Call:
    return _call("simulate", sound_et(d / "s.et"), *options)


for _flag, _value in [("--compute-scale", "nan"), ("--compute-scale", "inf"),
                      ("--compute-scale", "-1"), ("--compute-scale", "0"),
                      ("--cpu-scale", "inf"), ("--bandwidth-scale", "nan"),
                      ("--bandwidth-scale", "1e308"), ("--comm-streams", "-1"),
                      ("--comm-streams", "1000000000")]:
    case("options", _flag, name=f"simulate{_flag}={_value}")(
        lambda d, s, f=_flag, v=_value: _simulate_with(d, f, v))

for _flag, _value in [("--bandwidth", "nan"), ("--bandwidth", "inf"), ("--bandwidth", "-1"),
                      ("--latency", "nan"), ("--latency", "-1"), ("--latency", "inf")]:
    _other = "--latency" if _flag == "--bandwidth" else "--bandwidth"
    case("options", _flag, name=f"simulate{_flag}={_value}")(
        lambda d, s, f=_flag, v=_value, o=_other: _simulate_with(d, f, v, o, "1"))


def _workload(d: Path) -> Path:
    (d / "w.txt").write_text("MICRO\n1\nl1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 100 5\n")
    return d / "w.txt"


for _flag, _value in [("--passes", "0"), ("--passes", "1000000000"), ("--npus", "0"),
                      ("--npus", "1000000000")]:
    case("options", _flag, name=f"from-text{_flag}={_value}")(
        lambda d, s, f=_flag, v=_value: _call("from-text", _workload(d), "--npus", 2, "-o",
                                              d / "out", f, v))

for _flag, _value in [("--steps", "100000000"), ("--npus", "1000000000"), ("--size", "-1"),
                      ("--steps", "0")]:
    case("options", _flag, name=f"microbench{_flag}={_value}")(
        lambda d, s, f=_flag, v=_value: _call("microbench", "--size", 8, "--npus", 2, "-o",
                                              d / "out", f, v))


@case("options", "--hops")
def _graph_hops_negative(d: Path, s: Path) -> Call:
    return _call("graph", sound_et(d / "s.et"), "-o", d / "out.dot", "--around", 1, "--hops", -1)


@case("options", "--max-nodes")
def _graph_max_nodes_zero(d: Path, s: Path) -> Call:
    return _call("graph", sound_et(d / "s.et"), "-o", d / "out.dot", "--max-nodes", 0)


@case("options", "--top")
def _inspect_top_negative(d: Path, s: Path) -> Call:
    return _call("inspect", sound_et(d / "s.et"), "--top", -1)


@case("options", "--rank", "int")
def _convert_rank_not_a_number(d: Path, s: Path) -> Call:
    return _call("convert", "--host-trace", _host(d), "-o", d / "out.et", "--rank", "one")


@case("options", "--no-such-option")
def _unknown_option(d: Path, s: Path) -> Call:
    return _call("simulate", sound_et(d / "s.et"), "--no-such-option")


@case("options", "-o/--output")
def _missing_required(d: Path, s: Path) -> Call:
    return _call("convert", "--host-trace", _host(d))


@case("options", "invalid choice")
def _unknown_command(d: Path, s: Path) -> Call:
    return _call("convrt", "--host-trace", "x")


@case("options", "--bandwidth/--latency")
def _bandwidth_without_latency(d: Path, s: Path) -> Call:
    return _simulate_with(d, "--bandwidth", "10")


# == messages: one line, no warning before it ==============================


@case("messages", "h.json", "duplicate")
def _warning_then_error_host(d: Path, s: Path) -> Call:
    doc = {**host_doc(host_node(4, "aten::dup", 2, 12)), "schema": "1.9.0"}  # warns, then fails
    return _convert_host(d, doc)


@case("messages", "k.json", "complete event")
def _warning_then_error_kineto(d: Path, s: Path) -> Call:
    trunc = _kernel(**{"Collective name": "allreduce", "In split size": "[1, 2, ...]"})
    broken = {"ph": "X", "cat": "cpu_op", "name": "aten::q", "pid": PID, "tid": 1}
    return _convert_pair(d, kineto_doc(trunc, broken))


# == outputs: nothing partial left =========================================


@case("outputs", "report.json", must_not_exist=("out.et",))
def _report_is_a_folder(d: Path, s: Path) -> Call:
    (d / "report.json").mkdir()
    return _call("convert", "--host-trace", _host(d), "-o", d / "out.et", "--report",
                 d / "report.json")


@case("outputs", "report.json", must_not_exist=("out.et",))
def _report_under_a_file(d: Path, s: Path) -> Call:
    (d / "file").write_text("x")
    return _call("convert", "--host-trace", _host(d), "-o", d / "out.et", "--report",
                 d / "file" / "report.json")


@case("outputs", "report.json", must_not_exist=("out.0.et", "out.comm_groups.json"))
def _astra_sim_report_is_a_folder(d: Path, s: Path) -> Call:
    (d / "report.json").mkdir()
    return _call("convert", "--host-trace", _host(d), "--consumer", "astra-sim", "--rank", 0,
                 "-o", d / "out", "--report", d / "report.json")


@case("outputs", "out.et", must_not_exist=())
def _output_is_a_folder(d: Path, s: Path) -> Call:
    (d / "out.et").mkdir()
    return _call("convert", "--host-trace", _host(d), "-o", d / "out.et")


@case("outputs", "out.et")
def _output_folder_missing(d: Path, s: Path) -> Call:
    return _call("convert", "--host-trace", _host(d), "-o", d / "nowhere" / "out.et")


@case("outputs", "out.json", must_not_exist=())
def _jsonize_into_folder(d: Path, s: Path) -> Call:
    (d / "out.json").mkdir()
    return _call("jsonize", sound_et(d / "s.et"), "-o", d / "out.json")


@case("outputs", "t.json")
def _simulate_timeline_into_folder(d: Path, s: Path) -> Call:
    (d / "t.json").mkdir()
    return _simulate_with(d, "--timeline", d / "t.json")


@case("outputs", "out")
def _astra_sim_prefix_missing_folder(d: Path, s: Path) -> Call:
    return _call("astra-sim", sound_et(d / "s.et"), "-o", d / "nowhere" / "out")


@case("outputs", "out.json")
def _link_output_under_file(d: Path, s: Path) -> Call:
    (d / "file").write_text("x")
    return _call("link", "--host-trace", _host(d), "--device-trace", _kineto(d), "-o",
                 d / "file" / "out.json")


@case("outputs", "out.json")
def _timeline_output_under_file(d: Path, s: Path) -> Call:
    (d / "file").write_text("x")
    return _call("timeline", sound_et(d / "s.et"), "-o", d / "file" / "out.json")


# == unsound inputs: refused by astra-sim and simulate (``--force`` to go on) ==

UNSOUND: dict[str, tuple[Callable[[], list[Any]], str]] = {
    "self-dependency": (lambda: [comp_node(1, [1]), comm_node(2, [1])], "cycle"),
    "cycle": (lambda: [comp_node(1, [2]), comm_node(2, [1])], "cycle"),
    "dangling-dep": (lambda: [comp_node(1, [9]), comm_node(2, [1])], "dangling"),
    "duplicate-ids": (lambda: [comp_node(1), comm_node(1)], "duplicate"),
    "comm-without-size": (lambda: [comp_node(1), comm_node(2, [1], size=None)], "comm_size"),
}

for _what, (_nodes, _needle) in UNSOUND.items():
    case("unsound", "u.et", _needle, "--force", name=f"astra-sim-{_what}",
         must_not_exist=("out.0.et", "out.comm_groups.json"))(
        lambda d, s, n=_nodes: _call("astra-sim", write_rank(d / "u.et", n()), "-o", d / "out"))
    case("unsound", "u.et", _needle, "--force", name=f"simulate-{_what}")(
        lambda d, s, n=_nodes: _call("simulate", write_rank(d / "u.et", n())))


@case("unsound", "s.et", "twice")
def _simulate_same_file_twice(d: Path, s: Path) -> Call:
    return _call("simulate", sound_et(d / "s.et"), d / "s.et")


@case("unsound", "s.et", "twice")
def _simulate_same_file_by_two_names(d: Path, s: Path) -> Call:
    os.symlink(sound_et(d / "s.et"), d / "t.et")
    return _call("simulate", d / "s.et", d / "t.et")


@case("unsound", "s.et", "twice", rc=2)
def _validate_same_file_twice(d: Path, s: Path) -> Call:
    return _call("validate", sound_et(d / "s.et"), d / "s.et")


@case("unsound", "s.et", "twice", must_not_exist=("out.json",))
def _timeline_same_file_twice(d: Path, s: Path) -> Call:
    return _call("timeline", sound_et(d / "s.et"), d / "s.et", "-o", d / "out.json")


@case("unsound", "deadlock")
def _simulate_deadlock(d: Path, s: Path) -> Call:
    a = write_rank(d / "a.et", [comm_node(1, seq=0), comm_node(2, [1], seq=1)], rank=0)
    b_nodes = [comm_node(1, seq=1), comm_node(2, [1], seq=0)]
    b = write_rank(d / "b.et", b_nodes, rank=1)
    return _call("simulate", a, b)


# == pairs: host ET and Kineto of different ranks or runs ===================


@case("pairs", "k.json", "pid", "--force")
def _pid_mismatch(d: Path, s: Path) -> Call:
    return _convert_pair(d, kineto_doc(pid=PID + 1))


@case("pairs", "k.json", "pid", "--force")
def _link_pid_mismatch(d: Path, s: Path) -> Call:
    return _call("link", "--host-trace", _host(d), "--device-trace",
                 _kineto(d, kineto_doc(pid=PID + 1)), "-o", d / "out.json")


@case("pairs", "k.json", "rank", "--force")
def _rank_option_disagrees(d: Path, s: Path) -> Call:
    return _convert_pair(d, kineto_doc(distributedInfo={"rank": 1, "world_size": 2}), None,
                         "--rank", 0)


@case("pairs", "rank1.kineto.json.gz", "pid", "--force")
def _dlrm_rank0_host_rank1_kineto(d: Path, s: Path) -> Call:
    return _call("convert", "--host-trace", TRACES / "dlrm_8gpu" / "rank0.host_et.json.gz",
                 "--device-trace", TRACES / "dlrm_8gpu" / "rank1.kineto.json.gz",
                 "-o", d / "out.et")


@case("pairs", "gpt_tiny_cpu.kineto.json.gz", "--force")
def _sample_host_with_dlrm_kineto(d: Path, s: Path) -> Call:
    return _call("convert", "--host-trace", TRACES / "dlrm_8gpu" / "rank0.host_et.json.gz",
                 "--device-trace", f"{SAMPLE}.kineto.json.gz", "-o", d / "out.et")


# == running the corpus =====================================================


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    work = tmp_path_factory.mktemp("corpus")
    shared = work / "_shared"
    shared.mkdir()
    gzip_bomb(shared / "bomb.gz", BOMB_BYTES)
    folders, calls = [], []
    for key, c in CASES.items():
        folder = work / key
        folder.mkdir()
        folders.append(folder)
        calls.append(c.build(folder, shared))
    results = run_batch(calls, work)
    return {key: (folder, r) for key, folder, r in zip(CASES, folders, results)}


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if p.name.endswith(".tmp") or ".tmp." in p.name]


@pytest.mark.parametrize("key", list(CASES))
def test_case_ends_as_promised(corpus, key: str) -> None:
    if CASES[key].family == "pairs" and not TRACES.is_dir() and "dlrm" in key:
        pytest.skip("real traces absent")
    c = CASES[key]
    folder, proc = corpus[key]
    assert proc.returncode != TIMED_OUT, "hung"
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert proc.returncode == c.rc, proc.stderr
    assert lines[0].startswith("pt2chakra"), lines[0]
    for needle in c.needles:
        assert needle in lines[0], lines[0]
    assert proc.stdout == ""
    assert _leftovers(folder) == []
    for name in c.must_not_exist:
        assert not (folder / name).exists(), name


def test_corpus_covers_every_family_and_command() -> None:
    families = {c.family for c in CASES.values()}
    assert families == {"int64", "types", "depth", "size", "files", "gzip", "encoding",
                        "options", "messages", "outputs", "unsound", "pairs"}
    assert len(CASES) >= 80
