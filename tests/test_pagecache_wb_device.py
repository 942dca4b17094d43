"""``linux`` writeback on a device of its own speed (``writeback_completion="device"``, the default).

The device writes one page in the time reclaim isolates ``write_cost`` pages, first in first out; a
priority level's writes reach it together as the level ends (the plug). Until the first swap-in it also gets
``fill_write_credit`` / 8 clock units per zero-filled page (the hand-worked cases set it to 0 but the last). Worked out by hand on the dirty
memory of :func:`test_pagecache_wb_level.dirty_memory` (1024 dirty, not young pages, page 0 at the inactive
tail, no active list); request by request against the naive twin in test_pagecache_wb_level.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from cli_helpers import run_cli
from naive_emulate import zipf_access_trace
from test_pagecache_wb_level import META, PAGES, dirty_memory, inactive_tail

import swaptrace.emulate as pagecache
from swaptrace.core.traceio import open_trace
from swaptrace.emulate import Emulator, EmulatorConfig, emulate
from swaptrace.errors import ConfigError
from swaptrace.kernels.emulate import state as ks
from swaptrace.kernels.emulate.dlist import _push_tail, _unlink
from swaptrace.kernels.emulate.linux_lists import _linux_reclaim, _shrink_batch, _wb_complete
from swaptrace.kernels.emulate.plug import _flush, _submit

# ---- worked out by hand ---------------------------------------------------------------------------------


def test_a_fast_device_frees_as_the_level_rule_does_but_leaves_the_last_level_in_flight():
    # write cost 1: a level's writes go to the device as it ends, one page per page isolated after that.
    # Shares (size >> p) * 90 // 510 as in the level rule's test; the clock counts pages isolated.
    #   p 7   share 1: clock 1, writes page 0; unplugged: done at max(0, 1) + 1 = 2
    #   p 6   share 2: by clock 1 + 2 = 3 page 0 is done -> tail; frees 0, writes 1; done at 4
    #   p 5   share 5: by 8, page 1 done; frees 1, writes 2..5; done at 9..12
    #   p 4   share 11: by 19, 2..5 done; frees 4, writes 6..12 (7); done at 20..26
    #   p 3   share 22: by 41, 6..12 done; frees 7, writes 13..27 (15); done at 42..56
    #   p 2   share 44: batch 32 (by 73: 13..27 done) frees 15, writes 28..44 (17); batch 12 (by 85: the
    #         level's own writes are still in its plug) writes 45..56; done at 86..114
    #   p 1   share 87: batch 32 (by 117: 28..56 done) frees 29 -- 57 >= 32, the call stops -- and writes
    #         57..59, unplugged as the level ends: done at 118..120
    # Freed 57, written 60, scanned 117 -- as under "level", whose level ends complete its own writes; here
    # the stopping level's 3 are still on the device.
    emu, st = dirty_memory(writeback_completion="device", write_cost=1, fill_write_credit=0, write_latency=0)
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 57
    r = st.reg
    assert r[ks.C_PAGES_OUT] == 60 and r[ks.C_SCANNED] == 117 and r[ks.R_RESIDENT] == PAGES - 57
    assert r[ks.R_WB_N] == 3 and r[ks.R_WB_PLUGGED] == 0
    assert r[ks.R_WB_CLOCK] == 117 and r[ks.R_WB_DEV] == 120
    assert np.flatnonzero(st.flags & ks.WRITEBACK).tolist() == [57, 58, 59]
    # the next call: levels 12..8 (967 pages) scan nothing; level 7 (share 1) isolates one page by clock 118,
    # when page 57 is done: rotated to the tail, freed, and the call is done
    assert _linux_reclaim(st.b, st.m, st.f, 1) == 1
    assert r[ks.R_WB_N] == 2 and r[ks.C_PAGES_OUT] == 60 and not st.flags[57] & ks.RESIDENT


def test_a_slow_device_lets_a_call_write_its_whole_scan_before_anything_is_freed():
    # write cost 1000: the first write is done at clock 1001, and the call's whole scan (levels 7..0, 356
    # pages, the call rule's count) takes the clock to 356 only: it writes all 356 and frees none -- the
    # kernel's first burst of thousands of pages when a dirty inactive tail meets a busy device
    emu, st = dirty_memory(writeback_completion="device", write_cost=1000, fill_write_credit=0, write_latency=0)
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 0
    r = st.reg
    assert r[ks.C_PAGES_OUT] == r[ks.C_SCANNED] == r[ks.R_WB_N] == 356 and r[ks.R_RESIDENT] == PAGES
    assert r[ks.R_WB_CLOCK] == 356 and r[ks.R_WB_DEV] == 1 + 356 * 1000
    # a wait (a read, or reclaim meeting one of them) sleeps until the device is done: every write completes,
    # last written at the tail, and the clock moves to the device's
    _wb_complete(st.b, st.m, ks.WB_ALL)
    assert r[ks.R_WB_N] == 0 and r[ks.R_WB_CLOCK] == 1 + 356 * 1000
    assert inactive_tail(st, 2) == [355, 354]
    # the next call frees them with no write: levels 7..4 free 1 + 2 + 5 + 11, level 3 its 22 (41 >= 32)
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 41
    assert r[ks.C_PAGES_OUT] == 356 and r[ks.R_RESIDENT] == PAGES - 41


def test_each_level_ends_its_merged_request():
    # The slow device's call above writes its whole scan, 356 pages, in isolation order, so the pages get
    # consecutive fresh slots 1..356. shrink_lruvec holds one block plug per priority level, and
    # blk_finish_plug issues the level's request, so no request spans two levels: the requests are the
    # level shares ((1024 >> p) * 90 // 510 for p = 7..0: 1, 2, 5, 11, 22, 45, 90, 180), the last split at
    # the largest request (128 pages, --max-request 512KiB).
    emu, st = dirty_memory(writeback_completion="device", write_cost=1000, fill_write_credit=0, write_latency=0)
    _linux_reclaim(st.b, st.m, st.f, 32)
    rows = st.take_rows()
    assert rows["op"].tolist() == [ks.OP_WRITE] * 9
    assert (rows["length"] // 4096).tolist() == [1, 2, 5, 11, 22, 45, 90, 128, 52]
    assert (rows["offset"] // 4096).tolist() == [1, 2, 4, 9, 20, 42, 87, 177, 305]


def test_a_bio_merges_at_either_end_of_the_last_request_only():
    # blk_attempt_plug_merge tries the plug's last request; blk_try_merge takes a bio that ends where it starts
    # (front) as well as one that starts where it ends (back). Slots 10, 9, 8 (front, front) then 11 (back):
    # one request of slots 8..11. Then 5 (adjacent to nothing) starts a request, 7 does not join it though it
    # would have joined the one before, and 6 joins 5..5 at its end and would fit 7..7 at its start, but only
    # the last request (7) is tried: front merge there, 6..7.
    emu, st = dirty_memory(writeback_completion="device", write_cost=1, fill_write_credit=0, write_latency=0)
    for slot in (10, 9, 8, 11, 5, 7, 6):
        _submit(st.m, st.f, ks.OP_WRITE, slot, ks.CAUSE_RECLAIM)
    _flush(st.m, st.f)
    rows = st.take_rows()
    assert (rows["offset"] // 4096).tolist() == [8, 5, 6]
    assert (rows["length"] // 4096).tolist() == [4, 1, 2]
    # and a read never joins a write
    _submit(st.m, st.f, ks.OP_WRITE, 20, ks.CAUSE_RECLAIM)
    _submit(st.m, st.f, ks.OP_READ, 19, ks.CAUSE_FAULT)
    _flush(st.m, st.f)
    rows = st.take_rows()
    assert rows["op"].tolist() == [ks.OP_WRITE, ks.OP_READ]


def test_a_sleep_on_writeback_ends_the_merged_request():
    # 5 pages written from the dirty tail, in the level's plug as one request of slots 1..5; reclaim then
    # meets page 2 again, still under writeback, and (cgroup v1) waits for it: the sleep flushes the plug,
    # so the 5 are one request, page 2 (now clean) is freed, and page 5's write starts another request
    # though its fresh slot 6 follows slot 5
    emu, st = dirty_memory(writeback_completion="device", write_cost=10, fill_write_credit=0, write_latency=0)
    assert _shrink_batch(st.b, st.m, st.f, 5, 0) == (0, 5)
    assert st.reg[ks.R_PEND_N] == 5  # merged, not yet issued
    # the written pages went back to the inactive head; move page 2 to the tail so the next batch meets it
    F = st.F
    nx, pv = int(st.m[ks.O_NEXT]), int(st.m[ks.O_PREV])
    _unlink(st.m, nx, pv, 2)
    _push_tail(st.m, nx, pv, F + 1, 2)
    assert _shrink_batch(st.b, st.m, st.f, 2, 5) == (1, 6)
    assert st.reg[ks.C_WB_WAITS] == 1
    rows = st.take_rows()
    assert (rows["length"] // 4096).tolist() == [5] and (rows["offset"] // 4096).tolist() == [1]
    assert st.reg[ks.R_PEND_SLOT] == 6 and st.reg[ks.R_PEND_N] == 1


def test_a_latency_keeps_a_fast_devices_writes_in_flight_for_the_whole_call():
    # write cost 1 as in the fast device's case, but each write completes 1000 units after the device served
    # it. Levels 7..0 end at clocks 1, 3, 8, 19, 41, 86, 176, 356 and hand the device 1, 2, 5, 11, 22, 45,
    # 90, 180 pages; the device keeps up (served at 2; 4, 5; 9..13; 20..30; 42..63; 87..131; 177..266;
    # 357..536), but the first completion is at 2 + 1000 = 1002, past the call's whole scan (clock 356):
    # the call writes all 356 and frees none -- the slow device's call, from a fast device far away
    emu, st = dirty_memory(writeback_completion="device", write_cost=1, fill_write_credit=0, write_latency=1000)
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 0
    r = st.reg
    assert r[ks.C_PAGES_OUT] == r[ks.C_SCANNED] == r[ks.R_WB_N] == 356
    assert r[ks.R_WB_CLOCK] == 356 and r[ks.R_WB_DEV] == 536
    # nothing is done by clock 1001; page 0 by 1002; a wait sleeps until the last one, 536 + 1000
    _wb_complete(st.b, st.m, 1001)
    assert r[ks.R_WB_N] == 356
    _wb_complete(st.b, st.m, 1002)
    assert r[ks.R_WB_N] == 355
    _wb_complete(st.b, st.m, ks.WB_ALL)
    assert r[ks.R_WB_N] == 0 and r[ks.R_WB_CLOCK] == 1536


def test_the_write_latency_is_a_device_setting():
    assert EmulatorConfig.resolve(META, memory_bytes=40960).write_latency == pagecache.DEFAULT_WRITE_LATENCY
    assert EmulatorConfig.resolve(META, memory_bytes=40960, writeback_completion="level").write_latency == 0
    with pytest.raises(ConfigError, match="--write-latency applies to --writeback-completes device"):
        EmulatorConfig.resolve(META, memory_bytes=40960, writeback_completion="level", write_latency=3)
    with pytest.raises(ConfigError, match="must not be negative"):
        EmulatorConfig.resolve(META, memory_bytes=40960, write_latency=-1)


def test_plugged_writes_wait_for_the_level_end_or_a_wait():
    # one batch of 5 isolated from the dirty tail: written, in the level's plug, not on the device -- no
    # clock completes them -- until a wait (reclaim meets one, or a read: schedule() flushes the plug) hands
    # them over and sleeps until the device is done: 5 pages at cost 10 from clock 5, done at 55
    emu, st = dirty_memory(writeback_completion="device", write_cost=10, fill_write_credit=0, write_latency=0)
    r = st.reg
    assert _shrink_batch(st.b, st.m, st.f, 5, 0) == (0, 5)
    assert r[ks.R_WB_PLUGGED] == r[ks.R_WB_N] == 5 and r[ks.R_WB_CLOCK] == 5
    _wb_complete(st.b, st.m, 10**9)
    assert r[ks.R_WB_N] == 5
    _wb_complete(st.b, st.m, ks.WB_ALL)
    assert r[ks.R_WB_N] == r[ks.R_WB_PLUGGED] == 0 and r[ks.R_WB_DEV] == r[ks.R_WB_CLOCK] == 55
    assert inactive_tail(st, 5) == [4, 3, 2, 1, 0]


def test_the_fill_credit_gives_the_device_time_until_the_first_swap_in():
    # 1024 pages zero-filled before the first call: credit 8 adds 1024 units before the scan, credit 6 768
    # (1024 * 6 // 8), credit 1 128, each paying for all 1024 pages; the device and the scan keep their rule, so the call frees, writes and scans as
    # with no credit (the fast device's case above) and only the clock is ahead
    for credit, ahead in ((8, 1024), (6, 768), (1, 128)):
        emu, st = dirty_memory(writeback_completion="device", write_cost=1, fill_write_credit=credit, write_latency=0)
        assert _linux_reclaim(st.b, st.m, st.f, 32) == 57
        r = st.reg
        assert r[ks.C_PAGES_OUT] == 60 and r[ks.C_SCANNED] == 117
        assert r[ks.R_WB_CLOCK] == 117 + ahead and r[ks.R_WB_DEV] == 120 + ahead and r[ks.R_FILL_SEEN] == 1024
        # no page zero-filled since: the next call gets nothing more
        _linux_reclaim(st.b, st.m, st.f, 1)
        assert r[ks.R_FILL_SEEN] == 1024 and r[ks.R_WB_CLOCK] >= 117 + ahead
    # after a swap-in the credit stops, however many pages are zero-filled later
    emu, st = dirty_memory(writeback_completion="device", write_cost=1, fill_write_credit=8, write_latency=0)
    st.reg[ks.C_MAJOR] = 1
    st.reg[ks.C_ZERO_FILL] += 500
    _linux_reclaim(st.b, st.m, st.f, 32)
    assert st.reg[ks.R_FILL_SEEN] == 0 and st.reg[ks.R_WB_CLOCK] == 117
    # a remainder waits: 3 pages at credit 2 are 6 eighths, no whole unit, so none is paid for yet
    emu, st = dirty_memory(writeback_completion="device", write_cost=1, fill_write_credit=2, write_latency=0)
    st.reg[ks.C_ZERO_FILL] = 3
    _linux_reclaim(st.b, st.m, st.f, 32)
    assert st.reg[ks.R_FILL_SEEN] == 0 and st.reg[ks.R_WB_CLOCK] == 117


def test_the_fill_credit_is_a_device_setting():
    assert EmulatorConfig.resolve(META, memory_bytes=40960).fill_write_credit == pagecache.DEFAULT_FILL_WRITE_CREDIT
    assert EmulatorConfig.resolve(META, memory_bytes=40960, writeback_completion="level").fill_write_credit == 0
    with pytest.raises(ConfigError, match="--fill-write-credit applies to --writeback-completes device"):
        EmulatorConfig.resolve(META, memory_bytes=40960, writeback_completion="level", fill_write_credit=3)
    with pytest.raises(ConfigError, match="must not be negative"):
        EmulatorConfig.resolve(META, memory_bytes=40960, fill_write_credit=-1)


# ---- configuration (its errors: test_pagecache_wb_level.py) ----------------------------------------------------------------------------------------


def test_defaults():
    assert pagecache.DEFAULT_WRITEBACK_COMPLETION == "device" and pagecache.DEFAULT_STATS_FLUSH_STEPS == 1
    cfg = EmulatorConfig.resolve(META, memory_bytes=40960)
    assert cfg.writeback_completion == "device" and cfg.write_cost == pagecache.DEFAULT_WRITE_COST
    assert cfg.scan_priorities and cfg.stats_flush_steps == 1
    m = Emulator(cfg, 100, np.array([1])).state.m
    assert m[ks.P_WB_LEVEL] == ks.WB_BY_DEVICE and m[ks.P_WB_COST] == pagecache.DEFAULT_WRITE_COST
    assert m[ks.P_WB_LAG] == ks.WB_ALL and m[ks.P_WB_THROTTLE] == 0
    for kw in ({"writeback_completion": "next-level"}, {"writeback_lag": 300}, {"scan_priorities": False}):
        cfg = EmulatorConfig.resolve(META, memory_bytes=40960, **kw)
        assert cfg.write_cost == 0 and Emulator(cfg, 100, np.array([1])).state.m[ks.P_WB_COST] == 0


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return zipf_access_trace(tmp_path_factory.mktemp("wbd") / "t.access.parquet", seed=9, footprint=300, n=5000,
                             steps=5, write_p=0.5)


def test_metadata_records_the_device(trace, tmp_path):
    r = run_cli("emulate", trace, "--memory-fraction", 0.3, "--write-cost", 3, "-o", tmp_path / "d.swapio.parquet")
    assert r.exit_code == 0, r.output
    params = open_trace(tmp_path / "d.swapio.parquet", kind="swapio").meta["params"]
    assert params["writeback_completion"] == "device" and params["write_cost"] == 3
    assert params["writeback_lag"] is None and params["stats_flush_steps"] == 1
    res = emulate(trace, tmp_path / "n.swapio.parquet", memory_fraction=0.3, writeback_completion="next-level")
    assert res.params["write_cost"] is None
