"""Swap slot allocator after Linux's cluster allocator (mm/swapfile.c, 6.x).

The device is cut into clusters of ``cluster_slots`` slots (SWAPFILE_CLUSTER,
256). Like one CPU's ``percpu_cluster``, the allocator keeps a current
cluster and a next offset, so consecutive allocations get consecutive slots;
when the current cluster has no free slot at or after the offset it is
released (to the non-full list unless full) and the allocator takes the head
of the non-full list, then the head of the free list (a discard-less device
prefers partly used clusters). Freeing a slot moves a full cluster to the
non-full tail and an emptied one to the free tail. Slot 0 is the swap header.
With swap more than half full (``vm_swap_full``) and the ``linux`` policy, a
cluster's scan also takes a slot that only the swap cache holds, freeing it
from its page (:func:`_scan_cluster`, 6.12+ ``cluster_scan_range``).
"""

from __future__ import annotations

from swaptrace.kernels.emulate.dlist import _push_tail, _unlink
from swaptrace.kernels.emulate.state import (
    C_SLOT_FREES,
    CL_FREE,
    CL_NONFULL,
    CL_OTHER,
    DIRTY,
    ERR_SWAP_FULL,
    FREED,
    MAPPED,
    O_CL_HINT,
    O_CL_NEXT,
    O_CL_PREV,
    O_CL_USED,
    O_CL_WHERE,
    O_SLOT,
    O_SLOT_PAGE,
    P_CLUSTER_SLOTS,
    P_NCLUSTERS,
    P_POLICY,
    P_USABLE_SLOTS,
    POLICY_LINUX,
    RESIDENT,
    R_CUR_CLUSTER,
    R_CUR_NEXT,
    R_ERROR,
    R_SLOTS_USED,
    WRITEBACK,
)
from swaptrace.kernels.jit import jit_noref


@jit_noref
def _release_current(m):
    """Stop allocating from the current cluster; file it as full or non-full."""
    c = m[R_CUR_CLUSTER]
    if c < 0:
        return
    if m[m[O_CL_USED] + c] < m[P_CLUSTER_SLOTS]:
        _push_tail(m, m[O_CL_NEXT], m[O_CL_PREV], m[P_NCLUSTERS] + 1, c)
        m[m[O_CL_WHERE] + c] = CL_NONFULL
    else:
        m[m[O_CL_WHERE] + c] = CL_OTHER
    m[R_CUR_CLUSTER] = -1


@jit_noref
def _cache_only(b, m, s):
    """Whether slot ``s`` is held by the swap cache alone: its page is in memory and mapped (no page-table entry
    holds the swap entry), not under writeback and not freed by the program (``SWAP_HAS_CACHE`` with a count of
    0, ``__try_to_reclaim_swap`` can take it)."""
    p = m[m[O_SLOT_PAGE] + s]
    return p >= 0 and (b[p] & (RESIDENT | MAPPED | WRITEBACK | FREED)) == (RESIDENT | MAPPED)


@jit_noref
def _scan_cluster(b, m, c, start):
    """First usable slot of cluster ``c`` at or after slot ``start``, or -1.

    Usable: free, or -- with swap more than half full and the ``linux`` policy -- held by the swap cache alone
    (:func:`_cache_only`): ``cluster_scan_range`` (mm/swapfile.c, 6.12+) then has ``alloc_swap_scan_cluster``
    reclaim it (``cluster_reclaim_range`` -> ``__try_to_reclaim_swap``), which frees the page's slot and dirties
    the page (``folio_free_swap``), and the allocation goes on through the cluster in order.
    Starts at the cluster's hint (no free slot below it) when that is later and nothing can be reclaimed,
    and moves the hint when the scan covered everything below the result.
    """
    sp = m[O_SLOT_PAGE]
    hint = m[O_CL_HINT] + c
    steal = m[P_POLICY] == POLICY_LINUX and _swap_full(m)
    lo = start if steal else max(start, m[hint])
    for s in range(lo, (c + 1) * m[P_CLUSTER_SLOTS]):
        if m[sp + s] == -1:
            if start <= m[hint]:
                m[hint] = s + 1
            return s
        if steal and _cache_only(b, m, s):
            p = m[sp + s]
            _free_slot(m, p)
            b[p] |= DIRTY
            m[C_SLOT_FREES] += 1
            return s
    if start <= m[hint]:
        m[hint] = (c + 1) * m[P_CLUSTER_SLOTS]
    return -1


@jit_noref
def _alloc_slot(b, m, page):
    """Give ``page`` a slot; returns it, or -1 (and sets R_ERROR) when swap is full."""
    cs = m[P_CLUSTER_SLOTS]
    C = m[P_NCLUSTERS]
    s = -1
    c = m[R_CUR_CLUSTER]
    if c >= 0:
        s = _scan_cluster(b, m, c, m[R_CUR_NEXT])
        if s < 0:
            _release_current(m)
    if s < 0:
        cn = m[O_CL_NEXT]
        for h in (C + 1, C):  # non-full clusters first, then free ones
            c = m[cn + 2 * h]
            if c != h:
                _unlink(m, cn, m[O_CL_PREV], c)
                m[m[O_CL_WHERE] + c] = CL_OTHER
                m[R_CUR_CLUSTER] = c
                s = _scan_cluster(b, m, c, c * cs)
                break
    if s < 0:
        m[R_ERROR] = ERR_SWAP_FULL
        return -1
    m[m[O_SLOT_PAGE] + s] = page
    m[m[O_SLOT] + page] = s
    m[m[O_CL_USED] + c] += 1
    m[R_SLOTS_USED] += 1
    m[R_CUR_NEXT] = s + 1
    if s + 1 == (c + 1) * cs:
        _release_current(m)
    return s


@jit_noref
def _free_slot(m, page):
    """Release ``page``'s slot (the page keeps its contents in memory)."""
    s = m[m[O_SLOT] + page]
    c = s // m[P_CLUSTER_SLOTS]
    C = m[P_NCLUSTERS]
    m[m[O_SLOT_PAGE] + s] = -1
    m[m[O_SLOT] + page] = -1
    if s < m[m[O_CL_HINT] + c]:
        m[m[O_CL_HINT] + c] = s
    used = m[m[O_CL_USED] + c] - 1
    m[m[O_CL_USED] + c] = used
    m[R_SLOTS_USED] -= 1
    if c == m[R_CUR_CLUSTER]:
        return
    w = m[m[O_CL_WHERE] + c]
    cn, cp = m[O_CL_NEXT], m[O_CL_PREV]
    if used == 0:
        if w == CL_NONFULL:
            _unlink(m, cn, cp, c)
        _push_tail(m, cn, cp, C, c)
        m[m[O_CL_WHERE] + c] = CL_FREE
    elif w == CL_OTHER:
        _push_tail(m, cn, cp, C + 1, c)
        m[m[O_CL_WHERE] + c] = CL_NONFULL


@jit_noref
def _swap_full(m):
    """``vm_swap_full()``: fewer than half of the usable slots are free."""
    return (m[P_USABLE_SLOTS] - m[R_SLOTS_USED]) * 2 < m[P_USABLE_SLOTS]
