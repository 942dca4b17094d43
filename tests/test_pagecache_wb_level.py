"""``linux`` writeback completing by priority level (``writeback_completion="level"``, with ``scan_priorities``).

(Also: the level rules' and the device rule's configuration errors, and the device rule against the naive twin;
its hand-worked cases are in test_pagecache_wb_device.py.)

The writes issued during one priority level of a reclaim call complete as that level ends
(``shrink_lruvec``'s ``blk_finish_plug`` submits them together; the device is far slower than the scan):
no lag clock, no throttle. A major fault and reclaim meeting a page under writeback would still complete
writes, but find none: every reclaim call ends with a level's end.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import run_cli, the_error
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst
from naive_emulate import zipf_access_trace
from test_pagecache_naive import assert_same, run_both, small_trace
from test_pagecache_props import run_arrays

import swaptrace.emulate as pagecache
from swaptrace.core.traceio import open_trace
from swaptrace.emulate import DEFAULT_WRITEBACK_COMPLETION, Emulator, EmulatorConfig, emulate
from swaptrace.errors import ConfigError
from swaptrace.kernels.emulate import state as ks
from swaptrace.kernels.emulate.linux_lists import _linux_reclaim
from swaptrace.kernels.emulate.plug import _flush

LEVEL = {"policy": "linux", "scan_priorities": True, "writeback_completion": "level"}
PAGES = 1024
OUT_ROWS = pagecache.OUT_ROWS  # as shipped (one test patches it)


# ---- request by request against the naive twin ---------------------------------------------------------


def growing_trace(seed, footprint, n, p_new=0.4, write_p=0.6, steps=5):
    """New pages (first touches: zero-fill faults) mixed with returns to recent ones (major and minor faults)."""
    rng = np.random.default_rng(seed)
    new = rng.random(n) < p_new
    newest = np.minimum(np.cumsum(new), footprint - 1)
    back = (newest - rng.zipf(1.3, n) + 1).clip(0)
    pages = np.where(new, newest, back)
    return pages.astype(np.int64), rng.random(n) < write_p, np.sort(rng.integers(0, steps, n)).astype(np.int64)


#: (trace, footprint, budget): small budgets reclaim often, but a call's shares then add up to a few dozen
#: pages, so it seldom stops in the middle of a level that wrote; with budgets of a few hundred pages it
#: does (the completion of the stopping level's writes matters there: without it the cases of 1000 pages
#: with budget 300 and of 2000 with budget 700 differ from the twin)
LEVEL_CASES = [("random", 300, 7), ("runs", 300, 40), ("random", 300, 120), ("random", 1000, 300),
               ("growing", 2000, 300), ("growing", 2000, 700)]


#: the rules compared: a level's writes done as it ends, and the device of write cost 1, 6 and 40 (the level's
#: writes handed over as it ends, then done at the device's pace)
RULES = [{"writeback_completion": "level"},
         *({"writeback_completion": "device", "write_cost": c} for c in (1, 6, 40)),
         *({"writeback_completion": "device", "write_cost": c, "plug_rules": True} for c in (1, 6))]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r['writeback_completion']}{r.get('write_cost', '')}"
                         f"{'-plug' if r.get('plug_rules') else ''}")
@pytest.mark.parametrize("flush", [0, 1])
@pytest.mark.parametrize("readahead", ["none", "vma"])
@pytest.mark.parametrize(("kind", "footprint", "budget"), LEVEL_CASES)
def test_level_equals_naive(kind, footprint, budget, readahead, flush, rule):
    seed = LEVEL_CASES.index((kind, footprint, budget))
    if kind == "growing":
        pages, writes, steps = growing_trace(seed, footprint, 4000)
    else:
        pages, writes, steps = small_trace(seed, footprint, 4000, steps=5, write_p=0.5, runs=kind == "runs")
    got = run_both(pages, writes, steps, footprint, budget, readahead=readahead, cluster_slots=16,
                   max_request_pages=3 + seed % 3, stats_flush_steps=flush, **{**LEVEL, **rule})
    assert_same(*got)
    emu = got[0]
    s = emu.summary()
    assert s["pages_out"] > 0 and s["evictions"] == s["clean_drops"]  # written asynchronously, freed clean
    if rule["writeback_completion"] == "level":
        assert emu.state.reg[ks.R_WB_N] == 0  # every level completed its writes


@pytest.mark.parametrize("write_cost", [1, 6])
def test_plug_rules_equal_the_twin_and_reach_each_rule(write_cost):
    """``plug_rules`` (a kernel profile's setting): against the twin on a random trace with 512 KiB requests and
    VMA readahead (rewrites to old slots make plugs of many small requests, fresh slots long ones), where a
    plug is sent both for holding 32 requests and for a first request of 128 KiB, and reclaim runs inside
    swap-ins; and the run differs from the one without the rules."""
    pages, writes, steps = small_trace(3, 4000, 30000, steps=5, write_p=0.5, runs=False)
    kw = {**LEVEL, "writeback_completion": "device", "write_cost": write_cost, "readahead": "vma",
          "cluster_slots": 64, "max_request_pages": 128, "stats_flush_steps": 1}
    got = run_both(pages, writes, steps, 4000, 1000, plug_rules=True, **kw)
    assert_same(*got)
    naive = got[2]
    assert naive.plug_sends["count"] > 0 and naive.plug_sends["head"] > 0, naive.plug_sends
    assert naive.nested_writes > 0
    without = run_both(pages, writes, steps, 4000, 1000, **kw)
    assert_same(*without)
    assert without[1] != got[1]


def test_plug_add_by_hand():
    """``_plug_add``, bio by bio on a fresh plug: a 1-page read, then 41 contiguous writes (one request), then a
    write elsewhere: the first request is 1 page, so the 128 KiB rule does not send the plug (3 requests in
    it). Then 29 more one-page requests make 32; the 33rd sends them all and starts a plug of its own. A long
    first request does send the plug as the next joins. A sleep's wait (``_wb_complete`` of all) empties it."""
    from swaptrace.kernels.emulate.linux_lists import _plug_add, _wb_complete

    _, st = dirty_memory(writeback_completion="device", write_cost=1, fill_write_credit=0, write_latency=0)
    m, f = st.m, st.f
    _plug_add(m, f, ks.OP_READ, 100, ks.CAUSE_FAULT)
    for slot in range(200, 241):
        _plug_add(m, f, ks.OP_WRITE, slot, ks.CAUSE_RECLAIM)
    _plug_add(m, f, ks.OP_WRITE, 300, ks.CAUSE_RECLAIM)
    assert m[ks.R_PLUG_REQS] == 3 and m[ks.R_PLUG_HEAD] == 1
    for slot in range(302, 360, 2):  # 29 one-page requests: 32 in the plug
        _plug_add(m, f, ks.OP_WRITE, slot, ks.CAUSE_RECLAIM)
    assert m[ks.R_PLUG_REQS] == 32
    _plug_add(m, f, ks.OP_WRITE, 400, ks.CAUSE_RECLAIM)
    assert m[ks.R_PLUG_REQS] == 1 and m[ks.R_PLUG_HEAD] == 1
    for slot in range(401, 440):  # the new first request grows to 40 pages (160 KiB)
        _plug_add(m, f, ks.OP_WRITE, slot, ks.CAUSE_RECLAIM)
    assert m[ks.R_PLUG_REQS] == 1 and m[ks.R_PLUG_HEAD] == 40
    _plug_add(m, f, ks.OP_WRITE, 500, ks.CAUSE_RECLAIM)  # joins a plug whose first request is 160 KiB: sent
    assert m[ks.R_PLUG_REQS] == 1 and m[ks.R_PLUG_HEAD] == 1
    _plug_add(m, f, ks.OP_WRITE, 600, ks.CAUSE_RECLAIM)
    assert m[ks.R_PLUG_REQS] == 2
    _wb_complete(st.b, m, ks.WB_ALL)
    assert m[ks.R_PLUG_REQS] == 0 and m[ks.R_PLUG_HEAD] == 0


# ---- worked out by hand ---------------------------------------------------------------------------------


def dirty_memory(**kw):
    """Stores to pages 0..1023 with room for exactly them, then their young bits cleared by hand.

    Every page is resident, dirty, without a slot, on the inactive list (page 0 at the tail), neither
    young nor referenced: reclaim writes each page it scans.
    """
    pages = np.arange(PAGES, dtype=np.int64)
    emu, _ = run_arrays(pages, np.ones(PAGES, bool), np.zeros(PAGES, np.int64), 2 * PAGES, PAGES,
                        readahead="none", stats_flush_steps=0, **{"policy": "linux", "scan_priorities": True, **kw})
    st = emu.state
    st.flags[:] &= ~np.uint16(ks.YOUNG)
    assert st.reg[ks.R_N_INACTIVE] == PAGES and st.reg[ks.C_SCANNED] == 0
    return emu, st


def inactive_tail(st, k):
    """The ``k`` pages at the inactive tail, the next to be scanned first."""
    out = [int(st.lprev[st.F + 1])]
    while len(out) < k:
        out.append(int(st.lprev[out[-1]]))
    return out


def test_first_call_frees_once_a_level_has_completed_its_writes():
    emu, st = dirty_memory(writeback_completion="level")
    # One call asked for 32. Shares (size >> p) * 90 // 510, size the inactive list at the level's start
    # (nothing is deactivated: no active list). A written page goes back to the head under writeback; the
    # level's end completes it and rotates it to the tail, where the next level frees it first.
    #   p 12..8  size 1024: share 0
    #   p 7      size 1024: share 1   -> writes page 0
    #   p 6      size 1024: share 2   -> frees 0; writes 1                         (done 1)
    #   p 5      size 1023: share 5   -> frees 1; writes 2..5                      (done 2)
    #   p 4      size 1022: share 11  -> frees 5..2; writes 6..12 (7)              (done 6)
    #   p 3      size 1018: share 22  -> frees 12..6; writes 13..27 (15)           (done 13)
    #   p 2      size 1011: share 44  -> batch 32 frees 27..13 (15), writes 28..44 (17); batch 12 writes
    #                                    45..56                                    (done 28)
    #   p 1      size  996: share 87  -> batch 32 frees 56..28 (29), writes 57..59; done 57 >= 32: stop,
    #                                    and this last level's end completes 57..59 too
    # Written 60 (pages 0..59, slots 1..60), freed 57, scanned 1+2+5+11+22+44+32 = 117.
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 57
    _flush(st.m, st.f)
    r = st.reg
    assert r[ks.C_PAGES_OUT] == 60 and r[ks.C_SCANNED] == 117
    assert r[ks.R_RESIDENT] == PAGES - 57 and r[ks.C_EVICTIONS] == r[ks.C_CLEAN_DROPS] == 57
    assert r[ks.R_WB_N] == 0 and not np.any(st.flags & ks.WRITEBACK) and r[ks.C_WB_WAITS] == 0
    assert st.slot[:60].tolist() == list(range(1, 61))
    resident = np.flatnonzero(st.flags & ks.RESIDENT)
    assert resident.tolist() == list(range(57, PAGES))
    assert inactive_tail(st, 3) == [59, 58, 57]  # completed last level, rotated: scanned first next time
    assert not np.any(st.flags[57:60] & (ks.MAPPED | ks.DIRTY))
    # the call's writes: contiguous slots, but one block plug per level (shrink_lruvec), so one request per
    # level that wrote: p 7..1 wrote pages 0, 1, 2..5, 6..12, 13..27, 28..56, 57..59 (slot = page + 1)
    rows = st.take_rows()
    assert rows["op"].tolist() == [ks.OP_WRITE] * 7
    assert (rows["offset"] // 4096).tolist() == [1, 2, 3, 7, 14, 29, 58]
    assert (rows["length"] // 4096).tolist() == [1, 1, 4, 7, 15, 29, 3]


def test_a_page_touched_right_after_its_write_is_a_minor_fault_without_io():
    emu, st = dirty_memory(writeback_completion="level")
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 57
    _flush(st.m, st.f)
    st.take_rows()
    # page 58: written by the stopping level, complete, still in memory (swap cache): mapped again, no read.
    # page 10: written and freed: read back from its slot 11 (967 + 1 pages fit, so no reclaim)
    rows = list(emu.feed(np.array([58, 10]), np.zeros(2, bool), np.zeros(2, np.int64)))
    s = emu.summary()
    assert s["swapcache_hit"] == 1 and s["major_faults"] == s["pages_in"] == 1
    assert len(rows) == 1 and rows[0]["op"].tolist() == [ks.OP_READ]
    assert rows[0]["offset"].tolist() == [11 * 4096] and rows[0]["cause"].tolist() == [ks.CAUSE_FAULT]
    assert st.flags[58] & ks.MAPPED and st.slot[58] == 59  # a load keeps the slot (swap is far from full)


def test_the_lag_rule_writes_the_whole_scan_before_freeing():
    # The same memory and call under the default rule: nothing is freed before a write completes, so the
    # list stays 1024 long and every level's share is written: 1+2+5+11+22+45+90+180 = 356 pages, on a
    # writeback clock that reaches 356 < the lag 640 (none completes), and 356 < 640 + 64 (no throttle)
    emu, st = dirty_memory(writeback_completion="lag")
    assert emu.cfg.writeback_completion == "lag"
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 0
    assert st.reg[ks.C_PAGES_OUT] == st.reg[ks.C_SCANNED] == st.reg[ks.R_WB_N] == 356
    assert st.reg[ks.R_RESIDENT] == PAGES


# ---- the output buffer --------------------------------------------------------------------------------


def bursts(monkeypatch, out_rows):
    """Fill 8192 pages, store to 8192 new ones, then re-store the first: every page write its own request."""
    monkeypatch.setattr(pagecache.engine, "OUT_ROWS", out_rows)
    b = 8192
    pages = np.concatenate([np.arange(2 * b), np.arange(b)]).astype(np.int64)
    return run_arrays(pages, np.ones(pages.size, bool), np.zeros(pages.size, np.int64), 3 * b, b,
                      readahead="none", max_request_bytes=4096, **LEVEL)


def test_big_bursts_fit_the_output_buffer(monkeypatch):
    # The first access past the fill makes four calls. Each scans the shares of levels 12..0 of 8192 pages,
    # 0+0+1+2+5+11+22+45+90+180+361+722+1445 = 2884: the first two mark young pages referenced (and clear
    # their young bits), the third marks the last 1439 + 985 and, at level 0, meets 460 of the pages the
    # first call marked, not young now: it writes them all; the level's end completes them and the fourth
    # call frees 1+2+5+11+22 = 41 of them. One access, 460 write requests -- far past the bound without
    # writeback (2 * 8 + 32 + 64 + 8 = 120), so a buffer of 16 rows plus max_rows_per_access overflows
    # (RuntimeError) unless that bound holds the burst
    emu, rows = bursts(monkeypatch, 16)
    cfg = emu.cfg
    assert cfg.max_rows_per_access == 2 * 8 + 32 + 2 * 32 + 8 + 8192
    assert emu.state.m[ks.P_OUT_CAP] == 16 + cfg.max_rows_per_access
    _, per_access = np.unique(rows["t_us"], return_counts=True)  # one step: t_us is the access index
    assert per_access.max() == 460 <= cfg.max_rows_per_access
    s = emu.summary()
    assert s["pages_out"] == s["requests"]["write"] == np.count_nonzero(rows["op"] == ks.OP_WRITE) == 2 * 8192
    ref_rows = bursts(monkeypatch, OUT_ROWS)[1]  # the same stream through the usual buffer
    for k, v in rows.items():
        np.testing.assert_array_equal(v, ref_rows[k])


SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
traces = hst.integers(2, 60).flatmap(
    lambda f: hst.tuples(hst.just(f), hst.lists(hst.tuples(hst.integers(0, f - 1), hst.booleans()), min_size=1,
                                                max_size=400)))


@SETTINGS
@given(trace=traces, frac=hst.floats(0.05, 1.0), readahead=hst.sampled_from(["none", "vma", "cluster"]),
       flush=hst.sampled_from([0, 1]))
def test_invariants(trace, frac, readahead, flush):
    footprint, accesses = trace
    pages = np.array([a[0] for a in accesses], np.int64)
    writes = np.array([a[1] for a in accesses], bool)
    steps = np.zeros(pages.size, np.int64)
    budget = max(1, int(frac * footprint))
    emu, rows = run_arrays(pages, writes, steps, footprint, budget, readahead=readahead, cluster_slots=8,
                           max_request_bytes=4096, stats_flush_steps=flush, **LEVEL)
    s, st = emu.summary(), emu.state
    # every reclaim call ends with a level's end: no write is in flight between accesses
    assert st.reg[ks.R_WB_N] == 0 and not np.any(st.flags & ks.WRITEBACK)
    assert s["writeback_waits"] == 0  # so reclaim never meets a page under writeback
    assert s["evictions"] == s["clean_drops"]  # written pages are freed later, clean
    assert s["pages_out"] * 4096 == s["bytes_written"] == rows["length"][rows["op"] == 1].sum()
    assert int(np.count_nonzero(st.flags & ks.RESIDENT)) <= budget
    if rows["step"].size:
        _, per_access = np.unique(rows["t_us"], return_counts=True)
        assert per_access.max() <= emu.cfg.max_rows_per_access


# ---- configuration, CLI, metadata ----------------------------------------------------------------------

META = {"page_bytes": 4096, "footprint_pages": 100}


def test_defaults():
    # the default rule, "device", has its own tests (test_pagecache_wb_device.py); the level rules' settings:
    assert DEFAULT_WRITEBACK_COMPLETION == "device" and pagecache.DEFAULT_SCAN_PRIORITIES is True
    cfg = EmulatorConfig.resolve(META, memory_bytes=40960, writeback_completion="next-level")
    assert cfg.scan_priorities and cfg.writeback_completion == "next-level"
    m = Emulator(cfg, 100, np.array([1])).state.m
    assert m[ks.P_WB_LEVEL] == ks.WB_BY_NEXT_LEVEL and m[ks.P_WB_LAG] == ks.WB_ALL and m[ks.P_WB_THROTTLE] == 0
    # 32-page rounds have no levels, and a lag given asks for the lag: both fall back to it
    for kw in ({"scan_priorities": False}, {"writeback_lag": 300}):
        cfg = EmulatorConfig.resolve(META, memory_bytes=40960, **kw)
        assert cfg.writeback_completion == "lag"
        m = Emulator(cfg, 100, np.array([1])).state.m
        assert m[ks.P_WB_LEVEL] == 0 and m[ks.P_WB_LAG] == cfg.writeback_lag and m[ks.P_WB_THROTTLE] == 64
    assert EmulatorConfig.resolve(META, memory_bytes=40960, scan_priorities=False).writeback_lag == pagecache.DEFAULT_WRITEBACK_LAG
    cfg = EmulatorConfig.resolve(META, memory_bytes=40960, scan_priorities=True, writeback_completion="level")
    m = Emulator(cfg, 100, np.array([1])).state.m
    assert m[ks.P_WB_LEVEL] == ks.WB_BY_LEVEL and m[ks.P_WB_LAG] == ks.WB_ALL and m[ks.P_WB_THROTTLE] == 0


def test_next_level_rule_completes_a_levels_writes_as_the_next_one_ends():
    # 1024 dirty, not young pages; shares (size >> p) * 90 // 510, size = the inactive list at the level.
    # Levels 12..8 scan nothing. Level 7 (share 1) writes page 0. Level 6 (2) writes 1, 2; as it ends, page 0
    # (written a level earlier) completes and goes to the tail. Level 5 (5): frees 0, writes 3..6; 1, 2
    # complete. Level 4 (1023 >> 4 = 63 -> 11): frees 2, 1, writes 7..15; 3..6 complete. Level 3 (1021 >> 3
    # = 127 -> 22): frees 4, writes 16..33; 7..15 complete. Level 2 (1017 >> 2 = 254 -> 44, in batches of 32
    # and 12): frees 9 (16 so far), writes 34..56 and 57..68; 16..33 complete. Level 1 (1008 >> 1 = 504 -> 88):
    # its first batch of 32 frees those 18 (34 >= 32: the call stops) and writes 69..82; as this level ends,
    # the writes of level 2 (34..68) complete, its own 14 stay in flight.
    emu, st = dirty_memory(writeback_completion="next-level")
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 1 + 2 + 4 + 9 + 18
    assert st.reg[ks.C_SCANNED] == 1 + 2 + 5 + 11 + 22 + 44 + 32
    assert st.reg[ks.C_PAGES_OUT] == 1 + 2 + 4 + 9 + 18 + 35 + 14
    assert st.reg[ks.R_WB_N] == 14 and st.reg[ks.R_RESIDENT] == PAGES - 34
    # the next call: its first level (12, share 0) ends and completes those 14 (written before the last level
    # end); level 7 (990 >> 7 = 7 -> 1) frees one of them from the tail, and the call is done
    assert _linux_reclaim(st.b, st.m, st.f, 1) == 1
    assert st.reg[ks.R_WB_N] == 0 and st.reg[ks.C_PAGES_OUT] == 83 and st.reg[ks.C_SCANNED] == 118


def test_call_rule_completes_a_calls_writes_as_it_returns():
    # 1024 dirty, not young pages: the first call scans levels 7..0 (1+2+5+11+22+45+90+180 = 356, the shares
    # of (1024 >> p) * 90 // 510), writes every one and frees none -- nothing completes inside a call -- and
    # as it returns all 356 complete and go to the inactive tail, last written first
    emu, st = dirty_memory(writeback_completion="call")
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 0
    assert st.reg[ks.C_PAGES_OUT] == st.reg[ks.C_SCANNED] == 356
    assert st.reg[ks.R_WB_N] == 0 and st.reg[ks.R_RESIDENT] == PAGES
    # the next call frees them from the tail with no write: levels 7..4 free 1+2+5+11 = 19, level 3 its 22
    # in one batch (41 >= 32: it stops there)
    assert _linux_reclaim(st.b, st.m, st.f, 32) == 41
    assert st.reg[ks.C_PAGES_OUT] == 356 and st.reg[ks.R_RESIDENT] == PAGES - 41


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"writeback_completion": "done"},
         "unknown --writeback-completes 'done'; choose one of lag, level, next-level, call, device"),
        ({"writeback_completion": "call", "scan_priorities": False}, "--writeback-completes call needs --scan-priorities"),
        ({"writeback_completion": "level", "scan_priorities": False}, "needs --scan-priorities"),
        ({"writeback_completion": "level", "policy": "lru"}, "applies to the linux policy only"),
        ({"writeback_completion": "level", "policy": "clock"}, "applies to the linux policy only"),
        ({"writeback_completion": "level", "scan_priorities": True, "writeback_lag": 100},
         "--writeback-lag applies to --writeback-completes lag"),
        ({"writeback_completion": "level", "scan_priorities": True, "writeback_lag": 0}, "--writeback-lag"),
        ({"write_cost": 0}, "--write-cost must be at least 1"),
        ({"write_cost": -3}, "--write-cost must be at least 1"),
        ({"write_cost": 4, "writeback_completion": "call"}, "--write-cost applies to --writeback-completes device"),
        ({"write_cost": 4, "writeback_lag": 100}, "--write-cost applies to --writeback-completes device"),
        ({"writeback_completion": "device", "scan_priorities": False}, "device needs --scan-priorities"),
        ({"writeback_completion": "device", "policy": "lru"}, "applies to the linux policy only"),
    ],
)
def test_config_errors(kw, match):
    with pytest.raises(ConfigError, match=match):
        EmulatorConfig.resolve(META, memory_bytes=40960, **kw)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return zipf_access_trace(tmp_path_factory.mktemp("wbl") / "t.access.parquet", seed=8, footprint=400, n=6000,
                             steps=6, write_p=0.4)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--writeback-completes", "next-level", "--no-scan-priorities"],
         "--writeback-completes next-level needs --scan-priorities"),
        (["--writeback-completes", "level", "--no-scan-priorities"], "needs --scan-priorities"),
        (["--writeback-completes", "level", "--policy", "lru"], "applies to the linux policy only"),
        (["--writeback-completes", "level", "--scan-priorities", "--writeback-lag", "64"], "--writeback-lag"),
        (["--writeback-completes", "soon", "--scan-priorities"], "'soon' is not one of 'lag', 'level'"),
        (["--write-cost", "0"], "'--write-cost': 0 is not in the range 1<=x"),
        (["--write-cost", "4", "--writeback-completes", "next-level"], "--write-cost applies to"),
        (["--write-cost", "many"], "'many' is not a valid integer"),
    ],
)
def test_cli_rejects(trace, tmp_path, args, message):
    out = tmp_path / "bad.swapio.parquet"
    r = run_cli("emulate", trace, "--memory-fraction", 0.3, *args, "-o", out)
    assert message in the_error(r)
    assert not out.exists()


