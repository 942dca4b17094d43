"""The swap zero map (``linux``, Linux >= 6.12) on traces small enough to work out by hand.

The kernel's rules (mm/page_io.c): ``swap_writeout`` of a folio whose contents are all zeros
(``is_folio_zero_filled``) issues no write -- the slot is marked in the swap device's zero map and the folio
is freed in the same reclaim pass (vmstat ``swpout_zero``); ``swap_read_folio`` of a slot marked there fills
the folio with zeros and issues no read (``swpin_zero``), for the faulting folio and read-ahead ones alike.
A page holds zeros after a zero-filling first load, or a store of zeros (access code 4); an ordinary store
ends that, a load leaves it as it is.

Every case runs the ``linux`` policy in 32-page reclaim rounds with exact list sizes and synchronous writes
(``ROUNDS``) unless it says otherwise. In these rounds a page just touched is young: the first pass over
the inactive list only clears that (young -> referenced, back to the list), the second frees (evicts) what
it finds, oldest first; a dirty page or a page without a slot is given the next free slot (slot 0 is the
swap header, so slots go 1, 2, 3 ...) and written; requests to consecutive slots merge.
"""

from __future__ import annotations

import numpy as np
import pytest
from naive_emulate import NaiveEmulator, write_access_trace
from test_pagecache_props import run_arrays

from swaptrace.emulate import EmulatorConfig
from swaptrace.errors import ConfigError
from swaptrace.kernels.emulate import state as ks

L, S, FR, Z = ks.ACC_LOAD, ks.ACC_STORE, ks.ACC_FREE, ks.ACC_ZERO_STORE
W, R = ks.OP_WRITE, ks.OP_READ
BIG_LAG = 10**6  # no write completes by the clock: only a read, or reclaim meeting it again, completes it
ROUNDS = {"policy": "linux", "readahead": "none", "writeback_lag": 0, "scan_priorities": False,
          "stats_flush_steps": 0, "zero_page": False}


