"""Scale-out's public API: write the M-rank job of a recorded N-rank
data-parallel job (``extrapolate``), build only the distinct ranks of it
for a replay (``scaled_graphs``), or replay those (``simulate_world_size``,
``simulate --world-size``).

    from pt2chakra.scaleout import extrapolate, simulate_world_size
    summary = extrapolate(["job.0.et", "job.1.et"], 1024, "out/job")
    print(summary.describe())
    scaled = simulate_world_size(["job.0.et", "job.1.et"], 1024)
    print(scaled.run.result.predicted_step_us, scaled.breakdown().describe())

Streaming: one recorded rank is read, rewritten and encoded at a time, and
its clones are written from those bytes, so memory follows one rank, not M.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import msgspec

from pt2chakra.atomic import StagedOutputs, refuse_overwriting_inputs
from pt2chakra.chakra.encode import encode_node
from pt2chakra.chakra.io import read_et, write_et
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata
from pt2chakra.errors import InputError
from pt2chakra.rules.checks import refuse_unsound_files
from pt2chakra.scaleout.hosts import NO_SHARING, HostSharing
from pt2chakra.scaleout.plan import ScalePlan, plan
from pt2chakra.scaleout.retime import RetimeCounts, retime_rank
from pt2chakra.scaleout.rewrite import RewriteCounts, rank_metadata, rewrite_nodes

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # the simulator is imported on first use: extrapolate needs none of it
    from pt2chakra.scaleout.breakdown import ScaleBreakdown
    from pt2chakra.simulation import SimulationOptions, SimulationRun
    from pt2chakra.simulation.results import ProfilerOverhead

# What extrapolate does not know to be right: listed in every summary.
UNVALIDATED = (
    "op inputs/outputs of the c10d calls keep the recorded tensor lists (a list all-gather's "
    "output still holds N tensors)",
    "compute and CPU time copied as recorded (weak scaling), stretched only by the host "
    "sharing given (--ranks-per-host/--cores-per-host); other contention a larger job adds "
    "(a shared switch, stragglers) is not modelled",
)


class ExtrapolateSummary(msgspec.Struct):
    """What ``extrapolate`` wrote and did (printed by the CLI)."""

    recorded_ranks: int
    world_size: int
    job_kind: str
    representative: int
    kept_ranks: list[int]  # new ranks holding their own recorded work
    files: int
    nodes_per_rank: dict[int, int]  # recorded rank -> nodes of each file cloned from it
    rescaled: dict[int, int]  # recorded rank -> collectives whose comm_size changed
    groups_rewritten: int
    rules: dict[str, int]
    unvalidated: list[str]
    prefix: str
    hosts: str = NO_SHARING.describe()
    cpu_stretch: float = 1.0  # factor on the recorded CPU time (hosts.py)
    uplinks: bool = False  # the hosts are joined by uplinks (hosts.py)
    scaling: str = "weak scaling"  # what changes (ScalePlan.scaling)
    retimed: dict[int, RetimeCounts] = {}  # recorded rank -> its sharded ops re-timed

    def describe(self) -> str:
        lines = [f"{self.prefix}.{{0..{self.world_size - 1}}}.et: {self.files} ranks from "
                 f"{self.recorded_ranks} recorded ({self.job_kind}, {self.scaling})"]
        kept = self.kept_ranks
        lines.append(f"  ranks {kept[0]}..{kept[-1]} hold their own recorded work; "
                     + (f"ranks {len(kept)}..{self.world_size - 1} are clones of recorded "
                        f"rank {self.representative}" if self.world_size > len(kept)
                        else "no clone"))
        copied = sum(self.nodes_per_rank.values()) - sum(self.rescaled.values())
        lines.append(f"  copied: {copied} nodes of {len(self.nodes_per_rank)} distinct ranks "
                     "(compute, CPU time, dependencies as recorded)")
        lines.extend(retimed_lines(self.retimed))
        if self.cpu_stretch != 1.0:
            lines.append(f"  CPU time x{self.cpu_stretch:.3g} ({self.hosts}; in the metadata)")
        if self.uplinks:
            lines.append(f"  hosts: {self.hosts} (in the metadata): a collective spanning "
                         "hosts is paced by its slowest hop")
        lines.append(f"  rescaled: {sum(self.rescaled.values())} collective sizes, "
                     f"{self.groups_rewritten} process-group records (group_size "
                     f"{self.recorded_ranks} -> {self.world_size})")
        for rule, count in sorted(self.rules.items()):
            lines.append(f"    {count} x {rule}")
        lines.extend(f"  unvalidated: {u}" for u in self.unvalidated)
        return "\n".join(lines)


# What a tensor-parallel degree change does not know to be right.
TP_UNVALIDATED = (
    "ops on a shard re-timed by the compute model fitted on the recording (a kind of one "
    "recorded size in proportion to its work); DTensor's dispatch and the time between ops "
    "kept as recorded, as at a degree of 1 where a job may not use DTensor at all",
    "collective sizes kept as recorded (the activation all-reduce after a column- then "
    "row-sharded pair of layers does not change with the degree), timed at the new group size",
)


def retimed_lines(retimed: dict[int, RetimeCounts]) -> list[str]:
    """What re-timing the sharded ops did, per recorded rank, in words."""
    out = []
    for rank, c in sorted(retimed.items()):
        assumed = (f"; {c.proportional} in proportion to their work (their kind's rate "
                   "unknown: one size recorded)") if c.proportional else ""
        out.append(f"  rank {rank}: {c.ops} ops on a shard re-timed by the compute model, "
                   f"{c.recorded_us / 1e3:.1f} -> {c.retimed_us / 1e3:.1f} ms{assumed}")
    return out


def output_path(prefix: str, rank: int) -> str:
    return f"{prefix}.{rank}.et"


def _scaled_rank(p: ScalePlan, source: int) -> tuple[GlobalMetadata, list[ChakraNode],
                                                       RewriteCounts, RetimeCounts | None]:
    """One recorded rank rewritten for the M-rank job, its sharded ops
    re-timed where the plan changes the tensor-parallel degree."""
    metadata, nodes = read_et(p.paths[source])
    new_nodes, counts = rewrite_nodes(list(nodes), p.recorded, p.target)
    if p.tensor_parallel is None:
        return metadata, new_nodes, counts, None
    metadata, new_nodes, retimed = retime_rank(metadata, new_nodes, p.tensor_parallel,
                                               p.paths[source])
    log.info("rank %d: %d sharded ops re-timed, %.0f -> %.0f us", source, retimed.ops,
             retimed.recorded_us, retimed.retimed_us)
    return metadata, new_nodes, counts, retimed


def sound_plan(paths: Sequence[str | os.PathLike[str]], world_size: int, scaling: str = "weak",
               force: bool = False, tensor_parallel: bool = False) -> ScalePlan:
    """The plan of every scale-out command (``extrapolate``, ``simulate
    --world-size``, ``astra-sim --world-size``): the recorded files opened
    through the rank-set front door and what the trace cannot tell refused
    (``plan``), then the recorded ranks checked as one sound job, as
    ``simulate`` checks a set (``rules.checks.refuse_unsound_files``: ranks of
    two recordings, malformed process groups), before anything is written or
    replayed. ``force``: proceed past the second with warnings;
    ``tensor_parallel``: ``world_size`` is the new tensor-parallel degree."""
    p = plan([os.fspath(x) for x in paths], world_size, scaling, tensor_parallel)
    recorded = sorted(p.paths)
    refuse_unsound_files([p.paths[r] for r in recorded], recorded, force)
    return p


def extrapolate(paths: Sequence[str | os.PathLike[str]], world_size: int,
                prefix: str | os.PathLike[str], scaling: str = "weak",
                hosts: HostSharing = NO_SHARING, force: bool = False,
                tensor_parallel: bool = False) -> ExtrapolateSummary:
    """Write ``<prefix>.<rank>.et`` for ranks 0..world_size-1 (all or
    nothing); refuses in one ``InputError`` what the trace cannot tell, and a
    recorded set that is not one sound job (``sound_plan``, unless ``force``).
    ``hosts``: the ranks' hosts (the recorded and the new job's alike)."""
    prefix = os.fspath(prefix)
    names = [os.fspath(x) for x in paths]
    p = sound_plan(names, world_size, scaling, force, tensor_parallel)
    hosts = with_recorded_link_cost(hosts, names)
    folder = os.path.dirname(prefix) or "."
    if not os.path.isdir(folder):
        raise InputError(prefix, f"folder {folder!r} does not exist")
    inputs: list[str | os.PathLike[str] | None] = list(names)
    for r in range(world_size):
        refuse_overwriting_inputs(output_path(prefix, r), inputs)
    nodes_per: dict[int, int] = {}
    rescaled: dict[int, int] = {}
    retimed_per: dict[int, RetimeCounts] = {}
    groups = 0
    with StagedOutputs() as staged:
        for source in sorted(set(p.sources)):
            metadata, nodes, counts, retimed = _scaled_rank(p, source)
            if retimed is not None:
                retimed_per[source] = retimed
            encoded = [encode_node(n) for n in nodes]
            del nodes
            nodes_per[source], rescaled[source] = len(encoded), counts.rescaled
            groups += counts.groups
            for r in p.targets_of(source):
                md = rank_metadata(metadata, r, source, p.recorded, p.target, hosts)
                write_et(staged.stage(output_path(prefix, r)), md, encoded)
        staged.commit()
    kept = list(range(min(p.recorded, world_size)))
    return ExtrapolateSummary(
        recorded_ranks=p.recorded, world_size=world_size, job_kind=p.job_kind,
        representative=p.representative, kept_ranks=kept, files=world_size,
        nodes_per_rank=nodes_per, rescaled=rescaled, groups_rewritten=groups, rules=p.rules,
        unvalidated=list(TP_UNVALIDATED if tensor_parallel else UNVALIDATED), prefix=prefix, hosts=describe_hosts(hosts, world_size),
        cpu_stretch=hosts.cpu_stretch(p.recorded, world_size),
        uplinks=hosts.uplink_gbps is not None, scaling=p.scaling(), retimed=retimed_per)


def with_recorded_link_cost(hosts: HostSharing, paths: Sequence[str]) -> HostSharing:
    """``hosts`` with the recording host's CPU cost per link byte that
    ``collect`` stored beside the traces (``meta.json``), where the cores
    are described and no cost was given; as given otherwise."""
    if hosts.cores_per_host is None or hosts.link_cpu_ns_per_byte is not None:
        return hosts
    from pt2chakra.simulation.profiler_overhead import read_meta_link_cost

    found = read_meta_link_cost(paths)
    if found is None:
        return hosts
    log.info("link CPU cost %.3g ns per byte (host busy %s), from %s", found.ns_per_byte,
             found.host_ns_per_byte, found.meta)
    return hosts._replace(link_cpu_ns_per_byte=found.ns_per_byte,
                          link_cpu_ns_upper=found.host_ns_per_byte)


def describe_hosts(hosts: HostSharing, world_size: int) -> str:
    """The hosts of an M-rank prediction in words, with the cap their CPU
    puts on each rank's link where it is known."""
    cap = hosts.host_link_gbps(world_size)
    text = hosts.describe()
    if cap is not None:
        text += f"; each rank's link moves at most {cap * 1e3:.3g} MB/s (its host's CPU)"
    return text


