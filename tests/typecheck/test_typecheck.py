"""The public facade is typed for users (``py.typed``): mypy, run on
``user_code.py`` as a user's code, reveals each name's real type (not
``Any``), as each ``# R:`` comment there says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

HERE = Path(__file__).parent
USER_CODE = HERE / "user_code.py"
PYPROJECT = HERE.parents[1] / "pyproject.toml"
EXPECTED = re.compile(r"reveal_type\(.*\)\s+# R: (.+)$")
REVEALED = re.compile(r":(\d+): note: Revealed type is \"(.+)\"$")


def _expected() -> dict[int, str]:
    lines = USER_CODE.read_text().splitlines()
    return {n: m.group(1).strip() for n, line in enumerate(lines, 1)
            if (m := EXPECTED.search(line))}


@pytest.mark.slow
def test_the_facade_reveals_real_types() -> None:
    api = pytest.importorskip("mypy.api")
    stdout, stderr, status = api.run([str(USER_CODE), "--config-file", str(PYPROJECT),
                                      "--no-error-summary", "--hide-error-context"])
    revealed = {int(m.group(1)): m.group(2) for line in stdout.splitlines()
                if (m := REVEALED.search(line))}
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    assert not errors, "\n".join(errors)
    expected = _expected()
    assert expected and revealed == expected


def test_every_reveal_has_an_expectation() -> None:
    """The check above can fail: each reveal_type line carries its type."""
    reveals = [line for line in USER_CODE.read_text().splitlines()
               if line.startswith("reveal_type(")]
    assert len(reveals) == len(_expected()) > 10
