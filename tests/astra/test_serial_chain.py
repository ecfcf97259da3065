"""The ``serial`` ASTRA-sim profile (the default): one serial compute chain per
rank, communication hanging off it, rank start offsets as leading gaps."""

from __future__ import annotations

import pytest
from builders import IS_GPU, comm_attrs, cpu_attrs, gpu_attrs, metadata, node
from helpers import assert_one_line_failure, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.astra.collective_time import AstraNetwork, AstraSystem, collective_ns
from pt2chakra.astra.consumer import ConsumerOptions, consume, run_as_astra_sim
from pt2chakra.astra.export import convert_files, profile
from pt2chakra.astra.serial_chain import COMM_DONE, COMM_ORDER, HOST_WAIT, ISSUE_POINT
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata, NodeType, attr_dict
from pt2chakra.rules.conventions import CPU_GAP_CATEGORY
from pt2chakra.rules.cycles import find_cycle_in
from pt2chakra.tools.validate import validate

AR_1MIB = comm_attrs(0, 1 << 20, pg=None)  # an all-reduce of 1 MiB, no group


def _kernel(i: int, start: int, dur: int, stream: int, deps: list[int] | None = None,
            ) -> ChakraNode:
    return node(i, deps or [], name=f"K{i}", start=start, dur=dur, attrs=gpu_attrs(stream))


def _coll(i: int, start: int, dur: int, deps: list[int] | None = None) -> ChakraNode:
    return node(i, deps or [], name=f"AR{i}", node_type=NodeType.COMM_COLL_NODE, start=start,
                dur=dur, attrs=[*gpu_attrs(99), *AR_1MIB])


def _chain(out: list[ChakraNode]) -> list[ChakraNode]:
    return [n for n in out if n.type == NodeType.COMP_NODE]


def test_overlapping_streams_fold_into_one_chain_with_gaps():
    # K1 [10, 30) on stream 1, K2 [20, 40) on stream 2 (overlaps K1 by 10),
    # K3 [50, 55) on stream 1 after 10 us of idle; step [0, 60)
    nodes = [node(1, name="cpu", dur=60, attrs=cpu_attrs()),
             _kernel(2, 10, 20, 1, [1]), _kernel(3, 20, 20, 2, [1]),
             _kernel(4, 50, 5, 1, [2])]
    _md_out, out = profile(metadata(world_size=2, step=(0, 60)), nodes, "serial")
    chain = _chain(out)
    names = [n.name for n in chain]
    assert names == [CPU_GAP_CATEGORY, "K2", "K3", CPU_GAP_CATEGORY, "K4", CPU_GAP_CATEGORY]
    assert [n.duration_micros for n in chain] == [10, 20, 10, 10, 5, 5]
    # one compute resource: each chain node waits for the one before it
    for prev, cur in zip(chain, chain[1:]):
        assert cur.data_deps[:1] == [prev.id]
    assert sum(n.duration_micros for n in chain) == 60
    assert not any(attr_dict(n.attrs)["is_cpu_op"] for n in out)
    assert all(not n.ctrl_deps for n in out)


def test_waiting_for_communication_is_a_dependency_not_a_gap():
    # K2 waits for the all-reduce [20, 70) and starts 5 us after it ends:
    # the 5 us are CPU time (a gap after the collective), the rest the network's
    nodes = [_kernel(1, 0, 20, 1), _coll(2, 20, 50, [1]), _kernel(3, 75, 5, 1, [2])]
    _md_out, out = profile(metadata(world_size=2, step=(0, 80)), nodes, "serial")
    by_id = {n.id: n for n in out}
    chain = _chain(out)
    gap = chain[chain.index(by_id[3]) - 1]
    assert gap.name == CPU_GAP_CATEGORY and gap.duration_micros == 5
    assert 2 in gap.data_deps
    assert dict(zip(gap.data_deps, attr_dict(gap.attrs)["data_dep_kinds"]))[2] == COMM_DONE
    coll = by_id[2]
    assert coll.data_deps == [1]
    assert attr_dict(coll.attrs)["data_dep_kinds"] == [ISSUE_POINT]
    # the chain has no node covering the wait [20, 70): only K1, the gap, K3
    assert [n.name for n in chain] == ["K1", CPU_GAP_CATEGORY, "K3"]


