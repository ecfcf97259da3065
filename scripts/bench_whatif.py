"""What-ifs checked against measurements (``make bench-whatif``).

Records a 2-rank DDP step over gloo on CPU with ``pt2chakra collect --ddp
gloo`` at several loopback bandwidths (``tc qdisc ... tbf``, root only) and
at two compute settings (1 and 2 micro-batches of 256 per step: the same
ops twice, gradients all-reduced once), converts every
recording, predicts every setting from every other one with ``simulate
--calibrate --bandwidth-scale`` / ``--cpu-scale`` (and without
``--calibrate``, for comparison), and prints predicted against measured,
median and spread over the recorded steps.

The machine may be shared: each run notes the CPU time other processes used
meanwhile (``/proc/stat`` busy time less our own children's), and a run
whose neighbours used more than ``--max-other`` cores on average is recorded
again (at most ``--retries`` times), else kept and flagged.

Without root or ``tc`` (or torch) it prints one line and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_machine as machine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PT2CHAKRA = [sys.executable, "-m", "pt2chakra"]
# The model: 4 square layers of width 1024 are 16.8 MB of gradients, in
# 4 MB buckets (4 all-reduces of one layer each), so that at these rates
# communication is half to most of the step.
HIDDEN, LAYERS, BUCKET_MB = 1024, 4, 4.0
BATCH = 64
# The compute settings: 1 and 2 micro-batches per step (gradient
# accumulation), communication unchanged. The second micro-batch runs the
# same ops on the same shapes, so the factor is known before measuring
# (a batch change is not: at 64 -> 128 the step's CPU time hardly moved,
# at 256 -> 512 the matmuls took 1.79x). At batch 256 the micro-batches are
# ~95 % of the CPU time, so scaling every CPU op (the optimizer and DDP's
# copies, which do not repeat, included) errs by little.
COMPUTE_BATCH = 256
# Compute steps vary by +-20 % from one to the next on this shared machine
# (neighbours' load the guest cannot see): twice the steps per run there.
COMPUTE_STEPS = 8
# One DDP bucket for the compute settings (more than the 16.8 MB of
# gradients): the all-reduce then follows the backward pass instead of
# running beside it. Gloo's transfer threads copy and reduce on the same 2
# cores as the matmuls, a contention the replay does not model (each thread
# is its own core there), and which varied the step by +-20 % run to run.
COMPUTE_BUCKET_MB = 32.0
COMPUTE_ACCUMULATE = (1, 2)
# Rates at which the shaped link, not the hosts' copying, limits a gloo
# transfer: at 8 Gbit/s a 4 MB all-reduce already runs at ~0.4 of the
# 0.5 GB/s the link allows each rank (docs/WHAT_IFS.md).
RATES_GBIT = (4.0, 2.0, 1.0)
UNSHAPED = 0.0  # a rate of 0: loopback as it is (no qdisc)
# The compute settings are recorded on unshaped loopback: the transfers are
# then short, so gloo's worker threads (which copy, reduce and run the TCP
# stack on the same 2 cores) steal little from the matmuls. At 4 Gbit/s they
# overlap the whole backward pass and slow it unevenly (docs/WHAT_IFS.md).
COMPUTE_RATE_GBIT = UNSHAPED
# tbf as the issue found it to work here (netem does not): a burst above
# loopback's 64 KB packets, a queue long enough never to drop.
TBF = ("burst", "256kb", "latency", "100ms")
# Neighbours using more than this many cores on average (of the machine's)
# during a run make it contaminated.
MAX_OTHER_CORES = 0.1
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Before each run, wait this long at most for a quiet second (sampled over
# QUIET_WINDOW_S): on a shared machine the neighbours' load comes and goes.
QUIET_PATIENCE_S = 20.0
QUIET_WINDOW_S = 1.0
ACCEPT_PCT = 10.0
# The ops one micro-batch runs (its forward, loss and backward), which the
# compute settings repeat: ``simulate --cpu-scale X --cpu-scale-ops`` scales
# the time inside them and leaves the optimizer step, DDP's bucket copies and
# the gaps around them alone. Chosen from what the model does, not fitted.
MODEL_OPS = r"DistributedDataParallel\.forward|aten::mse_loss|autograd::engine::evaluate_function"
RUN_NOTE = "run.json"
MIN_CLEAN_RUNS = 2  # fewer clean runs than this: the least contaminated fill in, flagged  # per run folder: setting and the neighbours' CPU


@dataclass(frozen=True, slots=True)
class Setting:
    rate_gbit: float
    batch: int
    accumulate: int = 1  # micro-batches per step
    bucket_mb: float = BUCKET_MB

    @property
    def work(self) -> int:
        """Samples per step: compute is proportional to it."""
        return self.batch * self.accumulate

    @property
    def label(self) -> str:
        rate = f"{self.rate_gbit:g} Gbit/s" if self.rate_gbit != UNSHAPED else "unshaped"
        micro = f" x{self.accumulate}" if self.accumulate > 1 else ""
        return f"{rate}, batch {self.batch}{micro}"


@dataclass(slots=True)
class Recording:
    """One recorded step: its .et files and what the trace measured."""

    ets: list[str]
    measured_us: float
    compute_us: float  # the ranks' CPU ops' own time, summed


@dataclass(slots=True)
class Measured:
    setting: Setting
    recordings: list[Recording] = field(default_factory=list)
    other_cores: list[float] = field(default_factory=list)  # per kept run
    flagged: bool = False  # a contaminated run had to be kept

    def median(self) -> float:
        return statistics.median(r.measured_us for r in self.recordings)

    def spread(self) -> tuple[float, float]:
        values = [r.measured_us for r in self.recordings]
        return min(values), max(values)


# --------------------------------------------------------------------------
# Preconditions and the shaped loopback
# --------------------------------------------------------------------------


def why_not() -> str | None:
    """None when the benchmark can run here, else the one-line reason."""
    if not sys.platform.startswith("linux"):
        return "needs Linux (tc, /proc/stat)"
    if os.geteuid() != 0:
        return "needs root to shape loopback with tc"
    if shutil.which("tc") is None:
        return "needs tc (iproute2)"
    try:
        import torch.distributed as dist
    except ImportError:
        return "needs torch"
    if not dist.is_available() or not dist.is_gloo_available():
        return "needs a torch build with gloo"
    shown = subprocess.run(["tc", "qdisc", "show", "dev", "lo"], capture_output=True, text=True)
    if shown.returncode != 0:
        return f"tc cannot read loopback: {shown.stderr.strip()}"
    if "tbf" in shown.stdout or "netem" in shown.stdout:
        return "loopback is already shaped by someone else; not touching it"
    return None


def _unshape() -> None:
    subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], capture_output=True)


@contextmanager
def shaped(rate_gbit: float) -> Iterator[None]:
    """Loopback limited to ``rate_gbit`` inside the block; removed on every
    exit. ``UNSHAPED``: loopback left alone."""
    if rate_gbit == UNSHAPED:
        yield
        return
    subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate",
                    f"{rate_gbit:g}gbit", *TBF], check=True, capture_output=True)
    try:
        yield
    finally:
        _unshape()


# --------------------------------------------------------------------------
# Recording, with the neighbours' CPU time
# --------------------------------------------------------------------------


def _busy_seconds() -> float:
    """Busy CPU time of the whole machine so far (all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / CLK_TCK


def _children_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def record(setting: Setting, out: Path, steps: int) -> tuple[list[list[Path]], float]:
    """One ``collect`` run: per recorded step, the ranks' host ET paths; and
    the cores other processes used on average meanwhile."""
    cmd = [*PT2CHAKRA, "collect", "--ddp", "gloo", "--out-dir", str(out), "--name", "w",
           "--hidden", str(HIDDEN), "--layers", str(LAYERS), "--batch", str(setting.batch),
           "--accumulate", str(setting.accumulate),
           "--bucket-mb", str(setting.bucket_mb), "--steps", str(steps), "-q"]
    busy0, ours0, t0 = _busy_seconds(), _children_seconds(), time.monotonic()
    with shaped(setting.rate_gbit):
        returncode, stderr = _run_group(cmd)
    wall = time.monotonic() - t0
    other = max(0.0, (_busy_seconds() - busy0) - (_children_seconds() - ours0)) / wall
    if returncode != 0:
        tail = stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"collect failed at {setting.label}: {tail[0]}")
    (out / RUN_NOTE).write_text(json.dumps({"rate_gbit": setting.rate_gbit,
                                            "batch": setting.batch,
                                            "accumulate": setting.accumulate,
                                            "bucket_mb": setting.bucket_mb,
                                            "other_cores": other}))
    return recorded_steps(out), other


