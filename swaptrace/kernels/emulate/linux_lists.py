"""Linux's two-list anonymous page reclaim (classic LRU, no MGLRU), as in mm/vmscan.c.

* New and swapped-in pages enter the inactive list head (since 5.9 anon pages
  start inactive: b518154e59aa "mm/vmscan: protect the workingset on anonymous
  LRU", ``folio_add_lru_vma`` in mm/memory.c ``do_anonymous_page``, whose PTE is
  made young by ``pte_sw_mkyoung``), so is a first touch after an alloc or a free
  (:mod:`swaptrace.kernels.emulate.release`); a page-table access sets the PTE young bit only.
* Refault activation (mm/workingset.c, anon since 5.9): an evicted page
  leaves a shadow entry holding ``nonresident_age``, a counter bumped by
  every eviction and every activation (``workingset_eviction``,
  ``move_folios_to_lru``, ``workingset_refault``). A page read back from swap
  (faulting or read ahead) whose refault distance ``age - shadow`` is at most
  the active list's size (``workingset_test_recent`` with no file pages and
  free swap) goes straight to the active list head.
* Reclaim isolates up to ``SWAP_CLUSTER_MAX`` pages from the inactive tail and
  applies ``folio_check_references``: young and already PG_referenced ->
  activate (active head); young only -> set PG_referenced, back to the
  inactive head; not young -> clear PG_referenced and reclaim. On activation a
  swap-cache page loses its slot when swap is more than half full.
* Before each isolation round, when ``inactive_is_low`` (``inactive * ratio <
  active`` with ``ratio = int_sqrt(10 * GB)``, GB the size of both lists), or
  when the inactive list is empty, ``shrink_active_list`` moves up to 32 pages
  from the active tail to the inactive head, clearing their young bits.
  Otherwise, in a reclaim call that follows refault activations
  (``prepare_scan_control`` sets ``may_deactivate`` when
  WORKINGSET_ACTIVATE_ANON moved since ``snapshot_refaults``), it moves
  ``min(32, 32 * active // inactive)``: ``get_scan_count`` gives both anon
  lists scan targets in proportion to their sizes and ``shrink_lruvec``
  takes up to 32 from each per round.
* A reclaim call stops once it has reclaimed at least the requested count.
* Writeback (``P_WB_LAG`` > 0). ``shrink_folio_list`` unmaps a dirty page,
  starts its write (``pageout``) and puts it back at the inactive head under
  writeback (PG_writeback, PG_reclaim): written, not yet reclaimed. When the
  write completes, ``folio_end_writeback`` -> ``folio_rotate_reclaimable``
  moves a clean inactive page to the inactive tail, where the next scan frees
  it without I/O. The emulator has no clock of its own, so the write
  completes once reclaim has isolated ``P_WB_LAG`` more pages (the device's
  latency in units of reclaim work), when the process waits for a read (a
  major fault: the device works in order, the writes queued before the read
  are done when it is), or when reclaim meets a page still under writeback:
  memcg reclaim on cgroup v1 (``!writeback_throttling_sane``) then waits for
  it (``folio_wait_writeback``), as it does once one call has written
  ``P_WB_THROTTLE`` (64) pages more than the lag: throttled on writeback,
  which also bounds the requests one access can issue. So a
  reclaim call whose inactive tail is dirty writes well past its target
  before the first pages come free -- the bursts of the kernel's streams --
  and a page touched meanwhile is a minor fault with no read. A lag of 0 is a synchronous device (``pageout``'s
  "probably a ramdisk" case): the page is freed as it is written.
* Writeback completing by priority level (``P_WB_LEVEL``, with
  ``P_SCAN_PRIO``). ``shrink_lruvec`` holds a block plug (``blk_start_plug``
  .. ``blk_finish_plug``, block/blk-core.c) around one level's scanning, so
  the level's writes reach the device together -- the kernel's streams show
  writes in bursts of up to 31 requests (~4000 pages) issued within 20 us --
  and the device is far slower than scanning. With no clock of its own the
  emulator completes them at a reclaim boundary: ``WB_BY_LEVEL`` as their
  level ends, ``WB_BY_NEXT_LEVEL`` as the level after it ends
  (in the same call or the next; ``R_WB_MARK`` holds the writeback clock as
  the last level ended), ``WB_BY_CALL`` as their reclaim call returns.
  ``P_WB_LAG`` is then ``WB_ALL`` and ``P_WB_THROTTLE`` 0: no write
  completes by the lag clock and the throttle never fires; the read wait and
  the cgroup v1 wait stay. Writes are still asynchronous: a written page goes
  back to the inactive head under writeback, and a later level (or call)
  frees it from the tail, where its completion put it.
* Writeback on a device of its own speed (``WB_BY_DEVICE``, the default).
  The device writes one page in the time reclaim isolates ``P_WB_COST``
  pages, first in first out; a level's writes reach it together as the
  level ends (the plug), and each completes ``P_WB_COST`` after the one
  before it (or after it reached an idle device). So a few writes complete
  within the call that issued them, while a level that writes thousands --
  a dirty inactive tail, as when memory first fills -- keeps the device busy
  past the call's end, and the call goes on to lower levels writing more
  before it frees anything: the kernel's bursts of ~4000 pages, which the
  fixed-boundary rules above cannot make at one budget without overshooting
  at another. A wait for all writes (a read, or the cgroup v1 wait) first
  hands the plug to the device (``schedule`` flushes it) and moves the clock
  to the device's: the process slept meanwhile.
* The block layer's plug rules (``P_PLUG_RULES``, with ``WB_BY_DEVICE``; a kernel profile's ``plug_rules``).
  A bio that starts a new request first sends the task's plug to the device when the plug holds
  ``BLK_MAX_REQUEST_COUNT`` (32) requests or its *first* request has reached ``BLK_PLUG_FLUSH_SIZE``
  (128 KiB) (``blk_add_rq_to_plug``, block/blk-mq.c). A swap-in (``swap_vma_readahead``, mm/swap_state.c)
  holds a plug while it charges and reads each page of its window in turn; the reclaim a charge runs nests
  its own per-level plug inside, a no-op (``blk_start_plug`` on a task that has one), so its writes merge
  across levels and calls and none reaches the device before 32 requests or the swap-in's end -- the
  kernel's bursts of 31 requests of 512 KiB at once (research/plug_flushes.py). Without the rules a level's
  plug is sent whole as the level ends.
* Flushed statistics (``P_STATS_FLUSH`` > 0). ``inactive_is_low``, the refault
  test and ``may_deactivate`` read ``lruvec_page_state``: the memory cgroup's
  rstat counters, folded together only at a flush (``memcg_flush_stats``:
  every 2 s by a worker, at every ``memory.stat`` read; the reclaim-side
  ``mem_cgroup_flush_stats_ratelimited`` waits for the worker). The emulator
  flushes every ``P_STATS_FLUSH`` steps (:func:`_linux_stats_tick`, at the
  first fault of a step); scan targets (``lruvec_lru_size``) stay exact.
"""