def test_rank_start_offset_is_a_leading_gap(converted, tmp_path):  # noqa: F811
    files = [converted[f"dlrm_rank{r}"] for r in range(8)]
    written = convert_files(files, tmp_path / "dlrm")
    firsts = []
    for path in written:
        if path.endswith(".et"):
            _md_out, nodes = read_et(path)
            first = next(iter(nodes))
            firsts.append(first)
    # every rank's chain begins with a gap at the earliest rank's step start
    # (ASTRA-sim starts all ranks at 0); later ranks wait longer
    assert all(n.name == CPU_GAP_CATEGORY for n in firsts)
    assert len({n.start_time_micros for n in firsts}) == 1
    assert len({n.duration_micros for n in firsts}) > 1


@st.composite
def _schedules(draw: st.DrawFn) -> tuple[GlobalMetadata, list[ChakraNode]]:
    count = draw(st.integers(1, 12))
    nodes: list[ChakraNode] = []
    for i in range(1, count + 1):
        start = draw(st.integers(0, 200))
        dur = draw(st.integers(0, 40))
        if draw(st.booleans()) and i > 1:
            deps = [draw(st.integers(1, i - 1))]
            deps = [d for d in deps if nodes[d - 1].start_time_micros +
                    nodes[d - 1].duration_micros <= start]
        else:
            deps = []
        if draw(st.integers(0, 3)) == 0:
            nodes.append(_coll(i, start, dur, deps))
        else:
            nodes.append(_kernel(i, start, dur, draw(st.integers(0, 2)), deps))
    end = max(n.start_time_micros + n.duration_micros for n in nodes) + draw(st.integers(0, 9))
    return metadata(world_size=2, step=(0, end)), nodes


@pytest.mark.slow
@given(_schedules(), st.integers(0, 50))
@settings(max_examples=150, deadline=None)
def test_chain_invariants(schedule, origin):
    """One path of compute nodes from ASTRA-sim's time 0 to the step end,
    every GPU node kept once, no cycle."""
    md, nodes = schedule
    _md_out, out = profile(md, nodes, "serial", origin_us=origin)
    ids = [n.id for n in out]
    assert len(ids) == len(set(ids))
    assert {n.id for n in nodes} <= set(ids)
    chain = _chain(out)
    for prev, cur in zip(chain, chain[1:]):
        assert prev.id in cur.data_deps
    end = max(n.start_time_micros + n.duration_micros for n in nodes)
    step_end = attr_dict(md.attrs)["step_end_micros"]
    comm = [n for n in out if n.type == NodeType.COMM_COLL_NODE]
    if not comm:  # then the chain alone spans the step, shifted by the origin
        assert sum(n.duration_micros for n in chain) == max(step_end, end) + origin
    deps = {n.id: [(d, "data") for d in n.data_deps] for n in out}
    assert find_cycle_in(ids, deps) == []


def _pair(kernel_us: int) -> list[tuple[GlobalMetadata, list[ChakraNode]]]:
    """Two ranks: compute, an all-reduce, compute after it."""
    out = []
    for _rank in range(2):
        nodes = [_kernel(1, 0, kernel_us, 1), _coll(2, kernel_us, 100, [1]),
                 _kernel(3, kernel_us + 110, 10, 1, [2])]
        md, chain = profile(metadata(world_size=2, step=(0, kernel_us + 130)), nodes, "serial")
        out.append((md, chain))
    return out


def test_consumer_replays_the_export_to_the_measured_step():
    graphs = _pair(40)
    net = AstraNetwork("Ring", 2, 50.0, 500.0)
    result = run_as_astra_sim(graphs, ["a.0.et", "a.1.et"], ConsumerOptions(network=net))
    # the network decides the all-reduce (measured: 100 us); the rest of the
    # step is as measured: 40 us kernel, then after the all-reduce 10 us of
    # CPU, a 10 us kernel and 10 us of CPU until the step's end
    network_us = collective_ns(0, 1 << 20, 2, net, AstraSystem()) / 1000
    assert result.measured_step_us == 170
    assert result.predicted_step_us == pytest.approx(70 + network_us, abs=0.001)