def _run_group(cmd: list[str]) -> tuple[int, str]:
    """Run ``cmd`` in its own process group; on any interruption the whole
    group (collect and the rank processes it spawned) is killed."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _out, err = proc.communicate()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return proc.returncode, err


def recorded_steps(out: Path) -> list[list[Path]]:
    """Per recorded step of one run, the ranks' host ETs."""
    hosts = sorted(out.glob("w.*rank*.host_et.json.gz"))
    steps: dict[str, list[Path]] = {}
    for h in hosts:
        steps.setdefault(h.name.split(".rank")[0], []).append(h)
    return [steps[k] for k in sorted(steps)]


def reuse(folder: Path, settings: list[Setting], runs: int, max_other: float,
          ) -> list[Measured]:
    """The runs a previous ``--out`` kept (their notes say setting and
    contamination): the table again without recording."""
    found: dict[Setting, list[tuple[float, list[list[Path]]]]] = {s: [] for s in settings}
    for note in sorted(folder.glob(f"*/{RUN_NOTE}")):
        d = json.loads(note.read_text())
        s = Setting(float(d["rate_gbit"]), int(d["batch"]), int(d.get("accumulate", 1)),
                    float(d.get("bucket_mb", BUCKET_MB)))
        if s in found:
            found[s].append((float(d["other_cores"]), recorded_steps(note.parent)))
    return [_keep(s, [r for r in found[s] if r[0] <= max_other],
                  [r for r in found[s] if r[0] > max_other], runs) for s in settings]


