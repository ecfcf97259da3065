"""The scale-out benchmark's test bed: one network namespace per rank.

Every rank gets its own namespace, joined to one Linux bridge by a veth
pair whose two ends are both shaped with ``tc ... tbf`` (each rank its own
full-duplex link, as on a switch; loopback is left alone, since one qdisc on
``lo`` is one bus that every rank shares). ``GLOO_SOCKET_IFNAME`` names the
namespace's end, so gloo's traffic crosses the shaped link. Also the
machine's CPU accounting: what other processes used during a run (the
machine may be shared).

Two more shapes (``Layout``): a two-tier bed, where consecutive ranks share a
host bridge and each host bridge is joined to one spine bridge by an uplink
(a veth pair shaped on both ends, slower than the ranks' own links), and a
slow link, one rank's veth shaped slower than the others' (both ends). Every
address is in one subnet, so gloo finds every peer across the bridges.

Used by ``scripts/bench_scale.py``; needs Linux, root, ``ip`` and ``tc``.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# Names kept short: Linux interface names have at most 15 characters.
BRIDGE = "p2cbr"  # the flat bed's bridge; the two-tier bed's spine
HOST_BRIDGE = "p2cbh{host}"  # a two-tier host's bridge
UPLINK_HOST_END = "p2cuh{host}"  # the uplink's end on the host bridge
UPLINK_SPINE_END = "p2cus{host}"  # the uplink's end on the spine
PREFIX = "p2c"  # every name above starts with it: teardown removes them all
NETNS = "p2cns{rank}"
HOST_END = "p2ch{rank}"  # the veth end on the bridge (root namespace)
RANK_END = "p2cn{rank}"  # the veth end inside the rank's namespace
SUBNET = "10.231.0.{host}/24"
# tbf: a burst small against the transfers (32 KB is 2.6 ms at 100 Mbit/s; a 256 KB
# bucket let a quarter of a 1 MB transfer through at once after an idle spell, so
# the link's time per byte depended on how long it had been idle), larger GSO
# packets segmented by tbf itself; a queue long enough never to drop.
TBF = ("burst", "32kb", "latency", "100ms")
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# A wait for a quiet second before each run (the neighbours' load comes and goes).
QUIET_WINDOW_S = 1.0


# The ranks run ahead of the machine's other processes (a shared machine: other
# jobs' CPU would otherwise stretch the ranks' CPU work by an amount no model of
# the job can know); they still share the bed's cores among themselves.
NICENESS = -10
# Neighbours using more than this many cores on average during a run make it
# contaminated (recorded again). The machine has 2 cores; a few helpers' tests
# come and go on it.
MAX_OTHER_CORES = 0.5
QUIET_PATIENCE_S = 30.0


def add_bed_options(ap: argparse.ArgumentParser) -> None:
    """The options of every bench that records on the bed: the ranks'
    niceness and when a run counts as contaminated."""
    ap.add_argument("--nice", type=int, default=NICENESS,
                    help="the ranks' niceness (negative: ahead of other processes)")
    ap.add_argument("--max-other", type=float, default=MAX_OTHER_CORES,
                    help="cores other processes may use during a clean run")
    ap.add_argument("--patience", type=float, default=QUIET_PATIENCE_S,
                    help="seconds to wait for a quiet machine before each run")


def unwind_on_signals() -> None:
    """SIGINT (also where a launcher ignored it), SIGTERM and SIGHUP unwind
    like Ctrl-C, so a bench's ``finally`` always tears down what it set up."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)


def why_not() -> str | None:
    """None when the bed can be built here, else the one-line reason."""
    if not sys.platform.startswith("linux"):
        return "needs Linux (network namespaces, tc, /proc/stat)"
    if os.geteuid() != 0:
        return "needs root to create network namespaces and shape links with tc"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"needs {tool} (iproute2)"
    try:
        import torch.distributed as dist
    except ImportError:
        return "needs torch"
    if not dist.is_available() or not dist.is_gloo_available():
        return "needs a torch build with gloo"
    return None


@dataclass(frozen=True)
class Layout:
    """Where the ranks sit: ``ranks_per_host`` 0 is the flat bed (every rank
    on one bridge); else consecutive ranks share a host bridge, joined to the
    spine at ``uplink_mbit``. ``slow_rank`` (None: none) gets ``slow_mbit``
    on both ends of its own link instead of the bed's rate."""

    ranks_per_host: int = 0
    uplink_mbit: float = 0.0
    slow_rank: int | None = None
    slow_mbit: float = 0.0

    def host_of(self, rank: int) -> int | None:
        """The rank's host (None on the flat bed)."""
        return rank // self.ranks_per_host if self.ranks_per_host else None

    def hosts(self, world_size: int) -> int:
        """Host bridges of a ``world_size``-rank bed (0 on the flat bed)."""
        return -(-world_size // self.ranks_per_host) if self.ranks_per_host else 0

    def rate_of(self, rank: int, rate_mbit: float) -> float:
        """The rank's own link: the bed's rate, or the slow rank's."""
        return self.slow_mbit if rank == self.slow_rank else rate_mbit


FLAT = Layout()


def rank_addr(rank: int) -> str:
    return SUBNET.format(host=rank + 1).split("/")[0]


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True)


