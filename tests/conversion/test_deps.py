"""Each dependency rule alone, on small hand-made spans."""

from pt2chakra.chakra.dep_kinds import EdgeKind as K
from pt2chakra.conversion.deps import (
    CpuSpan,
    GpuSpan,
    StreamLookup,
    gpu_sync_edges,
    inter_thread_edges,
    iter_thread_order_edges,
    launch_edges,
    stream_order_edges,
    stream_wait_edges,
)


def test_thread_order_caller_before_callee_and_siblings_in_order():
    # 10 calls 11 (which calls 12), then 13; thread 2 runs 20 alone.
    spans = [CpuSpan(13, 10, 1), CpuSpan(10, 0, 1), CpuSpan(12, 11, 1), CpuSpan(11, 10, 1),
             CpuSpan(20, 0, 2)]
    assert list(iter_thread_order_edges(spans)) == [
        (10, 11, K.CALLER), (11, 12, K.CALLER), (12, 13, K.THREAD_ORDER)]


def test_inter_thread_waits_for_last_finished_op_on_other_thread():
    main_before = CpuSpan(1, 0, 1, start=0, end=10)
    backward_call = CpuSpan(2, 0, 1, start=11, end=100)  # main thread blocks here
    bw1 = CpuSpan(3, 0, 2, start=20, end=30)
    bw2 = CpuSpan(4, 0, 2, start=31, end=90)
    after = CpuSpan(5, 0, 1, start=101, end=110)
    edges = inter_thread_edges([main_before, backward_call, bw1, bw2, after])
    # bw1 must not wait for the still-running backward call, only for op 1;
    # the main thread resumes after the last backward-thread op finished.
    assert (1, 3, K.INTER_THREAD) in edges
    assert (4, 5, K.INTER_THREAD) in edges
    assert all(src != 2 for src, _, _ in edges)


def test_inter_thread_needs_timing():
    assert inter_thread_edges([CpuSpan(1, 0, 1), CpuSpan(2, 0, 2)]) == []


def test_launch_edges_skip_unknown_launcher():
    gpu = [GpuSpan(100, 0, 7, 5.0, launcher=3), GpuSpan(101, 0, 7, 6.0)]
    assert launch_edges(gpu) == [(3, 100, K.LAUNCH)]


def test_stream_order_per_device_and_stream_by_launch_time():
    gpu = [GpuSpan(102, 0, 7, 3.0), GpuSpan(100, 0, 7, 1.0), GpuSpan(101, 0, 8, 2.0),
           GpuSpan(103, 1, 7, 2.5), GpuSpan(104, 0, 7, 2.0)]
    edges = set(stream_order_edges(gpu))
    assert edges == {(100, 104, K.STREAM_ORDER), (104, 102, K.STREAM_ORDER)}


def test_stream_wait_links_recorded_work_to_next_work_on_waiting_stream():
    gpu = [GpuSpan(1, 0, 7, 10.0), GpuSpan(2, 0, 7, 30.0),  # compute stream
           GpuSpan(3, 0, 9, 5.0), GpuSpan(4, 0, 9, 25.0)]  # side stream
    lookup = StreamLookup(gpu)
    # event recorded on stream 7 at t=20 (after op 1), waited on by stream 9 at t=22
    edges = stream_wait_edges([(0, 9, 22.0, 7, 20.0)], lookup)
    assert edges == [(1, 4, K.STREAM_WAIT)]


def test_gpu_sync_device_waits_all_streams_stream_waits_one():
    gpu = [GpuSpan(1, 0, 7, 10.0), GpuSpan(2, 0, 9, 11.0), GpuSpan(3, 0, 7, 50.0)]
    lookup = StreamLookup(gpu)
    next_cpu = {77: ([5.0, 40.0, 60.0], [100, 101, 102])}
    device = gpu_sync_edges([(0, -1, 20.0, 30.0, 77)], lookup, next_cpu)
    assert sorted(device) == [(1, 101, K.GPU_SYNC), (2, 101, K.GPU_SYNC)]
    stream = gpu_sync_edges([(0, 9, 20.0, 30.0, 77)], lookup, next_cpu)
    assert stream == [(2, 101, K.GPU_SYNC)]
    # nothing starts after the sync on that thread: no edge
    assert gpu_sync_edges([(0, -1, 20.0, 70.0, 77)], lookup, next_cpu) == []


def test_merge_edges_keeps_most_reliable_kind_and_first_seen_order():
    from pt2chakra.conversion.dep_table import DepTable

    merged = DepTable.merged([[(1, 2, K.THREAD_ORDER), (3, 2, K.LAUNCH), (1, 2, K.CALLER),
                               (4, 4, K.LAUNCH), (5, 6, K.GPU_SYNC)]])
    assert merged == {2: [(1, K.CALLER), (3, K.LAUNCH)], 6: [(5, K.GPU_SYNC)]}