def test_cli_help_states_every_rule():
    r = run_cli("emulate", "--help")
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "--writeback-completes [lag|level|next-level|call|device]" in text
    assert "call: as the reclaim call that wrote it returns." in text
    assert "level: as the priority level that wrote it ends." in text
    assert "lag: once reclaim has isolated --writeback-lag more pages." in text
    assert "device: as a first-in first-out device of --write-cost gets to it." in text
    assert f"[default: {pagecache.DEFAULT_WRITEBACK_COMPLETION}]" in text


def test_metadata_records_the_rule(trace, tmp_path):
    out = tmp_path / "level.swapio.parquet"
    r = run_cli("emulate", trace, "--memory-fraction", 0.3, "--scan-priorities", "--writeback-completes", "level",
                "-o", out, "--json")
    assert r.exit_code == 0, r.output
    meta = open_trace(out, kind="swapio").meta
    params = meta["params"]
    assert params["writeback_completion"] == "level" and params["scan_priorities"] is True
    assert params["writeback_lag"] is None  # no lag applies
    assert meta["summary"]["pages_out"] == json.loads(r.output)["pages_out"] > 0
    res = emulate(trace, tmp_path / "default.swapio.parquet", memory_fraction=0.3)
    assert res.params["writeback_completion"] == "device" and res.params["writeback_lag"] is None
    res = emulate(trace, tmp_path / "lag.swapio.parquet", memory_fraction=0.3, writeback_lag=200)
    assert res.params["writeback_completion"] == "lag" and res.params["writeback_lag"] == 200
    assert open_trace(res.path, kind="swapio").meta["params"]["writeback_completion"] == "lag"


