"""The public facade is typed for users (``py.typed``): mypy, run on
``user_code.py`` as a user's code, reveals each name's real type (not
``Any``), as each ``# R:`` comment there says, and reports exactly the
errors its ``# E:`` comments expect: a misspelt facade name (which a
``__getattr__`` visible to mypy would make ``Any``) and a call of a
subpackage's name (which a facade function of that name would hide)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

HERE = Path(__file__).parent
USER_CODE = HERE / "user_code.py"
PYPROJECT = HERE.parents[1] / "pyproject.toml"
EXPECTED = re.compile(r"reveal_type\(.*\)\s+# R: (.+)$")
EXPECTED_ERROR = re.compile(r"\s# E: (.+)$")
REVEALED = re.compile(r":(\d+): note: Revealed type is \"(.+)\"$")
# an error line, less its code: "user_code.py:12: error: <message>  [attr-defined]"
REPORTED = re.compile(r":(\d+): error: (.+?)(?:  \[[a-z-]+\])?$")


def _comments(pattern: re.Pattern[str]) -> dict[int, str]:
    """Line number -> what the line's comment of ``pattern`` expects."""
    lines = USER_CODE.read_text().splitlines()
    return {n: m.group(1).strip() for n, line in enumerate(lines, 1)
            if (m := pattern.search(line))}


@pytest.mark.slow
def test_the_facade_reveals_real_types() -> None:
    api = pytest.importorskip("mypy.api")
    stdout, stderr, status = api.run([str(USER_CODE), "--config-file", str(PYPROJECT),
                                      "--no-error-summary", "--hide-error-context"])
    revealed = {int(m.group(1)): m.group(2) for line in stdout.splitlines()
                if (m := REVEALED.search(line))}
    errors = {int(m.group(1)): m.group(2) for line in stdout.splitlines()
              if (m := REPORTED.search(line))}
    assert errors == _comments(EXPECTED_ERROR), stdout
    expected = _comments(EXPECTED)
    assert expected and revealed == expected


def test_every_reveal_has_an_expectation() -> None:
    """The check above can fail: each reveal_type line carries its type, and
    the expected errors are there (a misspelt name, a subpackage called)."""
    reveals = [line for line in USER_CODE.read_text().splitlines()
               if line.startswith("reveal_type(")]
    assert len(reveals) == len(_comments(EXPECTED)) > 10
    expected_errors = _comments(EXPECTED_ERROR).values()
    assert any("no attribute" in e for e in expected_errors)
    assert any("not callable" in e for e in expected_errors)
