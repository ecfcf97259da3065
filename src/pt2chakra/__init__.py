"""pt2chakra: PyTorch host + Kineto traces -> Chakra execution traces.

``pt2chakra.read(path)`` gives ``(metadata, nodes)`` of any ``.et`` file and
``pt2chakra.write(path, metadata, nodes)`` writes one; ``pt2chakra.api`` has
the pipeline (``convert``, ``link_traces``).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["read", "write", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy: importing the package must stay cheap (the CLI imports it first).
    if name in ("read", "write"):
        from pt2chakra import tools_io

        return getattr(tools_io, name)
    raise AttributeError(f"module 'pt2chakra' has no attribute {name!r}")