def test_network_what_if_moves_only_what_waits_for_the_network():
    graphs = _pair(40)
    names = ["a.0.et", "a.1.et"]
    base = ConsumerOptions(network=AstraNetwork("Ring", 2, 50.0, 500.0))
    slow = ConsumerOptions(network=AstraNetwork("Ring", 2, 50.0, 500.0), bandwidth_scale=0.01)
    fast_step = run_as_astra_sim(graphs, names, base).predicted_step_us
    slow_step = run_as_astra_sim(graphs, names, slow).predicted_step_us
    assert slow_step > fast_step  # 1 MiB at 0.5 GB/s is ~2 ms: the kernel after it waits
    half = ConsumerOptions(network=base.network, compute_scale=0.5)
    # K1 and K3 are 50 us of kernels: halving them saves 25 us, no more
    assert run_as_astra_sim(graphs, names, half).predicted_step_us == pytest.approx(
        fast_step - 25, abs=0.01)


def test_dlrm_serial_export_replays_to_the_measured_step(converted, tmp_path):  # noqa: F811
    files = [converted[f"dlrm_rank{r}"] for r in range(8)]
    written = [p for p in convert_files(files, tmp_path / "dlrm") if p.endswith(".et")]
    report = validate(written, consumer="astra-sim")
    assert report.sound and not report.problems, report.lines()
    net = AstraNetwork("Ring", 8, 50.0, 500.0)
    serial = consume(written, net).result
    assert len(serial.ranks) == 8
    assert serial.measured_step_us == pytest.approx(20733, abs=1)
    assert abs(serial.error_pct or 0) < 0.05
    # the per-stream gaps of the "drop" profile add up on ASTRA-sim's one
    # compute resource: what real ASTRA-sim printed (27,625 us)
    drop = [p for p in convert_files(files, tmp_path / "drop", cpu="drop") if p.endswith(".et")]
    assert consume(drop, net).result.predicted_step_us == pytest.approx(27625, abs=1)


@pytest.mark.parametrize("name", ["linear_1gpu", "hta_simple_add"])
def test_one_rank_trace_is_refused_in_one_line(converted, tmp_path, name):  # noqa: F811
    proc = run_cli("astra-sim", converted[name], "-o", tmp_path / "one")
    assert_one_line_failure(proc, str(converted[name]), "at least 2 NPUs")
    assert proc.returncode == 2
    assert list(tmp_path.iterdir()) == []


# -- host-only ranks (gloo on CPU) ---------------------------------------------

def _host_op(i: int, start: int, dur: int, deps: list[int] | None = None) -> ChakraNode:
    return node(i, deps or [], name=f"op{i}", start=start, dur=dur, attrs=cpu_attrs())


def _host_coll(i: int, start: int, dur: int, deps: list[int]) -> ChakraNode:
    return node(i, deps, name=f"gloo:all_reduce{i}", node_type=NodeType.COMM_COLL_NODE,
                start=start, dur=dur, attrs=[IS_GPU, *AR_1MIB])


def _host_rank(queued: bool = False) -> list[ChakraNode]:
    """op1 issues an all-reduce that a gloo worker runs [100, 1100); op3 (no
    recorded edge to it) resumes at 1120, 20 us after it ended. ``queued``:
    op4 [150, 160) issues a second all-reduce that waits for the busy worker
    and runs [1100, 2100); op5 resumes at 2120."""
    nodes = [_host_op(1, 0, 100), _host_coll(2, 100, 1000, [1]), _host_op(3, 1120, 50, [1])]
    if queued:
        nodes[2] = _host_op(3, 150, 10, [1])
        nodes += [_host_coll(4, 1100, 1000, [2, 3]), _host_op(5, 2120, 50, [3])]
    return nodes


def test_host_wait_for_a_collective_is_a_dependency_plus_the_wake_up():
    _md_out, out = profile(metadata(world_size=2, step=(0, 1170)), _host_rank(), "serial")
    chain = _chain(out)
    waiting = [n for n in chain if 2 in n.data_deps]  # the wait, then the step's tail
    assert waiting[0].duration_micros == 20  # the wake-up only
    kinds = dict(zip(waiting[0].data_deps, attr_dict(waiting[0].attrs)["data_dep_kinds"]))
    assert kinds[2] == COMM_DONE
    # busy time before the wait and after it stays: 100 + 20 + 50 us of chain
    assert sum(n.duration_micros for n in chain) == 170


