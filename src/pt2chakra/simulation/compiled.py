"""The compiled fast path of the simulator's tier (``_fast.c`` here) and its
contract: the twin of ``chakra/compiled.py``, which holds the formats' module
and the switch both go through (``load_compiled``: ``PT2CHAKRA_PURE_PYTHON``,
a build without a C compiler).

Every function of this package's ``_fast`` has a pure-Python twin with the
same results; the compiled one takes only the cases it reads exactly and
returns None for anything else, which the twin then takes. ``CONTRACT`` names, for each,
its twin and the test that compares the two on arbitrary input
(``tests/chakra/test_compiled_contract.py`` checks that the table covers the
module and that each name in it exists).
"""

from __future__ import annotations

from types import ModuleType

from pt2chakra.chakra.compiled import CompiledFunction, load_compiled

COMPILED_MODULE = "pt2chakra.simulation._fast"

CONTRACT: tuple[CompiledFunction, ...] = (
    CompiledFunction("replay_plain", "pt2chakra.simulation.event_loop:_Replay.replay",
                     "tests/simulation/test_replay_fast.py::test_same_replay"),
    CompiledFunction("walk_back", "pt2chakra.simulation.critical_path:_walk_back_python",
                     "tests/simulation/test_walk_back_fast.py::test_same_walk"),
    CompiledFunction("parents_of", "pt2chakra.simulation.prepare:_parents",
                     "tests/simulation/test_parents_fast.py::test_same_parents"),
    CompiledFunction("link_children", "pt2chakra.simulation.prepare:_link_children",
                     "tests/simulation/test_link_children_fast.py::test_same_children"),
    CompiledFunction("cpu_delays", "pt2chakra.simulation.thread_timing:_thread_delays",
                     "tests/simulation/test_cpu_delays_fast.py::test_same_delays"),
    CompiledFunction("lane_cover", "pt2chakra.simulation.rank_results:_cover_python",
                     "tests/simulation/test_summaries_fast.py::test_same_cover"),
    CompiledFunction("longest", "pt2chakra.simulation.critical_path:_longest_python",
                     "tests/simulation/test_summaries_fast.py::test_same_longest"),
    CompiledFunction("cpu_slices", "pt2chakra.simulation.thread_timing:_slices_python",
                     "tests/simulation/test_cpu_delays_fast.py::test_same_slices"),
    CompiledFunction("shared_floats", "pt2chakra.simulation.prepared:_shared_floats_python",
                     "tests/simulation/test_shared_floats_fast.py::test_same_floats"),
)

FAST: ModuleType | None = load_compiled(COMPILED_MODULE)


def fast_path() -> ModuleType | None:
    """The compiled module, or None (read at call time: tests switch it off)."""
    return FAST