def convert_step(hosts: list[Path]) -> Recording:
    """Convert one recorded step (each rank; once) and read what it measured."""
    from pt2chakra import convert
    from pt2chakra.simulation import simulate

    ets = []
    for host in hosts:
        et = str(host).replace(".host_et.json.gz", ".et")
        if not os.path.exists(et):
            convert(host, str(host).replace(".host_et.", ".kineto."), et)
        ets.append(et)
    result = simulate(ets)
    return Recording(ets=ets, measured_us=result.measured_step_us,
                     compute_us=sum(map(_cpu_op_time, ets)))


def _cpu_op_time(et: str) -> float:
    """The rank's CPU ops' own (exclusive) time: what compute costs it."""
    from pt2chakra.chakra.io import read_et
    from pt2chakra.chakra.records import NodeType

    _meta, nodes = read_et(et)
    return float(sum(n.duration_micros for n in nodes if n.type == NodeType.COMP_NODE))


def wait_quiet(max_other: float, patience_s: float) -> float:
    """Wait (at most ``patience_s``) for a second in which other processes
    use at most ``max_other`` cores; returns the last second's figure."""
    deadline = time.monotonic() + patience_s
    while True:
        busy0, ours0, t0 = _busy_seconds(), _children_seconds(), time.monotonic()
        time.sleep(QUIET_WINDOW_S)
        other = ((_busy_seconds() - busy0) - (_children_seconds() - ours0)) / \
            (time.monotonic() - t0)
        if other <= max_other or time.monotonic() > deadline:
            return other


def measure_all(settings: list[Setting], compute: list[Setting], work: Path,
                args: argparse.Namespace,
                ) -> list[Measured]:
    """``args.runs`` clean runs of ``args.steps`` recorded steps per setting.
    Settings take turns, run by run, so that a slow drift of the machine's
    load falls on all of them alike; a contaminated run is redone (at most
    ``args.retries`` times per setting), else the least contaminated are kept."""
    kept: dict[Setting, list[tuple[float, list[list[Path]]]]] = {s: [] for s in settings}
    spare: dict[Setting, list[tuple[float, list[list[Path]]]]] = {s: [] for s in settings}
    for attempt in range(args.runs + args.retries):
        for s in settings:
            if len(kept[s]) == args.runs or len(spare[s]) > args.retries:
                continue
            wait_quiet(args.max_other, args.patience)
            out = work / f"r{s.rate_gbit:g}_b{s.batch}x{s.accumulate}_{attempt}"
            steps = args.compute_steps if s in compute else args.steps
            hosts, other = record(s, out, steps)
            clean = other <= args.max_other
            (kept if clean else spare)[s].append((other, hosts))
            print(f"  {s.label}: run {attempt}: others used {other:.2f} cores"
                  + ("" if clean else " (contaminated)"), flush=True)
    return [_keep(s, kept[s], spare[s], args.runs) for s in settings]


