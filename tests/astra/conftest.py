"""The real ASTRA-sim binary for the tests that run it: the ``astra_bin`` fixture.

``ASTRA_SIM_BIN`` names the congestion-unaware analytical binary (``make test``
sets it from ``make astra-sim``'s cache). Where it is absent the tests that ask
for ``astra_bin`` skip, and one line before the tests says how many and how to
enable them; under ``PT2CHAKRA_REQUIRE_ASTRA_SIM=1`` (CI) they fail instead, with
the reason, so that no run passes without having run ASTRA-sim.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from pt2chakra.astra.job import BINARY_ENV

REQUIRE_ENV = "PT2CHAKRA_REQUIRE_ASTRA_SIM"
MARKER = "astra_sim"
ENABLE = "make astra-sim (needs ../shared; 6-17 min once, then cached), or set ASTRA_SIM_BIN"


def binary_problem() -> str | None:
    """Why ``ASTRA_SIM_BIN`` cannot be run, or None."""
    binary = os.environ.get(BINARY_ENV, "")
    if not binary:
        return f"{BINARY_ENV} is not set: {ENABLE}"
    if not os.access(binary, os.X_OK):
        return f"{BINARY_ENV}={binary} is not an executable ASTRA-sim binary"
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: runs the real ASTRA-sim binary "
                            "(the astra_bin fixture; skips without ASTRA_SIM_BIN)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks ``astra_sim`` every test that asks for the binary (``-m astra_sim``)."""
    for item in items:
        if "astra_bin" in getattr(item, "fixturenames", ()):
            item.add_marker(MARKER)


def pytest_collection_finish(session: pytest.Session) -> None:
    """One line before the tests when the ASTRA-sim tests will skip."""
    problem = binary_problem()
    if problem is None or os.environ.get(REQUIRE_ENV) == "1":
        return
    files = Counter(item.nodeid.split("::")[0] for item in session.items
                    if item.get_closest_marker(MARKER))
    if not files:
        return
    names = ", ".join(f"{path.rsplit('/', 1)[-1]} {n}" for path, n in sorted(files.items()))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"ASTRA-sim: {sum(files.values())} tests will skip ({names}): "
                            f"{problem}")


@pytest.fixture(scope="session")
def astra_bin() -> str:
    """The ASTRA-sim binary's path; skips (fails under PT2CHAKRA_REQUIRE_ASTRA_SIM=1)
    without one."""
    problem = binary_problem()
    if problem is not None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {problem}", pytrace=False)
        pytest.skip(problem)
    return os.environ[BINARY_ENV]
