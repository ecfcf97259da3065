"""Many ranks in one call: the same conversion as ``convert``, once per rank.

    from pt2chakra.conversion.many_ranks import RankTemplates, convert_ranks, parse_ranks
    t = RankTemplates("d/rank{rank}.host_et.json.gz", "d/rank{rank}.kineto.json.gz", "o/{rank}.et")
    result = convert_ranks(t.jobs(parse_ranks("0-7")), workers=2)
    # Kineto alone (no host ET), as ``convert --device-trace`` per rank:
    t = RankTemplates(None, "d/rank{rank}.kineto.json.gz", "o/k.{rank}.et")

Each rank is one independent ``convert`` call (so its ``.et`` is byte-identical
to converting that rank alone), run in a local process pool or, with
``ray_address``, as Ray tasks on a cluster. ``{rank}`` in a template is the
rank number; it only names files: the rank recorded in each ``.et`` is the one
its trace says, as for a single ``convert``. A trace that records another rank
than its files' number is refused (that rank fails) unless ``force``; each
outcome names the rank its ``.et`` records.

Failure policy: ranks are independent, so a rank that fails (bad input, a
cycle, an unreadable file) gets one line naming it and the other ranks'
outputs are still written. Rerun the failed ranks alone with ``--ranks``. A
failed rank never leaves a partial output.

Outputs: every rank's files are staged (hidden temp files named by the rank's
token) and committed together by this process when the last rank is done;
Ctrl-C or SIGTERM stops the workers at once (queued ranks cancelled, running
ones terminated), removes every rank's temp files and leaves the previous
outputs as they were. Every output and input path of every rank is checked
against all the others before any work (``atomic.check_outputs``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pt2chakra.atomic import StagedOutputs, check_outputs, new_token, remove_temps
from pt2chakra.conversion.linker import RANKS_OPTION
from pt2chakra.conversion.progress import Stages
from pt2chakra.conversion.step import STEP_LAST, StepChoice
from pt2chakra.errors import InputError

log = logging.getLogger(__name__)

RANK_FIELD = "{rank}"
# A rank spec naming more ranks than this is a typo (e.g. "0-1000000"), not a
# job: the largest recorded jobs have tens of thousands of ranks, and each
# rank is one conversion of seconds to minutes.
MAX_RANKS = 65536
# After Ctrl-C / SIGTERM, how long running workers get to remove their temp
# files before they are killed (the command must end within 2 s).
STOP_GRACE_S = 1.0
# How long joining a Ray cluster may try to reach it (Ray's own wait is minutes).
RAY_CONNECT_TIMEOUT_S = 5.0
# How often a wait of the main thread wakes up (signals are handled between).
_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class RankJob:
    """One rank's conversion: its inputs and outputs, templates filled in."""

    rank: int
    host_trace: str | None  # None: the Kineto trace alone, as ``convert --device-trace``
    device_trace: str | None
    output: str
    report: str | None = None
    # Names the rank's temp files (``atomic.temp_path``), so that the process
    # that commits can remove them after stopping a worker.
    token: str = field(default_factory=new_token)

    @property
    def outputs(self) -> list[str]:
        return [p for p in (self.output, self.report) if p is not None]


@dataclass(frozen=True, slots=True)
class RankOptions:
    """Options every rank's ``convert`` gets (the single-rank CLI's flags)."""

    break_cycles: bool = False
    force: bool = False  # convert pairs that look like two ranks or runs
    repair: bool = False  # read host ETs cut off mid-array
    step: StepChoice = STEP_LAST  # a Kineto-only rank's measured step (convert --step)


