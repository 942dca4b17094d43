"""The FTL's timing (reads, write-buffer flushes, foreground and background GC, queueing) against the
discrete-event reference in naive_ssd_timing.py, on many small random devices and streams.

Tolerance: the model is deterministic, so completion times must agree exactly up to floating-point
summation order. Each time is a chain of at most a few thousand additions of positive terms, each rounded to
within 2**-53 relatively; ``rtol = 1e-9`` is 10**4 times that bound for 10**3 chained additions, and far below
the smallest modelled quantity (one 4 KiB transfer on a 4000 MB/s link, ~1 us, is 1e-5 of a 0.1 s run).
"""

from __future__ import annotations

import naive_ssd_timing
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swaptrace.core import traceio
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.simulate import Simulator

RTOL = 1e-9  # see the module docstring


def device(**kw) -> SSDConfig:
    base = dict(name="t", channels=2, dies_per_channel=2, planes=1, blocks_per_plane=10, pages_per_block=8,
                page_bytes=4096, read_us=50.0, program_us=300.0, erase_us=1500.0, channel_mb_s=400.0,
                host_mb_s=2000.0, spare_factor=0.35, gc_free_fraction=0.0, write_buffer_bytes=64 << 10)
    base.update(kw)
    return SSDConfig(**base)


def stream(cfg, n, rng, read_share=0.4, discard_share=0.05, max_pages=8, hot=1.0):
    u = cfg.user_units
    r = rng.random(n)
    op = np.where(r < read_share, traceio.OP_READ,
                  np.where(r < read_share + discard_share, traceio.OP_DISCARD, traceio.OP_WRITE)).astype(np.int8)
    npages = rng.integers(1, max_pages + 1, n)
    span = max(int(u * hot), max_pages + 1)
    lpn = np.minimum(rng.integers(0, span, n), u - npages)
    return op, lpn, npages


def run_both(cfg, op, lpn, npages, *, iodepth=4, t_us=None, precondition="seq", seed=0):
    ts = t_us is not None
    sim = Simulator(cfg, timing=True, iodepth=iodepth, use_timestamps=ts, seed=seed)
    ref = naive_ssd_timing.NaiveTimedSSD(cfg, iodepth=iodepth, use_timestamps=ts, seed=seed)
    if precondition == "seq":
        sim.precondition("seq")
        ref.fill_sequential_untimed()
    res = sim.run(op, lpn, npages, t_us)
    want = np.array(ref.run(op.tolist(), lpn.tolist(), npages.tolist(), None if t_us is None else list(t_us)))
    return sim, ref, res, want


def assert_same_times(sim, ref, res, want):
    np.testing.assert_allclose(res["done_us"], want[:, 0], rtol=RTOL, atol=0)
    np.testing.assert_allclose(res["latency_us"], want[:, 1], rtol=RTOL, atol=1e-9)
    sim.finish()
    ref.finish()
    np.testing.assert_allclose(sim.state.die_free, [d.free_at for d in ref.dies], rtol=RTOL)
    np.testing.assert_allclose(sim.state.chan_free, [c.free_at for c in ref.channels], rtol=RTOL)
    c = sim.counters()
    assert (c.host_write_units, c.gc_write_units, c.erases) == (ref.ftl.host_writes, ref.ftl.gc_writes,
                                                                ref.ftl.erases)


def bandwidth_mb_s(op, npages, done, map_bytes):
    moved = int(np.sum(np.where(op != traceio.OP_DISCARD, npages, 0))) * map_bytes
    return moved / float(np.max(done))  # bytes / us = MB/s


@pytest.mark.parametrize("policy", ["greedy", "fifo", "cost-benefit", "random", "d-choices"])
@pytest.mark.parametrize("copyback", [True, False])
def test_mixed_stream_with_foreground_gc_matches(policy, copyback):
    cfg = device(gc_policy=policy, gc_copyback=copyback, gc_d=3)
    rng = np.random.default_rng(len(policy) + 10 * copyback)
    op, lpn, npages = stream(cfg, 1500, rng, hot=0.6)
    sim, ref, res, want = run_both(cfg, op, lpn, npages, iodepth=4)
    assert ref.ftl.erases > 10  # GC ran inside the timed part
    assert_same_times(sim, ref, res, want)
    assert bandwidth_mb_s(op, npages, res["done_us"], cfg.map_bytes) == pytest.approx(
        bandwidth_mb_s(op, npages, want[:, 0], cfg.map_bytes), rel=RTOL)


