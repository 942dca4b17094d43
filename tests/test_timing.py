"""The time model's kernel against an independent reference (naive_timing.py, written from docs/timing.md), and
against hand-worked cases (analytic oracles). Kernel and reference agree to rel 1e-12: the same sums in another
order, a few hundred additions each within 2**-53 relatively."""

from __future__ import annotations

import math

import naive_timing as naive
import numpy as np
import pytest

from swaptrace.kernels.timing import steps as kt
from swaptrace.ssd.config import DEVICES
from swaptrace.timing import model as timing

SIZES = (4096, 16384, 65536)
DEPTHS = (1, 4, 16)
READ = ((100.0, 140.0, 400.0), (120.0, 200.0, 700.0), (200.0, 500.0, 1800.0))
WRITE = ((50.0, 90.0, 300.0), (70.0, 150.0, 520.0), (160.0, 420.0, 1500.0))
DEV = timing.DeviceTiming("t", "test", SIZES, DEPTHS, READ, WRITE)


def _requests(rng, nsteps, n):
    """Random requests in step order: bursts of reads (some waited) and writes, random sizes."""
    reqs, burst = [], 0
    steps = np.sort(rng.integers(0, nsteps, size=n))
    i = 0
    while i < n:
        k = int(rng.integers(1, 6))
        op = int(rng.integers(0, 2))
        frac = float(rng.random())
        s = int(steps[i])
        for _ in range(k):
            if i >= n or steps[i] != s:
                break
            reqs.append(dict(step=s, frac=frac, op=op, nbytes=float(4096 * int(rng.integers(1, 40))),
                             waits=bool(op == 0 and rng.random() < 0.7), burst=burst))
            i += 1
        burst += 1
    return reqs


def _run_kernel(reqs, nsteps, access, dense, dev=DEV, fault=3.0, reclaim=0.5, write=0.25, threads=None):
    req = timing.StreamRequests(
        step=np.array([r["step"] for r in reqs], dtype=np.int64),
        frac=np.array([r["frac"] for r in reqs], dtype=np.float64),
        op=np.array([r["op"] for r in reqs], dtype=np.int8),
        nbytes=np.array([r["nbytes"] for r in reqs], dtype=np.float64),
        waits=np.array([r["waits"] for r in reqs], dtype=bool),
        burst=np.array([r["burst"] for r in reqs], dtype=np.int64),
        nsteps=nsteps, first_step=0, page_bytes=4096, source="test",
    )
    comp = timing.ComputeTime(np.asarray(access, float), np.asarray(dense, float), "test")
    return timing.simulate(req, dev, comp, timing.CpuCosts(fault, reclaim, write), threads)


def _twin_case(seed, threads):
    """A random stream run by the kernel and by the twin on ``threads`` threads; both results."""
    rng = np.random.default_rng(seed)
    nsteps = int(rng.integers(1, 6))
    reqs = _requests(rng, nsteps, int(rng.integers(0, 60 if threads == 1 else 80)))
    access = rng.uniform(0, 2000, nsteps)
    dense = rng.uniform(0, 1000, nsteps)
    got = _run_kernel(reqs, nsteps, access, dense, threads=threads)
    want = naive.simulate(reqs, nsteps, access, dense, SIZES, DEPTHS, READ, WRITE, 3.0, 0.5, 0.25, 4096, threads)
    assert got.threads == threads
    for s in range(nsteps):
        assert got.step_us[s] == pytest.approx(want[s]["step"], rel=1e-12, abs=1e-9)
        assert got.queue_us[s] == pytest.approx(want[s]["queue"], rel=1e-12, abs=1e-9)
        assert got.fault_wait_us[s] == pytest.approx(want[s]["wait"], rel=1e-12, abs=1e-9)
        assert got.reclaim_cpu_us[s] == pytest.approx(want[s]["reclaim_cpu"], rel=1e-12, abs=1e-9)
        assert got.faults_waited[s] == want[s]["waits"]
    return got


