"""Page-cache emulator: an access trace and a DRAM budget in, a Linux-like swap I/O stream out.

The emulator replays a ``kind: access`` trace page by page against a memory
budget and writes the block requests the Linux anonymous-memory swap path
would issue (``kind: swapio``, one row per request, in issue order). What it
mimics (docs/emulate.md; mm/memory.c ``do_swap_page``, mm/swap_state.c,
mm/swapfile.c, mm/vmscan.c of Linux 6.x):

* **Swap semantics.** The first store to a page is a zero-fill (no read); with
  ``zero_page`` (``linux``) a load before it maps the kernel's shared zero
  page (``do_anonymous_page``): no frame, no list, and the later store
  allocates the page -- as a real process's untouched memory behaves. A
  page evicted dirty, or without a valid slot, is written; a clean page whose
  slot is still valid is dropped without I/O. A swap-in keeps the page's slot
  (swap cache) unless the faulting access is a write or swap is more than half
  full (``should_try_to_free_swap``); the next eviction of such a page needs a
  new slot and a write. A later store to a mapped page only dirties it: its
  eviction rewrites the same slot, as the kernel does.
* **Residency policies** (:data:`POLICIES`): ``lru`` (exact), ``clock``
  (second chance) and ``linux`` (active/inactive lists with PTE young and
  PG_referenced bits, activation on a second reference, reclaim isolating 32
  pages at a time, inactive:active target ``int_sqrt(10 * GB)``, workingset
  refault activation of swapped-in pages (mm/workingset.c) and deactivation
  after refaults (6.x mm/vmscan.c ``may_deactivate``)).
* **Reclaim trigger** like memory-cgroup limit reclaim: when the pages about to
  come in would push the resident count above the budget, reclaim
  ``max(batch, excess)`` pages in one call, where ``batch`` is 32
  (``SWAP_CLUSTER_MAX``) for ``linux`` and 1 for ``lru``/``clock`` (so those
  two hold exactly ``budget`` pages, the textbook definition behind miss-ratio
  curves and libCacheSim). ``reclaim_batch`` overrides it.
* **Slot allocator**: clusters of 256 slots with a current cluster and next
  offset, then non-full clusters, then free ones; slot 0 is the swap header.
* **Readahead**: ``vma`` (default, as with SSD-only swap), ``cluster``, or
  ``none``, with the kernel's window rule; readahead pages sit unmapped in the
  swap cache, and touching one is a minor fault that counts as a readahead hit.
* **Writeback** (``linux``): reclaim unmaps a dirty page and starts its
  write, but frees it only after the write completes -- at the next major
  fault (the process waits for its read), when reclaim meets it again and
  waits for it (cgroup v1 memcg reclaim), and otherwise by
  ``writeback_completion`` (:data:`WRITEBACK_COMPLETIONS`). The default,
  "device", gives the device a speed of its own: it writes one page in the
  time reclaim isolates ``write_cost`` pages (:data:`DEFAULT_WRITE_COST`),
  first in first out. ``shrink_lruvec`` holds a block plug
  (``blk_start_plug`` .. ``blk_finish_plug``, block/blk-core.c) around each
  level's scan, so a level's writes reach the device together as the level
  ends (the kernel's streams show bursts of up to 31 requests, ~4000 pages,
  issued within 20 us). A few writes are done while the call scans on; a
  level that writes thousands -- a dirty inactive tail, as when memory first
  fills -- keeps the device busy past the call's end, and the call writes on
  at lower levels before anything is freed: the kernel's first bursts.
  "next-level" (the 0.4.0 default) completes a level's writes as the level
  after it ends, "level" as their own level ends, "call" as the call returns;
  "lag" (the 0.3.0 rule, and the only one with 32-page rounds) once reclaim
  has isolated ``writeback_lag`` more pages (:data:`DEFAULT_WRITEBACK_LAG`;
  0 is a synchronous device, freeing a page as it is written -- ``lru`` and
  ``clock`` always work so). Until then a page stays in memory: touching it
  is a minor fault (``swapcache_hit``), and a reclaim call whose inactive
  tail is dirty writes past its target. The default was chosen against the
  kernel (docs/calibration.md).
* **Priority levels** (``linux``, ``scan_priorities``, on by default): a
  reclaim call walks priorities 12 .. 0 (``do_try_to_free_pages``), each level
  scanning ``(size >> priority) * 90 / 510`` pages of each list (the anon
  share of ``get_scan_count`` at swappiness 60 with no file pages) until the
  call has freed what it needs; ``scan_priorities=False`` isolates 32 pages at
  a time until done (the 0.3.0 default; writes then complete by the lag).
* **Flushed statistics** (``linux``): reclaim does not read the list sizes
  and the refault counter themselves but the memory cgroup's statistics,
  which the kernel folds together only when they are flushed (rstat: every
  2 s by a worker, and whenever ``memory.stat`` is read, as ``swaptrace
  capture`` does after each step; ``mem_cgroup_flush_stats_ratelimited`` in
  ``prepare_scan_control`` and ``workingset_test_recent`` does not flush
  sooner). So ``inactive_is_low``, the refault test and ``may_deactivate``
  see the lists as they were at the last flush, every
  ``stats_flush_steps`` steps (default :data:`DEFAULT_STATS_FLUSH_STEPS`;
  0 reads them exact). Between flushes reclaim seldom deactivates and the
  active list grows; a flush that shows it larger than the inactive one
  makes every call until the next flush deactivate -- the saw-tooth the
  kernel's own list sizes show (``vmscan`` tracepoints in research/notes/calibration.md).
* **Merging**: the writes of one reclaim call, and the reads of one fault with
  its readahead, back-merge when their slots are contiguous, up to
  ``max_request_bytes``.

Time model
----------
Access ``j`` of the ``n`` accesses of step ``s`` happens at
``t_us = (s - first_step + j / n) * step_us``; every request is issued at the
time of the access that caused it. The default ``step_us`` is
:data:`DEFAULT_STEP_US` = 100 ms, the order of one CPU training iteration of
the shipped presets' batch sizes; order, sizes and offsets of the stream do
not depend on it, only its rate (pass the measured step time to match a real
run, e.g. one from ``swaptrace capture``).

Summary (metadata ``summary`` and :class:`EmulationResult`): ``accesses``,
``hits`` (access to a mapped page, or a load through the zero page),
``faults`` (all others: ``zero_fill`` + ``zero_page`` (first loads of
never-written pages) +
``major_faults`` (swap-ins that read) + ``readahead_hit`` (minor faults on a
read-ahead page) + ``swapcache_hit`` (minor faults on a page reclaim had
unmapped but not yet freed)), ``pages_in``, ``pages_out``, ``readahead_issued``,
``evictions``, ``clean_drops``, ``slot_frees``, ``bytes_read``,
``bytes_written``, ``requests`` and ``request_size_hist`` by op.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace._kernels import swapstate as ks
from swaptrace._kernels.swap import _preload_swapped, _run
from swaptrace.errors import ConfigError
from swaptrace.traceio import TraceFile, TraceWriter, check_output_path, open_trace
from swaptrace.units import format_bytes

DEFAULT_STEP_US = 100_000.0
DEFAULT_MAX_REQUEST_BYTES = 512 * 1024
#: pages reclaim isolates while a write is in flight (``linux``); chosen by ``analysis/calibrate.py``
DEFAULT_WRITEBACK_LAG = 640
#: steps between flushes of the memory cgroup statistics reclaim reads (``linux``); 0: exact statistics.
#: One step is what ``swaptrace capture`` does (it reads ``memory.stat`` as each step ends, and the read
#: flushes them); with it the emulator deactivates as the kernel does there -- a few pages in the first call
#: after a flush, then bursts while the stale sizes say the inactive list is low (docs/calibration.md)
DEFAULT_STATS_FLUSH_STEPS = 1
#: ``linux`` reclaim walks the kernel's priority levels (False: 32-page rounds until done); chosen by
#: ``analysis/calibrate.py`` with :data:`DEFAULT_WRITEBACK_COMPLETION` (docs/calibration.md)
DEFAULT_SCAN_PRIORITIES = True
#: when a write started by ``linux`` reclaim completes (:data:`WRITEBACK_COMPLETIONS`): as a first-in
#: first-out device of :data:`DEFAULT_WRITE_COST` gets to it (docs/calibration.md)
DEFAULT_WRITEBACK_COMPLETION = "device"
#: writeback completion rules by name (``--writeback-completes``); each write also completes at the next
#: major fault and when reclaim meets it again
WRITEBACK_COMPLETIONS: dict[str, str] = {
    "lag": "once reclaim has isolated writeback_lag more pages, or a call has written lag + throttle",
    "level": "as the priority level of the reclaim call that wrote it ends (blk_finish_plug; needs scan_priorities)",
    "next-level": "as the priority level after the one that wrote it ends, in the same call or the next "
                  "(needs scan_priorities)",
    "call": "as the reclaim call that wrote it returns (needs scan_priorities)",
    "device": "as a first-in first-out device gets to it: one page in the time reclaim isolates write_cost pages, "
              "a level's writes handed over as the level ends (needs scan_priorities)",
}
#: WRITEBACK_COMPLETIONS that work by priority level (the level's plug), and their kernel codes (P_WB_LEVEL)
BY_LEVEL = {"level": ks.WB_BY_LEVEL, "next-level": ks.WB_BY_NEXT_LEVEL, "call": ks.WB_BY_CALL,
            "device": ks.WB_BY_DEVICE}
#: ``writeback_completion="device"``: pages reclaim isolates in the time the device writes one page
#: (its speed against the scan's); chosen by ``analysis/calibrate.py`` (docs/calibration.md)
DEFAULT_WRITE_COST = 4
#: ``writeback_completion="device"``: eighths of a clock unit the device gets per page the process zero-fills
#: before the first swap-in (its own time between reclaim calls); chosen with the ensemble below (research/notes/calibration.md,
#: "The mean of an ensemble")
DEFAULT_FILL_WRITE_CREDIT = 6
#: the default ensemble of ``emulate`` (``writeback_completion="device"``, no ``write_cost`` given): one run per
#: device speed and per room offset (a fraction of the budget), and the stream of the run nearest their mean
#: pages in and out is written. The kernel's run-to-run spread is in both: its device's speed and the room its
#: run really had (``room_gain_bytes`` spans up to 0.4 MiB at one budget); research/notes/calibration.md, "The mean of an ensemble"
ENSEMBLE_WRITE_COSTS = (3, 4, 5, 6, 8)
ENSEMBLE_ROOM_OFFSETS = (-0.005, 0.0, 0.005)
CHUNK_ROWS = 1 << 20
OUT_ROWS = 1 << 18


@dataclass(frozen=True)
class Policy:
    """A residency policy: its kernel code, default reclaim batch and a one-line description."""

    code: int
    batch_pages: int
    description: str


#: residency policies by name (``--policy``)
POLICIES: dict[str, Policy] = {
    "lru": Policy(ks.POLICY_LRU, 1, "exact least-recently-used; evicts one page per page brought in"),
    "clock": Policy(ks.POLICY_CLOCK, 1, "second chance: a FIFO that spares a referenced page once"),
    "linux": Policy(
        ks.POLICY_LINUX,
        ks.SWAP_CLUSTER_MAX,
        "Linux active/inactive lists, young + referenced bits, refault activation, reclaim in batches of 32",
    ),
}

#: readahead modes by name (``--readahead``)
READAHEAD_MODES: dict[str, int] = {"none": ks.RA_NONE, "vma": ks.RA_VMA, "cluster": ks.RA_CLUSTER}

INITIAL_STATES = ("untouched", "swapped")
#: region kinds whose pages start on swap with ``initial_state="swapped"``
SWAPPED_REGION_KINDS = ("table", "table-state")


@dataclass(frozen=True)
class EmulationResult:
    """What :func:`emulate` wrote and counted."""

    path: Path
    summary: dict[str, Any]
    accesses: int = 0
    hits: int = 0
    faults: int = 0
    zero_fill: int = 0
    major_faults: int = 0
    pages_in: int = 0
    pages_out: int = 0
    readahead_issued: int = 0
    readahead_hit: int = 0
    evictions: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    memory_pages: int = 0
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EmulatorConfig:
    """Validated emulator parameters (all sizes in pages unless named otherwise)."""

    policy: str
    budget_pages: int
    batch_pages: int
    readahead: str
    page_cluster: int
    cluster_slots: int
    nslots: int
    max_request_pages: int
    page_bytes: int
    step_us: float
    initial_state: str
    writeback_lag: int = 0
    zero_page: bool = False
    stats_flush_steps: int = 0
    scan_priorities: bool = False
    #: one of :data:`WRITEBACK_COMPLETIONS`; with those of :data:`BY_LEVEL`, ``writeback_lag`` is
    #: :data:`~swaptrace._kernels.swapstate.WB_ALL` (no write completes by the lag clock) and the throttle is off
    writeback_completion: str = "lag"
    #: "device" only (0 otherwise): pages reclaim isolates in the time the device writes one page
    write_cost: int = 0
    #: "device" only (0 otherwise): the device's time while the process zero-fills pages before the first
    #: swap-in, in eighths of a clock unit per zero-filled page (:data:`DEFAULT_FILL_WRITE_CREDIT`)
    fill_write_credit: int = 0
    #: pages a reclaim call may write beyond the lag before it waits for all of them (a safety bound on
    #: the requests of one access; never reached in the calibration runs -- tests lower it to reach it)
    writeback_throttle: int = 2 * ks.SWAP_CLUSTER_MAX

    @property
    def max_rows_per_access(self) -> int:
        window = 1 << self.page_cluster if self.readahead == "cluster" else 1 << min(self.page_cluster, 5)
        # reads <= window; writes <= max(batch, window) + one isolation round of 32
        base = 2 * window + self.batch_pages + 2 * ks.SWAP_CLUSTER_MAX + 8
        if self.writeback_completion in BY_LEVEL:
            # No throttle, and an access may make any number of calls (one that writes only at level 0
            # frees nothing; the next frees those pages and may go on writing), so bound the pages instead:
            # each request holds at least one page, and one access writes a page at most once -- a write
            # leaves it clean, not young and with a slot, and until the access's reclaim is over nothing
            # dirties a page, makes it young (activation is what frees a slot) or brings one in -- so its
            # writes are at most the pages resident when it began, at most the budget.
            return base + self.budget_pages
        # with writeback, a call writes at most lag + throttle (+ a round) pages before it waits, then
        # frees what it wrote, and one access makes at most two calls
        lag = self.writeback_lag
        wb = 2 * (lag + self.writeback_throttle + ks.SWAP_CLUSTER_MAX) if lag else 0
        return base + wb


def _linux_count(flag: str, value: int | None, default: int, policy: str, elsewhere: str) -> int:
    """A non-negative count only the ``linux`` policy uses: ``default`` there when not given, 0 elsewhere."""
    if value is None:
        return default if policy == "linux" else 0
    if value < 0:
        raise ConfigError(f"{flag} must not be negative, got {value}")
    if value and policy != "linux":
        raise ConfigError(f"{flag} applies to the linux policy only; {policy} {elsewhere}")
    return int(value)


def resolve_config(
    meta: dict[str, Any],
    *,
    memory_bytes: int | None = None,
    memory_fraction: float | None = None,
    policy: str = "linux",
    readahead: str = "vma",
    page_cluster: int = 3,
    cluster_slots: int = 256,
    swap_bytes: int | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    step_us: float | None = None,
    initial_state: str = "untouched",
    reclaim_batch: int | None = None,
    writeback_lag: int | None = None,
    zero_page: bool | None = None,
    stats_flush_steps: int | None = None,
    scan_priorities: bool | None = None,
    writeback_completion: str | None = None,
    write_cost: int | None = None,
    fill_write_credit: int | None = None,
    source: str = "trace",
) -> EmulatorConfig:
    """Check every parameter against the trace's metadata; raise :class:`ConfigError` naming the bad one."""
    if policy not in POLICIES:
        raise ConfigError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
    if readahead not in READAHEAD_MODES:
        raise ConfigError(f"unknown readahead {readahead!r}; choose one of {', '.join(READAHEAD_MODES)}")
    if initial_state not in INITIAL_STATES:
        raise ConfigError(f"unknown initial state {initial_state!r}; choose one of {', '.join(INITIAL_STATES)}")
    if writeback_completion is not None and writeback_completion not in WRITEBACK_COMPLETIONS:
        raise ConfigError(f"unknown --writeback-completes {writeback_completion!r}; "
                          f"choose one of {', '.join(WRITEBACK_COMPLETIONS)}")
    page_bytes = int(meta.get("page_bytes", 4096))
    footprint_pages = int(meta.get("footprint_pages", 0))
    if footprint_pages <= 0:
        raise ConfigError(f"{source}: metadata has no positive footprint_pages")
    footprint_bytes = footprint_pages * page_bytes
    if (memory_bytes is None) == (memory_fraction is None):
        raise ConfigError("give exactly one of --memory and --memory-fraction")
    if memory_bytes is not None and memory_bytes == 0:
        raise ConfigError("--memory must be positive, got 0")
    if memory_fraction is not None:
        if not (0.0 < memory_fraction <= 1.0) or math.isnan(memory_fraction):
            raise ConfigError(f"--memory-fraction must be in (0, 1], got {memory_fraction}")
        budget_pages = int(footprint_pages * memory_fraction)
    else:
        if memory_bytes < 0:
            raise ConfigError(f"--memory must not be negative, got {memory_bytes}")
        if memory_bytes > footprint_bytes:
            raise ConfigError(
                f"--memory {format_bytes(memory_bytes)} is above the trace's footprint "
                f"{format_bytes(footprint_bytes)}: nothing would be swapped"
            )
        budget_pages = memory_bytes // page_bytes
    if budget_pages < 1:
        raise ConfigError(f"memory budget is below one page ({format_bytes(page_bytes)}); give more memory")
    if not 0 <= page_cluster <= 10:
        raise ConfigError(f"--page-cluster must be in 0..10 (vm.page-cluster), got {page_cluster}")
    if cluster_slots < 1:
        raise ConfigError(f"--cluster-slots must be at least 1, got {cluster_slots}")
    if max_request_bytes < page_bytes:
        raise ConfigError(f"--max-request must be at least one page ({page_bytes} bytes), got {max_request_bytes}")
    if reclaim_batch is not None and reclaim_batch < 1:
        raise ConfigError(f"--reclaim-batch must be at least 1, got {reclaim_batch}")
    writeback_lag_given = writeback_lag is not None
    writeback_lag = _linux_count("--writeback-lag", writeback_lag, DEFAULT_WRITEBACK_LAG, policy,
                                 "frees pages as it writes them")
    if zero_page is None:
        zero_page = policy == "linux"
    if zero_page and policy != "linux":
        raise ConfigError(f"--zero-page applies to the linux policy only; {policy} gives every touched page a frame")
    stats_flush_steps = _linux_count("--stats-flush-steps", stats_flush_steps, DEFAULT_STATS_FLUSH_STEPS, policy,
                                     "reads no statistics")
    if scan_priorities is None:
        scan_priorities = DEFAULT_SCAN_PRIORITIES and policy == "linux"
    if scan_priorities and policy != "linux":
        raise ConfigError(f"--scan-priorities applies to the linux policy only; {policy} evicts one page at a time")
    if writeback_completion is None:  # a lag given, or 32-page rounds (no levels to complete by): the lag rule
        by_level = policy == "linux" and scan_priorities and not writeback_lag_given
        writeback_completion = DEFAULT_WRITEBACK_COMPLETION if by_level else "lag"
    if writeback_completion in BY_LEVEL:
        w = writeback_completion
        if policy != "linux":
            raise ConfigError(f"--writeback-completes {w} applies to the linux policy only; "
                              f"{policy} frees pages as it writes them")
        if not scan_priorities:
            raise ConfigError(f"--writeback-completes {w} needs --scan-priorities (it works by priority level)")
        if writeback_lag_given:
            raise ConfigError(f"--writeback-lag applies to --writeback-completes lag; {w} has no lag")
        writeback_lag = ks.WB_ALL  # no write completes by the clock (also keeps lag > 0: writes stay asynchronous)
    if writeback_completion == "device":
        write_cost = DEFAULT_WRITE_COST if write_cost is None else write_cost
        if write_cost < 1:
            raise ConfigError(f"--write-cost must be at least 1 (pages scanned per page written), got {write_cost}")
    elif write_cost is not None:
        raise ConfigError(f"--write-cost applies to --writeback-completes device; {writeback_completion} does not "
                          "model the device's speed")
    else:
        write_cost = 0
    if writeback_completion == "device":
        fill_write_credit = DEFAULT_FILL_WRITE_CREDIT if fill_write_credit is None else fill_write_credit
        if fill_write_credit < 0:
            raise ConfigError(f"--fill-write-credit must not be negative, got {fill_write_credit}")
    elif fill_write_credit:
        raise ConfigError(f"--fill-write-credit applies to --writeback-completes device; {writeback_completion} "
                          "does not model the device's time")
    else:
        fill_write_credit = 0
    if step_us is None:
        step_us = DEFAULT_STEP_US
    if not step_us > 0 or math.isinf(step_us):
        raise ConfigError(f"--step-us must be positive, got {step_us}")
    if swap_bytes is None:
        nslots = -(-(footprint_pages + 1) // cluster_slots) * cluster_slots
    else:
        if swap_bytes < 0:
            raise ConfigError(f"--swap-bytes must not be negative, got {swap_bytes}")
        nslots = swap_bytes // page_bytes
        if nslots < 2:
            raise ConfigError(f"--swap-bytes {format_bytes(swap_bytes)} holds no usable slot (the first page is the header)")
    return EmulatorConfig(
        policy=policy,
        budget_pages=budget_pages,
        batch_pages=int(reclaim_batch or POLICIES[policy].batch_pages),
        readahead=readahead,
        page_cluster=int(page_cluster),
        cluster_slots=int(cluster_slots),
        nslots=int(nslots),
        max_request_pages=int(max_request_bytes // page_bytes),
        page_bytes=page_bytes,
        step_us=float(step_us),
        initial_state=initial_state,
        writeback_lag=int(writeback_lag),
        zero_page=bool(zero_page),
        stats_flush_steps=int(stats_flush_steps),
        scan_priorities=bool(scan_priorities),
        writeback_completion=writeback_completion,
        write_cost=int(write_cost),
        fill_write_credit=int(fill_write_credit),
    )


def _step_counts(tf: TraceFile, first_step: int, chunk_rows: int) -> np.ndarray:
    """Accesses per step (first pass over the ``step`` column only; memory O(steps))."""
    counts = np.zeros(int(tf.meta.get("steps", 0) or 0), np.int64)
    for batch in tf.iter_batches(columns=["step"], batch_rows=chunk_rows):
        s = batch["step"].astype(np.int64) - first_step
        if s.size == 0:
            continue
        if s.min() < 0:
            raise ConfigError(f"{tf.path}: step {int(s.min()) + first_step} is before first_step {first_step}")
        top = int(s.max()) + 1
        if top > counts.size:
            counts = np.concatenate([counts, np.zeros(top - counts.size, np.int64)])
        counts += np.bincount(s, minlength=counts.size)
    return counts


def _new_hist() -> dict[str, dict[int, int]]:
    return {"read": {}, "write": {}}


def _add_hist(hist: dict[str, dict[int, int]], op: np.ndarray, length: np.ndarray) -> None:
    for code, name in ((0, "read"), (1, "write")):
        sizes, counts = np.unique(length[op == code], return_counts=True)
        h = hist[name]
        for size, count in zip(sizes.tolist(), counts.tolist(), strict=True):
            h[size] = h.get(size, 0) + count


def prefetch(batches: Iterator[Any]) -> Iterator[Any]:
    """Decode the next Parquet batch in a thread while the caller works on the current one."""
    with ThreadPoolExecutor(1) as pool:
        it = iter(batches)
        ahead = pool.submit(next, it, None)
        while True:
            batch = ahead.result()
            if batch is None:
                return
            ahead = pool.submit(next, it, None)
            yield batch


def _open_access(trace: str | os.PathLike) -> TraceFile:
    return open_trace(trace, kind="access")


def member_budget_pages(budget_pages: int, offset: float, footprint_pages: int) -> int:
    """An ensemble member's budget: ``budget_pages`` times ``1 + offset``, rounded down, within 1 .. footprint."""
    # the epsilon keeps an exact product whole: 200 * 1.005 is 200.99999999999997 in binary
    return min(footprint_pages, max(1, math.floor(budget_pages * (1 + offset) + 1e-9)))


def ensemble_configs(cfg: EmulatorConfig, footprint_pages: int) -> list[EmulatorConfig]:
    """The default ensemble's members of ``cfg``: each room offset with each write cost, offsets outermost."""
    return [replace(cfg, budget_pages=member_budget_pages(cfg.budget_pages, d, footprint_pages), write_cost=c)
            for d in ENSEMBLE_ROOM_OFFSETS for c in ENSEMBLE_WRITE_COSTS]


def nearest_member(counts: Sequence[tuple[int, int]]) -> int:
    """Index of the ``(pages_in, pages_out)`` nearest their mean: least relative distance in pages in plus
    pages out, the first of equals. Its run stands for the ensemble, whose mean no single stream has."""
    mean_in = sum(c[0] for c in counts) / len(counts)
    mean_out = sum(c[1] for c in counts) / len(counts)
    return min(range(len(counts)), key=lambda i: abs(counts[i][0] - mean_in) / max(mean_in, 1)
               + abs(counts[i][1] - mean_out) / max(mean_out, 1))


def emulate(
    trace: str | os.PathLike,
    out: str | os.PathLike,
    *,
    memory_bytes: int | None = None,
    memory_fraction: float | None = None,
    policy: str = "linux",
    readahead: str = "vma",
    page_cluster: int = 3,
    cluster_slots: int = 256,
    swap_bytes: int | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    step_us: float | None = None,
    initial_state: str = "untouched",
    force: bool = False,
    progress: Callable[[int], None] | None = None,
    reclaim_batch: int | None = None,
    writeback_lag: int | None = None,
    zero_page: bool | None = None,
    stats_flush_steps: int | None = None,
    scan_priorities: bool | None = None,
    writeback_completion: str | None = None,
    write_cost: int | None = None,
    fill_write_credit: int | None = None,
    ensemble: bool | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> EmulationResult:
    """Replay an access trace against a DRAM budget; write the swap I/O stream.

    Parameters
    ----------
    trace : path-like
        A ``kind: access`` Parquet file (``swaptrace generate``).
    out : path-like
        The ``kind: swapio`` file to write (atomically; refused if it exists
        unless ``force``).
    memory_bytes, memory_fraction : int or float
        The DRAM budget, in bytes or as a fraction of the trace's footprint;
        exactly one. Must hold at least one page and not exceed the footprint.
    policy : {"linux", "lru", "clock"}
        Residency policy (:data:`POLICIES`).
    readahead : {"vma", "cluster", "none"}
        Swap readahead (``vm.page-cluster`` = ``page_cluster``, default 3: at
        most 8 pages).
    cluster_slots : int
        Slots per allocator cluster (256 as in Linux; 512 with THP swap).
    swap_bytes : int, optional
        Swap device size; default: the footprint plus the header page, rounded
        up to whole clusters. Running out of slots is a :class:`ConfigError`.
    max_request_bytes : int
        Largest merged request (the device's ``max_sectors_kb``), default 512 KiB.
    step_us : float, optional
        Duration of one training step in the time model (default 100 ms).
    initial_state : {"untouched", "swapped"}
        ``swapped``: pages of ``table`` and ``table-state`` regions start on
        swap (clean, consecutive slots), as after loading a model and pushing
        it out; no I/O is recorded for that.
    force : bool
        Overwrite ``out``.
    progress : callable, optional
        Called with the number of accesses processed since the last call.
    reclaim_batch : int, optional
        Pages per reclaim call; default 32 for ``linux``, 1 for ``lru``/``clock``.
    writeback_lag : int, optional
        ``linux`` only: pages reclaim isolates while a write is in flight
        (default :data:`DEFAULT_WRITEBACK_LAG`); 0 frees a page as it is
        written (a synchronous device).
    zero_page : bool, optional
        ``linux`` only (default on): a load of a never-written page maps the
        shared zero page instead of a frame.
    stats_flush_steps : int, optional
        ``linux`` only: steps between flushes of the memory cgroup statistics
        reclaim reads (default :data:`DEFAULT_STATS_FLUSH_STEPS`); 0 reads
        exact list sizes.
    scan_priorities : bool, optional
        ``linux`` only (default :data:`DEFAULT_SCAN_PRIORITIES`): each reclaim
        call walks the kernel's priority levels (scan shares
        ``(size >> priority) * 90 / 510`` of both lists, 32 deactivations at
        the end of each level while the inactive list is low); False: 32-page
        rounds until done.
    writeback_completion : {"device", "call", "level", "next-level", "lag"}, optional
        ``linux`` only: when a write started by reclaim completes, besides at
        the next major fault and when reclaim meets the page again
        (:data:`WRITEBACK_COMPLETIONS`). Default :data:`DEFAULT_WRITEBACK_COMPLETION`
        with priority levels; "lag" with 32-page rounds or when
        ``writeback_lag`` is given. "device": as a first-in first-out device
        writing one page per ``write_cost`` pages isolated gets to it, a
        level's writes handed over as the level ends; "call": as the reclaim
        call that wrote it returns; "level": as its priority level ends (``shrink_lruvec``'s block
        plug, ``blk_finish_plug``, submits a level's writes together);
        "next-level": as the level after it ends; "lag": once reclaim has
        isolated ``writeback_lag`` more pages (or the call has written the lag
        plus 64 and waits for all). All but "lag" need ``scan_priorities`` and
        no ``writeback_lag``.
    write_cost : int, optional
        ``writeback_completion="device"`` only: pages reclaim isolates in the
        time the device writes one page (default :data:`DEFAULT_WRITE_COST`,
        chosen against the kernel; at least 1).
    fill_write_credit : int, optional
        ``writeback_completion="device"`` only: eighths of a clock unit the
        device gets per page zero-filled before the first swap-in (default
        :data:`DEFAULT_FILL_WRITE_CREDIT`; 0: none).
    ensemble : bool, optional
        ``writeback_completion="device"`` only, and no ``write_cost``: run once
        per write cost of :data:`ENSEMBLE_WRITE_COSTS` at each budget of
        :data:`ENSEMBLE_ROOM_OFFSETS` (15 runs) and write the stream of the run
        nearest their mean pages in and out (:func:`nearest_member`); the
        members are recorded in ``params["ensemble"]``. Default: on where it
        applies. False: one run at the budget with :data:`DEFAULT_WRITE_COST`.
        The kernel's runs spread over the device's speed and the room they
        really had, and its median run is what the emulator is calibrated
        against (research/notes/calibration.md, "The mean of an ensemble").

    Returns
    -------
    EmulationResult
    """
    tf = _open_access(trace)
    meta = tf.meta
    cfg = resolve_config(
        meta,
        memory_bytes=memory_bytes,
        memory_fraction=memory_fraction,
        policy=policy,
        readahead=readahead,
        page_cluster=page_cluster,
        cluster_slots=cluster_slots,
        swap_bytes=swap_bytes,
        max_request_bytes=max_request_bytes,
        step_us=step_us,
        initial_state=initial_state,
        reclaim_batch=reclaim_batch,
        writeback_lag=writeback_lag,
        zero_page=zero_page,
        stats_flush_steps=stats_flush_steps,
        scan_priorities=scan_priorities,
        writeback_completion=writeback_completion,
        write_cost=write_cost,
        fill_write_credit=fill_write_credit,
        source=str(tf.path),
    )
    if ensemble is None:
        ensemble = cfg.writeback_completion == "device" and write_cost is None
    elif ensemble and cfg.writeback_completion != "device":
        raise ConfigError(f"--ensemble varies the device's speed: it needs --writeback-completes device, "
                          f"not {cfg.writeback_completion}")
    elif ensemble and write_cost is not None:
        raise ConfigError("--ensemble varies the write cost: leave out --write-cost (or give --no-ensemble)")
    check_output_path(out, force)
    footprint_pages = int(meta["footprint_pages"])
    first_step = int(meta.get("first_step", 0))
    # The per-step access counts (for t_us only) come from a pass over the step column; with the step
    # count in the metadata that pass runs in a thread beside the emulation, else it runs first.
    counter = ThreadPoolExecutor(1)
    nsteps = int(meta.get("steps") or 0)
    if nsteps > 0:
        counts = counter.submit(_step_counts, tf, first_step, chunk_rows)
    else:
        counts = _step_counts(tf, first_step, chunk_rows)
        nsteps = counts.size
    counter.shutdown(wait=False)
    regions = meta.get("regions")

    def batches():
        return prefetch(tf.iter_batches(columns=["step", "page", "write"], batch_rows=chunk_rows))

    run_cfg, members = cfg, None
    if ensemble:
        configs = ensemble_configs(cfg, footprint_pages)
        progress = _share(progress, len(configs) + 1)  # the members' passes and the writing pass, one bar
        found = []
        for member in configs:  # counts only: their rows are dropped
            emu = Emulator(member, footprint_pages, counts, nsteps=nsteps, first_step=first_step, regions=regions)
            for batch in batches():
                for _ in emu.feed(batch["page"], batch["write"], batch["step"], progress=progress):
                    pass
            found.append((int(emu.state.reg[ks.C_PAGES_IN]), int(emu.state.reg[ks.C_PAGES_OUT])))
        chosen = nearest_member(found)
        run_cfg = configs[chosen]
        members = {
            "write_costs": list(ENSEMBLE_WRITE_COSTS),
            "room_offsets": list(ENSEMBLE_ROOM_OFFSETS),
            "members": [{"write_cost": m.write_cost, "memory_bytes": m.budget_pages * m.page_bytes,
                         "pages_in": n_in, "pages_out": n_out} for m, (n_in, n_out) in zip(configs, found, strict=True)],
            "chosen": chosen,
            "mean_pages_in": sum(f[0] for f in found) / len(found),
            "mean_pages_out": sum(f[1] for f in found) / len(found),
        }
    emu = Emulator(run_cfg, footprint_pages, counts, nsteps=nsteps, first_step=first_step, regions=regions)
    params = {
        "policy": cfg.policy,
        "memory_bytes": cfg.budget_pages * cfg.page_bytes,
        "memory_fraction": memory_fraction,
        "readahead": cfg.readahead,
        "page_cluster": cfg.page_cluster,
        "cluster_slots": cfg.cluster_slots,
        "swap_bytes": cfg.nslots * cfg.page_bytes,
        "max_request_bytes": cfg.max_request_pages * cfg.page_bytes,
        "step_us": cfg.step_us,
        "initial_state": cfg.initial_state,
        "reclaim_batch": cfg.batch_pages,
        # None with the by-level rules: their lag is a sentinel no write reaches, not a device latency
        "writeback_lag": None if cfg.writeback_completion in BY_LEVEL else cfg.writeback_lag,
        "zero_page": cfg.zero_page,
        "stats_flush_steps": cfg.stats_flush_steps,
        "scan_priorities": cfg.scan_priorities,
        "writeback_completion": cfg.writeback_completion,
        "write_cost": run_cfg.write_cost or None,
        "fill_write_credit": cfg.fill_write_credit if cfg.writeback_completion == "device" else None,
        # the members and the one whose stream this is (its write cost above, its budget in the entry)
        "ensemble": members,
    }
    out_meta = {
        "source": "emulator",
        "page_bytes": cfg.page_bytes,
        "device_bytes": cfg.nslots * cfg.page_bytes,
        "memory_bytes": cfg.budget_pages * cfg.page_bytes,
        "steps": nsteps,
        "first_step": first_step,
        "duration_us": float(nsteps * cfg.step_us),
        "trace": str(tf.path),
        "params": params,
    }
    # Parquet encoding runs in a second thread while the (GIL-free) kernel goes on; one batch in flight.
    with TraceWriter(out, "swapio", out_meta, force=force) as writer, ThreadPoolExecutor(1) as pool:
        pending = None
        for batch in batches():
            for rows in emu.feed(batch["page"], batch["write"], batch["step"], progress=progress):
                if pending is not None:
                    pending.result()
                pending = pool.submit(writer.write, **rows)
        if pending is not None:
            pending.result()
        summary = emu.summary()
        summary["memory_pages"] = cfg.budget_pages  # the budget asked for (a member's own: params["ensemble"])
        writer.metadata["summary"] = summary
        writer.metadata["step_faults"] = emu.step_faults()
    return _result(writer.path, summary, cfg, params)


def _share(progress: Callable[[int], None] | None, passes: int) -> Callable[[int], None] | None:
    """``progress`` for ``passes`` passes over the trace on one bar of the trace's length (whole accesses)."""
    if progress is None:
        return None
    done = [0, 0]  # accesses over all passes, and what the bar was given

    def tick(n: int) -> None:
        done[0] += n
        due = done[0] // passes
        if due > done[1]:
            progress(due - done[1])
            done[1] = due

    return tick


class Emulator:
    """The emulator's state and its chunk-by-chunk driver (what :func:`emulate` runs).

    Parameters
    ----------
    cfg : EmulatorConfig
        From :func:`resolve_config`.
    footprint_pages : int
        Every page number must be below it.
    step_counts : numpy.ndarray or concurrent.futures.Future
        Accesses in each step (for the time model); a future is resolved when
        the first rows are converted to ``t_us``.
    nsteps : int, optional
        Number of steps (default: ``len(step_counts)``); steps outside
        ``first_step .. first_step + nsteps - 1`` are an error.
    first_step : int
        Step number of ``step_counts[0]``.
    regions : list of dict, optional
        The trace's regions (used by ``initial_state="swapped"``).
    """

    def __init__(self, cfg: EmulatorConfig, footprint_pages: int, step_counts: Any, *, nsteps: int | None = None,
                 first_step: int = 0, regions: list[dict[str, Any]] | None = None):
        if nsteps is None:
            nsteps = len(step_counts)
        self._counts = step_counts
        self.cfg = cfg
        self.footprint_pages = int(footprint_pages)
        level = cfg.writeback_completion in BY_LEVEL
        max_rows = cfg.max_rows_per_access
        self.state = ks.new_state(
            footprint_pages=footprint_pages,
            nslots=cfg.nslots,
            cluster_slots=cfg.cluster_slots,
            nsteps=nsteps,
            params={
                "policy": POLICIES[cfg.policy].code,
                "budget_pages": cfg.budget_pages,
                "batch_pages": cfg.batch_pages,
                "readahead": READAHEAD_MODES[cfg.readahead],
                "page_cluster": cfg.page_cluster,
                "max_request_pages": cfg.max_request_pages,
                "page_bytes": cfg.page_bytes,
                "first_step": first_step,
                "max_rows_per_access": max_rows,
                "writeback_lag": cfg.writeback_lag,
                "zero_page": int(cfg.zero_page),
                # off with the by-level rules (their lag is WB_ALL, and lag + throttle must stay in int64)
                "writeback_throttle": 0 if level else cfg.writeback_throttle,
                "stats_flush_steps": cfg.stats_flush_steps,
                "scan_priorities": int(cfg.scan_priorities),
                "writeback_level": BY_LEVEL.get(cfg.writeback_completion, 0),
                "write_cost": cfg.write_cost,
                "fill_write_credit": cfg.fill_write_credit,
            },
            step_us=cfg.step_us,
            # the by-level rules bound an access's rows by the budget: room for OUT_ROWS more, not four times it
            out_rows=OUT_ROWS + max_rows if level else max(OUT_ROWS, 4 * max_rows),
        )
        self.hist = _new_hist()
        self.first_step = first_step
        self.nsteps = int(nsteps)
        if cfg.initial_state == "swapped":
            _preload(self.state, regions or [], cfg)

    def feed(self, pages: np.ndarray, writes: np.ndarray, steps: np.ndarray,
             progress: Callable[[int], None] | None = None) -> Iterator[dict[str, np.ndarray]]:
        """Process one chunk of accesses; yield the swap I/O rows as column dicts as they fill up."""
        st, cfg = self.state, self.cfg
        pages = np.ascontiguousarray(pages)
        pages = pages.view(np.int64) if pages.dtype == np.uint64 else pages.astype(np.int64, copy=False)
        if not pages.flags.writeable:  # Arrow's zero-copy buffers: one kernel signature for all callers
            pages = pages.copy()
        steps = np.ascontiguousarray(steps, dtype=np.int64)
        writes = np.ascontiguousarray(writes, dtype=np.bool_)
        i = 0
        while i < pages.size:
            j = _run(st.b, st.m, st.f, pages, writes, steps, i)
            error = st.reg[ks.R_ERROR]
            if error == ks.ERR_BAD_PAGE:
                raise ConfigError(f"page {int(pages[j])} is outside the footprint of {self.footprint_pages} pages")
            if error == ks.ERR_BAD_STEP:
                raise ConfigError(f"step {int(steps[j])} is outside the trace's steps "
                                  f"{self.first_step}..{self.first_step + self.nsteps - 1}")
            if error == ks.ERR_OUT_FULL:
                raise RuntimeError("emulator output buffer overflow: max_rows_per_access is too small (a bug)")
            if error == ks.ERR_SWAP_FULL:
                raise ConfigError(
                    f"swap is full: the device of {format_bytes(cfg.nslots * cfg.page_bytes)} "
                    f"({cfg.nslots - 1} usable slots) cannot hold the pages evicted from a "
                    f"{format_bytes(cfg.budget_pages * cfg.page_bytes)} budget over a "
                    f"{format_bytes(self.footprint_pages * cfg.page_bytes)} footprint; give a larger --swap-bytes"
                )
            rows = self._take_rows()
            if rows is not None:
                yield rows
            if progress is not None:
                progress(j - i)
            i = j

    def step_counts(self) -> np.ndarray:
        """Accesses per step (waits for the counting pass if it still runs)."""
        if not isinstance(self._counts, np.ndarray):
            self._counts = np.asarray(self._counts.result(), dtype=np.int64)
            if self._counts.size > self.nsteps:
                raise ConfigError(f"the trace has {self._counts.size} steps; its metadata says {self.nsteps}")
        return self._counts

    def _take_rows(self) -> dict[str, np.ndarray] | None:
        rows = self.state.take_rows()
        if rows is not None:
            # time model: access j of the n of step s happens at (s - first_step + j / n) * step_us
            si = rows["step"].astype(np.int64) - self.first_step
            rows["t_us"] = (si + rows["t_us"] / self.step_counts()[si]) * self.cfg.step_us
            _add_hist(self.hist, rows["op"], rows["length"])
        return rows

    def summary(self) -> dict[str, Any]:
        """Counters so far, in the swapio ``summary`` layout."""
        return _summary(self.state, self.hist, self.cfg)

    def step_faults(self) -> dict[str, Any]:
        """Major and minor faults per step so far (metadata ``step_faults``; a capture's are under ``kernel``)."""
        st = self.state
        return {"first_step": int(self.first_step), "major": st.step_major.tolist(), "minor": st.step_minor.tolist()}


def _preload(st: ks.EmuState, regions: list[dict[str, Any]], cfg: EmulatorConfig) -> None:
    chosen = [
        np.arange(int(r["first_page"]), int(r["first_page"]) + int(r["pages"]), dtype=np.int64)
        for r in regions
        if r.get("kind") in SWAPPED_REGION_KINDS
    ]
    if not chosen:
        return
    pages = np.unique(np.concatenate(chosen))
    _preload_swapped(st.b, st.m, pages)
    if st.reg[ks.R_ERROR] == ks.ERR_SWAP_FULL:
        raise ConfigError(
            f"swap is full: {pages.size} table pages do not fit in {cfg.nslots - 1} usable slots; give a larger --swap-bytes"
        )


def _summary(st: ks.EmuState, hist: dict[str, dict[int, int]], cfg: EmulatorConfig) -> dict[str, Any]:
    r = st.reg
    return {
        "accesses": int(r[ks.C_ACCESSES]),
        "hits": int(r[ks.C_HITS]),
        "faults": int(r[ks.C_FAULTS]),
        "zero_fill": int(r[ks.C_ZERO_FILL]),
        "zero_page": int(r[ks.C_ZERO_PAGE]),
        "major_faults": int(r[ks.C_MAJOR]),
        "pages_in": int(r[ks.C_PAGES_IN]),
        "pages_out": int(r[ks.C_PAGES_OUT]),
        "readahead_issued": int(r[ks.C_RA_ISSUED]),
        "readahead_hit": int(r[ks.C_RA_HIT]),
        "swapcache_hit": int(r[ks.C_SWAPCACHE_HIT]),
        "writeback_waits": int(r[ks.C_WB_WAITS]),
        "evictions": int(r[ks.C_EVICTIONS]),
        "clean_drops": int(r[ks.C_CLEAN_DROPS]),
        "slot_frees": int(r[ks.C_SLOT_FREES]),
        "reclaim_calls": int(r[ks.C_RECLAIM_CALLS]),
        "bytes_read": int(r[ks.C_BYTES_READ]),
        "bytes_written": int(r[ks.C_BYTES_WRITTEN]),
        "memory_pages": cfg.budget_pages,
        "requests": {"read": int(r[ks.C_REQ_READ]), "write": int(r[ks.C_REQ_WRITE]), "discard": 0},
        "request_size_hist": {
            name: {str(size): count for size, count in sorted(h.items())} for name, h in hist.items()
        },
    }


def _result(path: Path, summary: dict[str, Any], cfg: EmulatorConfig, params: dict[str, Any]) -> EmulationResult:
    keys = (
        "accesses hits faults zero_fill major_faults pages_in pages_out readahead_issued "
        "readahead_hit evictions bytes_read bytes_written"
    ).split()
    return EmulationResult(
        path=Path(path),
        summary=summary,
        memory_pages=cfg.budget_pages,
        params=params,
        **{k: summary[k] for k in keys},
    )