_Job = TypeVar("_Job")


def extrapolated_job(paths: Sequence[str | os.PathLike[str]], world_size: int,
                     prefix: str | os.PathLike[str],
                     write: Callable[[list[str], float], _Job],
                     hosts: HostSharing = NO_SHARING, force: bool = False,
                     tensor_parallel: bool = False) -> _Job:
    """``astra-sim --world-size``: the M-rank files in a scratch folder beside
    the output (removed after), handed to ``write`` (the job writer) with our
    prediction of the M-rank step (``simulate --world-size``). The recorded
    set is checked first (``sound_plan``): nothing is written for a set that
    is not one sound job, unless ``force``; ``tensor_parallel``: ``world_size``
    is the new tensor-parallel degree."""
    hosts = with_recorded_link_cost(hosts, [os.fspath(x) for x in paths])  # read once
    predicted = predicted_step_us(paths, world_size, hosts, force, tensor_parallel)
    folder = Path(os.fspath(prefix)).parent
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".scaleout-", dir=folder) as scratch:
        extrapolate(paths, world_size, os.path.join(scratch, "rank"), hosts=hosts, force=force,
                    tensor_parallel=tensor_parallel)
        return write([output_path(os.path.join(scratch, "rank"), r) for r in range(world_size)],
                     predicted)


