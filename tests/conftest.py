"""Shared test fixtures.

The real traces live outside the repository (``../shared/traces`` relative to
the project root, read-only, same place in CI); tests read them in place and
never copy them into the repo.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACES = (ROOT / ".." / "shared" / "traces").resolve()


@pytest.fixture(scope="session")
def traces() -> Path:
    """Directory of the real traces; skips the test when it is absent."""
    if not TRACES.is_dir():
        pytest.skip(f"real traces not found at {TRACES}")
    return TRACES


def read_with_reference(path: Path | str):
    """(GlobalMetadata, [Node]) of an ``.et`` decoded by mlc-chakra's own
    reader (protolib + its generated classes); skips when it is not installed."""
    protolib = pytest.importorskip("chakra.src.third_party.utils.protolib")
    et_def = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")
    handle = protolib.openFileRd(str(path))
    try:
        meta = et_def.GlobalMetadata()
        assert protolib.decodeMessage(handle, meta)
        nodes = []
        while True:
            node = et_def.Node()
            if not protolib.decodeMessage(handle, node):
                break
            nodes.append(node)
    finally:
        handle.close()
    return meta, nodes
