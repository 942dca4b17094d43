"""Swap readahead windows, written after mm/swap_state.c (Linux 6.x).

``_swapin_nr_pages`` is ``__swapin_nr_pages``: ``hits + 2`` pages; with no
hits, 1 page unless the fault is next to the previous one; otherwise rounded
up to a power of two of at least 4; capped at the maximum; never below half
the previous window. ``_vma_window`` is ``swap_vma_ra_win`` (window placed
forward, backward or centred around the fault, clamped to the VMA and its
2 MiB PMD region); ``_cluster_window`` is ``swapin_nr_pages`` plus the
aligned slot block of ``swap_cluster_readahead``. The emulated address
space is one VMA ``[0, footprint_pages)`` whose start is 2 MiB aligned.
"""

from __future__ import annotations

from swaptrace._kernels._jit import jit, jit_inline
from swaptrace._kernels.swapstate import (
    P_FOOTPRINT,
    P_NSLOTS,
    P_PAGE_CLUSTER,
    P_PMD_PAGES,
    R_CRA_HITS,
    R_CRA_LAST,
    R_CRA_PREV,
    R_RA_HITS,
    R_RA_PREV,
    R_RA_WIN,
    SWAP_RA_ORDER_CEILING,
)


@jit
def _swapin_nr_pages(prev_offset, offset, hits, max_pages, prev_win):
    """Readahead window in pages (``__swapin_nr_pages``)."""
    pages = hits + 2
    if pages == 2:
        if offset != prev_offset + 1 and offset != prev_offset - 1:
            pages = 1
    else:
        roundup = 4
        while roundup < pages:
            roundup <<= 1
        pages = roundup
    if pages > max_pages:
        pages = max_pages
    last_ra = prev_win // 2
    if pages < last_ra:
        pages = last_ra
    return pages


@jit_inline
def _vma_window(st, page):
    """Pages ``[start, end)`` to read for a swap fault on ``page`` (VMA readahead)."""
    pc = st.prm[P_PAGE_CLUSTER]
    max_win = 1 << min(pc, SWAP_RA_ORDER_CEILING)
    if max_win == 1:
        return page, page + 1
    reg = st.reg
    prev = reg[R_RA_PREV]
    win = _swapin_nr_pages(prev, page, reg[R_RA_HITS], max_win, reg[R_RA_WIN])
    reg[R_RA_PREV] = page
    reg[R_RA_WIN] = win
    reg[R_RA_HITS] = 0
    if win == 1:
        return page, page + 1
    if page == prev + 1:
        left = page
    elif prev == page + 1:
        left = page - win + 1
    else:
        left = page - (win - 1) // 2
    right = left + win
    if left < 0:
        left = 0
    pmd = st.prm[P_PMD_PAGES]
    base = page - page % pmd
    start = max(left, base)
    end = min(right, st.prm[P_FOOTPRINT], base + pmd)
    return start, end


@jit_inline
def _cluster_window(st, offset):
    """Slots ``[start, end)`` to read for a swap fault on slot ``offset`` (cluster readahead)."""
    pc = st.prm[P_PAGE_CLUSTER]
    max_pages = 1 << pc
    if max_pages <= 1:
        return offset, offset + 1
    reg = st.reg
    hits = reg[R_CRA_HITS]
    reg[R_CRA_HITS] = 0
    pages = _swapin_nr_pages(reg[R_CRA_PREV], offset, hits, max_pages, reg[R_CRA_LAST])
    if hits == 0:
        reg[R_CRA_PREV] = offset
    reg[R_CRA_LAST] = pages
    mask = pages - 1
    if mask == 0:
        return offset, offset + 1
    start = offset & ~mask
    end = offset | mask
    if start == 0:  # slot 0 is the swap header
        start = 1
    if end >= st.prm[P_NSLOTS]:
        end = st.prm[P_NSLOTS] - 1
    return start, end + 1
