"""Swap readahead windows, written after mm/swap_state.c (Linux 6.x).

``_swapin_nr_pages`` is ``__swapin_nr_pages``: ``hits + 2`` pages; with no
hits, 1 page unless the fault is next to the previous one; otherwise rounded
up to a power of two of at least 4; capped at the maximum; never below half
the previous window. ``_vma_window`` is ``swap_vma_ra_win`` (window placed
forward, backward or centred around the fault, clamped to the VMA and its
2 MiB PMD region); ``_cluster_window`` is ``swapin_nr_pages`` plus the
aligned slot block of ``swap_cluster_readahead``. The emulated address
space is one VMA ``[0, footprint_pages)`` whose start is 2 MiB aligned (as
``swaptrace capture``'s single anonymous mapping).
"""

from __future__ import annotations

from swaptrace.kernels.emulate.state import (
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
from swaptrace.kernels.jit import jit_noref


@jit_noref
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


@jit_noref
def _vma_window(m, page):
    """Pages ``[start, end)`` to read for a swap fault on ``page`` (VMA readahead)."""
    max_win = 1 << min(m[P_PAGE_CLUSTER], SWAP_RA_ORDER_CEILING)
    if max_win == 1:
        return page, page + 1
    prev = m[R_RA_PREV]
    win = _swapin_nr_pages(prev, page, m[R_RA_HITS], max_win, m[R_RA_WIN])
    m[R_RA_PREV] = page
    m[R_RA_WIN] = win
    m[R_RA_HITS] = 0
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
    pmd = m[P_PMD_PAGES]
    base = page - page % pmd
    return max(left, base), min(right, m[P_FOOTPRINT], base + pmd)


@jit_noref
def _cluster_window(m, offset):
    """Slots ``[start, end)`` to read for a swap fault on slot ``offset`` (cluster readahead)."""
    max_pages = 1 << m[P_PAGE_CLUSTER]
    if max_pages <= 1:
        return offset, offset + 1
    hits = m[R_CRA_HITS]
    m[R_CRA_HITS] = 0
    pages = _swapin_nr_pages(m[R_CRA_PREV], offset, hits, max_pages, m[R_CRA_LAST])
    if hits == 0:
        m[R_CRA_PREV] = offset
    m[R_CRA_LAST] = pages
    mask = pages - 1
    if mask == 0:
        return offset, offset + 1
    start = offset & ~mask
    end = offset | mask
    if start == 0:  # slot 0 is the swap header
        start = 1
    if end >= m[P_NSLOTS]:
        end = m[P_NSLOTS] - 1
    return start, end + 1
