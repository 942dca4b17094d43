"""Linux's two-list anonymous page reclaim (classic LRU, no MGLRU), as in mm/vmscan.c.

* New and swapped-in pages enter the inactive list head (since 5.9 anon pages
  start inactive); a page-table access sets the PTE young bit only.
* Reclaim isolates up to ``SWAP_CLUSTER_MAX`` pages from the inactive tail and
  applies ``folio_check_references``: young and already PG_referenced ->
  activate (active head); young only -> set PG_referenced, back to the
  inactive head; not young -> clear PG_referenced and reclaim. On activation a
  swap-cache page loses its slot when swap is more than half full.
* Before each isolation round, when ``inactive_is_low`` (``inactive * ratio <
  active`` with ``ratio = int_sqrt(10 * GB)``, GB the size of both lists), or
  when the inactive list is empty, ``shrink_active_list`` moves up to 32 pages
  from the active tail to the inactive head, clearing their young bits.
* A reclaim call stops once it has reclaimed at least the requested count.
"""

from __future__ import annotations

from swaptrace._kernels._jit import jit_inline
from swaptrace._kernels.dlist import _push_head, _unlink
from swaptrace._kernels.slots import _free_slot, _swap_full
from swaptrace._kernels.swapout import _evict
from swaptrace._kernels.swapstate import (
    ACTIVE,
    C_ACTIVATIONS,
    C_DEACTIVATIONS,
    C_SCANNED,
    C_SLOT_FREES,
    P_FOOTPRINT,
    P_PAGE_BYTES,
    R_ERROR,
    R_N_ACTIVE,
    R_N_INACTIVE,
    R_RESIDENT,
    REFERENCED,
    SWAP_CLUSTER_MAX,
    YOUNG,
)


@jit_inline
def _int_sqrt(x):
    """Floor of the square root of a non-negative integer (the kernel's ``int_sqrt``)."""
    r = 0
    while (r + 1) * (r + 1) <= x:
        r += 1
    return r


@jit_inline
def _inactive_is_low(st):
    """``inactive_is_low``: inactive * int_sqrt(10 * GB) < active (ratio 1 below 1 GB)."""
    inactive = st.reg[R_N_INACTIVE]
    active = st.reg[R_N_ACTIVE]
    gb = ((inactive + active) * st.prm[P_PAGE_BYTES]) >> 30
    ratio = _int_sqrt(10 * gb) if gb > 0 else 1
    return inactive * ratio < active


@jit_inline
def _deactivate(st, n):
    """``shrink_active_list``: up to ``n`` pages from the active tail to the inactive head."""
    F = st.prm[P_FOOTPRINT]
    for _ in range(n):
        page = st.lprev[F]
        if page == F:
            break
        _unlink(st.lnext, st.lprev, page)
        st.flags[page] &= ~(ACTIVE | YOUNG)
        _push_head(st.lnext, st.lprev, F + 1, page)
        st.reg[R_N_ACTIVE] -= 1
        st.reg[R_N_INACTIVE] += 1
        st.reg[C_DEACTIVATIONS] += 1


@jit_inline
def _linux_hit(st, page):
    """A mapped access sets the PTE accessed (young) bit; lists do not move."""
    st.flags[page] |= YOUNG


@jit_inline
def _linux_insert(st, page, target):
    """New page at the inactive head; the faulting page is young (it was just accessed)."""
    f = st.flags[page] & ~(ACTIVE | REFERENCED | YOUNG)
    if target:
        f |= YOUNG
    st.flags[page] = f
    _push_head(st.lnext, st.lprev, st.prm[P_FOOTPRINT] + 1, page)
    st.reg[R_N_INACTIVE] += 1


@jit_inline
def _linux_reclaim(st, n):
    """Shrink the lists until at least ``n`` pages are reclaimed (or none is left)."""
    F = st.prm[P_FOOTPRINT]
    reg = st.reg
    done = 0
    while done < n and reg[R_RESIDENT] > 0 and reg[R_ERROR] == 0:
        if _inactive_is_low(st) or reg[R_N_INACTIVE] == 0:
            _deactivate(st, SWAP_CLUSTER_MAX)
        take = min(SWAP_CLUSTER_MAX, reg[R_N_INACTIVE])
        page = st.lprev[F + 1]
        for i in range(take):  # isolate, oldest first
            st.tmp[i] = page
            page = st.lprev[page]
        for i in range(take):
            page = st.tmp[i]
            _unlink(st.lnext, st.lprev, page)
            reg[R_N_INACTIVE] -= 1
            reg[C_SCANNED] += 1
            f = st.flags[page]
            if f & YOUNG:
                if f & REFERENCED:
                    st.flags[page] = (f & ~YOUNG) | REFERENCED | ACTIVE
                    _push_head(st.lnext, st.lprev, F, page)
                    reg[R_N_ACTIVE] += 1
                    reg[C_ACTIVATIONS] += 1
                    if st.slot[page] >= 0 and _swap_full(st):
                        _free_slot(st, page)
                        reg[C_SLOT_FREES] += 1
                else:
                    st.flags[page] = (f & ~YOUNG) | REFERENCED
                    _push_head(st.lnext, st.lprev, F + 1, page)
                    reg[R_N_INACTIVE] += 1
            else:
                st.flags[page] = f & ~REFERENCED
                _evict(st, page)
                done += 1
    return done