@dataclass(frozen=True, slots=True)
class RankOutcome:
    """What one rank's conversion did: ``error`` is its one-line failure, or
    None. ``rank``: the one its ``.et`` records (else its number in the file
    names, ``named``)."""

    rank: int
    output: str
    nodes: int
    seconds: float
    error: str | None = None
    staged: dict[str, str] = field(default_factory=dict)  # target -> temp, to commit
    named: int | None = None  # the file names' rank, when the trace records another

    def line(self) -> str:
        if self.error is not None:
            return f"rank {self.rank}: {self.error}"
        named = f" (named {self.named} by {RANKS_OPTION})" if self.named is not None else ""
        return (f"rank {self.rank}{named}: {self.output}: {self.nodes} nodes "
                f"({self.seconds:.2f} s)")


@dataclass(frozen=True, slots=True)
class ManyRanksResult:
    """Every rank's outcome, in rank order."""

    outcomes: list[RankOutcome]
    runner: str
    # ``check_collectives``: where the ranks disagree about their collectives
    # (one line), or None; the outputs were then not kept unless ``allow_mismatch``.
    mismatch: str | None = None
    rolled_back: bool = False  # the mismatch was refused: no output was kept

    @property
    def failed(self) -> list[RankOutcome]:
        return [o for o in self.outcomes if o.error is not None]

    @property
    def outputs(self) -> list[str]:
        """The ``.et`` files written (none when a mismatch rolled them back)."""
        return [o.output for o in self.outcomes if o.error is None and not self.rolled_back]

    def summary(self) -> str:
        lines = [o.line() for o in self.outcomes if o.error is None]
        lines.append(f"{len(self.outcomes) - len(self.failed)} of {len(self.outcomes)} ranks "
                     f"converted ({self.runner})")
        return "\n".join(lines)


def parse_ranks(spec: str) -> list[int]:
    """``"0-3,7,9-10"`` -> ``[0, 1, 2, 3, 7, 9, 10]`` (sorted, each once)."""
    ranks: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        lo_text, dash, hi_text = part.partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if dash else lo
        except ValueError:
            raise InputError(RANKS_OPTION, f"bad rank range {part!r} in {spec!r}; "
                             "expected e.g. 0-7,9") from None
        if lo < 0 or hi < lo:
            raise InputError(RANKS_OPTION, f"bad rank range {part!r} in {spec!r}; "
                             "ranks are >= 0 and ranges go low-high")
        if hi - lo + 1 + len(ranks) > MAX_RANKS:
            raise InputError(RANKS_OPTION, f"{spec!r} names more than {MAX_RANKS} ranks")
        ranks.update(range(lo, hi + 1))
    return sorted(ranks)


def fill(template: str, rank: int) -> str:
    """``template`` with every ``{rank}`` replaced (other braces are left alone)."""
    return template.replace(RANK_FIELD, str(rank))


def fill_optional(template: str | None, rank: int) -> str | None:
    """``fill`` for a path that may not be given (then there is nothing to fill)."""
    return None if template is None else fill(template, rank)


@dataclass(frozen=True, slots=True)
class RankTemplates:
    """Paths with ``{rank}`` in them, one set per job (either trace may be
    None, not both: the same choices as a single ``convert``)."""

    host_trace: str | None
    device_trace: str | None
    output: str
    report: str | None = None

    def jobs(self, ranks: Sequence[int]) -> list[RankJob]:
        """One job per rank; with several ranks every output template must
        name the rank, or the ranks would overwrite each other."""
        if self.host_trace is None and self.device_trace is None:
            raise InputError(RANKS_OPTION, "give --host-trace, --device-trace, or both "
                             f"(templates with {RANK_FIELD})")
        if len(ranks) > 1:
            for option, template in (("--output", self.output), ("--report", self.report)):
                if template is not None and RANK_FIELD not in template:
                    raise InputError(option, f"{template!r} has no {RANK_FIELD}: "
                                     "every rank would write the same file")
        return [RankJob(rank=r, host_trace=fill_optional(self.host_trace, r),
                        device_trace=fill_optional(self.device_trace, r),
                        output=fill(self.output, r),
                        report=fill_optional(self.report, r))
                for r in ranks]


