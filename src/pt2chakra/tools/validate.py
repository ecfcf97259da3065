"""``pt2chakra validate``: the checks of ``rules.checks`` with a consumer's
rules chosen by name (``validate --consumer astra-sim``: ``astra.rules``)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from pt2chakra.astra import AstraSimRules
from pt2chakra.errors import renamed_keyword
from pt2chakra.rules.checks import ConsumerRules, ValidationReport, check_files

CONSUMERS: dict[str, ConsumerRules] = {"astra-sim": AstraSimRules()}
PROFILES = CONSUMERS  # the old name, still importable


def validate(paths: Sequence[str | os.PathLike[str]], consumer: str | None = None, *,
             profile: str | None = None) -> ValidationReport:
    """Check one or more ``.et`` files (several = one per rank of one run);
    ``consumer``: also the rules of that consumer (a key of ``CONSUMERS``).
    ``profile``: the old name of ``consumer``, still read."""
    name = renamed_keyword(consumer, profile, "validate", "consumer", "profile")
    if name is not None and name not in CONSUMERS:
        raise ValueError(f"unknown consumer {name!r}; known: {', '.join(CONSUMERS)}")
    return check_files(paths, CONSUMERS[name] if name is not None else None)
