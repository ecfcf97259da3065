"""Converted samples for the diff tests, once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SAMPLE, convert_gloo_pair


@pytest.fixture(scope="session")
def gloo_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The bundled 2-rank gloo DDP step, converted (one .et per rank)."""
    return convert_gloo_pair(tmp_path_factory.mktemp("gloo"))


@pytest.fixture(scope="session")
def gpt_tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled one-rank GPT step, converted."""
    from pt2chakra import convert

    target = tmp_path_factory.mktemp("gpt") / "gpt_tiny.et"
    convert(f"{SAMPLE}.host_et.json.gz", f"{SAMPLE}.kineto.json.gz", target)
    return target
