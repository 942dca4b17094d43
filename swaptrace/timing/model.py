"""Time model: a swap I/O stream (plus its access trace) in, predicted time of every training step out.

swaptrace's other stages count pages, bytes and requests; this one turns them into the unit users decide
on, training time. It predicts, step by step, how long the process runs when its memory is limited, and
the slowdown against the same steps with no limit.

The model
---------
Each step ``s`` takes its **compute** time ``C_s = A_s + D_s`` plus the time it is **stalled**:

* ``A_s`` is the time to touch the step's pages when all are resident (the embedding lookups and
  updates); the stream's requests happen inside it, at the share of the step's accesses where they
  were issued (emulator streams: ``t_us`` over ``params.step_us``; kernel streams: the request's rank in
  its step). ``D_s`` is the dense part (the MLP forward and backward), after the accesses.
* **Writes** (reclaim's swap-outs) are asynchronous (mm/vmscan.c ``pageout`` submits the bio and goes
  on): the process does not wait for them, but the device does them first in first out, so they make a
  **backlog** -- the device is busy until ``dev``. A write of ``L`` bytes in a burst of ``k`` requests
  adds ``lat_w(L, q) / q`` to it (``q = min(k, deepest depth of the device table)``): the device's
  throughput at that queue depth, by Little's law.
* **Reads** of one fault (the faulting page and the readahead issued with it, one burst) start when the
  device has done its backlog: ``begin = max(dev, t)``. The process waits for the reads it needs (cause
  ``fault``, and ``unknown`` in a kernel capture, where ftrace does not say which read of a burst held the
  faulting page) until ``begin + lat_r(L, q)``; readahead only occupies the device. The wait splits
  into **queueing** (``begin - t``: behind the writes still in the device) and **fault wait** (the read's
  own latency).
* **CPU**: each fault the process waits for costs ``fault_cpu_us`` (mm/memory.c ``do_swap_page``: page
  allocation, memory-cgroup charge, mapping); each page read in needs a page freed, which costs
  ``reclaim_cpu_us`` of reclaim work per page (mm/vmscan.c ``shrink_folio_list``: unmap, free); each page
  written costs ``write_cpu_us`` more (``add_to_swap``, bio submission).

* **Threads**: a framework runs a step on several threads (PyTorch's intra-op pool: ``at::parallel_for``
  cuts each embedding bag's batch into one chunk per thread), and while one waits for a fault the others
  go on. With ``threads = P``, every thread goes through the step's accesses over the whole access time
  and the step's bursts are dealt to them in turn (burst ``b`` to thread ``b mod P``); each stalls only on
  its own; its read bursts meet the device at ``P`` times their depth (the other threads fault at the same
  rate); the device takes bursts in the order they are issued, across the threads. ``P = 1`` is one
  thread. A recording measures ``P`` (:func:`swaptrace.capture.recorder.parallelism`: the effective number
  of threads busy in the training steps, from each thread's CPU time).

The step's time is ``C_s`` plus its longest thread's waits and CPU; the slowdown is ``sum(step) / sum(C)``.
The breakdown's terms are summed over the threads (as task delay accounting sums a program's threads).

Constants, and where each comes from (none is fitted to the slowdowns it is scored on):

* the device table ``lat_r``/``lat_w`` (mean latency by request size and queue depth, read and write):
  from a **measured profile** (``swaptrace fio profile RUN_DIR -o disk.toml``: fio's mean completion
  latency of random reads and writes at each size and depth, :mod:`swaptrace.timing.device_profile`), or from an
  **SSD model** preset or TOML (:func:`device_from_ssd`: tR, tPROG, channel and host transfer, the
  dies' parallelism and the steady-state write amplification of :mod:`swaptrace.ssd.analytic`);
* ``fault_cpu_us`` and ``reclaim_cpu_us``: a **micro-benchmark** on this machine
  (:func:`measure_cpu_costs`: first-touch faults of fresh anonymous pages, and ``MADV_DONTNEED`` of
  populated ones -- the allocation, charge and mapping a swap-in shares with a first touch, and the
  unmap and free reclaim does; both lower bounds) or given; on a real machine a fault costs more (the
  swap-in path, the cgroup's reclaim, the task's wake-up, a loop device's hop, waiting for a CPU), which
  :mod:`swaptrace.timing.calibrate` measures with a synthetic capture (root) for ``fault_cpu_us``;
  ``write_cpu_us`` is given (default 0);
* ``A_s`` and ``D_s``: **measured** (``compute="mlp"``: the trace's steps replayed on fresh anonymous
  memory with no limit, and the preset's MLP step, as ``swaptrace capture --compute mlp`` does for its
  baseline; :func:`measure_compute`), or the baseline run of a capture (``compute_baseline``), or given
  (``step_compute_us``), or none (pure paging time).

What it leaves out: the device's own variation (GC pauses: a profile measures the mean), reclaim of
pages that are not read back (clean drops are free here), the writeback throttling of
``balance_dirty_pages`` (anonymous memory has none), and contention for the CPU by other processes.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from swaptrace.core import bounds
from swaptrace.core.inputs import read_toml
from swaptrace.core.traceio import (
    CAUSE_FAULT,
    CAUSE_UNKNOWN,
    EVENT_ACCESS,
    EVENT_FREE,
    OP_DISCARD,
    OP_READ,
    TraceWriter,
    check_agree,
    open_trace,
)
from swaptrace.errors import ConfigError, TraceFileError
from swaptrace.kernels.timing import steps as kt
from swaptrace.timing.device import (  # noqa: F401 - the device half of the model, re-exported
    PROFILE_KIND,
    TABLE_DEPTHS,
    TABLE_SIZES,
    DeviceTiming,
    device_from_ssd,
    load_device_timing,
)

#: a kernel capture's requests more than this apart (us) are separate bursts (capture.convert's 50 us rule)
KERNEL_BURST_GAP_US = 50.0

STEPS_SCHEMA = pa.schema(
    [
        ("step", pa.uint32()),
        ("step_us", pa.float64()),
        ("compute_us", pa.float64()),
        ("fault_wait_us", pa.float64()),
        ("queue_us", pa.float64()),
        ("fault_cpu_us", pa.float64()),
        ("reclaim_cpu_us", pa.float64()),
        ("faults_waited", pa.uint32()),
    ]
)


def _register() -> None:
    from swaptrace.core import traceio

    traceio.register_kind("timing-steps", STEPS_SCHEMA)


_register()


# --------------------------------------------------------------------------- devices

@dataclass(frozen=True)
class CpuCosts:
    """Kernel CPU time per fault and per page (microseconds), and how each was obtained."""

    fault_cpu_us: float = 0.0
    reclaim_cpu_us: float = 0.0
    write_cpu_us: float = 0.0
    source: str = "given"
    #: the fault cost's spread over repeated measurements, ``(lowest, highest)`` us, or None (one value):
    #: :func:`simulate` also prices the stream at both ends (``TimingResult.slowdown_range``)
    fault_cpu_us_range: tuple[float, float] | None = None
    #: the write cost's spread, likewise; the low end is priced with the fault cost's low end, the high with
    #: its high end
    write_cpu_us_range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        for name in ("fault_cpu_us", "reclaim_cpu_us", "write_cpu_us"):  # the bounds of --fault-cpu-us, ...
            bounds.check(name, getattr(self, name), name.replace("_", "-"))
        for name in ("fault_cpu_us", "write_cpu_us"):
            spread = getattr(self, name + "_range")
            if spread is None:
                continue
            lo, hi = spread
            for v in (lo, hi):
                bounds.check(name, v, name.replace("_", "-"))
            if not lo <= getattr(self, name) <= hi:
                raise ConfigError(f"{name}_range: [{lo}, {hi}] does not hold {name} {getattr(self, name)}")

    def ends(self) -> list[tuple[float, float]] | None:
        """The ``(fault, write)`` costs at the measurements' low and high ends, or None when neither was repeated."""
        if self.fault_cpu_us_range is None and self.write_cpu_us_range is None:
            return None
        f = self.fault_cpu_us_range or (self.fault_cpu_us, self.fault_cpu_us)
        w = self.write_cpu_us_range or (self.write_cpu_us, self.write_cpu_us)
        return [(f[0], w[0]), (f[1], w[1])]


