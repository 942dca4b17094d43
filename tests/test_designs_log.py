"""The log-structured swap design: kernel vs naive twin, the shadow map and allocator invariants, and the
one-pass driver against ``emulate``."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive_designs import NaiveLog, log_for

from swaptrace.designs.log import LogConfig, LogSwap
from swaptrace.errors import ConfigError
from swaptrace.kernels.designs import logswap as kl

PB = 4096


def _kernel(cfg: LogConfig, F: int, pages, writes, evictions, chunks: int = 1) -> LogSwap:
    swap = LogSwap(cfg, footprint_pages=F, page_bytes=PB, nsteps=1)
    pages = np.asarray(pages, np.int64)
    writes = np.asarray(writes, np.bool_)
    steps = np.zeros(pages.size, np.int64)
    ev_at = np.array([a for a, _ in evictions], np.int64)
    ev_page = np.array([p for _, p in evictions], np.int64)
    swap.rows = []
    bounds = np.linspace(0, pages.size, chunks + 1).astype(int)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        sel = (ev_at >= a) & (ev_at < b)
        for rows in swap.feed(pages[a:b], writes[a:b], steps[a:b], ev_at[sel], ev_page[sel]):
            swap.rows.append(rows)
    last = swap.finish()
    if last is not None:
        swap.rows.append(last)
    return swap


def _kernel_rows(swap: LogSwap):
    out = []
    for r in swap.rows:
        for t, op, off, ln, cause in zip(r["t_us"], r["op"], r["offset"], r["length"], r["cause"], strict=True):
            out.append((int(t), int(op), int(off) // PB, int(ln) // PB, int(cause)))
    return out


def _naive(cfg: LogConfig, F: int, pages, writes, evictions) -> NaiveLog:
    # the twin's sizes (segments, prefetch buffer) come from LogConfig's docstring, not the kernel object
    return log_for(cfg, F, PB).run(pages, writes, evictions)


@st.composite
def traces(draw):
    F = draw(st.integers(1, 24))
    n = draw(st.integers(0, 300))
    pages = draw(st.lists(st.integers(0, F - 1), min_size=n, max_size=n))
    writes = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    ne = draw(st.integers(0, 2 * n))
    evictions = sorted(draw(st.lists(st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, F - 1)),
                                     min_size=ne, max_size=ne)), key=lambda e: e[0]) if n else []
    seg = draw(st.sampled_from([1, 2, 4]))
    cfg = LogConfig(segment_bytes=seg * PB, write_bytes=draw(st.sampled_from([1, seg])) * PB,
                    stride_bytes=(seg + draw(st.integers(0, 2))) * PB, spare_factor=draw(st.sampled_from([0.0, 0.25, 0.5, 1.0])),
                    victim=draw(st.sampled_from(["greedy", "cost-benefit"])),
                    swapin=draw(st.sampled_from(["page", "segment"])), prefetch_pages=draw(st.one_of(st.none(), st.integers(0, 5))),
                    prefetch_window_bytes=draw(st.sampled_from([None, PB, 2 * PB])),
                    low_segments=2, high_segments=draw(st.integers(2, 4)), discard=draw(st.booleans()),
                    free_at_half=draw(st.booleans()))
    return F, pages, writes, evictions, cfg


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces(), st.integers(1, 3))
def test_kernel_matches_naive_twin(case, chunks):
    F, pages, writes, evictions, cfg = case
    try:
        swap = _kernel(cfg, F, pages, writes, evictions, chunks)
    except ConfigError:  # the log filled up: the twin must fill up too
        with pytest.raises(OverflowError):
            _naive(cfg, F, pages, writes, evictions)
        return
    naive = _naive(cfg, F, pages, writes, evictions)
    assert swap.nsegs == naive.nsegs
    assert _kernel_rows(swap) == naive.rows
    got = vars(swap.counters())
    for k, v in naive.c.items():
        assert got[k] == v, k
    assert got["live_slots"] == len(naive.slot)
    assert swap.check_invariants() == []


@settings(max_examples=60, deadline=None)
@given(traces())
def test_shadow_map_and_no_leaks(case):
    """Every swap-in returns the last version written; live slots = pages with a slot; nothing dropped."""
    F, pages, writes, evictions, cfg = case
    try:
        swap = _kernel(cfg, F, pages, writes, evictions)
    except ConfigError:
        return
    c = swap.counters()
    assert c.bad_versions == 0
    assert swap.check_invariants() == []
    # pages out of memory that were ever written are all on the log (cleaning dropped none)
    out = (swap.flags & kl.IN_MEM) == 0
    assert np.all(swap.loc[out & (swap.ver > 0)] >= 0)
    # writes: evictions' pages plus the cleaner's moves, in whole pages
    assert c.write_pages == c.pages_out + c.clean_write_pages
    assert c.pages_in == c.prefetch_hit + c.buffer_hit + c.fault_reads


def test_invariant_checker_can_fail():
    swap = _kernel(LogConfig(segment_bytes=2 * PB), 4, [0, 1, 2, 2], [True] * 4, [(2, 0), (3, 1)])
    assert swap.check_invariants() == []
    assert swap.loc[0] >= 0 and swap.loc[1] >= 0
    swap.slot_ver[swap.loc[0]] -= 1
    assert any("old version" in p for p in swap.check_invariants())
    swap.slot_ver[swap.loc[0]] += 1
    swap.loc[1] = -1
    assert any("leak" in p for p in swap.check_invariants())


def test_sequential_writes_one_per_segment():
    """Evicting 8 dirty pages into 4-page segments: two writes of 4 pages at consecutive offsets."""
    pages = list(range(8)) + [9]
    swap = _kernel(LogConfig(segment_bytes=4 * PB), 10, pages, [True] * 9, [(8, p) for p in range(8)])
    rows = [r for r in _kernel_rows(swap) if r[1] == kl.OP_WRITE]
    assert [(r[2], r[3]) for r in rows] == [(0, 4), (4, 4)]


def test_prefetch_buffer_holds_eight_segments_first_in_first_out():
    """docs/designs.md: segment swap-in reads a page's segment neighbours into a buffer of 8 segments (FIFO).

    160 pages written and evicted one by one fill 40 segments of 4 pages; faulting the first page of 11
    segments prefetches 33 neighbours into a 32-page buffer, so the oldest one (page 1) is dropped. Reading
    the neighbours newest first: 32 hits, and page 1 is read again (11 + 1 fault reads).
    """
    F, k, seg = 160, 11, 4
    pages, writes = list(range(F)), [True] * F
    ev = [(i + 1, i) for i in range(F)]
    heads = [seg * s for s in range(k)]
    neighbours = [seg * s + j for s in range(k) for j in range(1, seg)][::-1]
    swap = _kernel(LogConfig(segment_bytes=seg * PB, swapin="segment"), F, pages + heads + neighbours,
                   writes + [False] * (len(heads) + len(neighbours)), ev)
    c = swap.counters()
    assert (c.prefetch_issued, c.prefetch_hit, c.prefetch_wasted) == (k * (seg - 1), 8 * seg, 1)
    assert c.fault_reads == k + 1


def test_greedy_cleaning_amplification_follows_utilization():
    """Uniform overwrites at utilization u: greedy cleaning moves pages, WA grows with u (LFS 1992, fig. 4)."""
    rng = np.random.default_rng(1)
    was = []
    for spare in (1.0, 0.25):
        F, n = 512, 40000
        pages = rng.integers(0, F, n)
        ev = [(i, int(p)) for i, p in enumerate(pages[:-1], start=1)]  # a memory of one page
        swap = _kernel(LogConfig(segment_bytes=16 * PB, spare_factor=spare, free_at_half=False), F, pages,
                       np.ones(n, bool), ev)
        was.append(swap.counters().host_write_amplification)
        assert swap.counters().bad_versions == 0
    assert 1.0 <= was[0] < was[1]


def test_bad_config_is_a_config_error():
    with pytest.raises(ConfigError):
        LogSwap(LogConfig(segment_bytes=1000), footprint_pages=4, page_bytes=PB, nsteps=1)
    with pytest.raises(ConfigError):
        LogSwap(LogConfig(victim="random"), footprint_pages=4, page_bytes=PB, nsteps=1)


def test_run_designs_linux_stream_is_emulate_no_ensemble(tmp_path, tiny_trace):
    from swaptrace.core.traceio import open_trace
    from swaptrace.designs.run import run_designs
    from swaptrace.emulate import EmulatorConfig, emulate, load_profile

    meta = open_trace(tiny_trace, kind="access").meta
    cfg = EmulatorConfig.resolve(meta, profile=load_profile(None), source=str(tiny_trace), memory_fraction=0.3)
    logs = {"log": LogConfig(segment_bytes=64 << 10), "log-seg": LogConfig(segment_bytes=64 << 10, swapin="segment")}
    outs = {k: tmp_path / f"{k}.parquet" for k in ("linux", *logs)}
    res = run_designs(tiny_trace, outs, cfg, logs, verify=True, chunk_rows=5000)
    ref = emulate(tiny_trace, tmp_path / "ref.parquet", cfg, ensemble=False)
    assert pq.read_table(outs["linux"]).equals(pq.read_table(ref.path))
    for name in logs:
        log = res[name].log
        assert res[name].problems == () and log.bad_versions == 0
        t = pq.read_table(outs[name]).to_pydict()
        assert sum(ln for op, ln in zip(t["op"], t["length"], strict=True) if op == "write") == log.write_pages * 4096
        # the same residency: every page the linux run wrote out at least once is evicted here too
        assert log.pages_out + log.clean_drops + log.ignored_evictions == ref.evictions
    assert res["log"].log.write_requests < res["linux"].summary["requests"]["write"]


@pytest.fixture(scope="module")
def tiny_trace(tmp_path_factory):
    from swaptrace.workload.generate import generate_trace

    return generate_trace("tiny", tmp_path_factory.mktemp("gen") / "tiny.access.parquet", steps=6, seed=0)


def test_eviction_log_is_off_by_default_and_counts_every_eviction(tiny_trace):
    from swaptrace.core.traceio import open_trace
    from swaptrace.emulate import EmulatorConfig, load_profile
    from swaptrace.emulate.engine import Emulator, step_counts

    tf = open_trace(tiny_trace, kind="access")
    cfg = EmulatorConfig.resolve(tf.meta, profile=load_profile(None), source=str(tiny_trace), memory_fraction=0.2)
    counts = step_counts(tf, 0, 1 << 20)
    runs = {}
    for record in (False, True):
        emu = Emulator(cfg, int(tf.meta["footprint_pages"]), counts, record_evictions=record)
        rows, ev = [], []
        for b in tf.iter_batches(columns=["step", "page", "write"], batch_rows=7000):
            rows += [r["offset"] for r in emu.feed(b["page"], b["write"], b["step"])]
            if record:
                ev.append(emu.take_evictions())
        runs[record] = (emu.counters(), np.concatenate(rows), ev)
        if not record:
            with pytest.raises(ValueError):
                emu.take_evictions()
    assert runs[False][0] == runs[True][0]  # same counters and rows with the log kept
    assert np.array_equal(runs[False][1], runs[True][1])
    at = np.concatenate([a for a, _ in runs[True][2]])
    assert at.size == runs[True][0].evictions > 0
    assert np.all(np.diff(at) >= 0) and at[-1] < runs[True][0].accesses


@st.composite
def emulated(draw):
    """A random trace, a budget and a policy: the evictions come from the real emulator."""
    F = draw(st.integers(2, 64))
    n = draw(st.integers(1, 600))
    hot = draw(st.integers(1, F))
    pages = np.array(draw(st.lists(st.integers(0, F - 1), min_size=n, max_size=n)), np.int64) % np.int64(hot + 1)
    pages = np.minimum(pages, F - 1)
    writes = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), np.bool_)
    steps = np.sort(np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), np.int64))
    budget = draw(st.integers(1, F))
    policy = draw(st.sampled_from(["linux", "lru", "clock"]))
    seg = draw(st.sampled_from([1, 2, 4, 8]))
    cfg = LogConfig(segment_bytes=seg * PB, victim=draw(st.sampled_from(["greedy", "cost-benefit"])),
                    swapin=draw(st.sampled_from(["page", "segment"])), spare_factor=1.0, discard=draw(st.booleans()))
    return F, pages, writes, steps, budget, policy, cfg


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(emulated())
def test_invariants_on_emulated_traces(case):
    """With the emulator's evictions: the shadow map holds, nothing leaks, and the log sees every eviction."""
    from swaptrace.emulate import EmulatorConfig, load_profile
    from swaptrace.emulate.engine import Emulator

    F, pages, writes, steps, budget, policy, cfg = case
    ecfg = EmulatorConfig.resolve({"footprint_pages": F, "page_bytes": PB}, profile=load_profile(None),
                                  memory_bytes=budget * PB, policy=policy)
    emu = Emulator(ecfg, F, np.bincount(steps, minlength=4), nsteps=4, record_evictions=True)
    swap = LogSwap(cfg, footprint_pages=F, page_bytes=PB, nsteps=4)
    for _ in emu.feed(pages, writes, steps):
        pass
    at, pg = emu.take_evictions()
    for _ in swap.feed(pages, writes, steps, at, pg):
        pass
    swap.finish()
    c = swap.counters()
    assert swap.check_invariants() == []
    assert c.pages_out + c.clean_drops + c.ignored_evictions == emu.counters().evictions
    # the same residency: a page in memory for the log has a frame (or the zero page) in the linux run
    from swaptrace.kernels.emulate import state as ks

    in_mem = np.flatnonzero(swap.flags & kl.IN_MEM)
    assert np.all(emu.state.flags[in_mem] & (ks.RESIDENT | ks.ZERO_PAGE))