def test_host_only_rank_follows_a_network_what_if():
    """Kept as a fixed gap, the wait would hold the step at its measured
    length on a faster network (issue 22: 1 -> 4 Gbit/s was +75 %)."""
    md = metadata(world_size=2, step=(0, 1170))
    graphs = [profile(md, _host_rank(), "serial") for _ in range(2)]
    net = AstraNetwork("Ring", 2, 50.0, 500.0)
    network_us = collective_ns(0, 1 << 20, 2, net, AstraSystem()) / 1000
    for scale in (1.0, 4.0):
        options = ConsumerOptions(network=net, bandwidth_scale=scale)
        step = run_as_astra_sim(graphs, ["a.0.et", "a.1.et"], options).predicted_step_us
        scaled_us = collective_ns(0, 1 << 20, 2, AstraNetwork("Ring", 2, 50.0 * scale, 500.0),
                                  AstraSystem()) / 1000
        assert step == pytest.approx(100 + scaled_us + 20 + 50, abs=0.01)
    assert network_us > scaled_us  # the faster network shortened the step


def test_collective_queued_on_a_busy_worker_is_issued_at_its_issuing_op():
    _md_out, out = profile(metadata(world_size=2, step=(0, 2170)), _host_rank(queued=True),
                           "serial")
    by_id = {n.id: n for n in out}
    second = by_id[4]
    kinds = dict(zip(second.data_deps, attr_dict(second.attrs)["data_dep_kinds"]))
    assert kinds[2] in (COMM_ORDER, HOST_WAIT)  # it starts when the first one ends
    issue = next(d for d, k in kinds.items() if k == ISSUE_POINT)
    # issued where op3 ended (160 us), not at its recorded start (1100 us)
    assert by_id[issue].start_time_micros + by_id[issue].duration_micros == 160
    # op5 waited for it: a dependency, then the 20 us wake-up
    waiting = [n for n in _chain(out) if 4 in n.data_deps]
    assert waiting[0].duration_micros == 20
    assert find_cycle_in([n.id for n in out],
                         {n.id: [(d, "data") for d in n.data_deps] for n in out}) == []


def test_the_jobs_network_ends_start_a_queued_collective_where_the_chain_issues_it():
    """``job.network_ends`` takes the chain's issue times (one rule): the
    queued all-reduce at its issuing op's end, the first at its start."""
    from pt2chakra.astra.export import _removed_nodes
    from pt2chakra.astra.serial_chain import comm_issue_times

    nodes = _host_rank(queued=True)
    issues = comm_issue_times(nodes, set(_removed_nodes(nodes, "serial")))
    assert issues[4] == 160  # not its recorded start (1100 us)
    assert issues[2] == next(n.start_time_micros for n in nodes if n.id == 2)


def test_a_what_if_scales_the_link_time_after_the_fitted_end_not_the_wake_up():
    """The all-reduce ran [100, 1100); op3 woke 20 us after. The job's
    fitted network ends it at 600 us: the 500 us after are recorded link
    time the fit leaves unexplained (gloo's two collectives sharing the
    link), the 20 us the host's wake-up. A what-if network that runs the
    collective in a quarter of the fitted time (``link_scales``: 0.25)
    scales the 500 us with it and keeps the 20 us; at 1 the gap is as
    recorded. Kept fixed, 1 -> 4 Gbit/s on gloo DDP x2 was +90.5 %."""
    from pt2chakra.astra.export import _profile_rank, rank_window

    nodes = _host_rank()
    md = metadata(world_size=2, step=(0, 1170))

    def wait_gap(scales: dict[int, float]) -> int:
        _md, out = _profile_rank(md, nodes, "serial", 0.0, rank_window(md, nodes), {2: 600.0},
                                 scales)
        return next(n for n in _chain(out) if 2 in n.data_deps).duration_micros

    assert wait_gap({}) == 500 + 20
    assert wait_gap({2: 1.0}) == 500 + 20
    assert wait_gap({2: 0.25}) == 125 + 20
    assert wait_gap({2: 4.0}) == 2000 + 20  # a slower network: more link time


