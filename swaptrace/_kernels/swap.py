"""The emulator's main loop: one access at a time through faults, readahead and reclaim.

Order of events for a fault on a page that is on swap (``do_swap_page``):
compute the readahead window (its candidates are the faulting page plus the
window's pages that are on swap and not in memory), reclaim until they fit
under the budget (one plug: the reclaim batch's writes merge), read them in
window order (one plug: contiguous reads merge), put them on the lists (the
faulting page last), map the faulting page, and free its slot if the access
is a write or swap is more than half full (``should_try_to_free_swap``).
"""

from __future__ import annotations

from swaptrace._kernels._jit import jit, jit_inline
from swaptrace._kernels.clock import _clock_hit, _clock_insert, _clock_reclaim
from swaptrace._kernels.linux_lists import _linux_hit, _linux_insert, _linux_reclaim
from swaptrace._kernels.lru import _lru_hit, _lru_insert, _lru_reclaim
from swaptrace._kernels.merge import OP_READ, _flush, _submit
from swaptrace._kernels.readahead import _cluster_window, _vma_window
from swaptrace._kernels.slots import _alloc_slot, _free_slot, _swap_full
from swaptrace._kernels.swapstate import (
    C_ACCESSES,
    C_FAULTS,
    C_HITS,
    C_MAJOR,
    C_PAGES_IN,
    C_RA_HIT,
    C_RA_ISSUED,
    C_RECLAIM_CALLS,
    C_SLOT_FREES,
    C_ZERO_FILL,
    DIRTY,
    F_NOW_US,
    F_STEP_US,
    MAPPED,
    P_BATCH,
    P_BUDGET,
    P_FIRST_STEP,
    P_MAX_ROWS_PER_ACCESS,
    P_POLICY,
    P_RA_MODE,
    POLICY_CLOCK,
    POLICY_LRU,
    R_CRA_HITS,
    R_ERROR,
    R_OUT_N,
    R_RA_HITS,
    R_RA_PREV,
    R_RESIDENT,
    R_STEP,
    RA_CLUSTER,
    RA_VMA,
    READAHEAD,
    RESIDENT,
    SWAP_RA_HITS_MAX,
    TOUCHED,
)

CAUSE_FAULT, CAUSE_READAHEAD = 0, 1
CAND0 = 64  # readahead candidates live in tmp[CAND0:]; reclaim isolation uses tmp[:32]


@jit_inline
def _policy_hit(st, page):
    p = st.prm[P_POLICY]
    if p == POLICY_LRU:
        _lru_hit(st, page)
    elif p == POLICY_CLOCK:
        _clock_hit(st, page)
    else:
        _linux_hit(st, page)


@jit_inline
def _policy_insert(st, page, target):
    p = st.prm[P_POLICY]
    if p == POLICY_LRU:
        _lru_insert(st, page, target)
    elif p == POLICY_CLOCK:
        _clock_insert(st, page, target)
    else:
        _linux_insert(st, page, target)
    st.reg[R_RESIDENT] += 1


@jit_inline
def _make_room(st, k):
    """Reclaim (one plug per call) until ``k`` more pages fit under the budget."""
    reg = st.reg
    budget = st.prm[P_BUDGET]
    while reg[R_RESIDENT] + k > budget and reg[R_RESIDENT] > 0 and reg[R_ERROR] == 0:
        n = max(st.prm[P_BATCH], reg[R_RESIDENT] + k - budget)
        reg[C_RECLAIM_CALLS] += 1
        p = st.prm[P_POLICY]
        if p == POLICY_LRU:
            _lru_reclaim(st, n)
        elif p == POLICY_CLOCK:
            _clock_reclaim(st, n)
        else:
            _linux_reclaim(st, n)
        _flush(st)