def run(pages, codes, budget, footprint=10, **kw):
    """Run the emulator on rows of access codes; returns (summary, state, requests as (op, slot, pages))."""
    kw = {**ROUNDS, **kw}
    pages = np.asarray(pages, np.int64)
    emu, rows = run_arrays(pages, np.asarray(codes, np.uint8), np.zeros(pages.size, np.int64), footprint, budget,
                           **kw)
    reqs = [(int(o), int(off) // 4096, int(n) // 4096)
            for o, off, n in zip(rows["op"], rows["offset"], rows["length"], strict=True)]
    return emu.summary(), emu.state, reqs


def test_zero_page_goes_out_and_comes_back_without_io():
    # budget 2: page 0 stored with zeros, page 1 with data; page 2 needs room. Reclaim: pass 1 finds 0 and 1
    # young (spared), pass 2 evicts 0 (slot 1: zeros, marked, no write) then 1 (slot 2: written). The load of
    # 0 is a swap-in of a slot in the zero map: a major fault with no read (room: only 2 is resident).
    s, st, reqs = run([0, 1, 2, 0], [Z, S, S, L], 2)
    assert reqs == [(W, 2, 1)]  # page 1's write only; no read at all
    assert (s["pages_out"], s["zero_out"], s["evictions"], s["clean_drops"]) == (1, 1, 2, 0)
    assert (s["pages_in"], s["zero_in"], s["major_faults"]) == (0, 1, 1)
    assert s["readahead_issued"] == 0
    # page 0 is back: clean, still zeros, still in slot 1 (a load keeps the slot: the swap device is far from full)
    fl = int(st.flags[0])
    assert fl & ks.RESIDENT and fl & ks.ZEROED and not fl & ks.DIRTY and st.slot[0] == 1
    assert st.slot[1] == 2 and not st.flags[1] & ks.RESIDENT


def test_zero_fill_by_a_load_is_a_page_of_zeros():
    # the same with page 0 first touched by a load (no zero page): a zero-filled frame, dirty, no slot -- it
    # needs a swap slot like a stored page, and holds zeros, so it too goes out and comes back without I/O
    s, _, reqs = run([0, 1, 2, 0], [L, S, S, L], 2)
    assert reqs == [(W, 2, 1)]
    assert (s["zero_fill"], s["pages_out"], s["zero_out"], s["pages_in"], s["zero_in"]) == (3, 1, 1, 0, 1)
    # a load does not change the contents: zero-filled by a store of data, then loaded, it is written
    s, _, reqs = run([0, 0, 1, 2, 0], [S, L, S, S, L], 2)
    assert reqs == [(W, 1, 2), (R, 1, 1)] and "zero_out" not in s


def test_store_after_zero_store_is_written_and_read_like_any():
    # page 0 stored with zeros, then with data: pass 2 evicts 0 (slot 1) and 1 (slot 2), both written, the
    # two writes merged into one request of 2 pages; the load of 0 reads slot 1
    s, st, reqs = run([0, 0, 1, 2, 0], [Z, S, S, S, L], 2)
    assert reqs == [(W, 1, 2), (R, 1, 1)]
    assert (s["pages_out"], s["pages_in"], s["major_faults"]) == (2, 1, 1)
    assert "zero_out" not in s and "zero_in" not in s  # the keys only when a page of zeros skipped I/O
    assert not st.flags[0] & ks.ZEROED
    # the other order, data then zeros: the page holds zeros again, no I/O for it
    s, _, reqs = run([0, 0, 1, 2, 0], [S, Z, S, S, L], 2)
    assert reqs == [(W, 2, 1)] and (s["zero_out"], s["zero_in"], s["pages_in"]) == (1, 1, 0)


def test_without_zeromap_zero_pages_are_written_and_read():
    # the first case's trace with --no-zeromap: 0 and 1 both written (slots 1, 2: one merged request), 0 read
    s, st, reqs = run([0, 1, 2, 0], [Z, S, S, L], 2, zeromap=False)
    assert reqs == [(W, 1, 2), (R, 1, 1)]
    assert (s["pages_out"], s["pages_in"], s["major_faults"]) == (2, 1, 1)
    assert "zero_out" not in s and "zero_in" not in s
    assert st.flags[0] & ks.ZEROED  # the contents are still zeros; only the I/O differs


def test_zero_page_between_two_written_pages_splits_the_write():
    # budget 3: pages 0 (data), 1 (zeros), 2 (data); page 3 needs room. Pass 2 evicts 0, 1, 2 into slots
    # 1, 2, 3: slot 2 is marked in the zero map with no bio, so the writes to slots 1 and 3 are not
    # contiguous and stay two requests
    s, st, reqs = run([0, 1, 2, 3], [S, Z, S, S], 3)
    assert reqs == [(W, 1, 1), (W, 3, 1)]
    assert (s["pages_out"], s["zero_out"]) == (2, 1)
    assert [int(st.slot[p]) for p in (0, 1, 2)] == [1, 2, 3]  # the slot numbering of written pages
    # an ordinary store in the middle instead, or no zero map: one request of 3 pages
    assert run([0, 1, 2, 3], [S, S, S, S], 3)[2] == [(W, 1, 3)]
    assert run([0, 1, 2, 3], [S, Z, S, S], 3, zeromap=False)[2] == [(W, 1, 3)]


def test_zero_pages_in_the_readahead_window_read_nothing():
    # footprint 8, budget 4, cluster readahead (page-cluster 2: up to 4 slots). Pages 0 1 2 3 stored: 0 and 2
    # with zeros. Page 4 needs room: pass 2 evicts 0..3 into slots 1..4 (0, 2 marked; 1 -> slot 2, 3 -> slot 4
    # written as 2 requests). Then load 1 (slot 2): the first cluster fault has no hits and the previous
    # offset is 0, not adjacent: a window of 1 slot, page 1 read. Load 0 (slot 1): adjacent to 2, a window of
    # 2 slots, aligned: slots 0..1, slot 0 is the header, so [1]: page 0 alone, of zeros, no read.
    # Load 3 (slot 4): not adjacent to the last offset (1)... the window is max(1, last 2 // 2) = 1: read
    # slot 4 alone. Reads: slot 2, slot 4; zero_in 1.
    s, _, reqs = run([0, 1, 2, 3, 4, 1, 0, 3], [Z, S, Z, S, S, L, L, L], 4, footprint=8, readahead="cluster",
                     page_cluster=2)
    assert reqs == [(W, 2, 1), (W, 4, 1), (R, 2, 1), (R, 4, 1)]
    assert (s["major_faults"], s["pages_in"], s["zero_in"], s["zero_out"]) == (3, 2, 1, 2)
    # vma readahead: after the eviction, load 1 then load 2: the fault on 2 is adjacent to the previous page
    # (1), a window of 2 pages starting at 2: pages 2 and 3. Page 2 (zeros) is filled, page 3 read ahead
    # (slot 4, cause readahead): one read of 1 page, zero_in 1, readahead_issued 1
    s, _, reqs = run([0, 1, 2, 3, 4, 1, 2], [Z, S, Z, S, S, L, L], 4, footprint=8, readahead="vma", page_cluster=2)
    assert reqs == [(W, 2, 1), (W, 4, 1), (R, 2, 1), (R, 4, 1)]
    assert (s["major_faults"], s["pages_in"], s["zero_in"], s["readahead_issued"]) == (2, 2, 1, 1)
    assert s["readahead_hit"] == 0
    # a read-ahead page of zeros: 0 1 2 stored with data (slots 1..3, one write), 3 with zeros (slot 4). Load
    # 1, then 2: the window [2, 3]; 2 is read (slot 3), 3 filled with zeros and no read. A load of 3 then
    # finds it in the swap cache: a read-ahead hit, no I/O, no major fault
    s, _, reqs = run([0, 1, 2, 3, 4, 1, 2, 3], [S, S, S, Z, S, L, L, L], 4, footprint=8, readahead="vma",
                     page_cluster=2)
    assert reqs == [(W, 1, 3), (R, 2, 1), (R, 3, 1)]
    assert (s["major_faults"], s["pages_in"], s["zero_in"], s["zero_out"]) == (2, 2, 1, 1)
    assert (s["readahead_issued"], s["readahead_hit"]) == (1, 1)


def test_store_after_swapin_of_a_zero_page_makes_the_next_eviction_write_it():
    # the first case's trace, then: page 0 (back, clean, zeros, slot 1) stored with data -- a hit: dirty, it
    # keeps slot 1 -- and page 3 needs room. The inactive list holds 2 then 0 (0 came back without a refault
    # activation: no page is active). Pass 1 spares both (young), pass 2 evicts 2 (dirty, no slot: slot 3,
    # written) then 0 (dirty, slot 1: written): two requests, slots 3 and 1 not contiguous
    s, _, reqs = run([0, 1, 2, 0, 0, 3], [Z, S, S, L, S, S], 2)
    assert reqs == [(W, 2, 1), (W, 3, 1), (W, 1, 1)]
    assert (s["pages_out"], s["zero_out"], s["zero_in"], s["clean_drops"]) == (3, 1, 1, 0)
    # without that store page 0 is clean and keeps its slot: dropped, no write (a clean drop, not zero_out)
    s, _, reqs = run([0, 1, 2, 0, 3], [Z, S, S, L, S], 2)
    assert reqs == [(W, 2, 1), (W, 3, 1)]
    assert (s["pages_out"], s["zero_out"], s["clean_drops"]) == (2, 1, 1)
    # stored with zeros again instead: dirty but zeros, so marked in the zero map again, no write
    s, _, reqs = run([0, 1, 2, 0, 0, 3], [Z, S, S, L, Z, S], 2)
    assert reqs == [(W, 2, 1), (W, 3, 1)]
    assert (s["pages_out"], s["zero_out"], s["clean_drops"]) == (2, 2, 0)


def test_zero_store_swapin_frees_the_slot_like_a_store():
    # the first case's rows 0..2, then a store of zeros to page 0 on swap (zeros): a major fault with no read;
    # as for any store the swap-in frees the slot (slot 1; the page is dirty). Resident: 2 and 0, both young
    # on the inactive list. Page 3 needs room: pass 2 evicts 2 (dirty, no slot: the allocator goes on in its
    # cluster, slot 3, written) and 0 (dirty, no slot: slot 4, marked, no write)
    s, st, reqs = run([0, 1, 2, 0, 3], [Z, S, S, Z, S], 2)
    assert (s["major_faults"], s["zero_in"], s["pages_in"], s["slot_frees"]) == (1, 1, 0, 1)
    assert reqs == [(W, 2, 1), (W, 3, 1)]
    assert (s["pages_out"], s["zero_out"], s["evictions"]) == (2, 2, 4)
    assert st.flags[0] & ks.ZEROED and not st.flags[0] & ks.RESIDENT and st.slot[0] == 4
    assert st.slot_page[1] == -1  # slot 1 went back to the pool at the swap-in
    # a load instead of the store of zeros keeps slot 1, and 0 (clean) is dropped from memory: no slot_frees
    s, st, _ = run([0, 1, 2, 0, 3], [Z, S, S, L, S], 2)
    assert s["slot_frees"] == 0 and st.slot[0] == 1


def test_zero_page_leaves_memory_at_once_under_slow_writeback():
    # a lag no write reaches (writes complete only when waited for), reclaim asked for 1 page, budget 3:
    # pages 0 (zeros), 1, 2 (data); page 3 needs room. Pass 1 spares 0 1 2, pass 2: 0 gets slot 1, no
    # write, and is freed at once (1 page: done); 1 and 2 (same batch) are written to slots 2, 3 (one
    # request) and stay, under writeback, back on the inactive list
    kw = {"writeback_lag": BIG_LAG, "reclaim_batch": 1}
    s, st, reqs = run([0, 1, 2, 3], [Z, S, S, S], 3, **kw)
    assert reqs == [(W, 2, 2)]
    assert (s["zero_out"], s["pages_out"], s["evictions"], s["writeback_waits"]) == (1, 2, 1, 0)
    assert not st.flags[0] & ks.RESIDENT and not st.flags[0] & ks.WRITEBACK and st.slot[0] == 1
    assert np.flatnonzero(st.flags & ks.WRITEBACK).tolist() == [1, 2]
    # then page 3 is freed (room without reclaim) and page 0 loaded: a swap-in of zeros waits for no read, so
    # the writes of 1 and 2 are still in flight (a process waiting for a read would have completed them)
    s, st, reqs = run([0, 1, 2, 3, 3, 0], [Z, S, S, S, FR, L], 3, **kw)
    assert reqs == [(W, 2, 2)]
    assert (s["major_faults"], s["zero_in"], s["pages_in"]) == (1, 1, 0)
    assert np.flatnonzero(st.flags & ks.WRITEBACK).tolist() == [1, 2]
    # without the zero map page 0 is written with 1 and 2 (slots 1..3, one request) and nothing is freed in
    # pass 2, so pass 3 meets 0 under writeback, waits (all three complete), and frees 0, 1, 2 clean
    s, st, reqs = run([0, 1, 2, 3], [Z, S, S, S], 3, zeromap=False, **kw)
    assert reqs == [(W, 1, 3)]
    assert (s["pages_out"], s["writeback_waits"], s["clean_drops"]) == (3, 1, 3)


def test_faulting_zero_page_counts_as_a_minor_fault_per_step():
    # per-step fault counts: a swap-in that reads is major there; the swap-in of zeros is not
    pages = np.array([0, 1, 2, 0, 1], np.int64)
    codes = np.array([Z, S, S, L, L], np.uint8)
    # steps 0 0 0 1 1: in step 1, page 0 (zeros) comes back -- room: only 2 resident; then page 1 needs room
    # and is read (slot 2)
    emu, _ = run_arrays(pages, codes, np.array([0, 0, 0, 1, 1], np.int64), 10, 2, **ROUNDS)
    f = emu.step_faults()
    assert f["major"] == [0, 1] and f["minor"] == [3, 1]
    assert emu.summary()["major_faults"] == 2  # both are major faults in the summary (do_swap_page)


def test_naive_twin_agrees_on_the_hand_worked_cases():
    # the slow twin (tests/naive_emulate.py) on the first cases' rows, as access codes
    cases = [([0, 1, 2, 0], [Z, S, S, L], 2, {}), ([0, 1, 2, 3], [S, Z, S, S], 3, {}),
             ([0, 1, 2, 0, 0, 3], [Z, S, S, L, S, S], 2, {}), ([0, 1, 2, 0], [Z, S, S, L], 2, {"zeromap": False})]
    for pages, codes, budget, kw in cases:
        s, _, reqs = run(pages, codes, budget, **kw)
        nslots = EmulatorConfig.resolve({"page_bytes": 4096, "footprint_pages": 10}, memory_bytes=budget * 4096,
                                        **ROUNDS).nslots
        naive = NaiveEmulator(10, budget, nslots=nslots, **ROUNDS, **kw)
        rows, c = naive.run(pages, codes, np.zeros(len(pages), np.int64))
        assert [(r[2], r[3] // 4096, r[4] // 4096) for r in rows] == reqs
        assert all(s.get(k, 0) == v for k, v in c.items())


@pytest.mark.parametrize("policy", ["lru", "clock"])
def test_zeromap_is_linux_only(policy):
    meta = {"page_bytes": 4096, "footprint_pages": 8}
    with pytest.raises(ConfigError, match="--zeromap applies to the linux policy only"):
        EmulatorConfig.resolve(meta, memory_bytes=4 * 4096, policy=policy, zeromap=True)
    with pytest.raises(ConfigError, match="--zero-page applies to the linux policy only"):
        EmulatorConfig.resolve(meta, memory_bytes=4 * 4096, policy=policy, zero_page=True)
    # off by default there (and an explicit off is accepted): pages of zeros are written like any
    for zeromap in (None, False):
        assert not EmulatorConfig.resolve(meta, memory_bytes=4 * 4096, policy=policy, zeromap=zeromap).zeromap
    # budget 2, batch 1: page 2 pushes out 0 (slot 1, written though zeros), the load of 0 pushes out 1 (slot 2)
    # and reads slot 1
    emu, rows = run_arrays(np.array([0, 1, 2, 0], np.int64), np.array([Z, S, S, L], np.uint8),
                           np.zeros(4, np.int64), 10, 2, policy=policy, readahead="none")
    s = emu.summary()
    assert "zero_out" not in s and (s["pages_out"], s["pages_in"]) == (2, 1)
    assert rows["op"].tolist() == [W, W, R] and (rows["offset"] // 4096).tolist() == [1, 2, 1]


def test_zeromap_is_on_by_default_for_linux_and_recorded():
    meta = {"page_bytes": 4096, "footprint_pages": 8}
    on = EmulatorConfig.resolve(meta, memory_bytes=4 * 4096, policy="linux")
    off = EmulatorConfig.resolve(meta, memory_bytes=4 * 4096, policy="linux", zeromap=False)
    assert on.zeromap is True and on.describe()["zeromap"] is True
    assert off.zeromap is False and off.describe()["zeromap"] is False
    lru = EmulatorConfig.resolve(meta, memory_bytes=4 * 4096, policy="lru")
    assert lru.describe()["zeromap"] is False


def test_cli_help_lists_zeromap():
    from click.testing import CliRunner

    from swaptrace.cli import cli

    res = CliRunner().invoke(cli, ["emulate", "--help"])
    assert res.exit_code == 0
    assert "--zeromap / --no-zeromap" in res.output


def test_cli_refuses_zeromap_with_lru_and_runs_a_zero_column(tmp_path):
    from click.testing import CliRunner

    from swaptrace.cli import cli
    from swaptrace.core.traceio import open_trace

    # the first case's trace as a file: page 0 stored with zeros (the zero column), 1 and 2 stored, 0 loaded
    trace = write_access_trace(tmp_path / "z.access.parquet", [0, 1, 2, 0], [1, 1, 1, 0], [0, 0, 0, 1], 8,
                               zeros=[1, 0, 0, 0])
    out = tmp_path / "z.swapio.parquet"
    base = ["emulate", str(trace), "--memory", "8KiB", "--readahead", "none"]
    res = CliRunner().invoke(cli, [*base, "-o", str(out), "--policy", "lru", "--zeromap"])
    assert res.exit_code == 2 and "--zeromap applies to the linux policy only" in res.output
    assert "Traceback" not in res.output and not out.exists()
    res = CliRunner().invoke(cli, [*base, "-o", str(out), "--policy", "linux", "--no-scan-priorities",
                                   "--stats-flush-steps", "0", "--writeback-lag", "0"])
    assert res.exit_code == 0, res.output
    tf = open_trace(out, "swapio")
    s = tf.meta["summary"]
    assert (s["zero_out"], s["zero_in"], s["pages_out"], s["pages_in"]) == (1, 1, 1, 0)
    assert tf.meta["params"]["zeromap"] is True
    assert "zero pages" in res.output


def test_access_codes_mark_stores_of_zeros_only():
    """The trace's ``zero`` column turns a store into code 4; a load, an alloc or a free keeps its own code."""
    from swaptrace.core.traceio import access_codes

    batch = {"write": np.array([True, True, False, False, False, True]),
             "event": np.array([0, 0, 0, 1, 2, 0], np.uint8),
             "zero": np.array([True, False, True, True, True, False])}
    # store+zero -> 4; store -> 1; load (its zero flag means nothing) -> 0; alloc -> 2; free -> 3; store -> 1
    assert access_codes(batch).tolist() == [4, 1, 0, 2, 3, 1]
    # without an event column
    assert access_codes({"write": batch["write"][:3], "zero": batch["zero"][:3]}).tolist() == [4, 1, 0]


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
def test_process_trace_state_of_zeros_is_swapped_without_io(tmp_path, optimizer):
    """Adagrad's state is written as zeros at start-up: under a tight limit its pages leave and come back
    without I/O until a step updates their rows; SGD has no state, so nothing is a page of zeros."""
    from test_process import PROFILE

    from swaptrace.core.traceio import open_trace
    from swaptrace.emulate import emulate
    from swaptrace.workload.generate import generate_trace
    from swaptrace.workload.spec import load_spec

    spec = load_spec("tiny").with_overrides(optimizer=optimizer)
    trace = generate_trace(spec, tmp_path / "p.access.parquet", steps=3, seed=5, runtime=PROFILE)
    tf = open_trace(trace, kind="access")
    d = tf.read_all(["step", "region", "zero"])
    kinds = np.array([r["kind"] for r in tf.meta["regions"]])
    state_rows = (d["step"] == 0) & np.isin(kinds[d["region"]], ["table-state", "mlp-state"])
    assert d["zero"].tolist() == state_rows.tolist()  # exactly start-up's state stores
    assert state_rows.any() == (optimizer == "adagrad")
    summaries = {}
    for zmap in (True, False):
        result = emulate(trace, tmp_path / f"{zmap}.swapio.parquet", memory_fraction=0.3, zeromap=zmap,
                         ensemble=False)
        summaries[zmap] = open_trace(result.path, kind="swapio").meta["summary"]
    on, off = summaries[True], summaries[False]
    assert "zero_out" not in off
    if optimizer == "adagrad":
        assert on["zero_out"] > 0 and on["pages_out"] < off["pages_out"]
    else:
        assert "zero_out" not in on and on["pages_out"] == off["pages_out"]