def test_a_profile_turns_the_plug_rules_on(trace, tmp_path):
    """``plug_rules = true`` in a kernel profile reaches the run (params, and other requests than without);
    the shipped profile leaves them off, and the lag rule has no plug to rule."""
    from pathlib import Path

    import swaptrace

    text = (Path(swaptrace.__file__).parent / "profiles" / "linux-6.x-cgroup1.toml").read_text()
    on = tmp_path / "plug.toml"
    assert "plug_rules = false" in text
    on.write_text(text.replace("plug_rules = false", "plug_rules = true"))
    a = emulate(trace, tmp_path / "on.swapio.parquet", memory_fraction=0.3, profile=str(on), ensemble=False)
    b = emulate(trace, tmp_path / "off.swapio.parquet", memory_fraction=0.3, ensemble=False)
    assert a.params["plug_rules"] is True and b.params["plug_rules"] is False
    ra = open_trace(a.path, kind="swapio").read_all(["offset", "length"])
    rb = open_trace(b.path, kind="swapio").read_all(["offset", "length"])
    assert ra["length"].tolist() != rb["length"].tolist() or ra["offset"].tolist() != rb["offset"].tolist()
    lag = emulate(trace, tmp_path / "lag.swapio.parquet", memory_fraction=0.3, profile=str(on), writeback_lag=200)
    assert lag.params["plug_rules"] is None