from __future__ import annotations

from swaptrace.kernels.emulate.dlist import _push_head, _push_tail, _unlink
from swaptrace.kernels.emulate.evict import _evict
from swaptrace.kernels.emulate.plug import _flush, _merges, _submit
from swaptrace.kernels.emulate.release import _drop
from swaptrace.kernels.emulate.slots import _alloc_slot, _free_slot, _swap_full
from swaptrace.kernels.emulate.state import (
    ACTIVE,
    C_ACTIVATIONS,
    C_DEACTIVATIONS,
    C_MAJOR,
    C_PAGES_OUT,
    C_REFAULT_ACTIVATIONS,
    C_SCANNED,
    C_SLOT_FREES,
    C_WB_WAITS,
    C_ZERO_FILL,
    CAUSE_RECLAIM,
    DIRTY,
    FREED,
    MAPPED,
    O_NEXT,
    O_PREV,
    O_SHADOW,
    O_SLOT,
    O_TMP,
    O_WBQ,
    O_WBT,
    OP_WRITE,
    P_FILL_CREDIT,
    P_FOOTPRINT,
    P_PAGE_BYTES,
    P_PLUG_RULES,
    P_SCAN_PRIO,
    P_STATS_FLUSH,
    P_WB_COST,
    P_WB_LAG,
    P_WB_LATENCY,
    P_WB_LEVEL,
    P_WB_THROTTLE,
    P_ZEROMAP,
    R_ERROR,
    R_FILL_SEEN,
    R_N_ACTIVE,
    R_N_INACTIVE,
    R_NESTED,
    R_NONRES_AGE,
    R_PEND_N,
    R_PLUG_HEAD,
    R_PLUG_REQS,
    R_REFAULT_SNAP,
    R_RESIDENT,
    R_STAT_ACTIVE,
    R_STAT_INACTIVE,
    R_STAT_REFAULTS,
    R_STAT_STEP,
    R_STEP,
    R_WB_CLOCK,
    R_WB_DEV,
    R_WB_HEAD,
    R_WB_MARK,
    R_WB_N,
    R_WB_PLUGGED,
    REFERENCED,
    RESIDENT,
    SWAP_CLUSTER_MAX,
    WB_ALL,
    WB_BY_CALL,
    WB_BY_DEVICE,
    WB_BY_LEVEL,
    WB_BY_NEXT_LEVEL,
    WRITEBACK,
    YOUNG,
    ZEROED,
)
from swaptrace.kernels.jit import jit_noref

