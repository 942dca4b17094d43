"""Alloc and free events in the access trace: the emulator against its twin and hand-worked cases.

The rules (swaptrace/kernels/emulate/release.py, docs/formats.md): a free releases the page's frame and
its swap slot with no I/O (mm/memory.c zap_pte_range, mm/swapfile.c free_swap_and_cache); a page under
writeback stays until its write completes; the next touch is a zero-fill first touch on the inactive
list; an alloc frees what the address still holds and otherwise only counts.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst
from naive_emulate import write_access_trace
from test_pagecache_naive import LINUX_VARIANTS, assert_same, run_both, zero_flags

from swaptrace.core.traceio import access_codes
from swaptrace.emulate import Emulator, EmulatorConfig
from swaptrace.kernels.emulate import state as ks


def event_trace(seed, footprint, n, steps=4, free_p=0.08, alloc_p=0.02):
    """Zipf accesses (30 % stores) with events mixed in: frees of pages touched 20..120 rows before (near
    the inactive tail: on swap, or under writeback) or drawn uniformly, most followed within 1..20 rows by
    an alloc and a store to the same page or by a bare access (a recording that missed the alloc), and
    stray allocs; and at each step's start a training-like buffer, 12 pages freed, allocated and written."""
    rng = np.random.default_rng(seed)
    rows = [((int(p) - 1 + int(d)) % footprint, bool(w), 0)
            for p, d, w in zip(rng.zipf(1.1, n), rng.integers(0, 3, n), rng.random(n) < 0.3, strict=True)]
    out = []
    later = {}  # row index -> rows to add there
    for i, row in enumerate(rows):
        out.extend(later.pop(i, []))
        out.append(row)
        u = rng.random()
        if u < free_p:
            back = int(rng.integers(20, 121))
            page = out[-back][0] if back <= len(out) and rng.random() < 0.7 else int(rng.integers(0, footprint))
            out.append((page, False, 2))
            v = rng.random()
            if v < 0.8:
                tail = [(page, False, 1), (page, True, 0)] if v < 0.5 else [(page, bool(rng.random() < 0.5), 0)]
                later.setdefault(i + int(rng.integers(1, 21)), []).extend(tail)
        elif u < free_p + alloc_p:
            out.append((int(rng.integers(0, footprint)), False, 1))
    for extra in later.values():
        out.extend(extra)
    buf = [(int(p), w, ev) for ev, w in ((2, False), (1, False), (0, True)) for p in range(footprint - 12, footprint)]
    full, step = [], []
    for s_, chunk in enumerate(np.array_split(np.arange(len(out)), steps)):
        part = buf + [out[j] for j in chunk]
        full += part
        step += [s_] * len(part)
    pages = np.array([r[0] for r in full], np.int64)
    writes = np.array([r[1] for r in full], bool)
    events = np.array([r[2] for r in full], np.uint8)
    return pages, writes, np.array(step, np.int64), events


CASES = [(p, r) for p in ("lru", "clock", "linux") for r in ("none", "vma", "cluster")]


@pytest.mark.parametrize(("policy", "readahead"), CASES)
@pytest.mark.parametrize("seed", range(3))
def test_events_equal_naive(policy, readahead, seed):
    footprint = 200
    pages, writes, steps, events = event_trace(seed, footprint, 1500)
    budget = [7, 35, 110][seed]  # each budget's run frees pages under writeback (the coverage check below)
    dropped = forgotten = 0
    for variant in LINUX_VARIANTS if policy == "linux" else [{}]:
        got = run_both(pages, writes, steps, footprint, budget, policy=policy, readahead=readahead,
                       cluster_slots=16, max_request_pages=4 + seed, nslots=1024 if seed == 2 else None,
                       events=events, **variant)
        assert_same(*got)
        s, naive = got[0].summary(), got[2]
        assert s["frees"] == int(np.count_nonzero(events == 2)) and s["allocs"] == int(np.count_nonzero(events == 1))
        assert s["accesses"] == int(np.count_nonzero(events == 0)) == s["hits"] + s["faults"]
        dropped += naive.freed_wb_dropped
        forgotten += naive.freed_wb_forgotten
    if policy == "linux":  # frees under writeback happened (test_free_under_writeback... covers both ways out)
        assert dropped + forgotten > 0


