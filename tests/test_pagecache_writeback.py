"""The ``linux`` policy's writeback and zero-page rules on traces small enough to work out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from test_pagecache_props import run_arrays

from swaptrace.errors import ConfigError
from swaptrace.kernels.emulate import state as ks

BIG_LAG = 10**6  # no write completes by the clock: only a read or reclaim's wait completes it
#: these traces are worked out for 32-page reclaim rounds with exact list sizes (``--no-scan-priorities
#: --stats-flush-steps 0``); the priority levels have their own hand-worked tests (test_pagecache_priorities.py)
ROUNDS = {"scan_priorities": False, "stats_flush_steps": 0}


def fill_then_one_more(lag, budget=64):
    """Store to pages 0..budget-1 (memory full, every page young and dirty), then to one new page."""
    pages = np.arange(budget + 1, dtype=np.int64)
    return run_arrays(pages, np.ones(budget + 1, bool), np.zeros(budget + 1, np.int64), budget + 8, budget,
                      policy="linux", readahead="none", writeback_lag=lag, swap_bytes=4096 * 1024, **ROUNDS)


def test_synchronous_device_frees_what_it_writes():
    emu, rows = fill_then_one_more(0)
    s = emu.summary()
    # the first pass spares every page once (young -> referenced), the second writes and frees 32
    assert s["pages_out"] == s["evictions"] == 32
    assert s["writeback_waits"] == 0


def test_slow_writeback_writes_the_whole_inactive_list_before_freeing():
    emu, rows = fill_then_one_more(BIG_LAG)
    s = emu.summary()
    # nothing comes free until reclaim meets its own first write again and waits for it: by then all
    # 64 pages are written; the wait completes them and the batch in hand (32 pages) is freed clean
    assert s["pages_out"] == 64
    assert s["writeback_waits"] == 1
    assert s["evictions"] == s["clean_drops"] == 32
    st = emu.state
    assert int(np.count_nonzero(st.flags & ks.RESIDENT)) == 64 - 32 + 1
    assert st.reg[ks.R_WB_N] == 0
    # one reclaim call: the 64 writes are contiguous slots, merged into 128-page requests at most
    assert rows["length"][rows["op"] == 1].sum() == 64 * 4096


@pytest.mark.parametrize("lag", [8, 24, 40])
def test_lag_sets_how_far_reclaim_writes_ahead(lag):
    s0 = fill_then_one_more(0)[0].summary()
    s = fill_then_one_more(lag)[0].summary()
    big = fill_then_one_more(BIG_LAG)[0].summary()
    # a write completes once `lag` more pages were isolated; then it moves to the inactive tail and the
    # next batch frees it -- so a longer lag writes more before the call has its 32 pages
    assert s0["pages_out"] <= s["pages_out"] <= big["pages_out"]
    assert s["evictions"] >= 32


def test_lag_orders_the_writes_ahead():
    outs = [fill_then_one_more(lag)[0].summary()["pages_out"] for lag in (0, 8, 24, 40, BIG_LAG)]
    assert outs == sorted(outs)
    assert outs[0] < outs[-1]


def test_touching_a_written_page_is_a_minor_fault_without_io():
    # after the burst above, pages 0..31 are freed and 32..63 are written, clean and unmapped (swap cache)
    budget = 64
    pages = np.concatenate([np.arange(budget + 1), [40, 5]]).astype(np.int64)
    writes = np.concatenate([np.ones(budget + 1, bool), [False, False]])
    emu, rows = run_arrays(pages, writes, np.zeros(pages.size, np.int64), budget + 8, budget, policy="linux",
                           readahead="none", writeback_lag=BIG_LAG, swap_bytes=4096 * 1024, **ROUNDS)
    s = emu.summary()
    assert s["swapcache_hit"] == 1  # page 40: mapped again, no read
    assert s["major_faults"] == s["pages_in"] == 1  # page 5: freed, read back
    assert s["pages_out"] == 64


def test_store_to_a_page_under_writeback_keeps_its_slot():
    # lag 40: the first 32 writes complete while reclaim goes on and are freed; pages 32..63 are still
    # under writeback when page 40 is stored to: it cannot leave the swap cache (folio_free_swap refuses
    # a folio under writeback), so it keeps its slot and is dirty again
    emu, _ = fill_then_one_more(40)
    st = emu.state
    assert np.flatnonzero(st.flags & ks.WRITEBACK).tolist() == list(range(32, 64))
    budget = 64
    pages = np.concatenate([np.arange(budget + 1), [40, 41]]).astype(np.int64)
    writes = np.concatenate([np.ones(budget + 1, bool), [True, False]])
    emu, _ = run_arrays(pages, writes, np.zeros(pages.size, np.int64), budget + 8, budget, policy="linux",
                        readahead="none", writeback_lag=40, swap_bytes=4096 * 1024, **ROUNDS)
    st, s = emu.state, emu.summary()
    assert s["swapcache_hit"] == 2 and s["pages_in"] == 0
    assert st.flags[40] & ks.MAPPED and st.flags[40] & ks.DIRTY and st.flags[40] & ks.WRITEBACK
    assert st.slot[40] >= 0 and s["slot_frees"] == 0


def test_loads_of_never_written_pages_map_the_zero_page():
    # 100 pages read, then 10 stored to, under a 10-page budget: the reads take no memory
    pages = np.concatenate([np.arange(100), np.arange(10)]).astype(np.int64)
    writes = np.concatenate([np.zeros(100, bool), np.ones(10, bool)])
    steps = np.zeros(pages.size, np.int64)
    emu, rows = run_arrays(pages, writes, steps, 100, 10, policy="linux", readahead="none", **ROUNDS)
    s = emu.summary()
    assert s["zero_page"] == 100 and s["zero_fill"] == 10
    assert s["pages_out"] == s["pages_in"] == 0
    assert int(np.count_nonzero(emu.state.flags & ks.RESIDENT)) == 10
    # without it every read page gets a zero-filled frame, and 90 of them are pushed out to swap: written
    # without the swap zero map
    emu, _ = run_arrays(pages, writes, steps, 100, 10, policy="linux", readahead="none", zero_page=False,
                        zeromap=False, **ROUNDS)
    assert emu.summary()["zero_fill"] == 100
    assert emu.summary()["pages_out"] >= 90
    # with it (the default) those frames hold zeros: each gets a slot marked in the zero map and no write
    emu, _ = run_arrays(pages, writes, steps, 100, 10, policy="linux", readahead="none", zero_page=False, **ROUNDS)
    s = emu.summary()
    assert s["zero_fill"] == 100 and s["zero_out"] >= 90 and s["pages_out"] == 0


@pytest.mark.parametrize("policy", ["lru", "clock"])
def test_writeback_and_zero_page_are_linux_only(policy):
    pages = np.arange(4, dtype=np.int64)
    args = (pages, np.ones(4, bool), np.zeros(4, np.int64), 4, 2)
    with pytest.raises(ConfigError, match="linux policy only"):
        run_arrays(*args, policy=policy, writeback_lag=8)
    with pytest.raises(ConfigError, match="linux policy only"):
        run_arrays(*args, policy=policy, zero_page=True)
    with pytest.raises(ConfigError, match="must not be negative"):
        run_arrays(*args, policy="linux", writeback_lag=-1)
    emu, _ = run_arrays(*args, policy=policy)
    assert emu.cfg.writeback_lag == 0 and not emu.cfg.zero_page