#: the first priority level of a reclaim call (DEF_PRIORITY, mm/vmscan.c)
DEF_PRIORITY = 12
#: the anon lists' share of the scan at each level, ``fraction[0] / denominator`` of ``get_scan_count`` with
#: swappiness 60 and no file pages: anon cost ``2c`` against file cost ``c`` gives ap = 60 * 3c / 2c = 90 and
#: fp = 140 * 3c / c = 420, so 90 / 510 (the kernel's tracepoints show a call scanning about a fifth of
#: ``size >> priority`` per level)
SCAN_ANON_SHARE = (90, 510)
#: requests a plug holds before the next one sends them all to the device (include/linux/blkdev.h)
BLK_MAX_REQUEST_COUNT = 32
#: a plug whose first request has reached this many bytes is sent as the next request joins (block/blk-mq.c)
BLK_PLUG_FLUSH_SIZE = 128 * 1024


@jit_noref
def _int_sqrt(x):
    """Floor of the square root of a non-negative integer (the kernel's ``int_sqrt``)."""
    r = 0
    while (r + 1) * (r + 1) <= x:
        r += 1
    return r


@jit_noref
def _linux_stats_tick(m):
    """Flush the memcg statistics once ``P_STATS_FLUSH`` steps have passed since the last flush.

    Called before each fault (the statistics are read only by faults and the
    reclaim they cause); a step without faults moves the flush to the next one.
    """
    if m[P_STATS_FLUSH] > 0 and m[R_STEP] >= m[R_STAT_STEP] + m[P_STATS_FLUSH]:
        m[R_STAT_STEP] = m[R_STEP]
        m[R_STAT_ACTIVE] = m[R_N_ACTIVE]
        m[R_STAT_INACTIVE] = m[R_N_INACTIVE]
        m[R_STAT_REFAULTS] = m[C_REFAULT_ACTIVATIONS]


@jit_noref
def _stat_active(m):
    """The active list's size as reclaim reads it: as of the last flush, or exact without flushing."""
    return m[R_STAT_ACTIVE] if m[P_STATS_FLUSH] > 0 else m[R_N_ACTIVE]


@jit_noref
def _stat_inactive(m):
    """The inactive list's size as reclaim reads it (see :func:`_stat_active`)."""
    return m[R_STAT_INACTIVE] if m[P_STATS_FLUSH] > 0 else m[R_N_INACTIVE]


@jit_noref
def _stat_refaults(m):
    """WORKINGSET_ACTIVATE_ANON as reclaim reads it (see :func:`_stat_active`)."""
    return m[R_STAT_REFAULTS] if m[P_STATS_FLUSH] > 0 else m[C_REFAULT_ACTIVATIONS]


@jit_noref
def _inactive_is_low(m):
    """``inactive_is_low``: inactive * int_sqrt(10 * GB) < active (ratio 1 below 1 GB), from the statistics."""
    inactive = _stat_inactive(m)
    active = _stat_active(m)
    gb = ((inactive + active) * m[P_PAGE_BYTES]) >> 30
    ratio = _int_sqrt(10 * gb) if gb > 0 else 1
    return inactive * ratio < active