@pytest.mark.parametrize("readahead", ["none", "vma", "cluster"])
@pytest.mark.parametrize("seed", range(3))
def test_events_with_zero_stores_equal_naive(readahead, seed):
    # the event traces with stores of zeros (the trace's zero column) and loads that zero-fill (no zero page):
    # a free or alloc forgets that a page held zeros, on swap, in memory or under writeback; every linux
    # writeback rule, the swap zero map on and off
    footprint = 200
    pages, writes, steps, events = event_trace(seed, footprint, 1500)
    zeros = zero_flags(seed, pages)
    budget = [7, 40, 110][seed]
    zero_out = {True: 0, False: 0}
    freed = 0
    for variant in LINUX_VARIANTS:
        for zeromap in (True, False):
            got = run_both(pages, writes, steps, footprint, budget, policy="linux", readahead=readahead,
                           cluster_slots=16, max_request_pages=4 + seed, nslots=1024 if seed == 2 else None,
                           events=events, zeros=zeros, **{**variant, "zero_page": False, "zeromap": zeromap})
            assert_same(*got)
            s = got[0].summary()
            assert s["accesses"] == int(np.count_nonzero(events == 0)) == s["hits"] + s["faults"]
            zero_out[zeromap] += s.get("zero_out", 0)
            freed += s["freed_resident"] + s["freed_swapped"]
    assert zero_out[True] > 0 and zero_out[False] == 0 and freed > 0