def convert_one(job: RankJob, options: RankOptions) -> RankOutcome:
    """One rank, as ``pt2chakra convert`` would do it, its files left staged
    for the caller to commit (``RankOutcome.staged``); bad input becomes the
    outcome's one-line error instead of an exception (so that one rank cannot
    stop the others)."""
    from pt2chakra.chakra.ranks import rank_in_metadata
    from pt2chakra.conversion.api import convert_run

    t0 = time.perf_counter()
    try:
        with StagedOutputs(job.token, hold=True) as staged:
            run = convert_run(job.host_trace, job.device_trace, job.output,
                              break_cycles=options.break_cycles, progress=False,
                              report_path=job.report, force=options.force,
                              repair=options.repair, step=options.step,
                              staged=staged, named_rank=job.rank)
            files = staged.detach()
    except InputError as exc:
        return RankOutcome(job.rank, job.output, 0, time.perf_counter() - t0, str(exc))
    except OSError as exc:
        where = exc.filename if exc.filename is not None else "I/O"
        return RankOutcome(job.rank, job.output, 0, time.perf_counter() - t0,
                           f"{where}: {exc.strerror or exc}")
    recorded = rank_in_metadata(run.graph.metadata)
    rank = job.rank if recorded is None else recorded
    return RankOutcome(rank, job.output, run.report.nodes, time.perf_counter() - t0,
                       staged=files, named=job.rank if rank != job.rank else None)


Runner = Callable[[list[RankJob], RankOptions, int], Generator[RankOutcome, None, None]]


def convert_ranks(jobs: list[RankJob], *, workers: int | None = None,
                  ray_address: str | None = None, use_ray: bool = False,
                  options: RankOptions | None = None,
                  progress: bool | None = None, check_collectives: bool = False,
                  allow_mismatch: bool = False) -> ManyRanksResult:
    """Convert every job; local processes by default (``workers``, default
    the CPU count, capped by the number of ranks), Ray tasks with ``use_ray``
    (``ray_address`` None: start a local Ray instance, or join the cluster
    named by ``RAY_ADDRESS``; "auto" or "HOST:PORT": join that cluster).
    Outcomes come back in rank order; failures are in them, not raised.

    ``check_collectives`` (when every rank converted): the ranks must agree
    about their collectives (``rules.checks.collective_mismatch``), else the
    outputs are rolled back (the previous ones kept) unless ``allow_mismatch``;
    ``ManyRanksResult.mismatch`` says where. The check runs before the outputs
    are final, so a signal during it also leaves the previous outputs."""
    options = options or RankOptions()
    check_outputs([p for j in jobs for p in (j.host_trace, j.device_trace)],
                  [p for j in jobs for p in j.outputs])
    n = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    runner, name = ((_ray_runner(ray_address), "ray") if use_ray
                    else (_local_runner, f"{n} process{'es' if n > 1 else ''}"))
    stages = Stages(len(jobs), progress)
    outcomes: list[RankOutcome] = []
    with StagedOutputs() as staged:
        try:
            with contextlib.closing(runner(jobs, options, n)) as running:
                for outcome in running:
                    staged.adopt(outcome.staged)
                    outcomes.append(outcome)
                    log.info("%s", outcome.line())
                    stages.step(outcome.line())
        except BaseException:  # stopped: a worker's files may not have reached us
            for job in jobs:
                remove_temps(job.outputs, job.token)
            raise
        staged.commit()
        mismatch = None
        if check_collectives and len(outcomes) > 1 and all(o.error is None for o in outcomes):
            from pt2chakra.rules.checks import collective_mismatch

            mismatch = collective_mismatch(sorted(o.output for o in outcomes))
        rolled_back = mismatch is not None and not allow_mismatch
        if rolled_back:
            staged.rollback()
    outcomes.sort(key=lambda o: o.rank)
    return ManyRanksResult(outcomes, name, mismatch, rolled_back)