def test_a_wake_after_two_collectives_keeps_only_the_wake_up_after_the_later():
    """op3 recorded a dependency on all-reduce 2 (ended at 600 us, inside its
    gap) and woke 20 us after all-reduce 4 ended (the wake-up rule): it
    waited for both, so the fixed gap is the 20 us after the later one, not
    the 520 us after the earlier (which would hold all-reduce 4's recorded
    time as fixed CPU time: DDP 4 -> 8 ran +21 % in ASTRA-sim)."""
    nodes = [_host_op(1, 0, 100), _host_coll(2, 100, 500, [1]), _host_coll(4, 110, 990, [1]),
             _host_op(3, 1120, 50, [1, 2])]
    _md_out, out = profile(metadata(world_size=2, step=(0, 1170)), nodes, "serial")
    chain = _chain(out)
    waiting = [n for n in chain if 4 in n.data_deps]
    assert waiting[0].duration_micros == 20
    assert 2 in waiting[0].data_deps
    # busy 100 us, 10 us until all-reduce 4's issue, the wake-up, op3
    assert sum(n.duration_micros for n in chain) == 100 + 10 + 20 + 50


def test_a_tail_that_ends_before_the_last_collective_is_no_wait_for_it():
    """The step ends with all-reduce 2's end (5,000 us); the threads' last op
    (op5 on a second thread, after a 3,880 us gap that ended 1 ms before the
    all-reduce's end: no wake-up) ends at 4,010 us. The tail is CPU time that
    runs beside the all-reduce, to 4,010 us, not a wait for it: on a faster
    network the rank still runs its 4 ms of CPU time."""
    nodes = [_host_op(1, 0, 100), _host_coll(2, 100, 4900, [1]),
             node(3, [1], name="op3", start=110, dur=10, attrs=cpu_attrs(2)),
             node(5, [3], name="op5", start=4000, dur=10, attrs=cpu_attrs(2))]
    _md_out, out = profile(metadata(world_size=2, step=(0, 5000)), nodes, "serial")
    chain = _chain(out)
    assert all(2 not in n.data_deps for n in chain)
    assert chain[-1].start_time_micros + chain[-1].duration_micros == 4010
    md = metadata(world_size=2, step=(0, 5000))
    graphs = [profile(md, nodes, "serial") for _ in range(2)]
    fast = AstraNetwork("Ring", 2, 50.0, 500.0)  # the all-reduce takes well under 4 ms
    step = run_as_astra_sim(graphs, ["a.0.et", "a.1.et"],
                            ConsumerOptions(network=fast)).predicted_step_us
    assert step == pytest.approx(4010, abs=1)


def test_a_collective_launched_when_another_ended_is_issued_with_it_not_at_its_start():
    """All-reduce 4 has no host op issuing it, only a recorded dependency on
    all-reduce 2, and started 25 us after 2 ended (DDP's bucket launched from
    a gloo callback). It is issued where 2 was (100 us), after 2's end: its
    recorded start (1,125 us) as an issue point would put a fixed 1 ms gap
    (2's recorded time) on the chain, which the job's CPU stretch multiplied."""
    from pt2chakra.astra.export import _removed_nodes
    from pt2chakra.astra.serial_chain import comm_issue_times

    nodes = [_host_op(1, 0, 100), _host_coll(2, 100, 1000, [1]), _host_coll(4, 1125, 500, [2]),
             _host_op(3, 1650, 50, [1])]
    assert comm_issue_times(nodes, set(_removed_nodes(nodes, "serial")))[4] == 100
    _md_out, out = profile(metadata(world_size=2, step=(0, 1700)), nodes, "serial")
    by_id = {n.id: n for n in out}
    kinds = dict(zip(by_id[4].data_deps, attr_dict(by_id[4].attrs)["data_dep_kinds"]))
    assert kinds[2] in (COMM_ORDER, HOST_WAIT)
    issue = next(d for d, k in kinds.items() if k == ISSUE_POINT)
    assert by_id[issue].start_time_micros + by_id[issue].duration_micros == 100
    # no chain gap holds 2's 1,000 us: busy 100, the wake-up after 4, op3
    assert max(n.duration_micros for n in _chain(out)) < 1000