def _run(pages, codes, budget, footprint=10, steps=None, **kw):
    cfg = EmulatorConfig.resolve({"page_bytes": 4096, "footprint_pages": footprint}, memory_bytes=budget * 4096,
                                 cluster_slots=8, **kw)
    steps = np.zeros(len(pages), np.int64) if steps is None else np.asarray(steps, np.int64)
    emu = Emulator(cfg, footprint, np.bincount(steps, minlength=1))
    parts = list(emu.feed(np.asarray(pages, np.int64), np.asarray(codes, np.uint8), steps))
    rows = [(int(o), int(off) // 4096, int(n) // 4096) for p in parts
            for o, off, n in zip(p["op"], p["offset"], p["length"], strict=True)]
    return emu, rows


L, S, A, FR = ks.ACC_LOAD, ks.ACC_STORE, ks.ACC_ALLOC, ks.ACC_FREE
W, R = ks.OP_WRITE, ks.OP_READ


@pytest.mark.parametrize("policy", ["lru", "clock", "linux"])
def test_free_of_a_swapped_page_frees_its_slot_without_io(policy):
    # budget 2: a b c stored, so a is written out (linux: synchronous writes, so a leaves memory); then a is freed
    a, b, c = 0, 1, 2
    kw = {"writeback_lag": 0, "scan_priorities": False, "zero_page": False} if policy == "linux" else {}
    emu0, rows0 = _run([a, b, c], [S, S, S], 2, policy=policy, **kw)
    assert emu0.state.flags[a] == ks.TOUCHED and emu0.state.slot[a] == 1  # on swap, in slot 1 (0 is the header)
    used = int(emu0.state.m[ks.R_SLOTS_USED])
    emu, rows = _run([a, b, c, a], [S, S, S, FR], 2, policy=policy, **kw)
    st, s = emu.state, emu.summary()
    assert rows == rows0  # no I/O for the free
    assert st.slot[a] == -1 and st.flags[a] == 0 and st.slot_page[1] == -1  # the slot back in the pool
    assert int(st.m[ks.R_SLOTS_USED]) == used - 1
    assert s["freed_swapped"] == 1 and s["freed_resident"] == 0 and s["frees"] == 1 and s["accesses"] == 3
    # touching a again: a zero-filled first touch, no read
    emu2, rows2 = _run([a, b, c, a, a], [S, S, S, FR, S], 2, policy=policy, **kw)
    s2 = emu2.summary()
    assert s2["major_faults"] == 0 and s2["pages_in"] == 0 and not [r for r in rows2 if r[0] == R]
    assert s2["zero_fill"] == 4


@pytest.mark.parametrize("policy", ["lru", "clock", "linux"])
def test_free_of_a_resident_dirty_page_writes_nothing(policy):
    # budget 1: a stored (dirty, no slot), freed; b then fits with no reclaim at all
    emu, rows = _run([0, 0, 1], [S, FR, S], 1, policy=policy)
    s = emu.summary()
    assert rows == [] and s["pages_out"] == 0 and s["reclaim_calls"] == 0
    assert s["freed_resident"] == 1 and emu.state.resident_pages == 1
    # without the free, b pushes a out: one write
    emu, rows = _run([0, 0, 1], [S, L, S], 1, policy=policy)
    assert emu.summary()["pages_out"] == 1 and [r[0] for r in rows] == [W]


def test_touch_after_free_is_a_zero_fill_not_a_read():
    # lru, budget 1: a stored, b stored (a written to slot 1), a freed, a loaded: zero fill, no read
    emu, rows = _run([0, 1, 0, 0], [S, S, FR, L], 1, policy="lru")
    s = emu.summary()
    assert rows == [(W, 1, 1), (W, 2, 1)]  # a out to slot 1, then b out to slot 2 to make room for the new a
    assert s["major_faults"] == 0 and s["zero_fill"] == 3 and s["freed_swapped"] == 1
    # without the free: a is read back from slot 1
    emu, rows = _run([0, 1, 0], [S, S, L], 1, policy="lru")
    assert rows == [(W, 1, 1), (W, 2, 1), (R, 1, 1)] and emu.summary()["major_faults"] == 1


def test_access_after_free_without_alloc_and_alloc_of_live_page():
    # access after a free with no alloc: a new first touch (recordings may miss the alloc)
    emu, _ = _run([0, 0, 0], [S, FR, S], 4, policy="lru")
    assert emu.summary()["zero_fill"] == 2
    # an alloc over a live page frees it first (mmap MAP_FIXED over a mapping); an alloc of a fresh page counts only
    emu, rows = _run([0, 0, 0, 5], [S, A, L, A], 4, policy="lru")
    s = emu.summary()
    assert s["allocs"] == 2 and s["frees"] == 0 and s["freed_resident"] == 1 and s["zero_fill"] == 2 and rows == []
    # a free of an untouched page, twice: counted, nothing else
    emu, rows = _run([3, 3], [FR, FR], 4, policy="linux")
    s = emu.summary()
    assert s["frees"] == 2 and s["freed_resident"] == s["freed_swapped"] == 0 and s["accesses"] == 0 and rows == []


def test_first_touch_after_free_goes_inactive_without_a_shadow():
    # linux, synchronous writes: page 0 evicted leaves a shadow entry (its nonresident age); a free erases
    # it (the swap entry and its shadow die with the slot), so the next touch cannot be a refault
    # activation; it is a zero fill onto the inactive head, young (do_anonymous_page: pte_sw_mkyoung;
    # lru_cache_add_inactive_or_unevictable since 5.9, b518154e59aa)
    kw = {"policy": "linux", "writeback_lag": 0, "zero_page": False, "stats_flush_steps": 0, "scan_priorities": False}
    pages = [0, 1, 2, 3, 4, 5, 6, 7, 8]
    codes = [S] * len(pages)

    def shadow(st, page):
        return int(st.m[int(st.m[ks.O_SHADOW]) + page])

    emu, _ = _run(pages, codes, 4, footprint=20, **kw)
    assert emu.state.flags[0] == ks.TOUCHED and shadow(emu.state, 0) >= 0
    emu, _ = _run(pages + [0], codes + [FR], 4, footprint=20, **kw)
    assert emu.state.flags[0] == 0 and shadow(emu.state, 0) == -1
    emu, _ = _run(pages + [0, 0], codes + [FR, L], 4, footprint=20, **kw)
    st, s = emu.state, emu.summary()
    fl = int(st.flags[0])
    assert s["major_faults"] == 0
    assert st.counters().refault_activations == 0
    assert not fl & ks.ACTIVE and fl & ks.YOUNG and fl & ks.RESIDENT and fl & ks.DIRTY
    assert st.lnext[st.F + 1] == 0  # the inactive list's head


def test_free_under_writeback_waits_for_the_write():
    # linux, 32-page rounds, lag 40 (tests/test_pagecache_writeback.py): after stores to 0..64 under a
    # budget of 64, pages 0..31 are on swap and 32..63 under writeback. A page freed then stays resident
    # (charged) until its write completes, then goes with its slot; a touch before that drops the old
    # frame at once and zero-fills the address; a read (major fault) waits for every write in flight
    kw = {"policy": "linux", "readahead": "none", "writeback_lag": 40, "swap_bytes": 4096 * 1024,
          "scan_priorities": False, "stats_flush_steps": 0, "zero_page": False}
    pages, codes = list(range(65)), [S] * 65
    emu, _ = _run(pages, codes, 64, footprint=72, **kw)
    st = emu.state
    assert np.flatnonzero(st.flags & ks.WRITEBACK).tolist() == list(range(32, 64))
    resident, n_wb = st.resident_pages, int(st.m[ks.R_WB_N])
    emu2, rows2 = _run(pages + [40, 41], codes + [FR, FR], 64, footprint=72, **kw)
    st2 = emu2.state
    for p in (40, 41):
        assert st2.flags[p] & ks.FREED and st2.flags[p] & ks.RESIDENT and st2.slot[p] >= 0
    assert st2.resident_pages == resident and int(st2.m[ks.R_WB_N]) == n_wb  # still charged, still written
    assert emu2.summary()["freed_resident"] == 2 and emu2.summary()["pages_out"] == emu.summary()["pages_out"]
    # touch 41 again before its write completes: the old frame goes now, a zero fill takes its place
    emu3, _ = _run(pages + [40, 41, 41], codes + [FR, FR, S], 64, footprint=72, **kw)
    st3 = emu3.state
    assert not st3.flags[41] & ks.FREED and st3.slot[41] == -1 and st3.flags[41] & ks.RESIDENT
    assert emu3.summary()["zero_fill"] == emu2.summary()["zero_fill"] + 1
    assert st3.resident_pages == resident and int(st3.m[ks.R_WB_N]) == n_wb - 1  # its write forgotten
    # a read of page 5 (on swap) waits for every write in flight: 40's completes and 40 goes with its slot
    emu4, _ = _run(pages + [40, 41, 41, 5], codes + [FR, FR, S, L], 64, footprint=72, **kw)
    st4 = emu4.state
    assert st4.flags[40] == 0 and st4.slot[40] == -1 and int(st4.m[ks.R_WB_N]) == 0
    assert not (st4.flags & ks.FREED).any()
    assert st4.resident_pages == resident  # 40 gone, 5 read in


def test_events_through_the_cli(tmp_path):
    from click.testing import CliRunner

    from swaptrace.cli import cli
    from swaptrace.core.traceio import open_trace

    pages = [0, 1, 2, 0, 0, 3]
    writes = [1, 1, 1, 0, 0, 1]
    events = [0, 0, 0, 2, 1, 0]
    trace = write_access_trace(tmp_path / "t.access.parquet", pages, writes, [0, 0, 0, 1, 1, 1], 8, events=events)
    out = tmp_path / "t.swapio.parquet"
    res = CliRunner().invoke(cli, ["emulate", str(trace), "-o", str(out), "--memory", "8KiB", "--policy", "lru",
                                   "--readahead", "none"])
    assert res.exit_code == 0, res.output
    assert "allocs / frees               1 / 1  (freed in memory 0, on swap 1)" in res.output
    s = open_trace(out, "swapio").meta["summary"]
    assert s["frees"] == 1 and s["allocs"] == 1 and s["freed_swapped"] == 1 and s["accesses"] == 4
    assert s["major_faults"] == 0 and s["pages_in"] == 0
    # the same trace without the event column: page 0 is read back
    plain = write_access_trace(tmp_path / "p.access.parquet", [0, 1, 2, 3], [1, 1, 1, 1], [0, 0, 0, 1], 8)
    res = CliRunner().invoke(cli, ["emulate", str(plain), "-o", str(tmp_path / "p.swapio.parquet"), "--memory",
                                   "8KiB", "--policy", "lru", "--readahead", "none"])
    assert res.exit_code == 0, res.output
    assert "frees" not in open_trace(tmp_path / "p.swapio.parquet", "swapio").meta["summary"]


def test_bad_event_value_is_one_line_exit_2(tmp_path):
    from click.testing import CliRunner

    from swaptrace.cli import cli

    trace = write_access_trace(tmp_path / "t.access.parquet", [0, 1], [1, 1], [0, 0], 8, events=[0, 3])
    out = tmp_path / "t.swapio.parquet"
    res = CliRunner().invoke(cli, ["emulate", str(trace), "-o", str(out), "--memory", "8KiB"])
    assert res.exit_code == 2
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "event" in lines[0] and "Traceback" not in res.output
    assert not out.exists() and not list(tmp_path.glob("*.swapio*"))


def test_access_codes():
    write = np.array([0, 1, 1, 0, 1], bool)
    assert access_codes({"write": write}) is write  # no event column: the flags as they are
    ev = np.array([0, 0, 1, 2, 2], np.uint8)
    assert access_codes({"write": write, "event": ev}).tolist() == [L, S, A, FR, FR]


def test_inspect_counts_events(tmp_path):
    from click.testing import CliRunner

    from swaptrace.cli import cli
    from swaptrace.commands.inspect import describe

    trace = write_access_trace(tmp_path / "t.access.parquet", [0, 1, 0, 0, 1, 1], [1, 0, 0, 0, 1, 1],
                               [0, 0, 0, 1, 1, 1], 4, events=[0, 0, 2, 1, 2, 0])
    facts = describe(str(trace))
    assert (facts["allocs"], facts["frees"], facts["freed_pages"]) == (1, 2, 2)
    assert facts["writes"] == 2 and facts["reads"] == 1  # access rows only: stores to 0 and to 1, a load of 1
    res = CliRunner().invoke(cli, ["inspect", str(trace)])
    assert res.exit_code == 0 and "frees       2" in res.output and "freed_pages 2" in res.output
    plain = write_access_trace(tmp_path / "p.access.parquet", [0, 1], [1, 0], [0, 0], 4)
    assert "frees" not in describe(str(plain))


def test_traceio_event_column(tmp_path):
    from swaptrace.core.traceio import TraceWriter, access_columns, event_counts, open_trace
    from swaptrace.errors import TraceFileError

    old = open_trace(write_access_trace(tmp_path / "o.access.parquet", [0, 1], [1, 0], [0, 0], 4))
    assert not old.has_column("event") and access_columns(old) == ["step", "page", "write"]
    assert event_counts(old) is None and set(old.read_all()) == {"step", "page", "write", "region"}
    new = open_trace(write_access_trace(tmp_path / "n.access.parquet", [0, 1, 1], [1, 0, 0], [0, 0, 0], 4,
                                        events=[0, 2, 2]))
    assert new.has_column("event") and access_columns(new)[-1] == "event"
    assert event_counts(new) == {"allocs": 0, "frees": 2, "freed_pages": 1}
    with pytest.raises(ValueError, match="no optional column"):
        TraceWriter(tmp_path / "x.access.parquet", "access", {}, optional=("nope",))
    # an event column of another type family (strings) is refused when the file is opened
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(tmp_path / "n.access.parquet")
    t = t.set_column(t.schema.get_field_index("event"), "event", pa.array(["a", "b", "c"]))
    pq.write_table(t, tmp_path / "s.access.parquet")
    with pytest.raises(TraceFileError, match="column 'event'"):
        open_trace(tmp_path / "s.access.parquet")
    # a value above 2: refused as the file is opened (row-group statistics), naming the file and the column
    bad = write_access_trace(tmp_path / "b.access.parquet", [0, 1], [1, 0], [0, 0], 4, events=[0, 7])
    with pytest.raises(TraceFileError, match="b.access.parquet.*'event'"):
        open_trace(bad)
    # a file written without statistics: refused as the values are read
    t = pq.read_table(bad)
    pq.write_table(t, tmp_path / "c.access.parquet", write_statistics=False)
    unchecked = open_trace(tmp_path / "c.access.parquet")
    with pytest.raises(TraceFileError, match="'event' holds values that are not event codes"):
        list(unchecked.iter_batches(["event"]))


def test_designs_refuse_events(tmp_path):
    # the log designs replay the emulator's evictions by access index and know no free: refused in one line
    from click.testing import CliRunner

    from swaptrace.cli import cli

    trace = write_access_trace(tmp_path / "t.access.parquet", [0, 1, 0], [1, 1, 0], [0, 0, 0], 8, events=[0, 0, 2])
    res = CliRunner().invoke(cli, ["designs", str(trace), "--memory-fraction", "0.5", "-o", str(tmp_path / "d")])
    assert res.exit_code == 2 and "alloc and free events" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "d").exists()


