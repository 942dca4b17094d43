"""``linux`` reclaim by priority levels (``scan_priorities``), worked out by hand on a full memory of 1024 pages.

Each level ``p`` (12 down to 0) gives the inactive list ``(size >> p) * 90 // 510`` pages to scan
(``get_scan_count``'s anon share at swappiness 60 with no file pages); a call stops once it has freed
what it was asked for.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_pagecache_props import run_arrays

from swaptrace.errors import ConfigError
from swaptrace.kernels.emulate import state as ks
from swaptrace.kernels.emulate.linux_lists import _linux_reclaim, _scan_share

PAGES = 1024


def full_memory(**kw):
    """Stores to pages 0..1023 with room for exactly them: every page resident, young, dirty, inactive."""
    pages = np.arange(PAGES, dtype=np.int64)
    emu, _ = run_arrays(pages, np.ones(PAGES, bool), np.zeros(PAGES, np.int64), 2 * PAGES, PAGES, policy="linux",
                        readahead="none", writeback_lag=0, scan_priorities=True, **kw)
    st = emu.state
    assert st.reg[ks.R_N_INACTIVE] == PAGES and st.reg[ks.C_SCANNED] == 0
    return emu, st


def test_share_per_level():
    assert [_scan_share(PAGES, p) for p in range(12, -1, -1)] == [0, 0, 0, 0, 0, 1, 2, 5, 11, 22, 45, 90, 180]


def test_a_call_that_frees_nothing_scans_every_level_once():
    emu, st = full_memory()
    # every page is young: each scanned page is kept (referenced) and goes back, so the list stays 1024 long
    # and the call scans the sum of the shares, 356 pages, frees none, and returns
    freed = _linux_reclaim(st.b, st.m, st.f, 32)
    assert freed == 0
    assert st.reg[ks.C_SCANNED] == 1 + 2 + 5 + 11 + 22 + 45 + 90 + 180
    assert st.reg[ks.R_N_INACTIVE] == PAGES and st.reg[ks.R_N_ACTIVE] == 0
    assert int(np.count_nonzero(st.flags & ks.REFERENCED)) == 356


def test_calls_walk_down_the_list_until_one_frees_enough():
    emu, st = full_memory()
    # each call scans 356 pages from the tail; the young ones go back referenced (to the head), so the
    # first two calls free nothing and the third meets, after the last 312 young pages, the pages the first
    # call marked: at level 0 (share 180 of the still full list) its fifth batch of 32 frees 24 and the last
    # batch (20 pages, the rest of the share) 20 more
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 0
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 0
    assert st.reg[ks.C_SCANNED] == 2 * 356
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 24 + 20
    assert st.reg[ks.C_SCANNED] == 3 * 356
    assert st.reg[ks.R_RESIDENT] == PAGES - 44
    assert st.reg[ks.C_PAGES_OUT] == 44  # dirty, and a synchronous device (lag 0): written as freed


def test_the_default_rounds_free_32_at_once():
    pages = np.arange(PAGES, dtype=np.int64)
    emu, _ = run_arrays(pages, np.ones(PAGES, bool), np.zeros(PAGES, np.int64), 2 * PAGES, PAGES, policy="linux",
                        readahead="none", writeback_lag=0, scan_priorities=False)
    st = emu.state
    # 32-page rounds until 32 are freed: the whole list once (all young), then 32 from the tail
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 32
    assert st.reg[ks.C_SCANNED] == PAGES + 32


def test_other_policies_reject_it():
    with pytest.raises(ConfigError, match="linux policy only"):
        run_arrays(np.arange(4), np.ones(4, bool), np.zeros(4, np.int64), 8, 4, policy="lru", scan_priorities=True)
