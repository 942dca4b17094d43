"""The emulator's main loop: one access at a time through faults, readahead and reclaim.

Order of events for a fault on a page that is on swap (``do_swap_page``):
compute the readahead window (its candidates are the faulting page plus the
window's pages that are on swap and not in memory), reclaim until they fit
under the budget (one plug: the reclaim call's writes merge), read them in
window order (one plug: contiguous reads merge), put them on the lists (the
faulting page last), map the faulting page, and free its slot if the access
is a write or swap is more than half full (``should_try_to_free_swap``).
With writes in flight (``linux``, :mod:`swaptrace.kernels.emulate.linux_lists`),
the wait for the read completes them.
A hit on a mapped page is handled inline in :func:`run_accesses` (no call).
The trace's alloc and free events (access codes ``ACC_ALLOC``, ``ACC_FREE``) go to
:func:`swaptrace.kernels.emulate.release._release`: no I/O, no fault.

Pages of zeros (``ZEROED``: a zero-fill not stored to since, or a store of zeros, ``ACC_ZERO_STORE``) with
``P_ZEROMAP``: a swap-in of one fills the frame with zeros instead of reading (Linux >= 6.12, mm/page_io.c
``swap_read_folio_zeromap``; vmstat ``swpin_zero``), read ahead or faulting; the fault still counts as major
(``do_swap_page`` found no folio in the swap cache) but waits for no read. Reclaim's side is in
:mod:`swaptrace.kernels.emulate.evict`.

Caution for editors: numba's on-disk cache (``cache=True``) checks only the
timestamp of the file defining a function, so after editing a helper module
(``slots.py``, ``lru.py`` ...) delete ``swaptrace/kernels/__pycache__/*.nb?``
or ``run_accesses`` keeps the old helper compiled in.
"""

from __future__ import annotations

import numpy as np

from swaptrace.kernels.emulate.clock import _clock_hit, _clock_insert, _clock_reclaim
from swaptrace.kernels.emulate.dlist import _move_head
from swaptrace.kernels.emulate.linux_lists import (
    WB_ALL,
    _linux_hit,
    _linux_insert,
    _linux_reclaim,
    _linux_stats_tick,
    _plug_add,
    _unplug,
    _wb_complete,
)
from swaptrace.kernels.emulate.lru import _lru_hit, _lru_insert, _lru_reclaim
from swaptrace.kernels.emulate.plug import _flush, _submit
from swaptrace.kernels.emulate.readahead import _cluster_window, _vma_window
from swaptrace.kernels.emulate.release import _release, _wb_forget
from swaptrace.kernels.emulate.slots import _alloc_slot, _free_slot, _swap_full
from swaptrace.kernels.emulate.state import (
    ACC_ALLOC,
    ACC_FREE,
    ACC_ZERO_STORE,
    C_ACCESSES,
    C_ALLOCS,
    C_FAULTS,
    C_FREES,
    C_HITS,
    C_MAJOR,
    C_PAGES_IN,
    C_RA_HIT,
    C_RA_ISSUED,
    C_RECLAIM_CALLS,
    C_SLOT_FREES,
    C_SWAPCACHE_HIT,
    C_ZERO_FAULTS,
    C_ZERO_FILL,
    C_ZERO_IN,
    C_ZERO_PAGE,
    CAUSE_FAULT,
    CAUSE_READAHEAD,
    DIRTY,
    ERR_BAD_PAGE,
    ERR_BAD_STEP,
    F_NOW,
    FREED,
    MAPPED,
    O_NEXT,
    O_PREV,
    O_SLOT,
    O_SLOT_PAGE,
    O_STEP_MAJOR,
    O_STEP_MINOR,
    O_STEP_SEEN,
    O_TMP,
    OP_READ,
    P_BATCH,
    P_BUDGET,
    P_EV_CAP,
    P_FIRST_STEP,
    P_FOOTPRINT,
    P_MAX_ROWS_PER_ACCESS,
    P_NSTEPS,
    P_OUT_CAP,
    P_PLUG_RULES,
    P_POLICY,
    P_RA_MODE,
    P_ZERO_PAGE,
    P_ZEROMAP,
    POLICY_CLOCK,
    POLICY_LINUX,
    POLICY_LRU,
    R_CRA_HITS,
    R_ERROR,
    R_EV_AT,
    R_EV_N,
    R_NESTED,
    R_OUT_N,
    R_RA_HITS,
    R_RA_PREV,
    R_RESIDENT,
    R_STEP,
    R_STEP_BACK,
    R_STEP_MAX,
    R_WB_N,
    RA_CLUSTER,
    RA_VMA,
    READAHEAD,
    REFERENCED,
    RESIDENT,
    SWAP_RA_HITS_MAX,
    TMP_CANDIDATES,
    TOUCHED,
    WRITEBACK,
    YOUNG,
    ZERO_PAGE,
    ZEROED,
)
from swaptrace.kernels.jit import jit_noref


