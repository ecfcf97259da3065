"""The ranks' process groups as a ``.et`` file's metadata records them: the
one parser every reader calls (validate's checks, the simulator's set check,
the ASTRA-sim export and its consumer model, scale-out).

``process_groups`` is a JSON string attribute of the metadata: a list of
``{"pg_name": ..., "ranks": [...], "group_size": N}`` records (``pg_size`` is
read where ``group_size`` is absent or 0; ``ranks`` empty means every rank of a group of that
size; ``pg_desc`` is kept as the record's description). Anything else in a
record is kept out of the typed view. A record
whose ranks are not rank numbers (strings, null inside the list, floats,
objects, negative or beyond ``MAX_RANK``) is refused here, in one line, by
every command alike; so is JSON nested deeper than ``files.MAX_DEPTH``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from pt2chakra.chakra.records import GlobalMetadata
from pt2chakra.errors import InputError
from pt2chakra.files import decode_json

ATTR = "process_groups"
# What validate calls a problem of them (``rules/checks.py``), and the rank-set
# front door (``chakra/ranks.py``) too.
PROCESS_GROUPS_PROBLEM = "process-groups"
# Ranks are int32 in Chakra's comm_src/comm_dst and in every launcher.
MAX_RANK = 2**31 - 1
# A group of more ranks than this is no recording's (ASTRA-sim's largest
# example systems have 65536 NPUs; every rank is listed in the JSON).
MAX_GROUP_RANKS = 1 << 20


class ProcessGroupRecord(NamedTuple):
    """One record: its name (ASTRA-sim wants digits), its ranks (empty: not
    listed), its size (0: not recorded), its description (c10d's
    ``pg_desc``: ``default_pg``, a device mesh's ``mesh_tp``; "" if none)."""

    name: str
    ranks: tuple[int, ...]
    size: int
    desc: str = ""

    def members(self, world_size: int | None = None) -> tuple[int, ...]:
        """The ranks; when none are listed, ``0..size-1`` if the size is the
        whole world's (``world_size`` None: any size)."""
        if self.ranks or not self.size or (world_size is not None and self.size != world_size):
            return self.ranks
        return tuple(range(self.size))


def _rank(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_RANK


def _count(value: Any) -> int | None:
    """A size field: absent/null -> 0, a non-negative int -> itself, else None."""
    if value is None:
        return 0
    return value if type(value) is int and 0 <= value <= MAX_GROUP_RANKS else None


def parse_process_groups(raw: str, where: str) -> list[ProcessGroupRecord]:
    """``raw`` (the attribute's JSON) as typed records; ``InputError`` naming
    ``where`` and the record when it is not a list of records, or a record's
    name, ranks or size is not what a process group can have."""
    doc = decode_json(raw, where, f"metadata {ATTR}")
    if not isinstance(doc, list):
        raise InputError(where, f"metadata {ATTR} is {type(doc).__name__}, expected a list "
                         "of process-group records")
    out = []
    for index, item in enumerate(doc):
        at = f"metadata {ATTR}[{index}]"
        if not isinstance(item, dict) or "pg_name" not in item:
            raise InputError(where, f"{at}: expected a record with pg_name")
        name = item["pg_name"]
        if type(name) not in (str, int):
            raise InputError(where, f"{at}.pg_name is {type(name).__name__}, expected a "
                             "string")
        ranks = item.get("ranks")
        if ranks is None:
            ranks = []
        if not isinstance(ranks, list) or len(ranks) > MAX_GROUP_RANKS \
                or not all(_rank(r) for r in ranks):
            bad = next((r for r in ranks if not _rank(r)), ranks) if isinstance(ranks, list) \
                else ranks
            raise InputError(where, f"{at}.ranks: {str(msgspec.json.encode(bad), 'utf-8')[:60]} "
                             f"is not a rank (integers 0..{MAX_RANK}, at most "
                             f"{MAX_GROUP_RANKS} of them)")
        size = _count(item.get("group_size")) or _count(item.get("pg_size"))
        if size is None:
            raise InputError(where, f"{at}.group_size is not a count of ranks")
        desc = item.get("pg_desc")
        out.append(ProcessGroupRecord(str(name), tuple(ranks), size,
                                      desc if isinstance(desc, str) else ""))
    return out


def read_process_groups(metadata: GlobalMetadata, where: str) -> list[ProcessGroupRecord]:
    """The metadata's process groups (none when it records none)."""
    for name, _kind, value in metadata.attrs:
        if name == ATTR:
            if not isinstance(value, str):
                raise InputError(where, f"metadata {ATTR} is not a JSON string")
            return parse_process_groups(value, where)
    return []