@settings(max_examples=25, deadline=None)
@given(trace=hst.integers(2, 30).flatmap(lambda f: hst.tuples(hst.just(f), hst.lists(
           hst.tuples(hst.integers(0, f - 1), hst.sampled_from([L, L, S, S, A, FR])), min_size=1, max_size=300))),
       frac=hst.floats(0.05, 1.0), policy=hst.sampled_from(["lru", "clock", "linux"]),
       readahead=hst.sampled_from(["none", "vma", "cluster"]), lag=hst.sampled_from([None, 0, 3, 40]))
def test_invariants_with_events(trace, frac, policy, readahead, lag):
    footprint, rows = trace
    pages = [p for p, _ in rows]
    codes = [c for _, c in rows]
    budget = max(1, int(frac * footprint))
    kw = {"writeback_lag": lag} if policy == "linux" else {}
    emu, _ = _run(pages, codes, budget, footprint=footprint, steps=np.sort(np.arange(len(pages)) % 3),
                  policy=policy, readahead=readahead, **kw)
    s, st = emu.summary(), emu.state
    assert s["hits"] + s["faults"] == s["accesses"] == sum(c <= S for c in codes)
    assert s.get("allocs", 0) == codes.count(A) and s.get("frees", 0) == codes.count(FR)
    fl, slot = st.flags.astype(np.int64), st.slot
    resident = np.flatnonzero(fl & ks.RESIDENT)
    assert resident.size == st.resident_pages <= budget
    # the lists hold exactly the resident pages
    F, on_lists = st.F, []
    for h in (F, F + 1):
        x = int(st.lnext[h])
        while x != h:
            on_lists.append(x)
            x = int(st.lnext[x])
    assert sorted(on_lists) == resident.tolist()
    if policy == "linux":
        assert int(st.m[ks.R_N_ACTIVE]) + int(st.m[ks.R_N_INACTIVE]) == resident.size
    # slots: owned once, each owner's slot is it, only pages with contents own one, the count is right
    owners = np.flatnonzero(slot >= 0)
    assert (st.slot_page[slot[owners]] == owners).all() and int(st.m[ks.R_SLOTS_USED]) == owners.size
    assert ((fl[owners] & (ks.TOUCHED | ks.RESIDENT)) != 0).all()
    # a page freed under writeback is resident, under writeback, unmapped and clean
    freed = np.flatnonzero(fl & ks.FREED)
    assert ((fl[freed] & (ks.RESIDENT | ks.WRITEBACK)) == (ks.RESIDENT | ks.WRITEBACK)).all()
    assert not (fl[freed] & (ks.MAPPED | ks.DIRTY)).any()
    assert int(st.m[ks.R_WB_N]) == np.count_nonzero(fl & ks.WRITEBACK)


