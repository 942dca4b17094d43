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
  first in first out, and each write completes ``write_latency`` clock units
  after the device served it (:data:`DEFAULT_WRITE_LATENCY`: the loop
  worker's and the disk's round trip). ``shrink_lruvec`` holds a block plug
  (``blk_start_plug`` .. ``blk_finish_plug``, block/blk-core.c) around each
  level's scan, so a level's writes reach the device together as the level
  ends (the kernel's streams show bursts of up to 31 requests, ~4000 pages,
  issued within 20 us); the plug's end also issues the level's last merged
  request, so no write request spans two levels. A few writes are done while
  the call scans on; a
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
  tail is dirty writes past its target. The defaults come from the kernel
  profile (:mod:`swaptrace.emulate.kernel_profile`).
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
  kernel's own list sizes show.
* **Merging**: the writes of one reclaim call, and the reads of one fault with
  its readahead, merge when a slot adjoins the last request at either end, up to
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

Layout: :mod:`~swaptrace.emulate.config` (the frozen :class:`EmulatorConfig`,
its validation and the budget rule), :mod:`~swaptrace.emulate.kernel_profile` (kernel
profiles), :mod:`~swaptrace.emulate.engine` (:class:`Emulator`, one run),
:mod:`~swaptrace.emulate.ensemble` (runs side by side) and
:mod:`~swaptrace.emulate.run` (:func:`emulate`, which writes the stream).

Summary (metadata ``summary`` and :class:`EmulationResult`): ``accesses``,
``hits`` (access to a mapped page, or a load through the zero page),
``faults`` (all others: ``zero_fill`` + ``zero_page`` (first loads of
never-written pages) +
``major_faults`` (swap-ins that read) + ``readahead_hit`` (minor faults on a
read-ahead page) + ``swapcache_hit`` (minor faults on a page reclaim had
unmapped but not yet freed)), ``pages_in``, ``pages_out``, ``readahead_issued``,
``evictions``, ``clean_drops``, ``slot_frees``, ``bytes_read``,
``bytes_written``, ``requests`` and ``request_size_hist`` by op; with the
trace's alloc and free events (docs/formats.md), ``allocs``, ``frees``,
``freed_resident`` and ``freed_swapped``
(:mod:`swaptrace.kernels.emulate.release`).
"""

from swaptrace.core.lazy import lazy_names

#: each module -> the names it defines; each loaded on first use, so importing one light module of the package
#: (its options, its constants) does not load the rest (swaptrace.core.lazy)
_NAMES = {
    "config": ("BY_LEVEL", "DEFAULT_FILL_WRITE_CREDIT", "DEFAULT_MAX_REQUEST_BYTES", "DEFAULT_SCAN_PRIORITIES", "DEFAULT_STATS_FLUSH_STEPS", "DEFAULT_STEP_US", "DEFAULT_WRITE_COST", "DEFAULT_WRITE_LATENCY", "DEFAULT_WRITEBACK_COMPLETION", "DEFAULT_WRITEBACK_LAG", "INITIAL_STATES", "POLICIES", "READAHEAD_MODES", "SWAPPED_REGION_KINDS", "WRITEBACK_COMPLETIONS", "EmulatorConfig", "Policy"),
    "engine": ("OUT_ROWS", "Counters", "Emulator", "prefetch"),
    "ensemble": ("ensemble_configs", "member_budget_pages", "nearest_member", "run_members"),
    "kernel_profile": ("DEFAULT_PROFILE", "Ensemble", "KernelProfile", "load_profile", "profile_names"),
    "run": ("CHUNK_ROWS", "EmulationResult", "emulate"),
}
__getattr__, __dir__ = lazy_names(globals(), _NAMES)

__all__ = [
    "BY_LEVEL", "CHUNK_ROWS", "DEFAULT_FILL_WRITE_CREDIT", "DEFAULT_MAX_REQUEST_BYTES", "DEFAULT_PROFILE",
    "DEFAULT_SCAN_PRIORITIES", "DEFAULT_STATS_FLUSH_STEPS", "DEFAULT_STEP_US", "DEFAULT_WRITE_COST",
    "DEFAULT_WRITE_LATENCY",
    "DEFAULT_WRITEBACK_COMPLETION", "DEFAULT_WRITEBACK_LAG", "INITIAL_STATES", "OUT_ROWS", "POLICIES",
    "READAHEAD_MODES", "SWAPPED_REGION_KINDS", "WRITEBACK_COMPLETIONS", "Counters", "EmulationResult", "Emulator",
    "EmulatorConfig", "Ensemble", "KernelProfile", "Policy", "emulate", "ensemble_configs", "load_profile",
    "member_budget_pages", "nearest_member", "prefetch", "profile_names", "run_members",
]
