"""A rank given on the command line (``--rank``, or ``{rank}`` in ``--ranks``
file names) that disagrees with the rank the trace records is an error unless
``--force``, Kineto-only input included; ``--ranks`` prints the rank each
``.et`` records."""

from __future__ import annotations

from pathlib import Path

from builders import kineto_doc, write_json
from helpers import assert_one_line_failure, run_cli

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.ranks import rank_in_metadata


def _kineto(path: Path, rank: int, world_size: int = 2) -> Path:
    return write_json(path, kineto_doc(distributedInfo={"backend": "nccl", "rank": rank,
                                                        "world_size": world_size}))


def test_rank_flag_against_a_kineto_only_trace(tmp_path: Path) -> None:
    trace = _kineto(tmp_path / "k.json", rank=1)
    out = tmp_path / "k.et"
    proc = run_cli("convert", "--device-trace", trace, "-o", out, "--rank", "5")
    assert_one_line_failure(proc, str(trace), "--rank is 5", "distributedInfo.rank is 1", "--force")
    assert proc.returncode == 2 and not out.exists()
    assert run_cli("convert", "--device-trace", trace, "-o", out, "--rank", "1").returncode == 0
    proc = run_cli("convert", "--device-trace", trace, "-o", out, "--rank", "5", "--force")
    assert proc.returncode == 0 and "writing rank 5" in proc.stderr
    assert rank_in_metadata(read_et(out)[0]) == 5
    proc = run_cli("validate", out)  # rank 5 of a world of 2 is no sound rank
    assert proc.returncode == 1 and "rank 5 of a world_size 2" in proc.stdout


def test_ranks_names_the_rank_each_file_records(tmp_path: Path) -> None:
    """Files numbered the other way round from the ranks they record."""
    for n in (0, 1):
        _kineto(tmp_path / f"k{n}.json", rank=1 - n)
    args = ["convert", "--ranks", "0-1", "--device-trace", str(tmp_path / "k{rank}.json"),
            "-o", str(tmp_path / "o.{rank}.et"), "--jobs", "1"]
    proc = run_cli(*args)
    assert proc.returncode == 2 and "0 of 2 ranks converted" in proc.stdout
    assert "--ranks is 0 but its distributedInfo.rank is 1" in proc.stderr
    proc = run_cli(*args, "--force")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"rank 0 (named 1 by --ranks): {tmp_path / 'o.1.et'}")
    assert lines[1].startswith(f"rank 1 (named 0 by --ranks): {tmp_path / 'o.0.et'}")
    assert rank_in_metadata(read_et(tmp_path / "o.0.et")[0]) == 1  # the trace's rank kept