def test_ensemble_members_with_events_count_as_runs_from_the_start(tmp_path):
    # the ensemble's shared prefix and its forks read the event column as one run does
    from swaptrace.core.traceio import access_codes, access_columns, open_trace
    from swaptrace.emulate import ensemble_configs, load_profile, run_members

    pages, writes, steps, events = event_trace(5, 400, 6000, steps=6)
    trace = write_access_trace(tmp_path / "e.access.parquet", pages, writes, steps, 400, events=events)
    tf = open_trace(trace, kind="access")
    cfg = EmulatorConfig.resolve(tf.meta, memory_fraction=0.4)
    members = ensemble_configs(cfg, 400, load_profile().ensemble)
    runs = run_members(tf, members, nsteps=6, first_step=0, chunk_rows=1000, workers=1)
    assert runs.prefix_accesses > 0
    for m, found in zip(members, runs.counters, strict=True):
        alone = Emulator(m, 400, None, nsteps=6)
        for batch in tf.iter_batches(columns=access_columns(tf), batch_rows=777):
            alone.count(batch["page"], access_codes(batch), batch["step"])
        assert alone.counters() == found and found.frees == int(np.count_nonzero(events == 2))


def test_rank_frequency_counts_accesses_only(tmp_path):
    from swaptrace.figures.generate import trace_page_counts

    trace = write_access_trace(tmp_path / "t.access.parquet", [0, 0, 1, 1, 1], [0, 0, 0, 0, 0], [0] * 5, 4,
                               events=[0, 2, 1, 0, 2])
    assert sorted(trace_page_counts(trace).tolist()) == [1, 1]  # one load of page 0, one of page 1


