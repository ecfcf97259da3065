#!/usr/bin/env python3
"""Communication nodes per converted trace, to compare two versions of the
collective rules (issue 34: every collective-bearing trace keeps its counts
or gains the ones it was missing).

    PYTHONPATH=<old>/src python scripts/comm_counts.py before.json
    PYTHONPATH=src       python scripts/comm_counts.py after.json --compare before.json

Converts every shared trace (``../shared/traces``: pairs, host ETs alone,
Kineto traces alone, ``h200``) and every public one (``../shared/traces/wild``,
each rank of its manifest) in this process with whichever pt2chakra is
imported, and writes per conversion: communication nodes (collective, send,
receive) and the COMP nodes whose name is a collective's (a backend op or an
NCCL kernel replayed as compute). ``--compare`` prints the markdown table of
the conversions that carry a collective in either version, and exits 1 when
one lost communication nodes.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT.parent / "shared" / "traces"
WILD = TRACES / "wild"
MANIFEST = ROOT / "tests" / "real_traces" / "wild_traces.json"
HOST, KINETO = "host_et", "kineto"


def _shared_units() -> dict[str, tuple[Path | None, Path | None]]:
    """Name -> (host ET, Kineto trace) of every conversion of the shared traces:
    each pair linked, and each of its files alone."""
    units: dict[str, tuple[Path | None, Path | None]] = {}
    for folder in sorted(p for p in [*TRACES.iterdir(), *(TRACES / "h200").iterdir()]
                         if p.is_dir() and p.name not in ("wild", "h200")):
        name = folder.relative_to(TRACES).as_posix()
        for host in sorted(folder.glob(f"*{HOST}.json*")):
            stem = host.name.split(HOST)[0]
            kineto = next(iter(sorted(folder.glob(f"{stem}{KINETO}.json*"))), None)
            units[f"{name}/{stem}host"] = (host, None)
            if kineto is not None:
                units[f"{name}/{stem}pair"] = (host, kineto)
        for kineto in sorted(folder.glob(f"*{KINETO}.json*")):
            stem = kineto.name.split(KINETO)[0]
            units[f"{name}/{stem}kineto"] = (None, kineto)
    return units


def _wild_units() -> dict[str, tuple[Path | None, Path | None]]:
    units: dict[str, tuple[Path | None, Path | None]] = {}
    for entry in json.loads(MANIFEST.read_text()):
        folder = WILD / entry["folder"]
        for r in entry["ranks"]:
            kineto = folder / r["kineto"]
            units[f"wild/{entry['name']}/rank{r['rank']}/kineto"] = (None, kineto)
            if r.get("host_et"):
                units[f"wild/{entry['name']}/rank{r['rank']}/pair"] = (folder / r["host_et"], kineto)
    return units


def _counts(path: Path) -> dict[str, int]:
    from pt2chakra.chakra.io import read_et
    from pt2chakra.chakra.records import NodeType
    from pt2chakra.names import is_backend_comm_op, is_nccl_kernel

    comm = {NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE}
    found = {"comm": 0, "as_compute": 0}
    for node in read_et(path)[1]:
        if node.type in comm:
            found["comm"] += 1
        elif node.type == NodeType.COMP_NODE and (is_backend_comm_op(node.name)
                                                  or is_nccl_kernel(node.name)):
            found["as_compute"] += 1
    return found


def measure() -> dict[str, Any]:
    from pt2chakra.conversion.api import convert

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (host, kineto) in {**_shared_units(), **_wild_units()}.items():
            out = Path(tmp) / "out.et"
            try:
                convert(host, kineto, out, progress=False)
                results[name] = _counts(out)
            except Exception as exc:  # an outcome to compare (a refusal too), not a crash
                results[name] = {"error": str(exc).splitlines()[0][:120]}
            print(name, results[name], file=sys.stderr)
    return results


def table(before: dict[str, Any], after: dict[str, Any]) -> tuple[list[str], bool]:
    lines = ["| conversion | comm nodes before | after | collectives as compute before | after |",
             "|---|---|---|---|---|"]
    lost = False
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name, {}), after.get(name, {})
        if not any(d.get("comm") or d.get("as_compute") for d in (a, b)):
            continue
        cells = [str(d.get("comm", d.get("error", "-"))) for d in (b, a)]
        asc = [str(d.get("as_compute", "-")) for d in (b, a)]
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {asc[0]} | {asc[1]} |")
        lost |= a.get("comm", 0) < b.get("comm", 0)
    return lines, lost


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("output", help="JSON of this version's counts")
    ap.add_argument("--compare", metavar="BEFORE.json", help="print the table against these")
    args = ap.parse_args()
    after = measure()
    Path(args.output).write_text(json.dumps(after, indent=1, sort_keys=True))
    if args.compare is None:
        return 0
    lines, lost = table(json.loads(Path(args.compare).read_text()), after)
    print("\n".join(lines))
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