@jit_noref
def _deactivate(b, m, n):
    """``shrink_active_list``: up to ``n`` pages from the active tail to the inactive head."""
    F = m[P_FOOTPRINT]
    nx, pv = m[O_NEXT], m[O_PREV]
    for _ in range(n):
        page = m[pv + 2 * F]
        if page == F:
            break
        _unlink(m, nx, pv, page)
        b[page] &= ~(ACTIVE | YOUNG)
        _push_head(m, nx, pv, F + 1, page)
        m[R_N_ACTIVE] -= 1
        m[R_N_INACTIVE] += 1
        m[C_DEACTIVATIONS] += 1


@jit_noref
def _linux_hit(b, m, page):
    """A mapped access sets the PTE accessed (young) bit; lists do not move."""
    b[page] |= YOUNG


@jit_noref
def _linux_insert(b, m, page, target):
    """New page at the inactive head, or at the active head on a recent refault; the faulting page is young."""
    fl = b[page] & ~(ACTIVE | REFERENCED | YOUNG)
    if target:
        fl |= YOUNG
    sh = m[O_SHADOW] + page
    shadow = m[sh]
    m[sh] = -1
    if shadow >= 0 and m[R_NONRES_AGE] - shadow <= _stat_active(m):  # workingset_refault
        b[page] = fl | ACTIVE
        _push_head(m, m[O_NEXT], m[O_PREV], m[P_FOOTPRINT], page)
        m[R_N_ACTIVE] += 1
        m[R_NONRES_AGE] += 1
        m[C_REFAULT_ACTIVATIONS] += 1
        return
    b[page] = fl
    _push_head(m, m[O_NEXT], m[O_PREV], m[P_FOOTPRINT] + 1, page)
    m[R_N_INACTIVE] += 1


@jit_noref
def _unplug(m):
    """``blk_finish_plug`` (``WB_BY_DEVICE``): hand the plugged writes to the device, which writes them in order.

    Each completes ``P_WB_COST`` after the write before it, or after now if the device is idle by then.
    """
    F = m[P_FOOTPRINT]
    t = m[O_WBT]
    k = m[R_WB_PLUGGED]
    for j in range(m[R_WB_N] - k, m[R_WB_N]):
        i = m[R_WB_HEAD] + j
        if i >= F:
            i -= F
        m[R_WB_DEV] = max(m[R_WB_DEV], m[R_WB_CLOCK]) + m[P_WB_COST]
        m[t + i] = m[R_WB_DEV] + m[P_WB_LATENCY]
    m[R_WB_PLUGGED] = 0
    m[R_PLUG_REQS] = 0
    m[R_PLUG_HEAD] = 0


@jit_noref
def _wb_complete(b, m, upto):
    """Complete, oldest first, the writes issued at writeback clock ``upto`` or before.

    (``WB_BY_DEVICE``: the writes the device has done by clock ``upto``; ``WB_ALL``
    waits for all of them, plugged ones included, and the clock moves to the device's.)
    A completed page that is clean and inactive goes to the inactive tail
    (``folio_rotate_reclaimable``), so the last one completed is scanned first. A page the program
    freed meanwhile (``FREED``) is dropped with its slot (:mod:`swaptrace.kernels.emulate.release`).
    """
    F = m[P_FOOTPRINT]
    q, t = m[O_WBQ], m[O_WBT]
    nx, pv = m[O_NEXT], m[O_PREV]
    if upto == WB_ALL and m[P_WB_LEVEL] == WB_BY_DEVICE and m[R_WB_N] > 0:  # slept until the device was done
        _unplug(m)
        m[R_WB_CLOCK] = max(m[R_WB_CLOCK], m[R_WB_DEV] + m[P_WB_LATENCY])
    if upto == WB_ALL:  # a sleep sent the plug (schedule -> blk_flush_plug): the next request starts a new one
        m[R_PLUG_REQS] = 0
        m[R_PLUG_HEAD] = 0
    while m[R_WB_N] > 0:
        h = m[R_WB_HEAD]
        if m[t + h] > upto:
            break
        page = m[q + h]
        m[R_WB_HEAD] = h + 1 if h + 1 < F else 0
        m[R_WB_N] -= 1
        fl = b[page] & ~WRITEBACK
        b[page] = fl
        if fl & FREED:
            _drop(b, m, page)
        elif not (fl & (DIRTY | ACTIVE)):
            _unlink(m, nx, pv, page)
            _push_tail(m, nx, pv, F + 1, page)