@pytest.mark.parametrize("seed", range(25))
def test_kernel_matches_naive_twin(seed):
    got = _twin_case(seed, 1)
    # the breakdown adds up to the step time
    parts = got.compute_us + got.fault_wait_us + got.queue_us + got.fault_cpu_us + got.reclaim_cpu_us
    np.testing.assert_allclose(parts, got.step_us, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("threads", [2, 3, 5])
@pytest.mark.parametrize("seed", range(8))
def test_kernel_matches_naive_twin_with_threads(seed, threads):
    got = _twin_case(1000 + seed, threads)
    # summed over the threads, the terms are at least the longest thread's stall and at most threads times it
    parts = got.fault_wait_us + got.queue_us + got.fault_cpu_us + got.reclaim_cpu_us
    stall = got.step_us - got.compute_us
    assert np.all(parts >= stall - 1e-6) and np.all(parts <= threads * stall + 1e-6)


def test_two_threads_wait_for_their_faults_together():
    """Hand-worked: 4 KiB faults in three bursts at 1/2, 1/2 and 3/4 of a 1000 us access time; each costs 3 us
    fault CPU and 0.5 us reclaim CPU. One thread: 100 us each (depth 1) one after the other; the second waits
    for the first (issued at 603.5, the device free at 600), the third is issued at 750 + 207: 1310.5 us.
    Two threads: bursts 0 and 2 are thread 0's, burst 1 thread 1's. Reads meet the device at depth 2:
    lat = 100 + (2 - 1) / (4 - 1) * (140 - 100) = 113.33 us, each holding it lat / 2. At 500 both threads
    fault; thread 0's goes first (the tie), thread 1's begins 56.67 us later; thread 0's next fault is
    issued at 750 + its 116.83 us stall and finds the device free. Stalls: thread 0 2 x 116.83, thread 1
    56.67 + 116.83: the step is 1000 + 233.67 us."""
    reqs = [dict(step=0, frac=0.5, op=0, nbytes=4096.0, waits=True, burst=0),
            dict(step=0, frac=0.5, op=0, nbytes=4096.0, waits=True, burst=1),
            dict(step=0, frac=0.75, op=0, nbytes=4096.0, waits=True, burst=2)]
    one = _run_kernel(reqs, 1, [1000.0], [0.0], threads=1)
    assert one.step_us[0] == pytest.approx(1310.5)
    two = _run_kernel(reqs, 1, [1000.0], [0.0], threads=2)
    lat2 = 100 + 40 / 3
    assert two.step_us[0] == pytest.approx(1000 + 2 * (lat2 + 3.5))
    assert two.queue_us[0] == pytest.approx(lat2 / 2)  # thread 1's fault behind thread 0's
    assert two.fault_wait_us[0] == pytest.approx(3 * lat2)
    assert two.fault_cpu_us[0] == pytest.approx(9.0) and two.faults_waited[0] == 3  # summed over the threads


def test_threads_come_from_the_stream_unless_given(tmp_path):
    """A stream's ``threads`` (from a recorded program's trace) is the default; --threads overrides it; a stream
    without it is one thread."""
    meta = {"threads": 2, "threads_source": "recording r.parquet"}
    assert timing.stream_threads(meta) == (2, "recording r.parquet")
    assert timing.stream_threads({}) == (1, "one thread (the stream does not say)")
    assert timing.stream_threads({"threads": True})[0] == 1 and timing.stream_threads({"threads": 0})[0] == 1
    assert timing.stream_threads({"threads": 5000})[0] == 1 and timing.stream_threads({"threads": "2"})[0] == 1
    reqs = [dict(step=0, frac=0.25, op=0, nbytes=4096.0, waits=True, burst=0),
            dict(step=0, frac=0.75, op=0, nbytes=4096.0, waits=True, burst=1)]
    base = _run_kernel(reqs, 1, [1000.0], [0.0])
    assert base.threads == 1 and base.summary()["threads"] == 1


@pytest.mark.parametrize(("nbytes", "depth"), [(4096, 1), (1000, 1), (8192, 1), (65536, 4), (1 << 20, 16), (16384, 2),
                                                (16384, 64), (30000, 10)])
def test_latency_interpolation_matches_naive(nbytes, depth):
    got = DEV.latency_us("read", nbytes, depth)
    assert got == pytest.approx(naive.lat(SIZES, DEPTHS, READ, nbytes, depth), rel=1e-12)


def test_latency_table_points_and_limits():
    assert DEV.latency_us("read", 16384, 4) == 200.0
    assert DEV.latency_us("write", 4096, 1) == 50.0
    assert DEV.latency_us("read", 512, 1) == 100.0  # flat below the smallest size
    assert DEV.latency_us("read", 131072, 1) == pytest.approx(400.0)  # proportional above the largest
    assert DEV.latency_us("read", 4096, 32) == pytest.approx(800.0)  # saturated beyond the deepest depth


def test_isolated_faults_cost_their_read_latency_plus_cpu():
    # three faults in one step, far apart, idle device: each waits one 4 KiB read at depth 1
    reqs = [dict(step=0, frac=f, op=0, nbytes=4096.0, waits=True, burst=b) for b, f in enumerate((0.0, 0.4, 0.8))]
    r = _run_kernel(reqs, 1, [10_000.0], [5_000.0], fault=3.0, reclaim=0.5, write=0.0)
    assert r.queue_us[0] == 0.0
    assert r.fault_wait_us[0] == pytest.approx(3 * 100.0)
    assert r.step_us[0] == pytest.approx(15_000.0 + 3 * (100.0 + 3.0 + 0.5))
    assert r.slowdown == pytest.approx(r.step_us[0] / 15_000.0)


def test_fault_queues_behind_a_write_burst():
    # four 16 KiB writes in one burst at depth 4: the device needs 4 * 150/4 = 150 us; a fault right after waits it
    writes = [dict(step=0, frac=0.5, op=1, nbytes=16384.0, waits=False, burst=0) for _ in range(4)]
    fault = [dict(step=0, frac=0.5, op=0, nbytes=4096.0, waits=True, burst=1)]
    r = _run_kernel(writes + fault, 1, [1000.0], [0.0], fault=0.0, reclaim=0.0, write=0.0)
    assert r.queue_us[0] == pytest.approx(150.0)
    assert r.fault_wait_us[0] == pytest.approx(100.0)
    assert r.step_us[0] == pytest.approx(1000.0 + 250.0)


def test_backlog_drains_during_compute():
    # a 64 KiB write at the end of step 0 keeps the device busy 160 us; 100 us of dense compute follow,
    # so a fault at the start of step 1 queues the remaining 60 us
    reqs = [dict(step=0, frac=1.0, op=1, nbytes=65536.0, waits=False, burst=0),
            dict(step=1, frac=0.0, op=0, nbytes=4096.0, waits=True, burst=1)]
    r = _run_kernel(reqs, 2, [1000.0, 1000.0], [100.0, 0.0], fault=0.0, reclaim=0.0, write=0.0)
    assert r.queue_us.tolist() == pytest.approx([0.0, 60.0])
    assert r.step_us.tolist() == pytest.approx([1100.0, 1000.0 + 60.0 + 100.0])


def test_readahead_is_not_waited_for_but_occupies_the_device():
    # a fault read with two readahead reads in its burst (depth 3): the process waits only for its own read
    reqs = [dict(step=0, frac=0.0, op=0, nbytes=4096.0, waits=w, burst=0) for w in (True, False, False)]
    reqs.append(dict(step=0, frac=0.0, op=0, nbytes=4096.0, waits=True, burst=1))  # the next fault queues
    r = _run_kernel(reqs, 1, [0.0], [0.0], fault=0.0, reclaim=0.0, write=0.0)
    lat3 = DEV.latency_us("read", 4096, 3)
    assert r.faults_waited[0] == 2
    first_wait = lat3
    backlog_left = 3 * lat3 / 3 - first_wait  # the device finished the burst's work when the first read completed
    assert r.queue_us[0] == pytest.approx(max(backlog_left, 0.0))
    assert r.step_us[0] == pytest.approx(first_wait + max(backlog_left, 0.0) + 100.0)


def test_empty_stream_is_compute_only():
    r = _run_kernel([], 3, [1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    assert r.step_us.tolist() == [2.0, 3.0, 4.0] and r.slowdown == 1.0


def test_no_compute_has_no_slowdown():
    reqs = [dict(step=0, frac=0.0, op=0, nbytes=4096.0, waits=True, burst=0)]
    r = _run_kernel(reqs, 1, [0.0], [0.0], fault=0.0, reclaim=0.0, write=0.0)
    assert r.slowdown is None and r.total_us == pytest.approx(100.0)


def test_ssd_model_table_is_hand_checkable():
    cfg = DEVICES["nvme-tlc"]
    dev = timing.device_from_ssd(cfg)
    # 4 KiB read at depth 1: one page, tR + transfer over one channel and the host link
    want = cfg.read_us + 4096 / cfg.channel_mb_s + 4096 / cfg.host_mb_s
    assert dev.latency_us("read", 4096, 1) == pytest.approx(want)
    lat = np.asarray(dev.read_latency_us)
    assert np.all(np.diff(lat, axis=1) >= -1e-9)  # deeper queues never make a request faster
    assert np.all(np.diff(np.asarray(dev.write_latency_us), axis=0) > 0)  # larger writes take longer
    # sustained writes are limited by programming over the write amplification
    waf = dev.notes["waf"]
    prog = cfg.dies * cfg.program_units * cfg.map_bytes / cfg.program_us / waf
    # notes["waf"] is the table's WAF rounded to 4 decimals: prog is off by at most 0.5e-4 / waf relative
    assert dev.latency_us("write", 4096, 32) / 32 == pytest.approx(max(4096 / prog, 4096 / cfg.host_mb_s),
                                                                   rel=0.5e-4 / waf + 1e-12)
    assert waf > 1.0


def test_profile_toml_round_trip(tmp_path):
    p = tmp_path / "d.toml"
    p.write_text(DEV.to_toml())
    back = timing.load_device_timing(str(p))
    assert back.sizes_bytes == SIZES and back.depths == DEPTHS
    np.testing.assert_allclose(back.read_latency_us, READ)
    np.testing.assert_allclose(back.write_latency_us, WRITE)


@pytest.mark.parametrize(("text", "fragment"), [
    ("x = ", "cannot read device TOML"),
    ('kind = "swaptrace-device-profile"\nsizes_bytes = [4096]\ndepths = [1]\n', "not a valid device profile"),
    ('kind = "swaptrace-device-profile"\nsizes_bytes = [8192, 4096]\ndepths = [1]\n[read]\nlatency_us = [[1.0], [2.0]]\n'
     '[write]\nlatency_us = [[1.0], [2.0]]\n', "ascending"),
    ('kind = "swaptrace-device-profile"\nsizes_bytes = [4096]\ndepths = [1]\n[read]\nlatency_us = [[-1.0]]\n'
     '[write]\nlatency_us = [[1.0]]\n', "positive"),
    ('kind = "swaptrace-device-profile"\nsizes_bytes = [4096]\ndepths = [1, 4]\n[read]\nlatency_us = [[1.0]]\n'
     '[write]\nlatency_us = [[1.0, 2.0]]\n', "table is"),
    ("channels = 0\n", "positive integer"),
])
def test_bad_device_files_are_config_errors(tmp_path, text, fragment):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(timing.ConfigError, match=fragment):
        timing.load_device_timing(str(p))


def test_unknown_device_and_missing_file():
    with pytest.raises(timing.ConfigError, match="unknown device"):
        timing.load_device_timing("no-such-drive")
    with pytest.raises(timing.ConfigError, match="no such device file"):
        timing.load_device_timing("/nonexistent/dev.toml")


def test_cpu_micro_benchmark_is_positive_and_small():
    c = timing.measure_cpu_costs(pages=1024, repeats=3)
    # a page fault and an unmap take between 10 ns and 1 ms on any machine this runs on
    assert 0.01 < c.fault_cpu_us < 1000 and 0.001 < c.reclaim_cpu_us < 1000
    assert math.isfinite(c.fault_cpu_us)


def test_bad_cpu_costs_and_compute():
    with pytest.raises(timing.ConfigError, match="fault-cpu-us"):
        timing.CpuCosts(-1.0)
    with pytest.raises(timing.ConfigError, match="step-compute-us"):
        timing.given_compute(3, float("nan"))


def test_kernel_output_columns_are_distinct():
    cols = [kt.OUT_STEP, kt.OUT_COMPUTE, kt.OUT_WAIT, kt.OUT_QUEUE, kt.OUT_FAULT_CPU, kt.OUT_RECLAIM_CPU, kt.OUT_WAITS]
    assert sorted(cols) == list(range(kt.OUT_COLUMNS))


def test_a_measured_spread_of_the_fault_cost_prices_the_stream_at_both_ends():
    # the isolated-faults case by hand: three faults of 100 us read + f fault CPU + 0.5 reclaim over 15 ms of compute
    reqs = [dict(step=0, frac=f, op=0, nbytes=4096.0, waits=True, burst=b) for b, f in enumerate((0.0, 0.4, 0.8))]
    central = _run_kernel(reqs, 1, [10_000.0], [5_000.0], fault=3.0, reclaim=0.5, write=0.0)
    assert central.slowdown_range is None and "slowdown_range" not in central.summary()
    req = timing.StreamRequests(
        step=np.zeros(3, np.int64), frac=np.array([0.0, 0.4, 0.8]), op=np.zeros(3, np.int8),
        nbytes=np.full(3, 4096.0), waits=np.ones(3, bool), burst=np.arange(3), nsteps=1, first_step=0,
        page_bytes=4096, source="test")
    comp = timing.ComputeTime(np.array([10_000.0]), np.array([5_000.0]), "test")
    cpu = timing.CpuCosts(3.0, 0.5, 0.0, "test", fault_cpu_us_range=(1.0, 40.0))
    r = timing.simulate(req, DEV, comp, cpu)
    assert r.step_us[0] == central.step_us[0]  # the central prediction is the fault cost's own
    lo, hi = r.slowdown_range
    assert lo == pytest.approx((15_000.0 + 3 * (100.0 + 1.0 + 0.5)) / 15_000.0, rel=1e-12)
    assert hi == pytest.approx((15_000.0 + 3 * (100.0 + 40.0 + 0.5)) / 15_000.0, rel=1e-12)
    s = r.summary()
    assert s["slowdown_range"] == [lo, hi] and s["cpu_costs"]["fault_cpu_us_range"] == [1.0, 40.0]
    # without compute time there is no slowdown, and so no range
    none = timing.simulate(req, DEV, timing.ComputeTime(np.zeros(1), np.zeros(1), "none"), cpu)
    assert none.slowdown is None and none.slowdown_range is None


def test_a_measured_spread_of_the_write_cost_prices_the_stream_at_both_ends_with_the_faults():
    # one step of 15 ms compute: a 4-page write (no wait, written by reclaim: w us a page of CPU) and a fault
    # of 100 us read + f fault CPU + 0.5 reclaim. Ends: (f, w) = (1, 2) and (40, 10), the fault's low end with
    # the write's low end; the write's CPU is on the step's time like the fault's.
    req = timing.StreamRequests(
        step=np.zeros(2, np.int64), frac=np.array([0.0, 0.5]), op=np.array([1, 0], np.int8),
        nbytes=np.array([4 * 4096.0, 4096.0]), waits=np.array([False, True]), burst=np.arange(2), nsteps=1,
        first_step=0, page_bytes=4096, source="test")
    comp = timing.ComputeTime(np.array([10_000.0]), np.array([5_000.0]), "test")
    at = {}
    for f, w in ((1.0, 2.0), (40.0, 10.0), (3.0, 5.0)):
        at[f, w] = timing.simulate(req, DEV, comp, timing.CpuCosts(f, 0.5, w, "test")).slowdown
    cpu = timing.CpuCosts(3.0, 0.5, 5.0, "test", fault_cpu_us_range=(1.0, 40.0), write_cpu_us_range=(2.0, 10.0))
    r = timing.simulate(req, DEV, comp, cpu)
    assert r.slowdown == at[3.0, 5.0] and r.slowdown_range == (at[1.0, 2.0], at[40.0, 10.0])
    assert at[1.0, 2.0] < at[3.0, 5.0] < at[40.0, 10.0]
    # the write's spread alone: the fault cost stays at its value at both ends
    only = timing.simulate(req, DEV, comp, timing.CpuCosts(3.0, 0.5, 5.0, "test", write_cpu_us_range=(2.0, 10.0)))
    lo = timing.simulate(req, DEV, comp, timing.CpuCosts(3.0, 0.5, 2.0, "test")).slowdown
    hi = timing.simulate(req, DEV, comp, timing.CpuCosts(3.0, 0.5, 10.0, "test")).slowdown
    assert only.slowdown_range == (lo, hi) and lo < hi
    assert only.summary()["cpu_costs"]["write_cpu_us_range"] == [2.0, 10.0]


@pytest.mark.parametrize("spread", [(4.0, 5.0), (1.0, 2.0), (-1.0, 5.0)])
def test_a_spread_must_hold_the_fault_cost_and_its_bounds(spread):
    from swaptrace.errors import ConfigError

    with pytest.raises(ConfigError, match="fault"):
        timing.CpuCosts(3.0, 0.5, 0.0, fault_cpu_us_range=spread)


def test_host_costs_keep_their_spread_through_a_file(tmp_path):
    cpu = timing.CpuCosts(36.9, 0.29, 12.6, "measured", fault_cpu_us_range=(33.7, 51.4), write_cpu_us_range=(2.8, 12.6))
    back = timing.load_costs(timing.save_costs(cpu, tmp_path / "c.toml"))
    assert back.fault_cpu_us_range == (33.7, 51.4) and back.fault_cpu_us == 36.9
    assert back.write_cpu_us_range == (2.8, 12.6) and back.write_cpu_us == 12.6
    plain = timing.load_costs(timing.save_costs(timing.CpuCosts(2.0, 0.1, 0.0), tmp_path / "p.toml"))
    assert plain.fault_cpu_us_range is None and "fault_cpu_us_range" not in (tmp_path / "p.toml").read_text()
    assert plain.write_cpu_us_range is None and "write_cpu_us_range" not in (tmp_path / "p.toml").read_text()


@pytest.mark.parametrize("spread", [(13.0, 14.0), (-1.0, 13.0)])
def test_a_write_spread_must_hold_the_write_cost_and_its_bounds(spread):
    from swaptrace.errors import ConfigError

    with pytest.raises(ConfigError, match="write"):
        timing.CpuCosts(3.0, 0.5, 12.6, write_cpu_us_range=spread)