def predicted_step_us(paths: Sequence[str | os.PathLike[str]], world_size: int,
                      hosts: HostSharing = NO_SHARING, force: bool = False,
                      tensor_parallel: bool = False) -> float:
    """``simulate --world-size``'s step with its defaults (the calibrated network)."""
    from pt2chakra.simulation import SimulationOptions

    return simulate_world_size(paths, world_size, SimulationOptions(force=force), hosts,
                               tensor_parallel).run.result.predicted_step_us


class WorldSizeRun(NamedTuple):
    """``simulate_world_size``'s replay of the M-rank job's distinct ranks,
    with the plan that built them and the options as replayed."""

    plan: ScalePlan
    run: SimulationRun
    options: SimulationOptions  # as replayed: SimulationOptions.scaled_out
    hosts: HostSharing = NO_SHARING  # as applied (with the recorded link cost)
    # What was replayed, and how, for a replay of the same graphs on other
    # hosts (link_cost_range): None where the run was not built here.
    scaled: ScaledGraphs | None = None
    given: SimulationOptions | None = None  # as the caller gave them
    recorded: ProfilerOverhead | None = None  # recorded_figure's, on the recorded ranks

    def breakdown(self) -> ScaleBreakdown:
        """Where the M-rank step's time goes (what ``simulate --world-size``
        prints), with the step's range over what the fit assumed."""
        from pt2chakra.scaleout.breakdown import breakdown

        return breakdown(self.plan, self.run, self.options, self.assumed_range(),
                         describe_hosts(self.hosts, self.plan.target), self.link_cost_range(),
                         retimed_lines(self.scaled.retimed if self.scaled else {}))

    def link_cost_range(self) -> tuple[float, float] | None:
        """The M-rank step with the link CPU cost over its measured range
        (the ranks' own CPU to the host's busy time per byte, as
        ``collect`` measured them); None where no range was measured."""
        upper = self.hosts.at_upper_link_cost()
        if upper is None or self.scaled is None or self.given is None:
            return None
        high = _replayed(self.scaled.on_hosts(upper), self.given,
                         self.recorded).run.result.predicted_step_us
        low = self.run.result.predicted_step_us
        return min(low, high), max(low, high)

    def assumed_range(self) -> tuple[float, float] | None:
        """The M-rank step with the latency the fit assumed (where the
        recording could not tell it) moved over ``ASSUMED_LATENCY_RANGE``;
        None when the fit assumed nothing."""
        from pt2chakra.simulation import base_config
        from pt2chakra.simulation.calibration import ASSUMED_LATENCY_RANGE, assumes

        if not assumes(self.run.result.network_model):
            return None
        sim = self.run.simulator
        base = base_config(sim, [r.source for r in self.run.result.ranks], self.options)
        steps = [sim.predict(msgspec.structs.replace(base, assumed_latency_scale=x))
                 for x in ASSUMED_LATENCY_RANGE]
        return min(steps), max(steps)


