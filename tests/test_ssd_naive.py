"""The numba FTL makes the same GC decisions as the slow reference in naive_ssd.py."""

from __future__ import annotations

import naive_ssd
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swaptrace.core import traceio
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.simulate import Simulator


def small_config(policy="greedy", dies=2, blocks=12, pages=8, planes=1, page_bytes=4096, spare=0.4,
                 separate=False, hot_cold=False) -> SSDConfig:
    return SSDConfig(name="small", channels=1, dies_per_channel=dies, planes=planes, blocks_per_plane=blocks,
                     pages_per_block=pages, page_bytes=page_bytes, spare_factor=spare, gc_policy=policy, gc_d=3,
                     gc_free_fraction=0.0, write_buffer_bytes=1 << 20, separate_gc_stream=separate,
                     hot_cold_streams=hot_cold)


def run_both(cfg, ops, lpns, seed=0, cold_from=None):
    sim = Simulator(cfg, timing=False, iodepth=1, seed=seed)
    ref = naive_ssd.NaiveFTL(cfg, seed=seed)
    op = np.asarray(ops, dtype=np.int8)
    lpn = np.asarray(lpns, dtype=np.int64)
    cold = None if cold_from is None else lpn >= cold_from
    sim.run(op, lpn, np.ones(len(op), dtype=np.int64), record=False, cold=cold)
    for o, x in zip(ops, lpns, strict=True):
        if o == traceio.OP_WRITE:
            ref.write(int(x), cold=cold_from is not None and x >= cold_from)
        elif o == traceio.OP_DISCARD:
            ref.discard(int(x))
    return sim, ref


def assert_same(sim, ref):
    c = sim.counters()
    assert (c.host_write_units, c.gc_write_units, c.erases) == (ref.host_writes, ref.gc_writes, ref.erases)
    np.testing.assert_array_equal(sim.state.l2p.astype(np.int64), ref.l2p_array())
    valid = np.array([b.valid for b in ref.blocks])
    np.testing.assert_array_equal(sim.state.valid, valid)


POLICIES = ["greedy", "fifo", "cost-benefit", "random", "d-choices"]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("separate", [False, True])
def test_random_writes_match_reference(policy, separate):
    cfg = small_config(policy, separate=separate)
    rng = np.random.default_rng(7)
    lpns = rng.integers(0, cfg.user_units, 6 * cfg.user_units)
    sim, ref = run_both(cfg, [traceio.OP_WRITE] * len(lpns), lpns, seed=3)
    assert ref.erases > 20  # GC really ran
    assert_same(sim, ref)


@pytest.mark.parametrize("policy", ["greedy", "fifo", "cost-benefit"])
def test_writes_and_discards_with_planes_match(policy):
    cfg = small_config(policy, dies=3, blocks=8, pages=4, planes=2, page_bytes=8192, spare=0.35)
    rng = np.random.default_rng(11)
    n = 5 * cfg.user_units
    ops = np.where(rng.random(n) < 0.15, traceio.OP_DISCARD, traceio.OP_WRITE)
    hot = rng.random(n) < 0.7
    lpns = np.where(hot, rng.integers(0, cfg.user_units // 5, n), rng.integers(0, cfg.user_units, n))
    sim, ref = run_both(cfg, ops.tolist(), lpns.tolist())
    assert_same(sim, ref)


@settings(max_examples=15, deadline=None)
@given(
    policy=st.sampled_from(POLICIES),
    dies=st.integers(1, 3),
    pages=st.sampled_from([2, 4, 8]),
    seq=st.lists(st.tuples(st.sampled_from([traceio.OP_WRITE, traceio.OP_WRITE, traceio.OP_DISCARD]),
                           st.integers(0, 10_000)), min_size=0, max_size=600),
)
def test_hypothesis_same_decisions(policy, dies, pages, seq):
    cfg = small_config(policy, dies=dies, blocks=10, pages=pages, spare=0.35)
    ops = [o for o, _ in seq]
    lpns = [x % cfg.user_units for _, x in seq]
    sim, ref = run_both(cfg, ops, lpns, seed=len(seq))
    assert_same(sim, ref)
    # invariants: every mapped unit points back to itself; valid counts add up
    l2p = sim.state.l2p
    mapped = np.flatnonzero(l2p >= 0)
    np.testing.assert_array_equal(sim.state.p2l[l2p[mapped]], mapped)
    assert int(sim.state.valid.sum()) == len(mapped)


@pytest.mark.parametrize("policy", ["greedy", "cost-benefit"])
def test_host_tagged_hot_cold_streams_match(policy):
    cfg = small_config(policy, dies=2, blocks=14, pages=8, spare=0.45, separate=True, hot_cold=True)
    rng = np.random.default_rng(3)
    n = 6 * cfg.user_units
    hot = cfg.user_units // 5
    lpns = np.where(rng.random(n) < 0.8, rng.integers(0, hot, n), rng.integers(hot, cfg.user_units, n))
    sim, ref = run_both(cfg, [traceio.OP_WRITE] * n, lpns.tolist(), cold_from=hot)
    assert ref.erases > 20
    assert_same(sim, ref)


def test_sequential_overwrite_needs_no_relocation():
    cfg = small_config("greedy", dies=2, blocks=16, pages=8)
    lpns = np.tile(np.arange(cfg.user_units), 5)
    sim, ref = run_both(cfg, [traceio.OP_WRITE] * len(lpns), lpns)
    assert_same(sim, ref)
    assert sim.counters().gc_write_units == 0
    assert sim.counters().waf == 1.0