def _local_runner(jobs: list[RankJob], options: RankOptions, workers: int) -> Generator[RankOutcome, None, None]:
    """In this process when one worker is asked for, else a process pool
    (each worker converts one rank at a time, so memory is ``workers`` ranks)."""
    if workers == 1:
        for job in jobs:
            yield convert_one(job, options)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # forkserver: workers do not inherit this process's threads or memory.
    ctx = multiprocessing.get_context("forkserver")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                               initializer=_worker_signals)
    try:
        with _signals_deferred():  # a worker half started would print a traceback
            futures = [pool.submit(_convert_in_worker, job, options) for job in jobs]
        for future in as_completed(futures):
            yield future.result()
    except BaseException:  # Ctrl-C, SIGTERM, the caller gone: stop now, not after the queue
        _stop_pool(pool)
        raise
    pool.shutdown()


@contextlib.contextmanager
def _signals_deferred() -> Generator[None, None, None]:
    """Hold Ctrl-C and SIGTERM while the pool starts its workers (a fraction of
    a second): a worker forked but not yet known to the pool could not be
    stopped. The signal is delivered again right after."""
    caught: list[int] = []
    saved = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            saved[signum] = signal.signal(signum, lambda n, _f: caught.append(n))
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        if caught:
            os.kill(os.getpid(), caught[0])


# In a pool worker: whether it is converting a rank now (``_convert_in_worker``).
_worker_busy = False


def _worker_signals() -> None:
    """In a worker: SIGTERM (the parent stopping it) unwinds a conversion
    like Ctrl-C, so its temp files go, and ends the worker quietly (an
    exception left to multiprocessing prints a traceback). Ctrl-C reaches
    the whole process group: the parent alone handles it."""
    def stop(signum: int, _frame: object) -> None:
        if _worker_busy:
            raise KeyboardInterrupt(signum)
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, stop)


def _convert_in_worker(job: RankJob, options: RankOptions) -> RankOutcome:
    """``convert_one`` in a pool worker (see ``_worker_signals``)."""
    global _worker_busy
    _worker_busy = True
    try:
        return convert_one(job, options)
    except KeyboardInterrupt:  # stopped: the temp files went while unwinding
        os._exit(128 + signal.SIGTERM)
    finally:
        _worker_busy = False