@jit_noref
def _plug_add(m, f, op, slot, cause):
    """``P_PLUG_RULES``: a bio joins the task's plug as ``blk_add_rq_to_plug`` has it (block/blk-mq.c).

    A bio that starts a new request first sends the plug to the device (:func:`_unplug`) when the plug already
    holds ``BLK_MAX_REQUEST_COUNT`` requests or its first request has reached ``BLK_PLUG_FLUSH_SIZE``. The
    kernel's captures show the count at work: 16-33 requests of up to 512 KiB sent within 30 us, each run led
    by a request under 32 pages (research/plug_flushes.py).
    """
    if not _merges(m, op, slot):
        head_full = m[R_PLUG_HEAD] * m[P_PAGE_BYTES] >= BLK_PLUG_FLUSH_SIZE
        if m[R_PLUG_REQS] > 0 and (m[R_PLUG_REQS] >= BLK_MAX_REQUEST_COUNT or head_full):
            _flush(m, f)
            _unplug(m)
        m[R_PLUG_REQS] += 1
    _submit(m, f, op, slot, cause)
    if m[R_PLUG_REQS] == 1:  # the first request grows while it is the only one
        m[R_PLUG_HEAD] = m[R_PEND_N]


@jit_noref
def _writeout(b, m, f, page):
    """``pageout``: unmap ``page``, start its write, put it back at the inactive head under writeback.

    Returns False when no swap slot is left (``R_ERROR`` is set).
    """
    F = m[P_FOOTPRINT]
    so = m[O_SLOT]
    if m[so + page] < 0 and _alloc_slot(b, m, page) < 0:
        return False
    if m[P_PLUG_RULES]:  # (set only with WB_BY_DEVICE)
        _plug_add(m, f, OP_WRITE, m[so + page], CAUSE_RECLAIM)
    else:
        _submit(m, f, OP_WRITE, m[so + page], CAUSE_RECLAIM)
    m[C_PAGES_OUT] += 1
    b[page] = (b[page] & ~(MAPPED | DIRTY | YOUNG | REFERENCED)) | WRITEBACK
    _push_head(m, m[O_NEXT], m[O_PREV], F + 1, page)
    m[R_N_INACTIVE] += 1
    i = m[R_WB_HEAD] + m[R_WB_N]
    if i >= F:
        i -= F
    m[m[O_WBQ] + i] = page
    if m[P_WB_LEVEL] == WB_BY_DEVICE:  # in the level's plug: not on the device yet, no completion clock
        m[m[O_WBT] + i] = WB_ALL
        m[R_WB_PLUGGED] += 1
    else:
        m[m[O_WBT] + i] = m[R_WB_CLOCK]
    m[R_WB_N] += 1
    return True