def _keep(s: Setting, clean: list[tuple[float, list[list[Path]]]],
          spare: list[tuple[float, list[list[Path]]]], runs: int) -> Measured:
    """Convert the clean runs; contaminated ones are discarded unless fewer
    than ``MIN_CLEAN_RUNS`` are clean (then the least contaminated fill up
    to that, flagged)."""
    m = Measured(s)
    chosen = clean[:runs]
    if len(chosen) < MIN_CLEAN_RUNS:
        chosen += sorted(spare, key=lambda x: x[0])[:MIN_CLEAN_RUNS - len(chosen)]
        m.flagged = True
    for other, hosts_per_step in chosen:
        m.other_cores.append(other)
        m.recordings += [r for r in map(_usable_step, hosts_per_step) if r is not None]
    return m


def _usable_step(hosts: list[Path]) -> Recording | None:
    """``convert_step``, or None (with one line) for a step pt2chakra refuses."""
    from pt2chakra import InputError

    try:
        return convert_step(hosts)
    except InputError as e:
        print(f"  left out: {e}", flush=True)
        return None


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


def predict(src: Measured, bandwidth_scale: float, cpu_scale: float,
            calibrate: bool, cpu_scale_ops: str | None = None) -> list[float]:
    """The predicted step of every recording of ``src`` under the what-if."""
    from pt2chakra.simulation import SimulationOptions, simulate

    out = []
    for rec in src.recordings:
        options = SimulationOptions(calibrate=calibrate, bandwidth_scale=[bandwidth_scale],
                                    cpu_scale=[cpu_scale], cpu_scale_ops=cpu_scale_ops)
        result = simulate(rec.ets, options)
        row = result.what_if[0] if result.what_if else None
        out.append(row.predicted_step_us if row else result.predicted_step_us)
    return out


@dataclass(frozen=True, slots=True)
class Row:
    kind: str
    src: Setting
    dst: Setting
    knob: str
    measured: float
    measured_spread: tuple[float, float]
    calibrated: list[float]
    plain: list[float]

    def err(self, values: list[float]) -> float:
        return (statistics.median(values) / self.measured - 1) * 100


def _compute_us(m: Measured) -> float:
    return statistics.median(r.compute_us for r in m.recordings)


def rows(results: list[Measured], compute: list[Setting]) -> list[Row]:
    """Every network pair (each direction) at the base batch, and both
    directions of each compute pair (nominal work ratio, then the measured
    compute ratio)."""
    net = [m for m in results if m.setting.batch == BATCH and m.setting not in compute]
    comp = [m for m in results if m.setting in compute]
    out = []
    for a in net:
        for b in net:
            x = b.setting.rate_gbit / a.setting.rate_gbit
            out.append(Row("network", a.setting, b.setting, f"bandwidth x{x:g}", b.median(),
                           b.spread(), predict(a, x, 1.0, True), predict(a, x, 1.0, False)))
    for a in comp:
        for b in comp:
            if a is b:
                continue
            x = b.setting.work / a.setting.work
            for kind, label, ops in (("compute", f"cpu x{x:g}, model ops", MODEL_OPS),
                                     ("compute-all", f"cpu x{x:g}, every CPU op", None)):
                out.append(Row(kind, a.setting, b.setting, label, b.median(), b.spread(),
                               predict(a, 1.0, x, True, ops), predict(a, 1.0, x, False, ops)))
    return out