def simulate_world_size(paths: Sequence[str | os.PathLike[str]], world_size: int,
                        options: SimulationOptions | None = None,
                        hosts: HostSharing = NO_SHARING,
                        tensor_parallel: bool = False) -> WorldSizeRun:
    """``simulate --world-size M``: the step of the data-parallel job recorded
    in ``paths`` scaled out (or in) to ``world_size`` ranks, replayed from its
    distinct ranks without writing the M files (weak scaling; collectives
    timed at M by the options' network, else by the model fitted to the
    recording; ``hosts``: how the M ranks share hosts). ``options.write_et``
    is refused (``extrapolate`` writes the M-rank files); ``options.force``
    also lets a set through that is not one sound job."""
    from pt2chakra.simulation import SimulationOptions, recorded_figure

    given, recorded = recorded_figure(paths, options or SimulationOptions())
    scaled = scaled_graphs(paths, world_size, hosts=hosts, force=given.force,
                           tensor_parallel=tensor_parallel)
    return _replayed(scaled, given, recorded)


def _replayed(scaled: ScaledGraphs, given: SimulationOptions,
              recorded: ProfilerOverhead | None) -> WorldSizeRun:
    """The replay of ``scaled``'s graphs (``simulate_world_size``'s last step)."""
    from pt2chakra.simulation import simulate_graphs_run

    replayed = given.scaled_out(scaled.graphs)
    run = simulate_graphs_run(scaled.sources, scaled.graphs, replayed, recorded)
    return WorldSizeRun(scaled.plan, run, replayed, scaled.hosts, scaled, given, recorded)


