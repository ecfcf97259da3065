"""Which rank a file is, and whether a set of files can be one job: the one
front door of every command that reads several ranks (simulate, report,
validate, diff, timeline, the ASTRA-sim export, job and consumer).

    ranks = open_rank_set(["x.10.et", "x.2.et"])   # refuses a set that cannot be one job
    ranks.paths   # ['x.2.et', 'x.10.et']: rank order, never the order given
    graphs = ranks.load(read_et_whole)

The rule for a file's rank (``rank_of``): the ``rank`` its metadata records,
else the ``<rank>`` of a ``<prefix>.<rank>.et`` name (what ASTRA-sim reads and
what ``convert --ranks`` and ``--consumer astra-sim`` write), else, for a file given
alone, 0. The order of the arguments never decides: a shell glob over eleven
ranks lists ``x.10.et`` before ``x.2.et``.

A set is refused (``InputError``, one line naming the file) when it cannot be
one job: a file with no rank by that rule, a rank twice, one file under two
names (same content), ranks whose recorded world sizes differ or exceed it, a
file recorded by a single process (no rank, world size or process group of
several ranks) among others, malformed process groups (``process_groups``, the
one parser), or a process group that two files declare with other ranks or
another size (every rank of one job records its groups by the same names:
files of different jobs). With ``force`` each is one warning and the set is
used as given (see ``RankSet.issues`` for what ``validate`` reports instead).
What the metadata cannot tell (two recordings of one job's configuration) the
collectives do: ``rules.checks`` compares them across the ranks.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.process_groups import (
    PROCESS_GROUPS_PROBLEM,
    ProcessGroupRecord,
    read_process_groups,
)
from pt2chakra.chakra.records import GlobalMetadata, attr_dict
from pt2chakra.errors import InputError
from pt2chakra.files import STDIN

log = logging.getLogger(__name__)

# How a file got its rank (``RankFile.how``).
BY_METADATA, BY_NAME, ALONE, BY_ORDER = "metadata", "name", "alone", "order given (--force)"
# Names whose last dotted part before these suffixes is the rank.
ET_SUFFIXES = (".et.gz", ".et")
# This tool's ``generator`` attribute: its files say what they were recorded from.
OUR_GENERATOR = "pt2chakra"
# Metadata that only a recording has (``_is_recording``).
RECORDING_ATTRS = ("pid", "step_start_micros")
# Bytes hashed at a time when two inputs of one size are compared.
HASH_CHUNK = 1 << 20

Nodes = TypeVar("Nodes")
# The metadata of standard input, which ``survey`` leaves to the command to read.
UNREAD = GlobalMetadata(version="")


def rank_in_metadata(metadata: GlobalMetadata) -> int | None:
    value = attr_dict(metadata.attrs).get("rank")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def rank_in_name(path: str) -> int | None:
    """``<prefix>.<rank>.et`` / ``.et.gz`` -> rank; anything else -> None."""
    base = os.path.basename(path)
    for suffix in ET_SUFFIXES:
        if base.endswith(suffix):
            stem = base[: -len(suffix)]
            prefix, dot, tail = stem.rpartition(".")
            if dot and prefix and tail.isdigit():
                return int(tail)
    return None


def rank_of(metadata: GlobalMetadata, path: str) -> int | None:
    """A file's rank by the one rule: its metadata, else its name; None when
    neither says."""
    recorded = rank_in_metadata(metadata)
    return recorded if recorded is not None else rank_in_name(path)


class RankFile(NamedTuple):
    """One input of a set: its path, rank (and how it was found) and metadata."""

    path: str
    rank: int
    how: str
    metadata: GlobalMetadata


# What validate calls a problem of the set (the issues below but malformed
# process groups, which it reports as ``PROCESS_GROUPS_PROBLEM`` per file).
RANK_SET_PROBLEM = "rank-set"


class RankIssue(NamedTuple):
    """Why a set may not be one job: the file it is about, one line, and the
    kind of problem (validate's check name)."""

    path: str
    problem: str
    check: str = RANK_SET_PROBLEM


@dataclass(frozen=True, slots=True)
class RankSet:
    """The files of one job in rank order, and what is wrong with the set
    (empty for a sound one: ``open_rank_set`` refuses the rest)."""

    files: tuple[RankFile, ...]
    issues: tuple[RankIssue, ...] = ()

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    @property
    def ranks(self) -> list[int]:
        return [f.rank for f in self.files]

    def load(self, reader: Callable[[str], tuple[GlobalMetadata, Nodes]],
             ) -> list[tuple[GlobalMetadata, Nodes]]:
        """Each file read by ``reader`` (whole, lean, ...), in rank order."""
        return [reader(path) for path in self.paths]

    def refuse(self, force: bool) -> None:
        """The first issue as ``InputError``; with ``force``, one warning each."""
        if not self.issues:
            return
        if not force:
            first = self.issues[0]
            more = f" (and {len(self.issues) - 1} more)" if len(self.issues) > 1 else ""
            raise InputError(first.path, f"{first.problem}{more}; pass --force to use the "
                             "set anyway")
        for issue in self.issues:
            log.warning("%s: %s (used anyway: --force)", issue.path, issue.problem)


def ranks_in_memory(files: Sequence[tuple[str, GlobalMetadata]]) -> list[int]:
    """Ranks of graphs a library caller holds in memory, where no ``RankSet``
    decided them: ``rank_of`` each (path, metadata), else its position."""
    return [rank if (rank := rank_of(md, path)) is not None else index
            for index, (path, md) in enumerate(files)]


Inputs = Sequence[str | os.PathLike[str]]


def open_rank_set(paths: Inputs | RankSet, force: bool = False) -> RankSet:
    """The set of ``paths`` in rank order; a set that cannot be one job is
    refused (``InputError``) unless ``force`` (then one warning per issue).
    One file given twice is always refused. A ``RankSet`` already opened
    (by a caller that hands it to several steps) is returned as it is."""
    if isinstance(paths, RankSet):
        return paths
    ranks = survey(paths)
    ranks.refuse(force)
    return ranks


def survey(paths: Inputs) -> RankSet:
    """Read each file's metadata and give each its rank; the issues are
    returned, not raised (``validate`` reports them as errors). A file
    without a rank, or a rank seen before, gets the lowest rank not taken,
    in the order given (what ``--force`` uses)."""
    names = [os.fspath(p) for p in paths]
    if not names:
        raise InputError("input", "no .et file given")
    refuse_repeated_inputs(names)
    # Standard input can be read once, by the command's own reader: its
    # metadata is not read here, so its rank is 0 when it is given alone and
    # unknown among others.
    metadata = [read_et(path)[0] if path != STDIN else UNREAD for path in names]
    found = [(rank_of(md, path), rank_in_metadata(md) is not None)
             for path, md in zip(names, metadata)]
    issues: list[RankIssue] = []
    taken = {rank for rank, _ in found if rank is not None}
    owner: dict[int, str] = {}
    files: list[RankFile] = []
    for path, md, (rank, recorded) in zip(names, metadata, found):
        how = BY_METADATA if recorded else BY_NAME
        if rank is None and len(names) == 1:
            rank, how = 0, ALONE
        elif rank is None:
            issues.append(RankIssue(path, "no rank: neither its metadata nor its name "
                                    "(<prefix>.<rank>.et) says which rank it is"))
        elif rank in owner:
            issues.append(RankIssue(path, f"rank {rank} again (also {owner[rank]})"))
            rank = None
        if rank is None:
            rank, how = _lowest_free(taken), BY_ORDER
            taken.add(rank)
        owner[rank] = path
        files.append(RankFile(path, rank, how, md))
    issues += _world_issues(files)
    groups, malformed = _groups_of(files)
    issues += malformed
    if len(files) > 1:
        recordings = [f.path for f in files if _is_recording(attr_dict(f.metadata.attrs))]
        issues += _single_process_issues(files, groups) + _copies(recordings)
        issues += _disagreeing_groups(files, groups)
    return RankSet(tuple(sorted(files, key=lambda f: f.rank)), tuple(issues))


def refuse_repeated_inputs(paths: Sequence[str]) -> None:
    """One file given twice (even by two names) would count as two ranks."""
    seen: dict[str, str] = {}
    for path in paths:
        key = path if path == STDIN else os.path.realpath(path)
        if key in seen:
            same = "" if seen[key] == path else f" (as {seen[key]})"
            raise InputError(path, f"given twice{same}: pass each rank's file once")
        seen[key] = path


def _lowest_free(taken: set[int]) -> int:
    rank = 0
    while rank in taken:
        rank += 1
    return rank


def _world_size(metadata: GlobalMetadata) -> int | None:
    value = attr_dict(metadata.attrs).get("world_size")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _world_issues(files: Sequence[RankFile]) -> list[RankIssue]:
    """Recorded world sizes that differ (ranks of different jobs), and a rank
    beyond its recorded world."""
    issues: list[RankIssue] = []
    first: RankFile | None = None
    for f in files:
        world = _world_size(f.metadata)
        if world is None:
            continue
        if f.rank >= world:
            issues.append(RankIssue(f.path, f"rank {f.rank} of a world_size {world} "
                                    f"(ranks 0-{world - 1})"))
        if first is None:
            first = f
        elif world != _world_size(first.metadata):
            issues.append(RankIssue(f.path, f"world_size {world}, but "
                                    f"{_world_size(first.metadata)} in {first.path}: ranks of "
                                    "different jobs"))
    return issues


Groups = dict[str, list[ProcessGroupRecord]]


def _groups_of(files: Sequence[RankFile]) -> tuple[Groups, list[RankIssue]]:
    """Each file's process groups (by the one parser; standard input's are
    read later, by its command), and an issue per file whose groups are
    malformed (kept out of the first)."""
    groups: Groups = {}
    issues: list[RankIssue] = []
    for f in files:
        if f.metadata is UNREAD:
            continue
        try:
            groups[f.path] = read_process_groups(f.metadata, f.path)
        except InputError as exc:
            issues.append(RankIssue(f.path, exc.problem, PROCESS_GROUPS_PROBLEM))
    return groups, issues


def _disagreeing_groups(files: Sequence[RankFile], groups: Groups) -> list[RankIssue]:
    """A process group that two files declare with other members or another
    size: every rank of one job records a group by the same name (c10d counts
    them alike on every rank), so these files are of different jobs. One
    issue per file, the first group that differs."""
    first: dict[str, tuple[ProcessGroupRecord, str]] = {}
    issues: list[RankIssue] = []
    for f in files:
        for group in groups.get(f.path, ()):
            seen, where = first.setdefault(group.name, (group, f.path))
            if not _same_group(seen, group):
                issues.append(RankIssue(f.path, f"process group {group.name!r} is "
                                        f"{_describe_group(group)} here but "
                                        f"{_describe_group(seen)} in {where}: ranks of "
                                        "different jobs"))
                break
    return issues


def _same_group(a: ProcessGroupRecord, b: ProcessGroupRecord) -> bool:
    """The same members (as listed, or every rank of the size) and size
    (0: not recorded, agrees with any)."""
    sizes_agree = not a.size or not b.size or a.size == b.size
    members_a, members_b = set(a.members()), set(b.members())
    return sizes_agree and (not members_a or not members_b or members_a == members_b)


def _describe_group(group: ProcessGroupRecord) -> str:
    members = list(group.members())
    shown = f"ranks {members[:8]}{'...' if len(members) > 8 else ''}" if members else "no ranks"
    return f"{shown} of {group.size}" if group.size else shown


def _single_process_issues(files: Sequence[RankFile], groups: Groups) -> list[RankIssue]:
    """A file this tool wrote from a recording that names no rank, no world
    size and no process group of several ranks was recorded by one process
    alone: it is no rank of a several-rank job, whatever its name says."""
    return [RankIssue(f.path, "recorded by a single process (no rank, world_size or process "
                      "group of several ranks in its metadata): not one rank of a job")
            for f in files if f.path in groups
            and _recorded_alone(attr_dict(f.metadata.attrs), groups[f.path])]


def _recorded_alone(md: dict[str, Any], groups: Sequence[ProcessGroupRecord]) -> bool:
    if md.get("generator") != OUR_GENERATOR or "link_method" not in md:
        return False
    if "rank" in md or "world_size" in md:
        return False
    return not any(len(g.ranks) > 1 or g.size > 1 for g in groups)


def _is_recording(md: dict[str, Any]) -> bool:
    """A file converted from a recording names its process or its measured
    step; two ranks of one job never record the same ones."""
    return any(key in md for key in RECORDING_ATTRS)


def _copies(names: Sequence[str]) -> list[RankIssue]:
    """One recording under two names (a copy): the same bytes would replay as
    two ranks. (Synthetic workloads, ASTRA-sim's microbenchmarks among them,
    are byte-identical on every rank: only recordings are compared.) Only
    files of one size are read to compare."""
    by_size: dict[int, list[str]] = {}
    for path in names:
        if path != STDIN:
            by_size.setdefault(os.stat(path).st_size, []).append(path)
    issues: list[RankIssue] = []
    for same_size in by_size.values():
        seen: dict[str, str] = {}
        for path in same_size if len(same_size) > 1 else ():
            digest = _digest(path)
            if digest in seen:
                issues.append(RankIssue(path, f"the same content as {seen[digest]}: one "
                                        "rank's file under two names"))
            else:
                seen[digest] = path
    return issues


def _digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()