COSTS_KIND = "swaptrace-host-costs"


def save_costs(cpu: CpuCosts, path: str | os.PathLike, force: bool = False) -> Path:
    """Write ``cpu`` as a host-costs TOML (``kind = "swaptrace-host-costs"``), readable by :func:`load_costs`.

    The costs are the host's (kernel, CPU, swap path), measured once per machine as root
    (``swaptrace time --measure-fault-overhead --save-costs FILE``) and then given to every
    prediction on it (``time --costs FILE``, ``run --time-costs FILE``).
    """
    from swaptrace.core.traceio import AtomicPath

    text = (f'kind = "{COSTS_KIND}"\n'
            f"source = {json.dumps(cpu.source)}\n"
            "# microseconds: per fault waited for, per page freed, per page written\n"
            f"fault_cpu_us = {cpu.fault_cpu_us!r}\nreclaim_cpu_us = {cpu.reclaim_cpu_us!r}\n"
            f"write_cpu_us = {cpu.write_cpu_us!r}\n")
    for name in ("fault_cpu_us", "write_cpu_us"):
        spread = getattr(cpu, name + "_range")
        if spread is not None:
            what = name.split("_")[0]
            text += (f"# the {what} cost's lowest and highest measurement: every prediction is also made at both\n"
                     f"{name}_range = [{spread[0]!r}, {spread[1]!r}]\n")
    with AtomicPath(path, force=force) as ap:
        ap.tmp.write_text(text)
    return ap.path