class ScaledGraphs(msgspec.Struct):
    """The distinct ranks of the M-rank job, in memory (``simulate
    --world-size``): new ranks 0..min(N, M)-1, each with the metadata of an
    M-rank job. Every other new rank is a clone of ``plan.representative``,
    whose graph is one of these."""

    plan: ScalePlan
    sources: list[str]  # a label per graph
    graphs: list[tuple[GlobalMetadata, list[ChakraNode]]]
    hosts: HostSharing = NO_SHARING  # as applied (with the recorded link cost)
    retimed: dict[int, RetimeCounts] = {}  # recorded rank -> its sharded ops re-timed
    # Each graph's metadata before the hosts were written into it (on_hosts)
    rewritten: list[GlobalMetadata] = []

    def on_hosts(self, hosts: HostSharing) -> ScaledGraphs:
        """The same graphs with the metadata of other hosts (the nodes shared)."""
        p = self.plan
        graphs = [(rank_metadata(md, r, r, p.recorded, p.target, hosts), nodes)
                  for r, (md, (_old, nodes)) in enumerate(zip(self.rewritten, self.graphs,
                                                              strict=True))]
        return msgspec.structs.replace(self, graphs=graphs, hosts=hosts)


def scaled_graphs(paths: Sequence[str | os.PathLike[str]], world_size: int,
                  scaling: str = "weak", hosts: HostSharing = NO_SHARING,
                  force: bool = False, tensor_parallel: bool = False) -> ScaledGraphs:
    """The distinct ranks of the ``world_size``-rank job (see ScaledGraphs);
    the recorded set checked first (``sound_plan``, unless ``force``)."""
    p = sound_plan(paths, world_size, scaling, force, tensor_parallel)
    hosts = with_recorded_link_cost(hosts, [os.fspath(x) for x in paths])
    retimed_per: dict[int, RetimeCounts] = {}
    rewritten = []
    graphs = []
    labels = []
    for r in range(min(p.recorded, world_size)):
        metadata, nodes, _, retimed = _scaled_rank(p, r)
        if retimed is not None:
            retimed_per[r] = retimed
        rewritten.append(metadata)
        graphs.append((rank_metadata(metadata, r, r, p.recorded, p.target, hosts), nodes))
        labels.append(p.paths[r])
    return ScaledGraphs(p, labels, graphs, hosts, retimed_per, rewritten)
