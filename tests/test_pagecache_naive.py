"""The numba emulator equals the slow reference (tests/naive_emulate.py) request by request."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from naive_emulate import NaiveEmulator, naive_swapin_nr_pages

from swaptrace.core.traceio import access_codes
from swaptrace.emulate import Emulator, EmulatorConfig
from swaptrace.emulate.engine import StepsOutOfOrder
from swaptrace.kernels.emulate import state as ks
from swaptrace.kernels.emulate.readahead import _swapin_nr_pages


def small_trace(seed, footprint, n, steps=4, skew=1.1, write_p=0.3, runs=False):
    rng = np.random.default_rng(seed)
    if runs:  # sequential runs exercise readahead adjacency and merging
        starts = rng.integers(0, footprint, n // 4 + 1)
        pages = np.concatenate([np.arange(s, s + 4) % footprint for s in starts])[:n]
    else:
        pages = (rng.zipf(skew, n) - 1 + rng.integers(0, 3, n)) % footprint
    writes = rng.random(n) < write_p
    step = np.sort(rng.integers(0, steps, n))
    return pages.astype(np.int64), writes, step.astype(np.int64)


def run_both(pages, writes, steps, footprint, budget, **kw):
    meta = {"page_bytes": kw.get("page_bytes", 4096), "footprint_pages": footprint}
    nslots = kw.pop("nslots", None)
    events = kw.pop("events", None)  # the trace's event column (alloc 1, free 2), or none
    zeros = kw.pop("zeros", None)  # the trace's zero column (a store of zeros where a store has it), or none
    chunks = kw.pop("chunks", 2)  # feeds; with running=True the emulator counts each step's rows as it goes
    running = kw.pop("running", False)
    columns = {"write": writes}
    if events is not None:
        columns["event"] = np.asarray(events, np.uint8)
    if zeros is not None:
        columns["zero"] = np.asarray(zeros, bool)
    codes = access_codes(columns)
    cfg = EmulatorConfig.resolve(
        meta,
        memory_bytes=budget * meta["page_bytes"],
        policy=kw.get("policy", "lru"),
        readahead=kw.get("readahead", "none"),
        page_cluster=kw.get("page_cluster", 3),
        cluster_slots=kw.get("cluster_slots", 256),
        swap_bytes=None if nslots is None else nslots * meta["page_bytes"],
        max_request_bytes=kw.get("max_request_pages", 128) * meta["page_bytes"],
        reclaim_batch=kw.get("batch_pages"),
        initial_state=kw.get("initial_state", "untouched"),
        writeback_lag=kw.get("writeback_lag"),
        zero_page=kw.get("zero_page"),
        zeromap=kw.get("zeromap"),
        stats_flush_steps=kw.get("stats_flush_steps"),
        scan_priorities=kw.get("scan_priorities"),
        writeback_completion=kw.get("writeback_completion"),
        write_cost=kw.get("write_cost"),
        fill_write_credit=kw.get("fill_write_credit"),
        write_latency=kw.get("write_latency"),
    )
    if "writeback_throttle" in kw:
        cfg = dataclasses.replace(cfg, writeback_throttle=kw["writeback_throttle"])
    if "plug_rules" in kw:  # a kernel profile's setting, no option: set as a profile would
        cfg = dataclasses.replace(cfg, plug_rules=kw["plug_rules"])
    counts = np.bincount(steps, minlength=int(steps.max()) + 1 if steps.size else 0)
    regions = [{"name": "t", "kind": "table", "first_page": 0, "pages": footprint // 2}]
    emu = Emulator(cfg, footprint, None if running else counts, nsteps=counts.size, regions=regions)
    parts = []
    for cut in np.array_split(np.arange(len(pages)), chunks):
        parts += list(emu.feed(pages[cut], codes[cut], steps[cut]))
    last = emu.finish()
    assert last is None or running  # only a run that counts as it goes holds rows back
    parts += [last] if last is not None else []
    rows = []
    for p in parts:
        rows += list(zip(p["t_us"].tolist(), p["step"].tolist(), p["op"].tolist(), p["offset"].tolist(),
                         p["length"].tolist(), p["cause"].tolist(), strict=True))
    naive = NaiveEmulator(footprint, budget, nslots=cfg.nslots, **{k: v for k, v in kw.items() if k != "initial_state"})
    if kw.get("initial_state") == "swapped":
        naive.preload_swapped(range(footprint // 2))
    nrows, ncounts = naive.run(pages, writes, steps, events, zeros)
    return emu, rows, naive, nrows, ncounts


def assert_same(emu, rows, naive, nrows, ncounts):
    s = emu.summary()
    for key, value in ncounts.items():
        assert s.get(key, 0) == value, key  # the event counters are in the summary only when there were events
    # pages written, or of zeros marked in the zero map, >= dirty evictions
    assert s["pages_out"] + s.get("zero_out", 0) >= naive.dirty_evictions
    assert s.get("zero_faults", 0) == naive.zero_faults  # major faults on pages of zeros (no read)
    # the zero-map counters are in the summary exactly when one is non-zero
    assert ("zero_out" in s) == ("zero_in" in s) == bool(ncounts["zero_out"] or ncounts["zero_in"])
    assert len(rows) == len(nrows)
    for a, b in zip(rows, nrows, strict=True):
        assert a[1:] == b[1:]
        assert a[0] == pytest.approx(b[0])
    st = emu.state
    resident = set(np.flatnonzero(st.flags & ks.RESIDENT).tolist())
    assert resident == naive.resident
    assert set(np.flatnonzero(st.flags & ks.DIRTY).tolist()) == naive.dirty
    slots = {p: int(st.slot[p]) for p in np.flatnonzero(st.slot >= 0).tolist()}
    assert slots == naive.slot_of
    # list order (most recent first) equals the reference's
    F = st.flags.size
    order = []
    for h in (F, F + 1):
        x = st.lnext[h]
        while x != h:
            order.append(int(x))
            x = st.lnext[x]
    assert order == naive.policy.resident_order()
    assert set(np.flatnonzero(st.flags & ks.WRITEBACK).tolist()) == naive.wb_pages
    assert set(np.flatnonzero(st.flags & ks.ZERO_PAGE).tolist()) == naive.zero_mapped
    assert set(np.flatnonzero(st.flags & ks.FREED).tolist()) == naive.freed_wb
    assert set(np.flatnonzero(st.flags & ks.TOUCHED).tolist()) == naive.touched
    assert set(np.flatnonzero(st.flags & ks.ZEROED).tolist()) == naive.zeros  # pages whose contents are zeros
    faults = emu.step_faults()
    for kind in ("major", "minor"):
        got = {faults["first_step"] + i: n for i, n in enumerate(faults[kind]) if n}
        assert got == naive.step_faults[kind], kind
    # invariants: budget respected, no slot owned twice
    assert len(resident) <= emu.cfg.budget_pages
    owners = st.slot_page[st.slot_page >= 0]
    assert len(np.unique(owners)) == len(owners)


CASES = list(itertools.product(["lru", "clock", "linux"], ["none", "vma", "cluster"]))
#: linux variants: defaults (priority levels, writes on a device of write cost 8, statistics flushed every
#: step), the device faster and much slower than the scan, with exact statistics; the lag rule (a short lag:
#: writes also complete as reclaim goes on), the synchronous device, a call that waits whenever it wrote 6,
#: statistics flushed every other step, 32-page rounds, priority levels whose writes complete by level, and
#: the device's time in the filling step: none, a little, and enough to finish every write; and a device whose
#: writes complete some time after it served them (a short and a long latency)
LINUX_VARIANTS = [{}, {"write_cost": 1}, {"write_cost": 3, "stats_flush_steps": 0}, {"write_cost": 50},
                  {"writeback_lag": 24}, {"writeback_lag": 0, "zero_page": False},
                  {"writeback_lag": 6, "writeback_throttle": 0}, {"stats_flush_steps": 0},
                  {"scan_priorities": False, "stats_flush_steps": 1},
                  {"stats_flush_steps": 2, "writeback_lag": 24}, {"scan_priorities": False},
                  {"scan_priorities": True, "stats_flush_steps": 1, "writeback_lag": 24},
                  {"scan_priorities": True, "writeback_completion": "level"},
                  {"scan_priorities": True, "writeback_completion": "level", "stats_flush_steps": 1},
                  {"scan_priorities": True, "writeback_completion": "next-level"},
                  {"scan_priorities": True, "writeback_completion": "next-level", "stats_flush_steps": 1},
                  {"scan_priorities": True, "writeback_completion": "call"},
                  {"scan_priorities": True, "writeback_completion": "call", "stats_flush_steps": 1},
                  {"fill_write_credit": 0}, {"fill_write_credit": 1, "write_cost": 2}, {"fill_write_credit": 400},
                  {"write_latency": 40}, {"write_latency": 300, "write_cost": 2, "stats_flush_steps": 0}]


@pytest.mark.parametrize(("policy", "readahead"), CASES)
@pytest.mark.parametrize("seed", range(3))
def test_equals_naive(policy, readahead, seed):
    footprint = 300
    runs = seed == 1
    pages, writes, steps = small_trace(seed, footprint, 3000, runs=runs)
    budget = [7, 60, 150][seed]
    for variant in LINUX_VARIANTS if policy == "linux" else [{}]:
        got = run_both(pages, writes, steps, footprint, budget, policy=policy, readahead=readahead,
                       cluster_slots=16, max_request_pages=4 + seed, nslots=2048 if seed == 2 else None, **variant)
        assert_same(*got)


def zero_flags(seed, pages, share=0.25):
    """A ``zero`` column for ``pages``: a quarter of the pages (by a hash of the number) are mostly stored to
    with zeros (90 % of their stores), the others rarely (10 %), so pages of zeros both last long enough to be
    evicted and read back, and turn into data and back. Only the stores among the rows count."""
    rng = np.random.default_rng(1000 + seed)
    mostly = (pages * 2654435761 % 97) < share * 97
    return rng.random(pages.size) < np.where(mostly, 0.9, 0.1)


@pytest.mark.parametrize("readahead", ["none", "vma", "cluster"])
@pytest.mark.parametrize("seed", range(3))
def test_zero_stores_equal_naive(readahead, seed):
    # stores of zeros (access code 4) and loads that zero-fill a frame (no zero page), under every linux
    # writeback rule, with the swap zero map on and off: every counter (zero_out, zero_in too), the request
    # stream and the final state (which pages hold zeros) equal the twin's
    footprint = 300
    pages, writes, steps = small_trace(seed, footprint, 3000, runs=seed == 1, write_p=0.4)
    zeros = zero_flags(seed, pages)
    budget = [7, 60, 150][seed]
    totals = {True: dict.fromkeys(("zero_out", "zero_in", "zero_faults", "pages_out", "runs"), 0),
              False: dict.fromkeys(("zero_out", "zero_in", "zero_faults", "pages_out", "runs"), 0)}
    for variant in LINUX_VARIANTS:
        for zeromap in (True, False):
            for zero_page in (False, True) if seed == 0 else (False,):
                kw = {**variant, "zero_page": zero_page, "zeromap": zeromap}
                got = run_both(pages, writes, steps, footprint, budget, policy="linux", readahead=readahead,
                               cluster_slots=16, max_request_pages=4 + seed, nslots=2048 if seed == 2 else None,
                               zeros=zeros, **kw)
                assert_same(*got)
                s, t = got[0].summary(), totals[zeromap]
                t["zero_out"] += s.get("zero_out", 0)
                t["zero_in"] += s.get("zero_in", 0)
                t["zero_faults"] += got[2].zero_faults
                t["pages_out"] += s["pages_out"]
                t["runs"] += 1
    on, off = totals[True], totals[False]
    # coverage: pages of zeros went out and came back, faulting and read ahead (more zero swap-ins than faults)
    assert on["zero_out"] > 0 and on["zero_faults"] > 0
    assert on["zero_in"] > on["zero_faults"] or readahead == "none"
    # without the zero map nothing is kept out of I/O, and more is written
    assert off["zero_out"] == off["zero_in"] == off["zero_faults"] == 0
    assert off["pages_out"] > on["pages_out"] and on["runs"] == off["runs"]


@pytest.mark.parametrize(("policy", "readahead"), [("lru", "none"), ("clock", "cluster"), ("linux", "vma")])
@pytest.mark.parametrize("chunks", [1, 7, 400])
def test_counting_steps_as_it_goes_equals_naive(policy, readahead, chunks):
    # no counts given: the run times each step's rows once it has left the step; chunks of ~8 rows end
    # inside steps of ~750, 400 chunks leave rows held over many feeds, one chunk leaves them to finish()
    pages, writes, steps = small_trace(4, 300, 3000)
    for budget in (7, 150):
        assert_same(*run_both(pages, writes, steps, 300, budget, policy=policy, readahead=readahead,
                              cluster_slots=16, chunks=chunks, running=True))


def test_counting_steps_as_it_goes_refuses_a_trace_out_of_step_order():
    cfg = EmulatorConfig.resolve({"page_bytes": 4096, "footprint_pages": 20}, memory_bytes=2 * 4096, policy="lru",
                                 readahead="none")
    pages = np.arange(12) % 5
    emu = Emulator(cfg, 20, None, nsteps=3)
    list(emu.feed(pages[:8], np.ones(8, bool), np.array([0, 0, 1, 1, 2, 2, 2, 2])))
    with pytest.raises(StepsOutOfOrder):
        list(emu.feed(pages[8:], np.ones(4, bool), np.array([2, 1, 2, 2])))  # back to step 1, then on
    ordered = Emulator(cfg, 20, None, nsteps=3)
    list(ordered.feed(pages[:8], np.ones(8, bool), np.array([0, 0, 1, 1, 2, 2, 2, 2])))
    assert ordered.finish() is not None  # the last step's rows, held until the end
    assert ordered.step_counts().tolist() == [2, 2, 4]


@pytest.mark.parametrize("policy", ["lru", "clock", "linux"])
def test_equals_naive_edge_cases(policy):
    # capacity 1, one page repeated, swapped initial state with a roomy device, batch override
    pages, writes, steps = small_trace(5, 50, 800)
    assert_same(*run_both(pages, writes, steps, 50, 1, policy=policy, readahead="vma"))
    rep = np.zeros(100, np.int64)
    assert_same(*run_both(rep, np.ones(100, bool), np.zeros(100, np.int64), 10, 3, policy=policy))
    assert_same(*run_both(pages, writes, steps, 50, 20, policy=policy, readahead="cluster",
                          initial_state="swapped", nslots=200, batch_pages=5))


@pytest.mark.parametrize("policy", ["lru", "linux"])
def test_linux_large_lists_ratio(policy):
    # 2 MiB pages: 600 pages = 1.2 GB, so inactive_is_low uses ratio int_sqrt(10) = 3
    pages, writes, steps = small_trace(7, 800, 6000)
    assert_same(*run_both(pages, writes, steps, 800, 600, policy=policy, readahead="vma", page_bytes=2 << 20,
                          max_request_pages=1))


def test_swapin_nr_pages_matches_kernel_rule():
    for prev, off, hits, max_pages, prev_win in itertools.product(range(0, 6), range(0, 6), range(0, 12), (1, 2, 8, 32), range(0, 40, 3)):
        assert _swapin_nr_pages(prev, off, hits, max_pages, prev_win) == naive_swapin_nr_pages(prev, off, hits, max_pages, prev_win)
    # the rule written out (mm/swap_state.c): a few worked values
    assert _swapin_nr_pages(10, 50, 0, 8, 0) == 1  # no hits, not adjacent
    assert _swapin_nr_pages(10, 11, 0, 8, 0) == 2  # adjacent
    assert _swapin_nr_pages(10, 50, 1, 8, 0) == 4  # 3 -> round up to 4
    assert _swapin_nr_pages(10, 50, 3, 8, 0) == 8  # 5 -> 8
    assert _swapin_nr_pages(10, 50, 9, 8, 0) == 8  # capped
    assert _swapin_nr_pages(10, 50, 0, 8, 8) == 4  # never below half the previous window


def _state_for_windows(footprint, page_cluster=3, nslots=4096):
    cfg = EmulatorConfig.resolve({"page_bytes": 4096, "footprint_pages": footprint}, memory_bytes=4096 * 8,
                         page_cluster=page_cluster, swap_bytes=nslots * 4096)
    return Emulator(cfg, footprint, np.array([1])).state


def test_vma_window_placement_written_out():
    from swaptrace.kernels.emulate.readahead import _vma_window

    st = _state_for_windows(5000)
    m = st.m
    # first fault: no history, not adjacent -> window 1
    assert _vma_window(m, 100) == (100, 101)
    # adjacent forward fault -> 2 pages starting at the fault
    assert _vma_window(m, 101) == (101, 103)
    # a readahead hit: hits=1 -> 4 pages (3 rounded up), placed forward of the previous page
    m[ks.R_RA_HITS] = 1
    m[ks.R_RA_PREV] = 102
    assert _vma_window(m, 103) == (103, 107)
    # backward neighbour with 3 hits -> 8 pages ending at the fault
    m[ks.R_RA_HITS] = 3
    m[ks.R_RA_PREV] = 201
    assert _vma_window(m, 200) == (193, 201)
    # random fault: window halves at most (prev 8 -> 4), centred: left = f - (4 - 1) // 2
    assert _vma_window(m, 1000) == (999, 1003)
    # clamped to the 2 MiB region (512 pages): a centred window at 512 starts at 512
    m[ks.R_RA_WIN] = 8
    assert _vma_window(m, 512) == (512, 515)  # centred [511, 515) cut at the region start
    # and to the VMA end
    m[ks.R_RA_WIN] = 8
    assert _vma_window(m, 4999) == (4998, 5000)
    # page-cluster 0 disables readahead
    assert _vma_window(_state_for_windows(5000, page_cluster=0).m, 7) == (7, 8)


def test_cluster_window_written_out():
    from swaptrace.kernels.emulate.readahead import _cluster_window

    m = _state_for_windows(5000).m
    assert _cluster_window(m, 100) == (100, 101)  # no hits, not adjacent to prev_offset 0
    assert _cluster_window(m, 101) == (100, 102)  # adjacent: 2 slots, aligned block [100, 101]
    m[ks.R_CRA_HITS] = 2
    assert _cluster_window(m, 300) == (300, 304)  # 3 -> 4 pages, the aligned block 300..303