def _shape(dev: str, rate_mbit: float, netns: str | None = None) -> None:
    prefix = ["ip", "netns", "exec", netns] if netns else []
    subprocess.run([*prefix, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                    f"{rate_mbit:g}mbit", *TBF], check=True, capture_output=True)


def _names(cmd: list[str]) -> list[str]:
    """The names ``ip`` lists (one per line, the name first) that are the bed's."""
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.split()]
    return [n.split("@")[0].rstrip(":") for n in names if n.startswith(PREFIX)]


def teardown(world_size: int = 0) -> None:
    """Remove every piece of any bed (namespaces take their veth ends along,
    a veth end its peer); quiet when absent. ``world_size``: kept for
    callers; every name with the bed's prefix goes, whatever shape made it."""
    for ns in _names(["ip", "netns", "list"]):
        _ip("netns", "del", ns, check=False)
    for r in range(world_size):
        _ip("netns", "del", NETNS.format(rank=r), check=False)
    for dev in _names(["ip", "-o", "-br", "link", "show"]):
        _ip("link", "del", dev, check=False)


def _add_link(up: str, down: str, bridge: str, rate_mbit: float) -> None:
    """A veth pair, ``up`` on ``bridge``, ``down`` left in the root namespace;
    ``up`` shaped at ``rate_mbit`` (toward ``down``'s side)."""
    _ip("link", "add", up, "type", "veth", "peer", "name", down)
    _ip("link", "set", up, "master", bridge)
    _ip("link", "set", up, "up")
    _shape(up, rate_mbit)


def _add_bridge(name: str) -> None:
    _ip("link", "add", name, "type", "bridge")
    _ip("link", "set", name, "up")


@contextmanager
def bed(world_size: int, rate_mbit: float, layout: Layout = FLAT) -> Iterator[None]:
    """The namespaces, veths and bridges of ``world_size`` ranks in
    ``layout``, links shaped on both ends; removed on every exit."""
    teardown(world_size)
    try:
        _add_bridge(BRIDGE)
        for h in range(layout.hosts(world_size)):
            host_bridge = HOST_BRIDGE.format(host=h)
            _add_bridge(host_bridge)
            # the uplink: toward the host shaped on the spine's end, from it on the host's
            _add_link(UPLINK_SPINE_END.format(host=h), UPLINK_HOST_END.format(host=h), BRIDGE,
                      layout.uplink_mbit)
            host_end = UPLINK_HOST_END.format(host=h)
            _ip("link", "set", host_end, "master", host_bridge)
            _ip("link", "set", host_end, "up")
            _shape(host_end, layout.uplink_mbit)
        for r in range(world_size):
            ns, host, inner = NETNS.format(rank=r), HOST_END.format(rank=r), \
                RANK_END.format(rank=r)
            on = layout.host_of(r)
            rate = layout.rate_of(r, rate_mbit)
            _ip("netns", "add", ns)
            _add_link(host, inner, BRIDGE if on is None else HOST_BRIDGE.format(host=on), rate)
            _ip("link", "set", inner, "netns", ns)
            _ip("-n", ns, "addr", "add", SUBNET.format(host=r + 1), "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _shape(inner, rate, ns)  # from the rank: its egress (the bridge's end: its ingress)
        yield
    finally:
        teardown(world_size)


# The uplinks' rate as a ring moves data across them: both ways at once in
# rounds, each round a chunk each way and both received before the next, as
# gloo's ring steps. Free-running streams both ways are no measure: each
# one's ACKs queue behind the other's data in the shapers, and one stream
# starves the other (measured: 10-95 Mbit/s on 100 Mbit/s uplinks in 3 s
# probes, the other stream at 95), where a ring's step waits for both.
UPLINK_PROBE_S = 3.0  # hundreds of tbf buckets at 100 Mbit/s
UPLINK_PROBE_WARMUP_S = 0.5  # slow start and the first burst, not counted
UPLINK_PROBE_CHUNK = 1 << 20  # a 4 MB bucket's ring step on 4 ranks
UPLINK_PROBE_PORT = 29611
_PROBE_EXCHANGE = """
import socket, sys, threading, time
role, addr, port, chunk, warm, rounds = sys.argv[1:7]
port, chunk, warm, rounds = int(port), int(chunk), int(warm), int(rounds)
if role == "listen":
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port)); srv.listen(1); conn, _ = srv.accept()
else:
    for _ in range(200):
        try:
            conn = socket.create_connection((addr, port)); break
        except OSError:
            time.sleep(0.05)
payload = bytes(chunk)

def receive():
    left = chunk
    while left:
        data = conn.recv(min(left, 1 << 16))
        if not data:
            sys.exit("the peer closed the probe's connection")
        left -= len(data)

for k in range(warm + rounds):
    if k == warm:
        begin = time.monotonic()
    sender = threading.Thread(target=conn.sendall, args=(payload,)); sender.start()
    receive(); sender.join()
print(rounds * chunk * 8 / 1e6 / (time.monotonic() - begin))
"""


def uplink_probe_mbit(world_size: int, rate_mbit: float, layout: Layout) -> float | None:
    """The rate (Mbit/s, each way) a ring moves data across the two-tier
    bed's uplinks: host 0's last rank and the next host's first exchange
    chunks both ways in rounds (``_PROBE_EXCHANGE``), as gloo's ring steps.
    What a user gives ``--inter-host-bandwidth`` is the rate they measure of
    their network (nccl-tests, iperf), not the rate its shapers are set to.
    None on a bed of one host."""
    if layout.hosts(world_size) < 2:
        return None
    left, right = layout.ranks_per_host - 1, layout.ranks_per_host
    # both ends run the same rounds (a time limit each would part them)
    per_s = layout.uplink_mbit * 1e6 / 8 / UPLINK_PROBE_CHUNK
    args = [str(UPLINK_PROBE_PORT), str(UPLINK_PROBE_CHUNK),
            str(math.ceil(UPLINK_PROBE_WARMUP_S * per_s)), str(math.ceil(UPLINK_PROBE_S * per_s))]
    with bed(world_size, rate_mbit, layout):
        ends = [subprocess.Popen(["ip", "netns", "exec", NETNS.format(rank=rank),
                                  sys.executable, "-c", _PROBE_EXCHANGE, role, rank_addr(right),
                                  *args], stdout=subprocess.PIPE, text=True)
                for rank, role in ((right, "listen"), (left, "connect"))]
        timeout = 10 * (UPLINK_PROBE_WARMUP_S + UPLINK_PROBE_S)
        try:
            rates = [float(end.communicate(timeout=timeout)[0].strip() or 0) for end in ends]
        finally:
            for end in ends:
                if end.poll() is None:
                    end.kill()
                    end.wait()
    return min(rates) if all(r > 0 for r in rates) else None


def rank_command(rank: int, cmd: Sequence[str], niceness: int = 0) -> list[str]:
    """``cmd`` run inside rank ``rank``'s namespace, gloo on its link, at
    ``niceness`` (negative: ahead of the machine's other processes)."""
    return ["nice", "-n", str(niceness), "ip", "netns", "exec", NETNS.format(rank=rank), "env",
            f"GLOO_SOCKET_IFNAME={RANK_END.format(rank=rank)}", *cmd]


def run_ranks(commands: list[list[str]], log_dir: Path, timeout_s: float) -> list[int]:
    """Start every rank's command (each in its own process group), wait for
    all; on timeout or interruption every group is killed. Return codes."""
    log_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    try:
        for r, cmd in enumerate(commands):
            log = (log_dir / f"rank{r}.log").open("w")
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))
            log.close()
        deadline = time.monotonic() + timeout_s
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except BaseException:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        raise
    return [p.returncode for p in procs]