@jit_noref
def _shrink_batch(b, m, f, take, written):
    """``shrink_folio_list`` on ``take`` pages isolated from the inactive tail.

    Returns ``(freed, written)``: pages freed, and pages written by the
    calling reclaim call since it last waited for writeback (it waits here
    once that passes the lag plus ``P_WB_THROTTLE``; never with
    ``P_WB_LEVEL``, whose lag is ``WB_ALL``). On running out of swap slots it
    stops with ``R_ERROR`` set.
    """
    F = m[P_FOOTPRINT]
    nx, pv, tmp, so = m[O_NEXT], m[O_PREV], m[O_TMP], m[O_SLOT]
    lag = m[P_WB_LAG]
    freed = 0
    if lag > 0 and written >= lag + m[P_WB_THROTTLE]:  # throttled on writeback: wait for it all
        _flush(m, f)  # the task sleeps: schedule() flushes its plug (sched_submit_work -> blk_flush_plug)
        _wb_complete(b, m, WB_ALL)
        m[C_WB_WAITS] += 1
        written = 0
    elif m[P_WB_LEVEL] == WB_BY_DEVICE:  # the writes the device finishes by the time this batch is isolated
        _wb_complete(b, m, m[R_WB_CLOCK] + take)
    elif lag > 0:  # the writes that completed while the previous batch was processed
        _wb_complete(b, m, m[R_WB_CLOCK] + take - lag)
    m[R_WB_CLOCK] += take
    take = min(take, m[R_N_INACTIVE])  # the completions above may have dropped pages the program freed
    page = m[pv + 2 * (F + 1)]
    for i in range(take):  # isolate, oldest first
        m[tmp + i] = page
        page = m[pv + 2 * page]
    for i in range(take):
        page = m[tmp + i]
        if b[page] & WRITEBACK:  # cgroup v1 memcg reclaim waits for it; the device works in order
            _flush(m, f)  # folio_wait_writeback sleeps, and schedule() flushes the plug: no merge across it
            _wb_complete(b, m, WB_ALL)  # (before the unlink: completion may move the page)
            m[C_WB_WAITS] += 1
        if not (b[page] & RESIDENT):  # freed by the program: dropped as its write completed (in a wait above)
            continue
        _unlink(m, nx, pv, page)
        m[R_N_INACTIVE] -= 1
        m[C_SCANNED] += 1
        fl = b[page]
        if fl & YOUNG:
            if fl & REFERENCED:
                b[page] = (fl & ~YOUNG) | REFERENCED | ACTIVE
                _push_head(m, nx, pv, F, page)
                m[R_N_ACTIVE] += 1
                m[C_ACTIVATIONS] += 1
                m[R_NONRES_AGE] += 1
                if m[so + page] >= 0 and _swap_full(m):
                    _free_slot(m, page)
                    m[C_SLOT_FREES] += 1
            else:
                b[page] = (fl & ~YOUNG) | REFERENCED
                _push_head(m, nx, pv, F + 1, page)
                m[R_N_INACTIVE] += 1
        elif lag > 0 and ((fl & DIRTY) or m[so + page] < 0) and not ((fl & ZEROED) and m[P_ZEROMAP]):
            if not _writeout(b, m, f, page):
                break
            written += 1
        else:
            b[page] = fl & ~REFERENCED
            _evict(b, m, f, page)
            m[m[O_SHADOW] + page] = m[R_NONRES_AGE]  # workingset_eviction
            m[R_NONRES_AGE] += 1
            freed += 1
    return freed, written


@jit_noref
def _scan_share(size, prio):
    """Pages ``get_scan_count`` gives an anon list at ``prio``: ``(size >> prio)`` times the anon share."""
    return ((size >> prio) * SCAN_ANON_SHARE[0]) // SCAN_ANON_SHARE[1]