def _stop_pool(pool: Any) -> None:
    """SIGTERM the workers (they remove their temp files), SIGKILL those still
    there after ``STOP_GRACE_S``, then cancel the queued ranks. Workers go
    first: the pool's shutdown frees the queues a worker still starting up
    would read (it would print a traceback)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for proc in processes:
        with contextlib.suppress(Exception):
            proc.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in processes:
        with contextlib.suppress(Exception):
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(STOP_GRACE_S)
    pool.shutdown(wait=False, cancel_futures=True)


def _ray_runner(address: str | None) -> Runner:
    def run(jobs: list[RankJob], options: RankOptions, workers: int) -> Generator[RankOutcome, None, None]:
        # Ray's C++ core prints a stack dump (many lines) on SIGTERM; the
        # command handles SIGTERM itself (exit 143, nothing printed). Read
        # when Ray is imported.
        os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
        try:
            import ray
        except ImportError:
            raise InputError("--ray", "Ray is not installed; pip install 'pt2chakra[ray]'") from None
        host = None
        if not ray.is_initialized():
            if address:
                _refuse_unreachable(address)
            host = _RayHost(ray, address, workers)
            host.start()
        pending: list[Any] = []
        try:
            task = ray.remote(num_cpus=1, max_retries=0)(convert_one)
            pending = [task.remote(job, options) for job in jobs]
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                yield ray.get(done[0])
        except BaseException:  # stopped: cancel what is queued or running
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if host is not None:
                host.stop(STOP_GRACE_S)
                host = None
            raise
        finally:
            if host is not None:
                host.stop(None)
    return run


class _RayHost:
    """Ray started, and later shut down, by a thread of its own that lives as
    long as Ray is used.

    Why a thread: ``ray.init`` takes seconds (tens of seconds on a loaded
    machine) inside calls that do not look at signals, and so does
    ``ray.shutdown``; run by the main thread, they held Ctrl-C and SIGTERM
    back that long. The main thread only waits for this one, so a signal
    stops the command at once. Why it lives on: the processes of a local
    instance are tied to the thread that started them (they die with it),
    and so also with this process when a signal ends it. Started this way,
    Ray leaves the command's own SIGTERM handler in place."""

    def __init__(self, ray: Any, address: str | None, workers: int) -> None:
        self._ray = ray
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(address, workers),
                                        name="pt2chakra-ray", daemon=True)

    def _run(self, address: str | None, workers: int) -> None:
        try:
            _start_ray(self._ray, address, workers)
        except BaseException as exc:  # handed to the main thread
            self._error = exc
            return
        finally:
            self._ready.set()
        self._stop.wait()
        with contextlib.suppress(Exception):
            self._ray.shutdown()

    def start(self) -> None:
        """Wait (signals still stop the command) until Ray is up or failed."""
        self._thread.start()
        try:
            while not self._ready.wait(_POLL_S):
                pass
        except BaseException:  # stopped while Ray starts: it shuts down once up
            self._stop.set()
            raise
        if self._error is not None:
            raise self._error

    def stop(self, wait: float | None) -> None:
        """Shut Ray down; wait that long (None: until done, or until a
        SIGTERM comes: it is then handled as usual, raising here)."""
        self._stop.set()
        deadline = None if wait is None else time.monotonic() + wait
        with _sigterm_held():
            while self._thread.is_alive() and signal.SIGTERM not in signal.sigpending():
                left = _POLL_S if deadline is None else min(_POLL_S, deadline - time.monotonic())
                if left <= 0:
                    return
                self._thread.join(left)


@contextlib.contextmanager
def _sigterm_held() -> Generator[None, None, None]:
    """``ray.shutdown`` sets SIGTERM back to the default action, which would
    end this process on the spot with every rank's temp files left. Hold
    SIGTERM (pending) meanwhile, then give it back its handler: a SIGTERM
    that came is then handled by it, as it would have been."""
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    except (ValueError, OSError, AttributeError):  # not POSIX
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, OSError, TypeError):  # not the main thread
            handler = signal.getsignal(signal.SIGTERM)
            if handler is not None:
                signal.signal(signal.SIGTERM, handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _start_ray(ray: Any, address: str | None, workers: int) -> None:
    """``ray.init``; a start that fails is one line."""
    # Ray's own notices (e.g. about its token authentication) are not ours to
    # print at default verbosity; -v shows them.
    level = logging.ERROR if log.getEffectiveLevel() >= logging.WARNING else logging.INFO
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": level,
                              "log_to_driver": False}
    if address:
        kwargs["address"] = address
    elif "RAY_ADDRESS" not in os.environ:
        kwargs["num_cpus"] = workers  # a local instance: as many workers as asked
    try:
        ray.init(**kwargs)
    except Exception as exc:  # Ray raises many types; all mean "no cluster"
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        raise InputError("--ray", f"Ray did not start{f' at {address}' if address else ''}: "
                         f"{lines[-1].strip()}") from None


def _refuse_unreachable(address: str) -> None:
    """A ``HOST:PORT`` (or ``ray://HOST:PORT``) must accept a connection
    within ``RAY_CONNECT_TIMEOUT_S`` (Ray's own retries take minutes)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and the like: Ray's own lookup
    try:
        with socket.create_connection((host.strip("[]"), int(port)),
                                      timeout=RAY_CONNECT_TIMEOUT_S):
            pass
    except (OSError, ValueError, OverflowError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError("--ray", f"no Ray cluster answers at {address} ({reason})") from None