def test_capture_refuses_events_and_compute_replays_them(tmp_path, monkeypatch):
    # the capture's child replays accesses on real memory with no munmap or madvise for the events yet; the
    # compute measure replays a free as MADV_DONTNEED after the step's accesses
    from swaptrace.capture.replay import ReplayChild
    from swaptrace.errors import ConfigError
    from swaptrace.timing.model import measure_compute

    trace = write_access_trace(tmp_path / "t.access.parquet", [0, 1, 0], [1, 1, 0], [0, 0, 0], 8, events=[0, 0, 2])
    with pytest.raises(ConfigError, match="alloc and free events"):
        ReplayChild(trace, memory_fraction=0.5).check_inputs(None)
    for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(v, "1")  # in this process, so the drop below is the one measured
    dropped = []
    monkeypatch.setattr("swaptrace.timing.model._drop_pages",
                        lambda region, pages, page_bytes: dropped.append(sorted(pages.tolist())))
    comp = measure_compute(trace)
    assert comp.access_us.shape == (1,) and comp.access_us[0] > 0
    assert dropped == [[0]]  # the step's one free: page 0, after its two accesses


def test_drop_pages_zeroes_exactly_the_freed_pages():
    import mmap

    from swaptrace.timing.model import _drop_pages

    region = mmap.mmap(-1, 8 * 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        for p in range(8):
            region[p * 4096] = p + 1
        _drop_pages(region, np.array([5, 1, 2, 2, 7]), 4096)  # runs [1, 2], [5], [7]; a repeat is harmless
        assert [region[p * 4096] for p in range(8)] == [1, 0, 0, 4, 5, 0, 7, 0]
    finally:
        region.close()