@jit_noref
def _linux_reclaim(b, m, f, n):
    """Shrink the lists until at least ``n`` pages are reclaimed (or none is left).

    Two ways (``P_SCAN_PRIO``): 32 pages per round until done, or the kernel's
    priority levels (``do_try_to_free_pages``; the default since 0.4.0).
    """
    if m[P_SCAN_PRIO]:
        return _linux_reclaim_levels(b, m, f, n)
    done = 0
    written = 0  # by this call since it last waited
    refaulted = _stat_refaults(m) != m[R_REFAULT_SNAP]
    while done < n and m[R_RESIDENT] > 0 and m[R_ERROR] == 0:
        if _inactive_is_low(m) or m[R_N_INACTIVE] == 0:
            _deactivate(b, m, SWAP_CLUSTER_MAX)
        elif refaulted:  # may_deactivate: both lists scanned in proportion to their sizes
            _deactivate(b, m, min(SWAP_CLUSTER_MAX, SWAP_CLUSTER_MAX * m[R_N_ACTIVE] // m[R_N_INACTIVE]))
        take = min(SWAP_CLUSTER_MAX, m[R_N_INACTIVE])
        freed, written = _shrink_batch(b, m, f, take, written)
        done += freed
    m[R_REFAULT_SNAP] = _stat_refaults(m)  # snapshot_refaults
    return done


@jit_noref
def _linux_reclaim_levels(b, m, f, n):
    """``do_try_to_free_pages`` for a memory cgroup: priority levels 12 .. 0 until ``n`` pages are freed.

    At each level (``shrink_lruvec``) the inactive list gets
    ``(size >> priority) * 90 / 510`` pages to scan and, when deactivation is
    allowed (``may_deactivate``: refaults seen, or the inactive list low), the
    active list as many of its own; they go 32 at a time, inactive first, until
    the inactive share is used up or the call has freed ``n``. A level ends
    with 32 more deactivations while the inactive list is low. A call that
    gets through level 0 without freeing ``n`` returns what it freed (the
    caller calls again, as ``try_charge`` retries). At level 0 a list too short
    for a share is scanned whole, so every call makes progress. With
    ``P_WB_LEVEL`` the writes complete at level ends or as the call returns
    (``WB_BY_*``, module docstring) -- the level where the call stops because
    it has freed ``n`` included.
    """
    done = 0
    written = 0
    if m[P_FILL_CREDIT] > 0 and m[C_MAJOR] == 0:
        # Until the first swap-in the device's clock gets no read waits, yet the process's own time between
        # reclaim calls (zero-filling pages) lets the kernel's device finish one call's writes before the next:
        # P_FILL_CREDIT eighths of a clock unit per page zero-filled since the last call (research/notes/calibration.md, "The device's
        # time in the filling step"). Whole units for the pages zero-filled since the last call; the pages a
        # unit's remainder stands for are counted again at the next call (the rule as calibrated and held out)
        units = ((m[C_ZERO_FILL] - m[R_FILL_SEEN]) * m[P_FILL_CREDIT]) // 8
        m[R_WB_CLOCK] += units
        m[R_FILL_SEEN] += (units * 8) // m[P_FILL_CREDIT]
    refaulted = _stat_refaults(m) != m[R_REFAULT_SNAP]
    prio = DEF_PRIORITY
    while prio >= 0 and done < n and m[R_RESIDENT] > 0 and m[R_ERROR] == 0:
        deactivate = refaulted or _inactive_is_low(m)
        nr_in = _scan_share(m[R_N_INACTIVE], prio)
        nr_act = _scan_share(m[R_N_ACTIVE], prio) if deactivate else 0
        if prio == 0 and nr_in == 0:
            nr_in = min(SWAP_CLUSTER_MAX, m[R_N_INACTIVE])
        while nr_in > 0 and m[R_N_INACTIVE] > 0 and m[R_ERROR] == 0:
            take = min(SWAP_CLUSTER_MAX, nr_in, m[R_N_INACTIVE])
            nr_in -= take
            freed, written = _shrink_batch(b, m, f, take, written)
            done += freed
            if nr_act > 0:
                d = min(SWAP_CLUSTER_MAX, nr_act)
                nr_act -= d
                _deactivate(b, m, d)
            if done >= n:
                break
        if _inactive_is_low(m) or m[R_N_INACTIVE] == 0:  # the end of shrink_lruvec: keep the inactive list fed
            _deactivate(b, m, SWAP_CLUSTER_MAX)
        if m[R_NESTED]:  # inside a swap-in's plug: this level's blk_finish_plug does nothing
            prio -= 1
            continue
        # blk_finish_plug: the level's last request is issued, so no write merges across levels (the
        # kernel's requests are the levels' writes, 1, 3, 6 ... pages; research/notes/swapout-merge.md)
        _flush(m, f)
        if m[P_WB_LEVEL] == WB_BY_LEVEL:  # blk_finish_plug: the level's writes go out and are done before it rescans
            _wb_complete(b, m, WB_ALL)
        elif m[P_WB_LEVEL] == WB_BY_NEXT_LEVEL:  # ... or done while the next level scans
            _wb_complete(b, m, m[R_WB_MARK])
            m[R_WB_MARK] = m[R_WB_CLOCK]
        elif m[P_WB_LEVEL] == WB_BY_DEVICE:  # ... or reach the device, which takes its time
            _unplug(m)
        prio -= 1
    if m[P_WB_LEVEL] == WB_BY_CALL:  # done after the call returns, before the next one (or the next read)
        _wb_complete(b, m, WB_ALL)
    m[R_REFAULT_SNAP] = _stat_refaults(m)  # snapshot_refaults
    return done