def load_costs(path: str | os.PathLike) -> CpuCosts:
    """Read a host-costs TOML written by :func:`save_costs` (or by hand); ``ConfigError`` in one line otherwise."""
    try:
        data = read_toml(path, "host-costs TOML", "not a host-costs TOML")
    except TraceFileError as exc:
        raise ConfigError(str(exc)) from None
    if data.get("kind") != COSTS_KIND:
        raise ConfigError(f'{path}: not a host-costs file (kind = "{COSTS_KIND}" expected)')
    spreads = {}
    for name in ("fault_cpu_us_range", "write_cpu_us_range"):
        spread = data.get(name)
        if spread is not None:
            if not (isinstance(spread, list) and len(spread) == 2
                    and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in spread)):
                raise ConfigError(f"{path}: {name} must be [lowest, highest] in microseconds")
            spread = (float(spread[0]), float(spread[1]))
        spreads[name] = spread
    try:
        return CpuCosts(*(data[k] for k in ("fault_cpu_us", "reclaim_cpu_us", "write_cpu_us")),
                        source=f"{path}: {data.get('source', 'given')}", **spreads)
    except KeyError as exc:
        raise ConfigError(f"{path}: host-costs file without {exc.args[0]}") from None
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def measure_cpu_costs(pages: int = 8192, repeats: int = 5) -> CpuCosts:
    """Micro-benchmark this machine's page-fault and unmap cost (median of ``repeats``).

    ``fault_cpu_us``: a store to each page of a fresh private anonymous mapping (a first-touch fault:
    allocation, zeroing, memory-cgroup charge, page-table update -- the part of a swap-in fault
    without the swap-cache lookup and bio). ``reclaim_cpu_us``: ``madvise(MADV_DONTNEED)`` of the same
    pages, populated (unmap, TLB flush, uncharge, free -- reclaim's work on a page without the LRU scan
    and rmap walk). Both are lower bounds of the kernel's costs on the swap path.
    """
    page = mmap.PAGESIZE
    faults, frees = [], []
    for _ in range(repeats):
        region = mmap.mmap(-1, pages * page, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        try:
            view = np.frombuffer(region, dtype=np.uint8)
            t0 = time.perf_counter_ns()
            view[::page] = 1
            t1 = time.perf_counter_ns()
            region.madvise(mmap.MADV_DONTNEED)
            t2 = time.perf_counter_ns()
            del view
        finally:
            region.close()
        faults.append((t1 - t0) / 1e3 / pages)
        frees.append((t2 - t1) / 1e3 / pages)
    return CpuCosts(float(np.median(faults)), float(np.median(frees)), 0.0,
                    source=f"micro-benchmark: first-touch faults and MADV_DONTNEED of {pages} pages, median of {repeats}")


# --------------------------------------------------------------------------- compute time


@dataclass(frozen=True)
class ComputeTime:
    """Time of each step without paging: accesses ``access_us`` then the dense part ``dense_us``."""

    access_us: np.ndarray
    dense_us: np.ndarray
    source: str


def no_compute(nsteps: int) -> ComputeTime:
    """Zero compute: the prediction is pure paging time (no slowdown is defined)."""
    return ComputeTime(np.zeros(nsteps), np.zeros(nsteps), "none")


def given_compute(nsteps: int, step_compute_us: float) -> ComputeTime:
    """Every step takes ``step_compute_us`` without paging; requests are spread over it by access share."""
    if not (math.isfinite(step_compute_us) and step_compute_us >= 0):
        raise ConfigError(f"step-compute-us: must be a number >= 0, got {step_compute_us!r}")
    return ComputeTime(np.full(nsteps, float(step_compute_us)), np.zeros(nsteps), f"given: {step_compute_us} us per step")


def baseline_compute(capture_path: str | os.PathLike, nsteps: int) -> ComputeTime:
    """The unlimited run of a ``swaptrace capture`` (``kernel.unlimited``): replay and MLP time per step."""
    tf = open_trace(capture_path, "swapio")
    un = (tf.meta.get("kernel") or {}).get("unlimited") or {}
    if not isinstance(un, dict):
        raise TraceFileError(f"{tf.path}: metadata kernel.unlimited = {un!r} is not a baseline run")
    access, dense = un.get("replay_us"), un.get("compute_us")
    if not access or dense is None:
        raise TraceFileError(f"{tf.path}: not a capture with a baseline run (kernel.unlimited); "
                             "capture with --baseline")
    for key, times in (("replay_us", access), ("compute_us", dense)):
        if not isinstance(times, list):
            raise TraceFileError(f"{tf.path}: metadata kernel.unlimited.{key} = {times!r} is not a list of times")
        for i, t in enumerate(times):  # a step's time, bounded as --step-compute-us is (swaptrace.core.bounds)
            bounds.check("step_compute_us", t, f"{tf.path}: metadata kernel.unlimited.{key}[{i}]")
    if len(access) != nsteps or len(dense) != nsteps:
        raise ConfigError(f"{tf.path}: its baseline has {len(access)} steps, the stream {nsteps}")
    return ComputeTime(np.asarray(access, float), np.asarray(dense, float), f"baseline run of {tf.path}")


def measure_compute(trace_path: str | os.PathLike, nsteps: int | None = None, *, first_step: int = 0,
                    progress: Callable[[int], None] | None = None) -> ComputeTime:
    """Measure each step's time with no memory limit, in this process (no root needed).

    Replays the trace's accesses step by step on a fresh private anonymous mapping of its footprint
    with the capture child's kernel (a load, or a load and a store, per 4 KiB) and runs the model's
    MLP forward and backward (numpy, the capture child's :class:`~swaptrace.capture.child.MLP`) after
    each step -- what ``swaptrace capture --compute mlp`` does for its unlimited baseline run. Like the
    capture's child it runs with one BLAS thread (in a child process when this one's BLAS may use more:
    several BLAS threads on a busy machine made the MLP step 2-80x slower than the capture's).

    A process trace's ``free`` events drop their pages from the mapping after the step's accesses
    (``MADV_DONTNEED``, timed with the accesses), so a page the next step allocates again costs a zero-fill
    fault as the program's does; ``alloc`` events touch nothing (the first access does).
    """
    if any(os.environ.get(v) != "1" for v in _ONE_THREAD):
        return _measure_in_child(trace_path, nsteps, first_step)
    from swaptrace.capture.child import MLP
    from swaptrace.kernels.capture.replay import replay_codes, warm_up
    from swaptrace.workload.spec import mlp_layers

    tf = open_trace(trace_path, "access")
    meta = tf.meta
    page_bytes = tf.page_bytes
    touch = min(4096, page_bytes)
    steps = int(nsteps if nsteps is not None else meta.get("steps") or 0)
    first = int(meta.get("first_step", first_step))
    layers, batch = mlp_layers(meta)
    mlp = MLP(layers, batch) if layers else None
    warm_up(page_bytes, touch)
    if mlp is not None:
        mlp.step()
    footprint = int(meta["footprint_bytes"])
    region = mmap.mmap(-1, max(footprint, mmap.PAGESIZE), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    access = np.zeros(steps)
    dense = np.zeros(steps)
    try:
        mem = np.frombuffer(region, dtype=np.uint8)

        def run(codes: np.ndarray, k: int, mem: np.ndarray, frees: np.ndarray) -> None:
            t0 = time.perf_counter_ns()
            replay_codes(mem, codes, page_bytes, touch)
            _drop_pages(region, frees, page_bytes)
            t1 = time.perf_counter_ns()
            if mlp is not None:
                mlp.step()
            t2 = time.perf_counter_ns()
            if 0 <= k < steps:
                access[k] += (t1 - t0) / 1e3
                dense[k] += (t2 - t1) / 1e3
            if progress is not None:
                progress(1)

        for s, codes, freed in _replay_steps(tf, first):
            run(codes, s - first, mem, freed)
        del mem
    finally:
        region.close()
    return ComputeTime(access, dense, "measured: the trace's steps replayed with no memory limit"
                       + (" and the model's MLP step" if mlp is not None else ""))


def _replay_steps(tf, first: int):
    """Each step of an access trace as ``(step, codes, freed)``, in order from ``first``: the replay kernel's
    codes (``page << 1 | write``) of its accesses, and the pages its ``free`` events drop."""
    events = tf.has_column("event")
    none = np.zeros(0, np.int64)
    pending: list[np.ndarray] = []
    freed: list[np.ndarray] = []
    cur = first
    for cols in tf.iter_batches(columns=["step", "page", "write"] + (["event"] if events else [])):
        st = cols["step"].astype(np.int64)
        codes = (cols["page"].astype(np.int64) << 1) | cols["write"].astype(np.int64)
        ev = cols["event"] if events else None
        cuts = np.flatnonzero(np.diff(st)) + 1  # where the batch's step changes
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, st.size], strict=True):
            s = int(st[lo])
            if s != cur:
                yield cur, np.concatenate(pending) if pending else codes[:0], np.concatenate(freed) if freed else none
                pending, freed, cur = [], [], s
            if ev is None:
                pending.append(codes[lo:hi])
            else:
                pending.append(codes[lo:hi][ev[lo:hi] == EVENT_ACCESS])
                freed.append(codes[lo:hi][ev[lo:hi] == EVENT_FREE] >> 1)
    if pending:
        yield cur, np.concatenate(pending), np.concatenate(freed) if freed else none