@jit_noref
def _policy_hit(b, m, page):
    p = m[P_POLICY]
    if p == POLICY_LRU:
        _lru_hit(b, m, page)
    elif p == POLICY_CLOCK:
        _clock_hit(b, m, page)
    else:
        _linux_hit(b, m, page)


@jit_noref
def _policy_insert(b, m, page, target):
    p = m[P_POLICY]
    if p == POLICY_LRU:
        _lru_insert(b, m, page, target)
    elif p == POLICY_CLOCK:
        _clock_insert(b, m, page, target)
    else:
        _linux_insert(b, m, page, target)
    m[R_RESIDENT] += 1


@jit_noref
def _make_room(b, m, f, k):
    """Reclaim (one plug per call) until ``k`` more pages fit under the budget."""
    budget = m[P_BUDGET]
    while m[R_RESIDENT] + k > budget and m[R_RESIDENT] > 0 and m[R_ERROR] == 0:
        n = max(m[P_BATCH], m[R_RESIDENT] + k - budget)
        m[C_RECLAIM_CALLS] += 1
        p = m[P_POLICY]
        if p == POLICY_LRU:
            _lru_reclaim(b, m, f, n)
        elif p == POLICY_CLOCK:
            _clock_reclaim(b, m, f, n)
        else:
            _linux_reclaim(b, m, f, n)
        if not m[R_NESTED]:  # a swap-in's plug stays open across its reclaim calls
            _flush(m, f)


@jit_noref
def _swap_in(b, m, f, page, write):
    """Major fault: readahead window, room, reads, then map ``page``."""
    mode = m[P_RA_MODE]
    so = m[O_SLOT]
    cand = m[O_TMP] + TMP_CANDIDATES
    k = 0
    if mode == RA_VMA:
        start, end = _vma_window(m, page)
        for q in range(start, end):
            if q == page or (b[q] & (RESIDENT | TOUCHED)) == TOUCHED:
                m[cand + k] = q
                k += 1
    elif mode == RA_CLUSTER:
        start, end = _cluster_window(m, m[so + page])
        sp = m[O_SLOT_PAGE]
        for o in range(start, end):
            q = m[sp + o]
            if q >= 0 and (q == page or not (b[q] & RESIDENT)):
                m[cand + k] = q
                k += 1
    else:
        m[cand] = page
        k = 1
    if k > m[P_BUDGET]:  # a window larger than memory: read the page alone
        m[cand] = page
        k = 1
    # P_PLUG_RULES: swap_vma_readahead charges each page as it reads it, under its own plug (mm/swap_state.c)
    charged = m[P_PLUG_RULES] != 0  # (set only for the linux policy with WB_BY_DEVICE)
    if not charged:
        _make_room(b, m, f, k)
    if m[R_ERROR] != 0:
        return
    zeromap = m[P_ZEROMAP]
    zeros = 0
    waits = True  # for the faulting page's read
    for i in range(k):
        q = m[cand + i]
        if charged:  # room for this page, its reclaim inside the plug
            m[R_NESTED] = 1
            _make_room(b, m, f, i + 1)
            m[R_NESTED] = 0
            if m[R_ERROR] != 0:
                return
        zero = b[q] & ZEROED
        if zero and zeromap:  # filled with zeros, no bio: the reads on either side do not merge across it
            zeros += 1
            if q == page:
                waits = False
                m[C_ZERO_FAULTS] += 1
        elif charged:
            _plug_add(m, f, OP_READ, m[so + q], CAUSE_FAULT if q == page else CAUSE_READAHEAD)
        else:
            _submit(m, f, OP_READ, m[so + q], CAUSE_FAULT if q == page else CAUSE_READAHEAD)
        b[q] = RESIDENT | TOUCHED | zero | (0 if q == page else READAHEAD)
    _flush(m, f)
    if charged:  # blk_finish_plug: the writes its reclaim plugged go to the device with the reads
        _unplug(m)
    m[C_PAGES_IN] += k - zeros
    m[C_ZERO_IN] += zeros
    m[C_RA_ISSUED] += k - 1
    for i in range(k):
        q = m[cand + i]
        if q != page:
            _policy_insert(b, m, q, False)
    _policy_insert(b, m, page, True)
    b[page] |= MAPPED
    if write or _swap_full(m):
        _free_slot(m, page)
        m[C_SLOT_FREES] += 1
    if write:
        b[page] = (b[page] | DIRTY) & ~ZEROED
    # the process slept until its read completed: so did the writes queued before it (a page of zeros: no read)
    if m[R_WB_N] > 0 and waits:
        _wb_complete(b, m, WB_ALL)


