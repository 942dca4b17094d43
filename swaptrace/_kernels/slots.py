"""Swap slot allocator after Linux's cluster allocator (mm/swapfile.c, 6.x).

The device is cut into clusters of ``cluster_slots`` slots (SWAPFILE_CLUSTER,
256). Like one CPU's ``percpu_cluster``, the allocator keeps a current
cluster and a next offset, so consecutive allocations get consecutive slots;
when the current cluster has no free slot at or after the offset it is
released (to the non-full list unless full) and the allocator takes the head
of the non-full list, then the head of the free list (a discard-less device
prefers partly used clusters). Freeing a slot moves a full cluster to the
non-full tail and an emptied one to the free tail. Slot 0 is the swap header.
"""

from __future__ import annotations

from swaptrace._kernels._jit import jit_inline
from swaptrace._kernels.dlist import _push_tail, _unlink
from swaptrace._kernels.swapstate import (
    CL_FREE,
    CL_NONFULL,
    CL_OTHER,
    ERR_SWAP_FULL,
    P_CLUSTER_SLOTS,
    P_USABLE_SLOTS,
    R_CUR_CLUSTER,
    R_CUR_NEXT,
    R_ERROR,
    R_SLOTS_USED,
)


@jit_inline
def _release_current(st):
    """Stop allocating from the current cluster; file it as full or non-full."""
    c = st.reg[R_CUR_CLUSTER]
    if c < 0:
        return
    cs = st.prm[P_CLUSTER_SLOTS]
    C = st.cl_used.shape[0]
    if st.cl_used[c] < cs:
        _push_tail(st.cl_next, st.cl_prev, C + 1, c)
        st.cl_where[c] = CL_NONFULL
    else:
        st.cl_where[c] = CL_OTHER
    st.reg[R_CUR_CLUSTER] = -1


@jit_inline
def _scan_cluster(st, c, start):
    """First free slot of cluster ``c`` at or after slot ``start``, or -1."""
    cs = st.prm[P_CLUSTER_SLOTS]
    end = (c + 1) * cs
    for s in range(start, end):
        if st.slot_page[s] == -1:
            return s
    return -1


@jit_inline
def _alloc_slot(st, page):
    """Give ``page`` a slot; returns it, or -1 (and sets R_ERROR) when swap is full."""
    cs = st.prm[P_CLUSTER_SLOTS]
    C = st.cl_used.shape[0]
    s = -1
    c = st.reg[R_CUR_CLUSTER]
    if c >= 0:
        s = _scan_cluster(st, c, st.reg[R_CUR_NEXT])
        if s < 0:
            _release_current(st)
    if s < 0:
        for h in (C + 1, C):  # non-full clusters first, then free ones
            c = st.cl_next[h]
            if c != h:
                _unlink(st.cl_next, st.cl_prev, c)
                st.cl_where[c] = CL_OTHER
                st.reg[R_CUR_CLUSTER] = c
                s = _scan_cluster(st, c, c * cs)
                break
    if s < 0:
        st.reg[R_ERROR] = ERR_SWAP_FULL
        return -1
    st.slot_page[s] = page
    st.slot[page] = s
    st.cl_used[c] += 1
    st.reg[R_SLOTS_USED] += 1
    st.reg[R_CUR_NEXT] = s + 1
    if s + 1 == (c + 1) * cs:
        _release_current(st)
    return s


@jit_inline
def _free_slot(st, page):
    """Release ``page``'s slot (the page keeps its contents in memory, now dirty)."""
    s = st.slot[page]
    cs = st.prm[P_CLUSTER_SLOTS]
    C = st.cl_used.shape[0]
    c = s // cs
    st.slot_page[s] = -1
    st.slot[page] = -1
    st.cl_used[c] -= 1
    st.reg[R_SLOTS_USED] -= 1
    if c == st.reg[R_CUR_CLUSTER]:
        return
    w = st.cl_where[c]
    if st.cl_used[c] == 0:
        if w == CL_NONFULL:
            _unlink(st.cl_next, st.cl_prev, c)
        _push_tail(st.cl_next, st.cl_prev, C, c)
        st.cl_where[c] = CL_FREE
    elif w == CL_OTHER:
        _push_tail(st.cl_next, st.cl_prev, C + 1, c)
        st.cl_where[c] = CL_NONFULL


@jit_inline
def _swap_full(st):
    """``vm_swap_full()``: fewer than half of the usable slots are free."""
    free = st.prm[P_USABLE_SLOTS] - st.reg[R_SLOTS_USED]
    return free * 2 < st.prm[P_USABLE_SLOTS]