def _drop_pages(region: mmap.mmap, pages: np.ndarray, page_bytes: int) -> None:
    """``MADV_DONTNEED`` the given pages of ``region``, one call per run of consecutive pages."""
    if not pages.size:
        return
    pages = np.unique(pages)
    breaks = np.flatnonzero(np.diff(pages) != 1) + 1
    for lo, hi in zip(np.r_[0, breaks], np.r_[breaks, pages.size], strict=True):
        region.madvise(mmap.MADV_DONTNEED, int(pages[lo]) * page_bytes, int(hi - lo) * page_bytes)


_ONE_THREAD = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _measure_in_child(trace_path, nsteps, first_step) -> ComputeTime:
    import json
    import subprocess
    import sys

    code = ("import json, sys; from swaptrace.timing.model import measure_compute as m; "
            "c = m(sys.argv[1], None if sys.argv[2] == 'None' else int(sys.argv[2]), first_step=int(sys.argv[3])); "
            "print(json.dumps({'a': c.access_us.tolist(), 'd': c.dense_us.tolist(), 's': c.source}))")
    env = {**os.environ, **{v: "1" for v in _ONE_THREAD}}
    proc = subprocess.run([sys.executable, "-c", code, str(trace_path), str(nsteps), str(first_step)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        if "Error" in last and "swaptrace" in last:
            raise TraceFileError(last.split(": ", 1)[-1])
        raise RuntimeError(f"measuring the compute time failed: {last}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return ComputeTime(np.asarray(data["a"], float), np.asarray(data["d"], float), data["s"])


# --------------------------------------------------------------------------- the stream


@dataclass(frozen=True)
class StreamRequests:
    """A swap stream's read and write requests in issue order, as the kernel's input arrays."""

    step: np.ndarray  # int64, 0-based step index
    frac: np.ndarray  # float64, share of the step's accesses before the request
    op: np.ndarray  # int8, OP_READ / OP_WRITE
    nbytes: np.ndarray  # float64
    waits: np.ndarray  # bool, the process waits for it
    burst: np.ndarray  # int64, nondecreasing burst id
    nsteps: int
    first_step: int
    page_bytes: int
    source: str
    threads: int = 1  # threads the program shares each step over (:func:`stream_threads`)
    threads_source: str = "one thread"


def read_stream(stream_path: str | os.PathLike) -> StreamRequests:
    """Read a swapio file into :class:`StreamRequests` (discards dropped)."""
    tf = open_trace(stream_path, "swapio")
    meta = tf.meta
    cols = tf.read_all(["t_us", "step", "op", "length", "cause"])
    first = int(meta.get("first_step", 0))
    nsteps = int(meta.get("steps") or 0)
    keep = cols["op"] != OP_DISCARD
    t_us = cols["t_us"][keep]
    step = cols["step"][keep].astype(np.int64) - first
    op = cols["op"][keep].astype(np.int8)
    cause = cols["cause"][keep]
    if nsteps <= 0:
        nsteps = int(step.max()) + 1 if step.size else 0
    if step.size and (step.min() < 0 or step.max() >= nsteps):
        raise TraceFileError(f"{tf.path}: requests of steps outside the stream's {nsteps} steps")
    if step.size and np.any(np.diff(step) < 0):
        raise TraceFileError(f"{tf.path}: requests are not in step order")
    source = str(meta.get("source", "emulator"))
    step_us = float((meta.get("params") or {}).get("step_us") or 0.0)
    n = step.size
    if source != "kernel" and step_us > 0:
        frac = np.clip(t_us / step_us - step, 0.0, 1.0)
        gap = 0.0
    else:  # a kernel's t_us is its own (stalled) time: place requests by their rank in the step
        counts = np.bincount(step, minlength=nsteps) if n else np.zeros(nsteps, np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) if nsteps else np.zeros(0, np.int64)
        frac = (np.arange(n) - starts[step]) / np.maximum(counts[step], 1) if n else np.zeros(0)
        gap = KERNEL_BURST_GAP_US
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = (op[1:] != op[:-1]) | (step[1:] != step[:-1]) | (np.diff(t_us) > gap)
    burst = np.cumsum(new) - 1
    waits = (op == OP_READ) & ((cause == CAUSE_FAULT) | (cause == CAUSE_UNKNOWN))
    return StreamRequests(step, frac.astype(np.float64), op, cols["length"][keep].astype(np.float64), waits,
                          burst.astype(np.int64), nsteps, first, tf.page_bytes, source, *stream_threads(meta))


# --------------------------------------------------------------------------- prediction


@dataclass(frozen=True)
class TimingResult:
    """Per-step predicted times (microseconds) and their totals."""

    steps: np.ndarray
    step_us: np.ndarray
    compute_us: np.ndarray
    fault_wait_us: np.ndarray
    queue_us: np.ndarray
    fault_cpu_us: np.ndarray
    reclaim_cpu_us: np.ndarray
    faults_waited: np.ndarray
    device: str
    compute_source: str
    cpu: CpuCosts
    threads: int = 1
    threads_source: str = "one thread"
    #: the slowdown at the measured costs' low and high ends (``CpuCosts.ends``: the fault and write costs' ranges)
    slowdown_range: tuple[float, float] | None = None

    @property
    def total_us(self) -> float:
        return float(self.step_us.sum())

    @property
    def slowdown(self) -> float | None:
        """Predicted time over compute time; ``None`` without compute time."""
        c = float(self.compute_us.sum())
        return self.total_us / c if c > 0 else None

    def summary(self) -> dict[str, Any]:
        n = max(len(self.steps), 1)
        return {
            "steps": int(len(self.steps)),
            "device": self.device,
            "compute": self.compute_source,
            "cpu_costs": {"fault_cpu_us": self.cpu.fault_cpu_us, "reclaim_cpu_us": self.cpu.reclaim_cpu_us,
                          "write_cpu_us": self.cpu.write_cpu_us, "source": self.cpu.source,
                          **{k: list(getattr(self.cpu, k)) for k in ("fault_cpu_us_range", "write_cpu_us_range")
                             if getattr(self.cpu, k) is not None}},
            "threads": self.threads,
            "threads_source": self.threads_source,
            "mean_step_us": self.total_us / n,
            "slowdown": self.slowdown,
            **({"slowdown_range": list(self.slowdown_range)} if self.slowdown_range is not None else {}),
            "total_us": self.total_us,
            "breakdown_us": {
                "compute": float(self.compute_us.sum()),
                "fault_wait": float(self.fault_wait_us.sum()),
                "queueing": float(self.queue_us.sum()),
                "fault_cpu": float(self.fault_cpu_us.sum()),
                "reclaim_cpu": float(self.reclaim_cpu_us.sum()),
            },
            "faults_waited": int(self.faults_waited.sum()),
        }


def simulate(req: StreamRequests, device: DeviceTiming, compute: ComputeTime, cpu: CpuCosts,
             threads: int | None = None) -> TimingResult:
    """Run the time model (module docstring) on prepared requests.

    ``threads``: threads sharing each step (default: the stream's, :func:`stream_threads`). When ``cpu``
    carries the measured spread of its fault or write cost (``fault_cpu_us_range``, ``write_cpu_us_range``)
    the stream is priced again at both ends (:meth:`CpuCosts.ends`; the kernel is linear in none of the
    costs: queueing moves with them), and the result's ``slowdown_range`` holds the two slowdowns.
    """
    threads_source = req.threads_source if threads is None else "given"
    threads = req.threads if threads is None else int(threads)
    if threads < 1:
        raise ConfigError(f"threads: {threads}; give at least 1")
    if compute.access_us.shape[0] != req.nsteps:
        raise ConfigError(f"compute time has {compute.access_us.shape[0]} steps, the stream {req.nsteps}")
    out = _run_model(req, device, compute, fault_cpu_us=cpu.fault_cpu_us, write_cpu_us=cpu.write_cpu_us, cpu=cpu,
                     threads=threads)
    spread = None
    c = float(out[:, kt.OUT_COMPUTE].sum())  # the slowdown's denominator, as TimingResult.slowdown's
    if cpu.ends() is not None and c > 0:
        ends = [float(_run_model(req, device, compute, fault_cpu_us=f, write_cpu_us=w, cpu=cpu,
                                 threads=threads)[:, kt.OUT_STEP].sum()) / c for f, w in cpu.ends()]
        spread = (min(ends), max(ends))
    return TimingResult(
        steps=np.arange(req.first_step, req.first_step + req.nsteps, dtype=np.int64),
        step_us=out[:, kt.OUT_STEP], compute_us=out[:, kt.OUT_COMPUTE], fault_wait_us=out[:, kt.OUT_WAIT],
        queue_us=out[:, kt.OUT_QUEUE], fault_cpu_us=out[:, kt.OUT_FAULT_CPU],
        reclaim_cpu_us=out[:, kt.OUT_RECLAIM_CPU], faults_waited=out[:, kt.OUT_WAITS].astype(np.int64),
        device=device.name, compute_source=compute.source, cpu=cpu, threads=int(threads),
        threads_source=threads_source, slowdown_range=spread,
    )


def _run_model(req: StreamRequests, device: DeviceTiming, compute: ComputeTime, *, fault_cpu_us: float,
               write_cpu_us: float, cpu: CpuCosts, threads: int) -> np.ndarray:
    """The kernel's per-step output columns (``kt.OUT_*``) with the fault and write costs given (us)."""
    sizes, depths, read, write = device.arrays()
    out = np.zeros((req.nsteps, kt.OUT_COLUMNS))
    kt._simulate(req.step, req.frac, req.op, req.nbytes, req.waits, req.burst,
                 np.ascontiguousarray(compute.access_us, np.float64), np.ascontiguousarray(compute.dense_us, np.float64),
                 sizes, depths, read, write, float(fault_cpu_us), float(cpu.reclaim_cpu_us),
                 float(write_cpu_us), float(req.page_bytes), int(threads), out)
    return out


def stream_threads(meta: dict[str, Any]) -> tuple[int, str]:
    """The threads a stream's program shares its steps over, and where that comes from.

    A stream emulated from a recorded program's trace carries the recording's measure (``threads``, from
    the effective number of the program's threads busy in its steps, rounded); any other stream is one thread.
    """
    n = meta.get("threads")
    if bounds.within("threads", n):
        return int(n), str(meta.get("threads_source") or "the stream's metadata")
    return 1, "one thread (the stream does not say)"


def stream_trace_path(stream_path: str | os.PathLike, trace: str | os.PathLike | None = None) -> Path:
    """The access trace a stream was made from (``trace`` in its metadata), checked to exist."""
    stream = open_trace(stream_path, "swapio")
    meta = stream.meta
    p = Path(trace) if trace else (Path(meta["trace"]) if meta.get("trace") else None)
    if p is None:
        raise TraceFileError(f"{stream_path}: the stream names no access trace; give --trace")
    if not p.exists():
        raise TraceFileError(f"{p}: the stream's access trace is missing (give --trace)")
    tf = open_trace(p, "access")  # a file or a dataset folder
    label = "--trace" if trace else "the stream's trace"
    made_from = meta.get("trace_fingerprint")
    if isinstance(made_from, dict):
        for k, v in made_from.items():
            if tf.meta.get(k) != v:
                raise TraceFileError(f"{label} {p}: its {k} is {tf.meta.get(k)!r}, the stream was made from a trace "
                                     f"with {v!r}; give the access trace the stream came from")
    check_agree(stream, tf, ("page_bytes", "first_step"), "the stream", label,
                "give the access trace the stream came from")
    if int(tf.meta.get("steps") or 0) and int(meta.get("steps") or 0) > int(tf.meta["steps"]):
        raise TraceFileError(f"{label} {p}: has {tf.meta['steps']} steps, the stream {meta['steps']}; give the "
                             "access trace the stream came from")
    return p


def predict(stream_path: str | os.PathLike, device: str | DeviceTiming, *, compute: str = "mlp",
            step_compute_us: float | None = None, compute_baseline: str | os.PathLike | None = None,
            trace: str | os.PathLike | None = None, cpu: CpuCosts | None = None, threads: int | None = None,
            progress: Callable[[int], None] | None = None) -> TimingResult:
    """Predict each step's time of a swap stream on a device.

    Parameters
    ----------
    stream_path : path-like
        A ``swapio`` file (emulator or kernel capture).
    device : str or DeviceTiming
        SSD model preset, SSD model TOML, or measured profile TOML (:func:`load_device_timing`).
    compute : {"mlp", "none"}
        ``mlp``: measure the steps with no memory limit (:func:`measure_compute`; needs the trace).
        Ignored when ``step_compute_us`` or ``compute_baseline`` is given.
    step_compute_us : float, optional
        Given compute time of every step, microseconds.
    compute_baseline : path-like, optional
        A capture whose unlimited run gives the compute time (:func:`baseline_compute`).
    trace : path-like, optional
        The access trace (default: the one the stream's metadata names).
    cpu : CpuCosts, optional
        Kernel CPU costs; default :func:`measure_cpu_costs`.
    threads : int, optional
        Threads sharing each step (module docstring); default :func:`stream_threads` of the stream.
    """
    dev = device if isinstance(device, DeviceTiming) else load_device_timing(device)
    req = read_stream(stream_path)
    if step_compute_us is not None:
        comp = given_compute(req.nsteps, step_compute_us)
    elif compute_baseline is not None:
        comp = baseline_compute(compute_baseline, req.nsteps)
    elif compute == "none":
        comp = no_compute(req.nsteps)
    elif compute == "mlp":
        comp = measure_compute(stream_trace_path(stream_path, trace), req.nsteps, progress=progress)
    else:
        raise ConfigError(f"compute: unknown mode {compute!r}; use mlp or none")
    return simulate(req, dev, comp, cpu if cpu is not None else measure_cpu_costs(), threads)


def write_steps(result: TimingResult, out: str | os.PathLike, meta: dict[str, Any] | None = None,
                force: bool = False) -> Path:
    """Write the per-step table (``kind: timing-steps``) atomically."""
    with TraceWriter(out, "timing-steps", {**(meta or {}), "summary": result.summary()}, force=force) as w:
        w.write(step=result.steps.astype(np.uint32), step_us=result.step_us, compute_us=result.compute_us,
                fault_wait_us=result.fault_wait_us, queue_us=result.queue_us, fault_cpu_us=result.fault_cpu_us,
                reclaim_cpu_us=result.reclaim_cpu_us, faults_waited=result.faults_waited.astype(np.uint32))
        return w.path
