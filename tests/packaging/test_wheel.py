"""The wheel ships what users and type checkers need: the typing marker
(PEP 561), Chakra's schema, and every subpackage."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest
from helpers import ROOT, compiled_tiers

from pt2chakra.chakra.compiled import PURE_PYTHON_ENV
from pt2chakra.version import __version__

pytestmark = pytest.mark.slow  # processes of their own, or a browser, or torch

SUBPACKAGES = ("pytorch", "chakra", "rules", "conversion", "simulation", "tools", "astra", "diff",
               "collect", "cli", "report", "scaleout")
# The facade, its error type, the atomic writer, the input opener, the bounded child
# process runner, the packages' lazy entry points, the version (below the facade, which
# the CLI and the report cannot import), PyTorch's names (the formats and stages
# share them), ``-m pt2chakra``.
TOP_LEVEL_MODULES = {"__init__.py", "__main__.py", "errors.py", "atomic.py", "files.py",
                     "children.py", "lazy.py", "version.py", "names.py"}
MAX_TOP_LEVEL_MODULES = 9


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    pytest.importorskip("setuptools")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", str(ROOT), "-w", str(out)],
                   check=True, capture_output=True, timeout=300)
    (path,) = out.glob("pt2chakra-*.whl")
    assert path.name.startswith(f"pt2chakra-{__version__}-"), "pyproject.toml's version differs"
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


def test_wheel_ships_the_compiled_reader_where_it_builds(wheel):
    """Each tier's fast path's stub always; its extension where this machine
    compiled it (the build goes on without a C compiler)."""
    names = wheel.namelist()
    for tier in compiled_tiers():
        folder = tier.COMPILED_MODULE.replace(".", "/")
        assert f"{folder}.pyi" in names
        built = [n for n in names if n.startswith(f"{folder}.") and n.endswith((".so", ".pyd"))]
        assert bool(built) == (tier.FAST is not None) or os.environ.get(PURE_PYTHON_ENV)


def test_compiled_reader_is_built_where_required():
    """CI sets PT2CHAKRA_REQUIRE_COMPILED: there every tier's fast path must
    have been built and used, so its tests do not skip unnoticed."""
    if not os.environ.get("PT2CHAKRA_REQUIRE_COMPILED"):
        pytest.skip("PT2CHAKRA_REQUIRE_COMPILED is not set")
    assert all(tier.FAST is not None for tier in compiled_tiers())
