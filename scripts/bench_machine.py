"""The scale-out benchmark's test bed: one network namespace per rank.

Every rank gets its own namespace, joined to one Linux bridge by a veth
pair whose two ends are both shaped with ``tc ... tbf`` (each rank its own
full-duplex link, as on a switch; loopback is left alone, since one qdisc on
``lo`` is one bus that every rank shares). ``GLOO_SOCKET_IFNAME`` names the
namespace's end, so gloo's traffic crosses the shaped link. Also the
machine's CPU accounting: what other processes used during a run (the
machine may be shared).

Used by ``scripts/bench_scale.py``; needs Linux, root, ``ip`` and ``tc``.
"""

from __future__ import annotations

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
BRIDGE = "p2cbr"
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


def rank_addr(rank: int) -> str:
    return SUBNET.format(host=rank + 1).split("/")[0]


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True)


def _shape(dev: str, rate_mbit: float, netns: str | None = None) -> None:
    prefix = ["ip", "netns", "exec", netns] if netns else []
    subprocess.run([*prefix, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                    f"{rate_mbit:g}mbit", *TBF], check=True, capture_output=True)


def teardown(world_size: int) -> None:
    """Remove the bed (namespaces take their veth ends along); quiet when absent."""
    for r in range(world_size):
        _ip("netns", "del", NETNS.format(rank=r), check=False)
        _ip("link", "del", HOST_END.format(rank=r), check=False)
    _ip("link", "del", BRIDGE, check=False)


@contextmanager
def bed(world_size: int, rate_mbit: float) -> Iterator[None]:
    """The namespaces, veths and bridge of ``world_size`` ranks, links shaped
    to ``rate_mbit`` on both ends; removed on every exit."""
    teardown(world_size)
    try:
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("link", "set", BRIDGE, "up")
        for r in range(world_size):
            ns, host, inner = NETNS.format(rank=r), HOST_END.format(rank=r), \
                RANK_END.format(rank=r)
            _ip("netns", "add", ns)
            _ip("link", "add", host, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", ns)
            _ip("link", "set", host, "master", BRIDGE)
            _ip("link", "set", host, "up")
            _ip("-n", ns, "addr", "add", SUBNET.format(host=r + 1), "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _shape(host, rate_mbit)  # toward the rank: its ingress
            _shape(inner, rate_mbit, ns)  # from the rank: its egress
        yield
    finally:
        teardown(world_size)


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


def record_on_bed(commands: list[list[str]], rate_mbit: float, log_dir: Path, timeout_s: float,
                  label: str) -> float:
    """Run one recording's ranks (``commands``, one per rank, from
    ``rank_command``) on a bed of that many ranks at ``rate_mbit``; returns
    the cores other processes used meanwhile. Raises on a failed rank."""
    meter = OthersMeter().start()
    with bed(len(commands), rate_mbit):
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