def print_table(results: list[Measured], table: list[Row]) -> None:
    print("\nmeasured step per setting (median over recorded steps, [min - max], n; "
          "both ranks' CPU ops' own time, median; others' CPU per kept run)")
    for m in results:
        lo, hi = m.spread()
        cores = ", ".join(f"{c:.2f}" for c in m.other_cores)
        print(f"  {m.setting.label:26s} {m.median() / 1e3:8.1f} ms  [{lo / 1e3:.1f} - "
              f"{hi / 1e3:.1f}]  n={len(m.recordings)}  cpu ops {_compute_us(m) / 1e3:.1f} ms"
              f"  others {cores} cores"
              + ("  (contaminated runs kept)" if m.flagged else ""))
    print("\npredicted from -> measured at: medians over the source's recorded steps "
          "[min - max]; error of the median vs the measured median")
    print(f"  {'kind':11s} {'from':26s} {'to':26s} {'what-if':24s} {'measured ms':>18s} "
          f"{'calibrated ms':>22s} {'err':>7s} {'uncalibrated ms':>22s} {'err':>7s}")
    for r in table:
        cal, plain = r.calibrated, r.plain
        print(f"  {r.kind:11s} {r.src.label:26s} {r.dst.label:26s} {r.knob:24s} "
              f"{r.measured / 1e3:7.1f} [{r.measured_spread[0] / 1e3:.0f}-"
              f"{r.measured_spread[1] / 1e3:.0f}] "
              f"{statistics.median(cal) / 1e3:9.1f} [{min(cal) / 1e3:.0f}-{max(cal) / 1e3:.0f}] "
              f"{r.err(cal):+6.1f}% "
              f"{statistics.median(plain) / 1e3:9.1f} [{min(plain) / 1e3:.0f}-"
              f"{max(plain) / 1e3:.0f}] {r.err(plain):+6.1f}%")
    for kind in ("network", "compute", "compute-all"):
        chosen = [r for r in table if r.kind == kind and r.src != r.dst]
        for model, pick in (("calibrated", lambda r: r.calibrated),
                            ("uncalibrated", lambda r: r.plain)):
            errs = [abs(r.err(pick(r))) for r in chosen]
            if errs:
                inside = sum(e <= ACCEPT_PCT for e in errs)
                print(f"{kind}: {model} what-ifs within {ACCEPT_PCT:g} %: {inside} of "
                      f"{len(errs)} (worst {max(errs):.1f} %)")


def _recorded(results: list[Measured], folder: Path) -> list[Measured]:
    """The settings ``folder`` holds recordings of; one line for the others
    (recorded by another version of this benchmark, or not at all)."""
    missing = [m.setting.label for m in results if not m.recordings]
    if missing:
        print(f"bench-whatif: {folder} has no recordings of: {'; '.join(missing)}")
    return [m for m in results if m.recordings]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="keep the recordings here (default: a temp dir)")
    ap.add_argument("--runs", type=int, default=3, help="clean collect runs per setting")
    ap.add_argument("--steps", type=int, default=4, help="recorded steps per run")
    ap.add_argument("--compute-steps", type=int, default=COMPUTE_STEPS,
                    help="recorded steps per run of the compute settings")
    ap.add_argument("--retries", type=int, default=2, help="extra runs per setting when "
                    "contaminated")
    ap.add_argument("--max-other", type=float, default=MAX_OTHER_CORES,
                    help="cores other processes may use during a clean run")
    ap.add_argument("--patience", type=float, default=QUIET_PATIENCE_S,
                    help="seconds to wait for a quiet machine before each run")
    ap.add_argument("--reuse", type=Path, metavar="DIR",
                    help="print the table from the runs an earlier --out DIR kept "
                    "(no recording, no root needed)")
    ap.add_argument("--rates", type=float, nargs="*", default=list(RATES_GBIT),
                    metavar="GBIT", help="loopback rates for the network settings "
                    "(none: the compute settings only)")
    ap.add_argument("--accumulate", type=int, nargs="*", default=list(COMPUTE_ACCUMULATE),
                    metavar="K", help="micro-batches per step of the compute settings "
                    "(none: the network settings only)")
    ap.add_argument("--compute-batch", type=int, default=COMPUTE_BATCH, metavar="B",
                    help="batch size of the compute settings")
    ap.add_argument("--compute-rate", type=float, default=COMPUTE_RATE_GBIT, metavar="GBIT",
                    help="loopback rate for the compute settings (0: unshaped)")
    args = ap.parse_args(argv)
    compute = [Setting(args.compute_rate, args.compute_batch, k, COMPUTE_BUCKET_MB)
               for k in args.accumulate]
    settings = [Setting(r, BATCH) for r in args.rates] + compute
    if args.reuse:
        results = _recorded(reuse(args.reuse, settings, args.runs, args.max_other), args.reuse)
        if not results:
            return 2
        print_table(results, rows(results, compute))
        return 0
    reason = why_not()
    if reason:
        print(f"bench-whatif: skipped: {reason}")
        return 0
    machine.unwind_on_signals()  # the qdisc is always removed
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench_whatif.") as tmp:
        work = args.out or Path(tmp)
        try:
            results = measure_all(settings, compute, work, args)
        except KeyboardInterrupt:
            print("bench-whatif: interrupted; loopback unshaped")
            return 130
        finally:
            _unshape()
        print_table(results, rows(results, compute))
    print(f"\n{time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
