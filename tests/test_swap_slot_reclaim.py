"""The swap allocator reclaims slots only the swap cache holds once swap is more than half full.

Linux 6.12+ (mm/swapfile.c): ``alloc_swap_scan_cluster`` scans a cluster in order, and ``cluster_scan_range``
counts a slot whose only user is the swap cache (``SWAP_HAS_CACHE``, no page-table entry holds it) as usable
when ``vm_swap_full()``; ``cluster_reclaim_range`` -> ``__try_to_reclaim_swap`` then frees it from its page,
which keeps its frame and is dirty again (``folio_free_swap``). Worked out by hand on 8 slots (slot 0 the
header) in clusters of 4, against :mod:`swaptrace.kernels.emulate.slots`; the naive twin's allocator
(tests/naive_emulate.py) is compared with the product on whole runs in test_pagecache_wb_level.py.
"""

from __future__ import annotations

import numpy as np
from test_pagecache_props import run_arrays

from swaptrace.kernels.emulate import state as ks
from swaptrace.kernels.emulate.slots import _alloc_slot, _free_slot, _swap_full

PAGES = 8


def _filled(policy="linux"):
    """8 pages stored to with room for all of them (resident, mapped, dirty, no slot); then pages 0..6 get
    slots 1..7 in order -- cluster 0 holds 1..3 (0 is the header), cluster 1 holds 4..7 -- and page 1's slot 2
    is freed, so cluster 0 goes on the non-full list with one free slot, after slot 1 (page 0's)."""
    emu, _ = run_arrays(np.arange(PAGES, dtype=np.int64), np.ones(PAGES, bool), np.zeros(PAGES, np.int64), PAGES,
                        PAGES, policy=policy, readahead="none", swap_bytes=8 * 4096, cluster_slots=4)
    st = emu.state
    for p in range(7):
        assert _alloc_slot(st.b, st.m, p) == p + 1
    _free_slot(st.m, 1)
    return st


def _slot(st, page):
    return int(st.m[st.m[ks.O_SLOT] + page])


def test_over_half_full_the_scan_takes_a_cache_only_slot_before_a_later_free_one():
    st = _filled()
    # 6 of 7 usable slots in use: (7 - 6) * 2 < 7, swap is more than half full. Page 7's allocation finds no
    # current cluster (cluster 1 was released when slot 7 was taken) and takes non-full cluster 0 from its
    # start: slot 1 is page 0's, which is in memory and mapped -- the swap cache alone holds the slot -- so the
    # scan reclaims it before reaching free slot 2
    assert _swap_full(st.m)
    frees = int(st.reg[ks.C_SLOT_FREES])
    assert _alloc_slot(st.b, st.m, 7) == 1
    assert _slot(st, 7) == 1 and _slot(st, 0) == -1
    assert st.flags[0] & ks.DIRTY and st.flags[0] & ks.RESIDENT
    assert st.reg[ks.C_SLOT_FREES] == frees + 1 and st.reg[ks.R_SLOTS_USED] == 6
    # page 0 is dirty with no slot: its next allocation continues the cluster at free slot 2
    assert _alloc_slot(st.b, st.m, 0) == 2


def test_a_slot_under_writeback_or_held_by_a_page_table_entry_is_not_taken():
    for flag_off, flag_on in ((ks.MAPPED, 0), (0, ks.WRITEBACK), (0, ks.FREED)):
        st = _filled()
        st.flags[0] = (st.flags[0] & ~np.uint16(flag_off)) | np.uint16(flag_on)
        assert _alloc_slot(st.b, st.m, 7) == 2
        assert _slot(st, 0) == 1


def test_at_most_half_full_or_another_policy_only_free_slots_are_taken():
    st = _filled()
    for p in (2, 3, 4):  # 3 of 7 in use: (7 - 3) * 2 >= 7, not more than half full
        _free_slot(st.m, p)
    assert not _swap_full(st.m)
    assert _alloc_slot(st.b, st.m, 7) == 2 and _slot(st, 0) == 1
    st = _filled(policy="lru")
    assert _swap_full(st.m)
    assert _alloc_slot(st.b, st.m, 7) == 2 and _slot(st, 0) == 1