def fresh_run_dir(out: Path) -> None:
    """Empty a run's folder before it records: every later step (convert,
    the replay) skips work whose output exists, so an earlier bench's traces
    and .et left there would be measured in place of this run's."""
    shutil.rmtree(out, ignore_errors=True)


def record_on_bed(commands: list[list[str]], rate_mbit: float, log_dir: Path, timeout_s: float,
                  label: str, layout: Layout = FLAT) -> float:
    """Run one recording's ranks (``commands``, one per rank, from
    ``rank_command``) on a bed of that many ranks at ``rate_mbit`` in
    ``layout``; returns the cores other processes used meanwhile. Raises on
    a failed rank."""
    meter = OthersMeter().start()
    with bed(len(commands), rate_mbit, layout):
        codes = run_ranks(commands, log_dir, timeout_s)
    other = meter.cores()
    if any(codes):
        raise RuntimeError(f"{label}: ranks exited {codes}; logs in {log_dir}")
    return other


def busy_seconds() -> float:
    """Busy CPU time of the whole machine so far (all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / CLK_TCK


def children_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@dataclass
class OthersMeter:
    """Cores other processes used on average since ``start`` (the machine's
    busy time less our own finished children's)."""

    busy0: float = 0.0
    ours0: float = 0.0
    t0: float = 0.0

    def start(self) -> OthersMeter:
        self.busy0, self.ours0, self.t0 = busy_seconds(), children_seconds(), time.monotonic()
        return self

    def cores(self) -> float:
        wall = max(time.monotonic() - self.t0, 1e-9)
        return max(0.0, (busy_seconds() - self.busy0) - (children_seconds() - self.ours0)) / wall


def wait_quiet(max_other: float, patience_s: float) -> float:
    """Wait (at most ``patience_s``) for a second in which other processes use
    at most ``max_other`` cores; returns the last second's figure."""
    deadline = time.monotonic() + patience_s
    while True:
        meter = OthersMeter().start()
        time.sleep(QUIET_WINDOW_S)
        other = meter.cores()
        if other <= max_other or time.monotonic() > deadline:
            return other