@jit_inline
def _swap_in(st, page, write):
    """Major fault: readahead window, room, reads, then map ``page``."""
    mode = st.prm[P_RA_MODE]
    flags = st.flags
    k = 0
    if mode == RA_VMA:
        start, end = _vma_window(st, page)
        for q in range(start, end):
            if q == page or (flags[q] & (RESIDENT | TOUCHED)) == TOUCHED:
                st.tmp[CAND0 + k] = q
                k += 1
    elif mode == RA_CLUSTER:
        start, end = _cluster_window(st, st.slot[page])
        for o in range(start, end):
            q = st.slot_page[o]
            if q >= 0 and (q == page or not (flags[q] & RESIDENT)):
                st.tmp[CAND0 + k] = q
                k += 1
    else:
        st.tmp[CAND0] = page
        k = 1
    if k > st.prm[P_BUDGET]:  # a window larger than memory: read the page alone
        st.tmp[CAND0] = page
        k = 1
    _make_room(st, k)
    if st.reg[R_ERROR] != 0:
        return
    for i in range(k):
        q = st.tmp[CAND0 + i]
        if q == page:
            _submit(st, OP_READ, st.slot[q], CAUSE_FAULT)
            flags[q] = RESIDENT | TOUCHED
        else:
            _submit(st, OP_READ, st.slot[q], CAUSE_READAHEAD)
            flags[q] = RESIDENT | TOUCHED | READAHEAD
    _flush(st)
    st.reg[C_PAGES_IN] += k
    st.reg[C_RA_ISSUED] += k - 1
    for i in range(k):
        q = st.tmp[CAND0 + i]
        if q != page:
            _policy_insert(st, q, False)
    _policy_insert(st, page, True)
    flags[page] |= MAPPED
    if write or _swap_full(st):
        _free_slot(st, page)
        st.reg[C_SLOT_FREES] += 1
    if write:
        flags[page] |= DIRTY


@jit_inline
def _access(st, page, write):
    """One load or store of ``page``."""
    reg = st.reg
    f = st.flags[page]
    if f & MAPPED:
        reg[C_HITS] += 1
        _policy_hit(st, page)
        if write:
            st.flags[page] |= DIRTY
        return
    reg[C_FAULTS] += 1
    if f & RESIDENT:  # in the swap cache (read ahead): a minor fault, no I/O
        mode = st.prm[P_RA_MODE]
        if f & READAHEAD:
            f &= ~READAHEAD
            reg[C_RA_HIT] += 1
            if mode == RA_VMA:
                reg[R_RA_HITS] = min(reg[R_RA_HITS] + 1, SWAP_RA_HITS_MAX)
            elif mode == RA_CLUSTER:
                reg[R_CRA_HITS] += 1
        if mode == RA_VMA:
            reg[R_RA_PREV] = page
        st.flags[page] = f | MAPPED
        _policy_hit(st, page)
        if st.slot[page] >= 0 and (write or _swap_full(st)):
            _free_slot(st, page)
            reg[C_SLOT_FREES] += 1
        if write:
            st.flags[page] |= DIRTY
        return
    if not (f & TOUCHED):  # first touch: zero-filled page, no read
        reg[C_ZERO_FILL] += 1
        _make_room(st, 1)
        if reg[R_ERROR] != 0:
            return
        st.flags[page] = RESIDENT | MAPPED | TOUCHED | DIRTY
        _policy_insert(st, page, True)
        return
    reg[C_MAJOR] += 1
    _swap_in(st, page, write)


@jit
def _run(st, pages, writes, steps, start):
    """Process accesses from ``start`` until the chunk ends or the output buffers are nearly full.

    Returns the index of the first access not processed.
    """
    n = pages.shape[0]
    cap = st.out_t.shape[0]
    room = st.prm[P_MAX_ROWS_PER_ACCESS]
    first = st.prm[P_FIRST_STEP]
    step_us = st.freg[F_STEP_US]
    reg = st.reg
    i = start
    while i < n:
        if reg[R_OUT_N] + room > cap or reg[R_ERROR] != 0:
            break
        s = steps[i]
        si = s - first
        seen = st.step_seen[si]
        st.step_seen[si] = seen + 1
        st.freg[F_NOW_US] = si * step_us + seen * step_us / st.step_n[si]
        reg[R_STEP] = s
        reg[C_ACCESSES] += 1
        _access(st, pages[i], writes[i])
        i += 1
    return i


@jit
def _preload_swapped(st, pages):
    """``initial_state="swapped"``: give ``pages`` consecutive slots, contents on swap, no I/O."""
    for i in range(pages.shape[0]):
        page = pages[i]
        if _alloc_slot(st, page) < 0:
            return
        st.flags[page] = TOUCHED
