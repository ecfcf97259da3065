"""Class 7 of issue 25: the debatable cases, decided (docs/ERRORS.md,
"Decided"): a communication node without comm_size is refused by simulate as
by validate and astra-sim, unless its trace marks the size unknown
(``conventions.COMM_SIZE_UNKNOWN_ATTR``) or ``--force``; ``report`` has the
``--force`` its messages name; ``diff --help``'s examples run as shown
(the shell expands globs, pt2chakra does not); ``astra-sim`` refuses ranks
whose collectives are crossed (ASTRA-sim would hang) unless ``--force``."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from builders import comm_node, comp_node, write_rank
from rel_setup import make_inputs, run_quietly

from pt2chakra.rules.conventions import COMM_SIZE_UNKNOWN_ATTR


def _sizeless(path: Path, marked: bool, rank: int = 0) -> Path:
    node = comm_node(2, [1], size=None)
    if marked:
        node.attrs.append((COMM_SIZE_UNKNOWN_ATTR, "bool_val", True))
    return write_rank(path, [comp_node(1), node], rank=rank, world_size=2)


@pytest.mark.parametrize("command", ["simulate", "astra-sim", "validate"])
def test_a_sizeless_communication_node_is_refused_unless_marked(tmp_path: Path,
                                                                command: str) -> None:
    plain, marked = _sizeless(tmp_path / "p.et", False), _sizeless(tmp_path / "m.et", True)
    extra = ["-o", str(tmp_path / "j" / "job")] if command == "astra-sim" else []

    def files(et: Path) -> list[Path]:  # astra-sim: a job of two ranks
        if command != "astra-sim":
            return [et]
        return [et, _sizeless(tmp_path / f"{et.stem}1.et", et.stem == "m", rank=1)]

    rc, out, err = run_quietly(command, *files(plain), *extra)
    assert rc == (1 if command == "validate" else 2), (out, err)
    assert "comm_size" in (out + err)
    rc, out, err = run_quietly(command, *files(marked), *extra)
    assert rc == 0, (out, err)
    if command == "simulate":
        rc, _out, err = run_quietly(command, plain, "--force")
        assert rc == 0, err


def test_report_has_the_force_its_messages_name(tmp_path: Path) -> None:
    plain = _sizeless(tmp_path / "p.et", False)
    rc, _out, err = run_quietly("report", plain, "-o", tmp_path / "r.html")
    assert rc == 2 and "--force" in err
    rc, _out, err = run_quietly("report", plain, "-o", tmp_path / "r.html", "--force", "-q")
    assert rc == 0, err


def test_diff_help_examples_run_as_shown(tmp_path: Path) -> None:
    """The examples with globs work in a shell (they are not quoted)."""
    from pt2chakra.cli.diff import EPILOG

    line = next(x for x in EPILOG.splitlines() if "--a " in x)
    command = line.split("(")[0].strip()
    assert "'" not in command and '"' not in command
    i = make_inputs(tmp_path)
    for run in ("run1", "run2"):
        (tmp_path / run).mkdir()
        for r in (0, 1):
            (tmp_path / run / f"job.{r}.et").write_bytes(i[f"r{r}"].read_bytes())
    argv = shlex.split(command.replace("pt2chakra", f"{sys.executable} -m pt2chakra", 1))
    done = subprocess.run(" ".join(argv), shell=True, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_crossed_collectives_are_refused_by_astra_sim(tmp_path: Path) -> None:
    a = write_rank(tmp_path / "a.et", [comm_node(1, seq=0), comm_node(2, [1], seq=1)], rank=0)
    b = write_rank(tmp_path / "b.et", [comm_node(1, seq=1), comm_node(2, [1], seq=0)], rank=1)
    rc, _out, err = run_quietly("astra-sim", a, b, "-o", tmp_path / "j" / "job")
    assert rc == 2 and "collective-order" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "j").exists()
    rc, _out, err = run_quietly("astra-sim", a, b, "-o", tmp_path / "j" / "job", "--force", "-q")
    assert rc == 0, err