@jit_noref
def _fault(b, m, f, page, write):
    """An access to a page that is not mapped."""
    fl = b[page]
    if fl & FREED:  # the address was freed under writeback and is touched again: a new page
        _wb_forget(b, m, page)
        fl = b[page]
    if fl & ZERO_PAGE and not write:  # a load through the zero-page mapping: a hit
        m[C_HITS] += 1
        return
    m[C_FAULTS] += 1
    si = m[R_STEP] - m[P_FIRST_STEP]
    # swap cache, zero fill, zero page, or a page of zeros on swap: no read to wait for
    if fl & RESIDENT or not (fl & TOUCHED) or ((fl & ZEROED) and m[P_ZEROMAP]):
        m[m[O_STEP_MINOR] + si] += 1
    else:
        m[m[O_STEP_MAJOR] + si] += 1
    if m[P_POLICY] == POLICY_LINUX:
        _linux_stats_tick(m)
    if fl & RESIDENT:  # in the swap cache (read ahead, or unmapped by reclaim): a minor fault, no I/O
        mode = m[P_RA_MODE]
        if fl & READAHEAD:
            fl &= ~READAHEAD
            m[C_RA_HIT] += 1
            if mode == RA_VMA:
                m[R_RA_HITS] = min(m[R_RA_HITS] + 1, SWAP_RA_HITS_MAX)
            elif mode == RA_CLUSTER:
                m[R_CRA_HITS] += 1
        else:  # unmapped by reclaim (written, or clean and not yet freed)
            m[C_SWAPCACHE_HIT] += 1
        if mode == RA_VMA:
            m[R_RA_PREV] = page
        b[page] = fl | MAPPED
        _policy_hit(b, m, page)
        # a page under writeback keeps its slot (folio_free_swap refuses it); the store only dirties it
        if m[m[O_SLOT] + page] >= 0 and not (fl & WRITEBACK) and (write or _swap_full(m)):
            _free_slot(m, page)
            m[C_SLOT_FREES] += 1
        if write:
            b[page] = (b[page] | DIRTY) & ~ZEROED
        return
    if not (fl & TOUCHED):  # first touch: zero-filled page, no read
        if not write and m[P_ZERO_PAGE]:  # do_anonymous_page maps the shared zero page: no frame
            b[page] = fl | ZERO_PAGE
            m[C_ZERO_PAGE] += 1
            return
        m[C_ZERO_FILL] += 1
        _make_room(b, m, f, 1)
        if m[R_ERROR] != 0:
            return
        b[page] = RESIDENT | MAPPED | TOUCHED | DIRTY | (0 if write else ZEROED)
        _policy_insert(b, m, page, True)
        return
    m[C_MAJOR] += 1
    _swap_in(b, m, f, page, write)


