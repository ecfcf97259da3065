#!/usr/bin/env python3
"""Convert every shared real trace (and the samples) into one folder, through
the command line, so that two versions of pt2chakra can be compared file by
file (``--compare OTHER_DIR``): a refactoring must leave every byte alone.

    python scripts/convert_all.py out_before/
    ... change the code ...
    python scripts/convert_all.py out_after/ --compare out_before/

Writes, per trace: the linked conversion (pairs), the host-only conversion
(every host ET), the ASTRA-sim export (pairs; DLRM as 8 ranks together), and the
jsonize form, timeline, ``simulate --json``, ``validate --json`` and ``inspect
--json`` of the linked conversion; also the bundled
sample and, when present, the 100k-op benchmark pair in ``bench_data/``.
Reports are compared without their ``seconds`` field (wall time).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACES = (ROOT / ".." / "shared" / "traces").resolve()
PT2CHAKRA = [sys.executable, "-m", "pt2chakra"]

PAIRS = {
    "linear_1gpu": ("linear_1gpu/host_et.json.gz", "linear_1gpu/kineto.json.gz"),
    "hta_simple_add": ("hta_simple_add/host_et.json.gz", "hta_simple_add/kineto.json.gz"),
    **{f"dlrm{r}": (f"dlrm_8gpu/rank{r}.host_et.json.gz", f"dlrm_8gpu/rank{r}.kineto.json.gz")
       for r in range(8)},
}
HOST_ONLY = {
    "resnet_2gpu_host": "resnet_2gpu_host/host_et.json.gz",
    "resnet_1gpu_host": "resnet_1gpu_host/host_et.json.gz",
    "gpt2_host": "gpt2_host/host_et.json.gz",
    "chakra_pg_host": "chakra_pg_host/host_et.json.gz",
}
SAMPLE = ROOT / "samples" / "gpt_tiny_cpu" / "gpt_tiny_cpu"
BENCH = ROOT / "bench_data" / "gpt_large_cpu"


def _run(*args: str | Path, stdout: Path | None = None, ok: tuple[int, ...] = (0,),
         refusal: Path | None = None) -> None:
    """One command; with ``stdout``, its output is kept in that file (and -q left off).
    With ``refusal``, an input refusal (exit 2) is an outcome: its message is
    kept in that file, so that it is compared like any output."""
    cmd = [*PT2CHAKRA, *map(str, args)] + ([] if stdout else ["-q"])
    done = subprocess.run(cmd, capture_output=True, text=True)
    if refusal is not None and done.returncode == 2:
        refusal.write_text(done.stderr)
        return
    if done.returncode not in ok:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr}")
    if stdout is not None:
        stdout.write_text(done.stdout)


def _pairs() -> dict[str, tuple[Path, Path]]:
    pairs = {name: (TRACES / h, TRACES / k) for name, (h, k) in PAIRS.items()}
    pairs["gpt_tiny_cpu"] = (Path(f"{SAMPLE}.host_et.json.gz"), Path(f"{SAMPLE}.kineto.json.gz"))
    if Path(f"{BENCH}.host_et.json.gz").exists():
        pairs["bench_100k"] = (Path(f"{BENCH}.host_et.json.gz"), Path(f"{BENCH}.kineto.json.gz"))
    return pairs


def convert_all(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, (host, kineto) in _pairs().items():
        print(f"  {name}", flush=True)
        linked = out / f"{name}.et"
        _run("convert", "--host-trace", host, "--device-trace", kineto, "-o", linked,
             "--report", out / f"{name}.report.json")
        _run("convert", "--host-trace", host, "-o", out / f"{name}.host_only.et")
        if name != "bench_100k":
            _run("jsonize", linked, "-o", out / f"{name}.json")
            _run("timeline", linked, "-o", out / f"{name}.timeline.json")
            _run("simulate", linked, "--json", stdout=out / f"{name}.simulate.json")
            _run("validate", linked, "--json", stdout=out / f"{name}.validate.json", ok=(0, 1))
            _run("inspect", linked, "--json", stdout=out / f"{name}.inspect.json")
            if not name.startswith("dlrm") and name != "gpt_tiny_cpu":  # CPU-only: nothing for ASTRA-sim
                _run("convert", "--host-trace", host, "--device-trace", kineto,
                     "--consumer", "astra-sim", "-o", out / f"{name}.astra",
                     refusal=out / f"{name}.astra.refused")  # 1-rank traces are refused
    for name, host in HOST_ONLY.items():
        print(f"  {name}", flush=True)
        _run("convert", "--host-trace", TRACES / host, "-o", out / f"{name}.host_only.et")
    dlrm = [out / f"dlrm{r}.et" for r in range(8)]
    _run("astra-sim", *dlrm, "-o", out / "dlrm_astra")
    _run("simulate", *dlrm, "--json", stdout=out / "dlrm.simulate.json")
    _run("validate", *dlrm, "--json", stdout=out / "dlrm.validate.json", ok=(0, 1))


def _same(a: Path, b: Path) -> bool:
    if a.name.endswith(".report.json"):
        da, db = json.loads(a.read_text()), json.loads(b.read_text())
        for doc, folder in ((da, a.parent), (db, b.parent)):
            doc.pop("seconds", None)
            doc["output"] = doc["output"].replace(str(folder), "")
            for key in ("host_trace", "device_trace"):  # the sample's lie in each checkout
                if doc.get(key):
                    doc[key] = "/".join(Path(doc[key]).parts[-2:])
        return bool(da == db)
    if a.name.endswith((".simulate.json", ".validate.json", ".inspect.json", ".refused")):
        # they name the files they read, which live in the two folders
        return a.read_text().replace(str(a.parent), "") == b.read_text().replace(str(b.parent), "")
    return filecmp.cmp(a, b, shallow=False)


def compare(out: Path, other: Path) -> int:
    mine = sorted(p.name for p in out.iterdir())
    theirs = sorted(p.name for p in other.iterdir())
    problems = [f"only in {other}: {n}" for n in sorted(set(theirs) - set(mine))]
    problems += [f"only in {out}: {n}" for n in sorted(set(mine) - set(theirs))]
    problems += [f"differs: {n}" for n in sorted(set(mine) & set(theirs))
                 if not _same(out / n, other / n)]
    for line in problems:
        print(line)
    print(f"{len(set(mine) & set(theirs))} files compared, {len(problems)} problem(s)")
    return 1 if problems else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="folder to write")
    p.add_argument("--compare", type=Path, metavar="DIR", help="compare with an earlier run")
    args = p.parse_args()
    convert_all(args.out)
    return compare(args.out, args.compare) if args.compare else 0


if __name__ == "__main__":
    sys.exit(main())
