"""The wheel ships what users and type checkers need: the typing marker
(PEP 561), Chakra's schema, and every subpackage."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest
from helpers import ROOT

SUBPACKAGES = ("pytorch", "chakra", "conversion", "simulation", "tools", "export", "collect",
               "cli", "report")
# The facade, its error type, the atomic writer, the input opener, ``-m pt2chakra``.
TOP_LEVEL_MODULES = {"__init__.py", "__main__.py", "errors.py", "atomic.py", "files.py"}
MAX_TOP_LEVEL_MODULES = 6


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    pytest.importorskip("setuptools")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", str(ROOT), "-w", str(out)],
                   check=True, capture_output=True, timeout=300)
    (path,) = out.glob("pt2chakra-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_ships_py_typed_and_the_proto(wheel):
    names = set(wheel.namelist())
    assert "pt2chakra/py.typed" in names
    assert "pt2chakra/chakra/et_def.proto" in names
    # the HTML report inlines its script and styles from these
    assert {"pt2chakra/report/static/report.js", "pt2chakra/report/static/report.css"} <= names


def test_wheel_layout_is_subpackages_with_few_top_level_modules(wheel):
    names = wheel.namelist()
    for package in SUBPACKAGES:
        assert f"pt2chakra/{package}/__init__.py" in names
    top = {n.split("/")[1] for n in names if n.count("/") == 1 and n.endswith(".py")}
    assert top == TOP_LEVEL_MODULES
    assert len(top) <= MAX_TOP_LEVEL_MODULES
