"""``pt2chakra validate``: the checks of ``rules.checks`` with a consumer
profile chosen by name (``--profile astra-sim``: ``astra.rules``)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from pt2chakra.astra import AstraSimRules
from pt2chakra.rules.checks import ProfileRules, ValidationReport, check_files

PROFILES: dict[str, ProfileRules] = {"astra-sim": AstraSimRules()}


def validate(paths: Sequence[str | os.PathLike[str]], profile: str | None = None,
             ) -> ValidationReport:
    """Check one or more ``.et`` files (several = one per rank of one run);
    ``profile``: also the rules of that consumer (a key of ``PROFILES``)."""
    if profile is not None and profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    return check_files(paths, PROFILES[profile] if profile is not None else None)
