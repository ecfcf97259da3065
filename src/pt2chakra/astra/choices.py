"""The choices and defaults of the ASTRA-sim options, apart from the code that
uses them: the command line lists them in ``--help`` without importing the
export, the consumer model or the runner (each a noticeable share of a
start-up that does nothing else)."""

from __future__ import annotations

# What happens to CPU time (see ``export``'s module doc): ``serial`` (default)
# folds it into one serial chain per rank; ``drop`` keeps it as gaps per
# stream; ``keep`` leaves the CPU nodes; ``drop-no-gaps`` loses it.
CPU_MODES = ("serial", "drop", "keep", "drop-no-gaps")
DEFAULT_CPU_MODE = "serial"

# The one-dimensional networks the consumer model covers (``collective``).
TOPOLOGIES = ("Ring", "FullyConnected", "Switch")

CHECK_TIMEOUT_S = 600.0
"""A whole job (``astra-sim --check``): real jobs of 8-64 NPUs run in seconds; a
binary still running after ten minutes is stuck (e.g. on crossed collectives)."""