@jit_noref
def run_accesses(b, m, f, pages, writes, steps, start):
    """Process accesses from ``start`` until the chunk ends or the output columns are nearly full.

    ``writes`` holds each row's access code (uint8: ``ACC_LOAD``, ``ACC_STORE``, ``ACC_ALLOC``,
    ``ACC_FREE``, ``ACC_ZERO_STORE``; a bool store flag viewed as uint8 is the first two). Returns the index
    of the first row not processed. A page outside the footprint or a step outside the trace stops the run
    with ``R_ERROR`` set. Events are rows of their step (they take a place in its time) but not accesses.
    """
    n = pages.shape[0]
    # a counting run (P_OUT_CAP = 0) writes no rows and never stops for them
    limit = m[P_OUT_CAP] - m[P_MAX_ROWS_PER_ACCESS] if m[P_OUT_CAP] > 0 else 1 << 62
    # the eviction log (if kept) must have room for one access evicting every resident page
    ev_limit = m[P_EV_CAP] - m[P_BUDGET] - 1 if m[P_EV_CAP] > 0 else 1 << 62
    first = m[P_FIRST_STEP]
    nsteps = m[P_NSTEPS]
    footprint = m[P_FOOTPRINT]
    policy = m[P_POLICY]
    nx, pv = m[O_NEXT], m[O_PREV]
    ss = m[O_STEP_SEEN]
    hits = 0
    events = 0
    done_rows = m[C_ACCESSES] + m[C_ALLOCS] + m[C_FREES]  # rows before this call (the eviction log's index)
    cur, seen = -1, 0  # the step whose access count ``seen`` holds (kept out of ``m`` until the step changes)
    # only a fault issues rows, logs evictions or fails, so the stop test runs after faults
    stop = m[R_OUT_N] > limit or m[R_ERROR] != 0 or m[R_EV_N] > ev_limit
    i = start
    while i < n and not stop:
        si = np.int64(steps[i]) - first
        page = np.int64(pages[i])
        if si < 0 or si >= nsteps:
            m[R_ERROR] = ERR_BAD_STEP
            break
        if page < 0 or page >= footprint:
            m[R_ERROR] = ERR_BAD_PAGE
            break
        if si != cur:
            if cur >= 0:
                m[ss + cur] = seen
            cur, seen = si, m[ss + si]
            if si > m[R_STEP_MAX]:
                m[R_STEP_MAX] = si
            elif si < m[R_STEP_MAX]:
                m[R_STEP_BACK] = 1
        fl = b[page]
        code = writes[i]
        if code == ACC_ALLOC or code == ACC_FREE:
            _release(b, m, page, code)
            events += 1
        elif fl & MAPPED:  # the hot path: a hit, inline
            hits += 1
            if policy == POLICY_LRU:
                _move_head(m, nx, pv, footprint, page)
            elif policy == POLICY_CLOCK:
                fl |= REFERENCED
            elif policy == POLICY_LINUX:
                fl |= YOUNG
            if code:  # a store; its data is zeros only for ACC_ZERO_STORE
                fl = (fl | DIRTY) & ~ZEROED
                if code == ACC_ZERO_STORE:
                    fl |= ZEROED
            b[page] = fl
        else:
            f[F_NOW] = seen  # the caller turns (step, index in step) into t_us
            m[R_STEP] = si + first
            m[R_EV_AT] = done_rows + i - start
            _fault(b, m, f, page, code != 0)
            if code == ACC_ZERO_STORE and b[page] & RESIDENT:
                b[page] |= ZEROED
            stop = m[R_OUT_N] > limit or m[R_ERROR] != 0 or m[R_EV_N] > ev_limit
        seen += 1
        i += 1
    if cur >= 0:
        m[ss + cur] = seen
    m[C_HITS] += hits
    m[C_ACCESSES] += i - start - events
    return i


@jit_noref
def preload_swapped_pages(b, m, pages):
    """``initial_state="swapped"``: give ``pages`` consecutive slots, contents on swap, no I/O."""
    for i in range(pages.shape[0]):
        page = pages[i]
        if _alloc_slot(b, m, page) < 0:
            return
        b[page] = TOUCHED


@jit_noref
def count_steps(steps, first, counts, start):
    """Add each access of ``steps[start:]`` to ``counts[step - first]``.

    Returns -1 when all are counted, else the index of the first step outside
    ``[first, first + counts.size)`` (the caller grows ``counts`` or fails).
    """
    n = counts.shape[0]
    for i in range(start, steps.shape[0]):
        s = np.int64(steps[i]) - first
        if s < 0 or s >= n:
            return i
        counts[s] += 1
    return -1
