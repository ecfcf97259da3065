"""What ASTRA-sim requires of its input, as ``validate --consumer astra-sim``
checks it: no METADATA or CPU nodes, files named ``<prefix>.<rank>.et``, and
ranks 0..N-1 of at least two NPUs (``../shared/ASTRA_SIM.md``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from pt2chakra.chakra.records import ChakraNode, NodeType
from pt2chakra.rules.checks import Finding
from pt2chakra.rules.conventions import is_gpu

CONSUMER = "astra-sim"
# ASTRA-sim opens <prefix>.<rank>.et for every rank.
ASTRA_FILE_NAME = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et(\.gz)?$")


class AstraSimRules:
    """The ``astra-sim`` consumer's rules for ``rules.checks.check_files``."""

    name = CONSUMER

    def node_findings(self, node: ChakraNode, attrs: dict[str, Any]) -> Iterable[Finding]:
        if node.type == NodeType.METADATA_NODE:
            yield Finding("error", CONSUMER, f"METADATA_NODE {node.name!r}: ASTRA-sim stops with "
                          "'Invalid node_type'", "convert with --consumer astra-sim (drops it)", node.id)
        elif not is_gpu(attrs):
            yield Finding("error", CONSUMER, f"CPU node {node.name!r}: ASTRA-sim's statistics "
                          "step throws on CPU ops", "convert with --consumer astra-sim", node.id)

    def file_findings(self, path: str) -> Iterable[Finding]:
        if not ASTRA_FILE_NAME.match(os.path.basename(path)):
            yield Finding("error", CONSUMER, "file name is not <prefix>.<rank>.et",
                          "ASTRA-sim opens <prefix>.<rank>.et for every rank")

    def set_findings(self, files: Sequence[str], ranks: Sequence[int]) -> Iterable[Finding]:
        if len(files) == 1:
            yield Finding("warning", CONSUMER, "one file: ASTRA-sim needs at least 2 ranks",
                          "pass every <prefix>.<rank>.et of the run")
        elif sorted(ranks) != list(range(len(ranks))):
            yield Finding("error", CONSUMER, f"ranks {sorted(ranks)} are not 0..{len(ranks) - 1}",
                          "ASTRA-sim opens <prefix>.0.et .. <prefix>.<N-1>.et")
