"""Invariants of the emulator (hypothesis) and end-to-end behaviour of ``pagecache.emulate``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as hst
from naive_emulate import naive_lru_misses, write_access_trace

from swaptrace.core.traceio import open_trace
from swaptrace.emulate import BY_LEVEL, POLICIES, Emulator, EmulatorConfig, emulate
from swaptrace.errors import ConfigError
from swaptrace.kernels.emulate import state as ks

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def run_arrays(pages, writes, steps, footprint, budget, **kw):
    cfg = EmulatorConfig.resolve({"page_bytes": 4096, "footprint_pages": footprint}, memory_bytes=budget * 4096, **kw)
    counts = np.bincount(steps, minlength=1)
    emu = Emulator(cfg, footprint, counts)
    parts = list(emu.feed(pages, writes, steps))
    rows = {k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0) for k in
            ("t_us", "step", "op", "offset", "length", "cause")}
    return emu, rows


traces = hst.integers(2, 40).flatmap(
    lambda f: hst.tuples(
        hst.just(f),
        hst.lists(hst.tuples(hst.integers(0, f - 1), hst.booleans()), min_size=1, max_size=300),
    )
)


@SETTINGS
# a by-level writeback rule, whose config lag is 0 though its writes complete later (found by hypothesis)
@example(trace=(2, [(0, False), (1, False)]), frac=0.5, policy="linux", readahead="none", lag=None, zero_page=False,
         flush=0, levels=True)
@given(trace=traces, frac=hst.floats(0.05, 1.0), policy=hst.sampled_from(list(POLICIES)),
       readahead=hst.sampled_from(["none", "vma", "cluster"]), lag=hst.sampled_from([None, 0, 3, 40]),
       zero_page=hst.booleans(), flush=hst.sampled_from([0, 1, 2]), levels=hst.booleans())
def test_invariants(trace, frac, policy, readahead, lag, zero_page, flush, levels):
    footprint, accesses = trace
    pages = np.array([a[0] for a in accesses], np.int64)
    writes = np.array([a[1] for a in accesses], bool)
    steps = np.sort(np.arange(pages.size) % 3)
    budget = max(1, int(frac * footprint))
    linux = policy == "linux"
    emu, rows = run_arrays(pages, writes, steps, footprint, budget, policy=policy, readahead=readahead,
                           cluster_slots=8, writeback_lag=lag if linux else None,
                           zero_page=zero_page if linux else None, stats_flush_steps=flush if linux else None,
                           scan_priorities=levels and linux)
    s, cfg = emu.summary(), emu.cfg
    assert s["faults"] + s["hits"] == s["accesses"] == pages.size
    assert s["faults"] == (s["zero_fill"] + s["zero_page"] + s["major_faults"] + s["readahead_hit"]
                           + s["swapcache_hit"])
    per_step = emu.step_faults()  # per step, they add up to the totals
    # a major fault on a page of zeros reads nothing: minor in the per-step split (the time model's)
    zero_faults = s.get("zero_faults", 0)
    assert sum(per_step["major"]) == s["major_faults"] - zero_faults
    assert sum(per_step["minor"]) == s["faults"] - s["major_faults"] + zero_faults
    assert len(per_step["major"]) == int(steps.max()) + 1
    # first touch: a store zero-fills; with the zero page a load maps it and only a later store fills
    first_write = {int(p) for p, w in zip(pages, writes, strict=True) if w}
    assert s["zero_fill"] == (len(first_write) if cfg.zero_page else len(np.unique(pages)))
    _, first = np.unique(pages, return_index=True)
    assert s["zero_page"] == (int(np.count_nonzero(~writes[first])) if cfg.zero_page else 0)
    # the output buffer's bound: no access issues more requests than max_rows_per_access
    if rows["step"].size:
        _, per_access = np.unique(np.stack([rows["step"], rows["t_us"]]), axis=1, return_counts=True)
        assert per_access.max() <= cfg.max_rows_per_access
    # writes complete later with a lag or by level (the config's lag is 0 for the by-level rules, which have
    # no lag clock): written pages are freed later, clean, so every eviction is a clean drop
    if cfg.writeback_lag or cfg.writeback_completion in BY_LEVEL:
        assert s["evictions"] == s["clean_drops"] + s.get("zero_out", 0)  # pages of zeros leave at once
        in_flight = int(np.count_nonzero(emu.state.flags & ks.WRITEBACK))
        assert in_flight == emu.state.reg[ks.R_WB_N]
        if cfg.writeback_completion == "lag":
            assert in_flight <= cfg.writeback_lag + ks.SWAP_CLUSTER_MAX
        assert np.all(emu.state.flags[emu.state.flags & ks.WRITEBACK > 0] & ks.RESIDENT)
    else:
        assert s["evictions"] == s["pages_out"] + s["clean_drops"] + s.get("zero_out", 0)  # pages of zeros: no write
        assert s["swapcache_hit"] == s["writeback_waits"] == 0
    assert s["bytes_written"] == s["pages_out"] * 4096 == rows["length"][rows["op"] == 1].sum()
    assert s["bytes_read"] == s["pages_in"] * 4096 == rows["length"][rows["op"] == 0].sum()
    # every page a swap-in brings is read, or filled without a read if it is zeros (the swap zero map)
    assert s["pages_in"] + s.get("zero_in", 0) == s["major_faults"] + s["readahead_issued"]
    st = emu.state
    assert int(np.count_nonzero(st.flags & ks.RESIDENT)) <= budget
    owners = st.slot_page[st.slot_page >= 0]
    assert len(np.unique(owners)) == len(owners)  # no slot used twice at once
    assert np.all(st.slot[owners] == np.flatnonzero(st.slot_page >= 0))
    assert np.all(rows["offset"] > 0)  # never the header page
    assert np.all(np.diff(rows["t_us"]) >= 0)
    if readahead == "none":
        assert s["readahead_issued"] == s["readahead_hit"] == 0


@SETTINGS
@given(trace=traces)
def test_lru_faults_never_rise_with_memory(trace):
    footprint, accesses = trace
    pages = np.array([a[0] for a in accesses], np.int64)
    writes = np.array([a[1] for a in accesses], bool)
    steps = np.zeros(pages.size, np.int64)
    faults = []
    for budget in range(1, footprint + 1):
        emu, _ = run_arrays(pages, writes, steps, footprint, budget, policy="lru", readahead="none")
        faults.append(emu.summary()["faults"])
        if budget in (1, footprint // 2 + 1, footprint):
            assert faults[-1] == naive_lru_misses(pages, budget)
    assert all(a >= b for a, b in zip(faults, faults[1:], strict=False))


def test_dirty_evictions_are_written(tmp_path):
    # every page written once then evicted must be written out; clean re-reads are not
    footprint = 64
    pages = np.concatenate([np.arange(64), np.arange(64), np.arange(64)])
    writes = np.concatenate([np.ones(64, bool), np.zeros(64, bool), np.zeros(64, bool)])
    emu, rows = run_arrays(pages, writes, np.zeros(pages.size, np.int64), footprint, 16, policy="lru",
                           readahead="none", swap_bytes=4096 * 1024)
    s = emu.summary()
    assert s["pages_out"] == 64  # each page is written exactly once: read-backs keep their slot and stay clean
    assert s["clean_drops"] == 3 * 64 - 16 - 64
    assert s["pages_in"] == 2 * 64  # a cyclic scan larger than memory misses every time under LRU


def test_slot_freed_on_write_fault_and_rewritten_in_place(tmp_path):
    # page 0: written, evicted (slot A), read back (slot kept), then stored to -> rewritten to slot A
    pages = np.array([0, 1, 2, 0, 0, 1, 2], np.int64)
    writes = np.array([1, 1, 1, 0, 1, 0, 0], bool)
    emu, rows = run_arrays(pages, writes, np.zeros(7, np.int64), 3, 2, policy="lru", readahead="none",
                           swap_bytes=4096 * 1024)
    writes_off = rows["offset"][rows["op"] == 1].tolist()
    assert writes_off[:2] == [4096, 8192]  # pages 0 and 1 get consecutive slots after the header
    assert writes_off.count(4096) == 2  # page 0 rewritten in place: its slot was kept on the read fault
    # a write fault frees the slot: the next eviction needs a new one
    pages = np.array([0, 1, 0, 1, 0], np.int64)
    writes = np.array([1, 1, 1, 1, 1], bool)
    emu, rows = run_arrays(pages, writes, np.zeros(5, np.int64), 2, 1, policy="lru", readahead="none",
                           swap_bytes=4096 * 1024)
    assert emu.summary()["slot_frees"] == 3


def test_merging_of_one_reclaim_batch():
    # linux reclaims 32 at once: 64 dirty pages evicted by the next zero-fills leave in merged writes
    footprint = 200
    pages = np.arange(footprint, dtype=np.int64)
    writes = np.ones(footprint, bool)
    emu, rows = run_arrays(pages, writes, np.zeros(footprint, np.int64), footprint, 100, policy="linux",
                           readahead="none", max_request_bytes=64 * 1024)
    w = rows["length"][rows["op"] == 1]
    assert w.max() == 64 * 1024 and w.sum() == emu.summary()["pages_out"] * 4096
    assert len(w) < emu.summary()["pages_out"] / 4


@pytest.mark.parametrize("chunk_rows", [7, 1000])
def test_emulate_file_streams_in_chunks(tmp_path, chunk_rows):
    rng = np.random.default_rng(3)
    n, footprint = 3000, 400
    pages = (rng.zipf(1.2, n) * 7) % footprint
    writes = rng.random(n) < 0.4
    steps = np.repeat(np.arange(6), n // 6)
    trace = write_access_trace(tmp_path / "t.access.parquet", pages, writes, steps, footprint, row_group_rows=500)
    res = emulate(trace, tmp_path / "a.swapio.parquet", memory_fraction=0.25, policy="linux", chunk_rows=chunk_rows,
                  step_us=1000.0)
    ref = emulate(trace, tmp_path / "b.swapio.parquet", memory_fraction=0.25, policy="linux", step_us=1000.0)
    a = open_trace(res.path, kind="swapio")
    b = open_trace(ref.path, kind="swapio").read_all()
    for k, v in a.read_all().items():
        np.testing.assert_array_equal(v, b[k])
    meta = a.meta
    assert meta["source"] == "emulator" and meta["summary"] == ref.summary
    assert meta["duration_us"] == 6000.0 and meta["steps"] == 6
    assert res.faults + res.summary["hits"] == n
    t = b["t_us"]
    assert np.all(t >= b["step"] * 1000.0) and np.all(t < (b["step"] + 1) * 1000.0)


def test_initial_state_swapped_reads_tables_first_time(tmp_path):
    footprint = 100
    regions = [{"name": "t", "kind": "table", "first_page": 0, "pages": 60},
               {"name": "s", "kind": "scratch", "first_page": 60, "pages": 40}]
    pages = np.arange(footprint)
    trace = write_access_trace(tmp_path / "t.access.parquet", pages, np.zeros(footprint, bool),
                               np.zeros(footprint, np.int64), footprint, regions=regions)
    res = emulate(trace, tmp_path / "s.swapio.parquet", memory_fraction=0.5, policy="lru", readahead="none",
                  initial_state="swapped", swap_bytes=1 << 20)
    assert res.major_faults == 60 and res.zero_fill == 40


def test_swap_full_is_a_config_error_and_leaves_no_file(tmp_path):
    footprint = 300
    pages = np.arange(footprint)
    trace = write_access_trace(tmp_path / "t.access.parquet", pages, np.ones(footprint, bool),
                               np.zeros(footprint, np.int64), footprint)
    out = tmp_path / "x.swapio.parquet"
    with pytest.raises(ConfigError, match="swap is full"):
        emulate(trace, out, memory_fraction=0.1, policy="lru", swap_bytes=64 * 4096)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [trace]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"memory_bytes": 0}, "positive"),
        ({"memory_bytes": 10 << 30}, "above the trace's footprint"),
        ({"memory_bytes": -4096}, "negative"),
        ({"memory_fraction": 1.5}, "memory-fraction"),
        ({"memory_bytes": 4096, "memory_fraction": 0.5}, "exactly one"),
        ({"memory_bytes": 40960, "policy": "fifo"}, "unknown policy"),
        ({"memory_bytes": 40960, "readahead": "x"}, "unknown readahead"),
        ({"memory_bytes": 40960, "swap_bytes": -1}, "negative"),
        ({"memory_bytes": 40960, "max_request_bytes": 100}, "max-request"),
    ],
)
def test_bad_parameters(tmp_path, kw, match):
    trace = write_access_trace(tmp_path / "t.access.parquet", [0, 1], [0, 1], [0, 0], 100)
    out = tmp_path / "x.swapio.parquet"
    with pytest.raises(ConfigError, match=match):
        emulate(trace, out, **kw)
    assert not out.exists()


def test_kernel_batches_are_the_trace_in_the_kernels_dtypes(tmp_path):
    """Each batch holds the rows pyarrow reads, as the trace's own uint64 pages and uint32 steps and uint8
    codes (one compiled kernel for every caller), and stays intact after the next batch is made."""
    import pyarrow.parquet as pq

    from swaptrace.emulate.engine import kernel_batches

    rng = np.random.default_rng(5)
    n, footprint = 2000, 300
    pages = rng.integers(0, footprint, n)
    writes = rng.random(n) < 0.3
    steps = np.repeat(np.arange(4), n // 4)
    trace = write_access_trace(tmp_path / "t.access.parquet", pages, writes, steps, footprint, row_group_rows=300)
    table = pq.read_table(trace)  # the reference: pyarrow's own reading of the file
    held, seen = [], 0
    for cols in kernel_batches(open_trace(trace, kind="access"), 128):
        p, c, s = cols
        assert (p.dtype, c.dtype, s.dtype) == (np.uint64, np.uint8, np.uint32)
        assert all(a.flags.writeable and a.flags.c_contiguous for a in cols)
        held.append((seen, cols))
        seen += len(p)
    assert seen == n and len(held) > 4
    for start, (p, c, s) in held:
        k = len(p)
        np.testing.assert_array_equal(p, table["page"].to_numpy()[start:start + k])
        np.testing.assert_array_equal(c, table["write"].to_numpy()[start:start + k].astype(np.uint8))
        np.testing.assert_array_equal(s, table["step"].to_numpy()[start:start + k])


@pytest.mark.parametrize(("pages", "steps", "message"), [
    ([3, -1], [0, 0], "page -1 is outside what an access trace holds"),
    ([3, 4], [0, -2], "step -2 is outside what an access trace holds"),
    ([3, 4], [0, 1 << 32], "step 4294967296 is outside what an access trace holds"),
])
def test_kernel_columns_refuse_what_a_trace_cannot_hold(pages, steps, message):
    """A signed or wider column converts to the trace's dtypes only when every value fits (no wrap-around)."""
    from swaptrace.emulate.engine import kernel_columns

    with pytest.raises(ConfigError, match=message):
        kernel_columns(np.array(pages, np.int64), np.zeros(2, bool), np.array(steps, np.int64))
    p, c, s = kernel_columns(np.array([3, 4], np.int64)[::-1], np.array([True, False]), np.array([0, 1], np.int16))
    assert p.tolist() == [4, 3] and p.flags.c_contiguous and c.tolist() == [1, 0] and s.dtype == np.uint32
    # already the trace's dtypes, but strided or read-only: copied into the one layout the kernel is compiled for
    frozen = np.arange(3, dtype=np.uint32)
    frozen.flags.writeable = False
    p, _, s = kernel_columns(np.arange(6, dtype=np.uint64)[::2], np.zeros(3, bool), frozen)
    assert p.tolist() == [0, 2, 4] and p.flags.c_contiguous and s.tolist() == [0, 1, 2] and s.flags.writeable