def test_background_gc_on_idle_dies_matches():
    # timestamps leave the device idle between bursts: background GC runs there
    cfg = device(bg_gc_free_fraction=0.3, separate_gc_stream=True, spare_factor=0.45, blocks_per_plane=16)
    rng = np.random.default_rng(4)
    op, lpn, npages = stream(cfg, 1200, rng, read_share=0.2, hot=0.5)
    t = np.cumsum(rng.exponential(400.0, len(op)))
    sim, ref, res, want = run_both(cfg, op, lpn, npages, iodepth=2, t_us=t)
    assert sim.counters().background_gc > 5
    assert_same_times(sim, ref, res, want)


def test_multi_plane_units_and_the_smallest_buffer():
    # 2 planes x 8 KiB pages: 4 units per program; the buffer holds exactly one program unit per die, so a
    # write waits for the program that frees its slot
    cfg = device(planes=2, page_bytes=8192, blocks_per_plane=6, write_buffer_bytes=4 * 4 * 4096)
    rng = np.random.default_rng(9)
    op, lpn, npages = stream(cfg, 800, rng, read_share=0.3)
    sim, ref, res, want = run_both(cfg, op, lpn, npages, iodepth=8)
    assert_same_times(sim, ref, res, want)


def test_reads_of_a_fresh_drive_use_the_striping_rule():
    cfg = device()
    rng = np.random.default_rng(2)
    op, lpn, npages = stream(cfg, 400, rng, read_share=1.0, discard_share=0.0)
    sim, ref, res, want = run_both(cfg, op, lpn, npages, iodepth=3, precondition="none")
    assert_same_times(sim, ref, res, want)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31),
    dies_per_channel=st.integers(1, 3),
    channels=st.integers(1, 2),
    planes=st.integers(1, 2),
    buffer_units=st.sampled_from([1, 2, 5]),  # program units per die: the least the model allows is 1
    iodepth=st.sampled_from([1, 2, 5, 16]),
    bg=st.sampled_from([0.0, 0.2]),
    copyback=st.booleans(),
    timestamps=st.booleans(),
    read_share=st.sampled_from([0.0, 0.3, 0.7]),
)
def test_random_devices_and_streams_match(seed, dies_per_channel, channels, planes, buffer_units, iodepth, bg,
                                          copyback, timestamps, read_share):
    cfg = device(channels=channels, dies_per_channel=dies_per_channel, planes=planes, blocks_per_plane=12,
                 write_buffer_bytes=buffer_units * planes * 4096 * channels * dies_per_channel, bg_gc_free_fraction=bg, gc_copyback=copyback,
                 spare_factor=0.4)
    rng = np.random.default_rng(seed)
    op, lpn, npages = stream(cfg, 300, rng, read_share=read_share, hot=0.7)
    t = np.cumsum(rng.exponential(200.0, len(op))) if timestamps else None
    sim, ref, res, want = run_both(cfg, op, lpn, npages, iodepth=iodepth, t_us=t, seed=seed % 7)
    assert_same_times(sim, ref, res, want)


@pytest.mark.parametrize("qd", [1, 3, 32])
def test_queue_depth_issue_times_match_reference(qd):
    # the reference computes its own completions (rule 1: issue at the qd-th largest completion so far)
    cfg = device(blocks_per_plane=12)
    rng = np.random.default_rng(qd)
    op, lpn, npages = stream(cfg, 2000, rng, read_share=0.5, discard_share=0.0)
    sim, ref, res, want = run_both(cfg, op, lpn, npages, iodepth=qd)
    issued = res["done_us"] - res["latency_us"]
    np.testing.assert_allclose(issued, want[:, 0] - want[:, 1], rtol=RTOL, atol=1e-9)
    if qd == 1:  # at depth 1 every request issues when the one before it completed
        np.testing.assert_allclose(issued[1:], res["done_us"][:-1], rtol=RTOL)
