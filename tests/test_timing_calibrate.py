"""The fault- and write-overhead micro-benchmarks: their synthetic workloads, and (root) small runs under the kernel."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require_root

from swaptrace import timing
from swaptrace.timing_calibrate import measure_fault_overhead, measure_write_overhead, synthetic_trace
from swaptrace.traceio import open_trace


def test_synthetic_trace_is_uniform_and_seeded(tmp_path):
    a = open_trace(synthetic_trace(tmp_path / "a.access.parquet", pages=1000, steps=4, touches=5000, seed=3), "access")
    b = open_trace(synthetic_trace(tmp_path / "b.access.parquet", pages=1000, steps=4, touches=5000, seed=3), "access")
    ca, cb = a.read_all(), b.read_all()
    assert np.array_equal(ca["page"], cb["page"]) and a.meta["footprint_pages"] == 1000
    assert np.bincount(ca["step"]).tolist() == [5000] * 4
    assert ca["write"].mean() == 0.5
    # uniform: every tenth of the footprint gets 10 % of the touches, within 5 sigma of a binomial
    counts = np.bincount(ca["page"].astype(np.int64) // 100, minlength=10)
    sigma = np.sqrt(20000 * 0.1 * 0.9)
    assert np.all(np.abs(counts - 2000) < 5 * sigma)


def test_write_only_trace_stores_to_every_page_once(tmp_path):
    tf = open_trace(synthetic_trace(tmp_path / "w.access.parquet", pages=1000, steps=3, seed=1, writes_only=True),
                    "access")
    cols = tf.read_all()
    assert sorted(cols["page"].tolist()) == list(range(1000))  # each page once: nothing can fault back in
    assert cols["write"].all()
    assert np.bincount(cols["step"]).tolist() == [333, 333, 334]
    assert not np.array_equal(cols["page"], np.arange(1000))  # in random order, not address order


@pytest.mark.privileged
@pytest.mark.slow
def test_write_overhead_under_the_kernel(tmp_path):
    require_root()
    dev = timing.DeviceTiming("t", "test", (4096,), (1,), ((50.0,),), ((50.0,),))
    r = measure_write_overhead(dev, pages=4096, steps=4, fraction=0.25, cpu=timing.CpuCosts(0.0, 0.0, 0.0))
    assert r.details["major_faults"] == 0  # nothing is touched twice
    assert r.pages_out >= 4096 * 0.6  # three quarters of the pages must leave (less what the budget's slack keeps)
    assert r.overhead_us * r.pages_out + r.modelled_us == pytest.approx(max(r.measured_us, r.modelled_us), rel=1e-9)


@pytest.mark.privileged
@pytest.mark.slow
def test_fault_overhead_under_the_kernel(tmp_path):
    require_root()
    dev = timing.DeviceTiming("t", "test", (4096,), (1,), ((50.0,),), ((50.0,),))
    r = measure_fault_overhead(dev, pages=2048, steps=3, touches=1500, fraction=0.25,
                               cpu=timing.CpuCosts(0.0, 0.0, 0.0))
    assert r.major_faults > 500  # a quarter of the pages fit: most touches of swapped pages fault
    assert r.overhead_us >= 0.0 and r.measured_us > 0.0
    # what the model does not explain plus what it does is what was measured (or the model explains more)
    assert r.overhead_us * r.major_faults + r.modelled_us == pytest.approx(max(r.measured_us, r.modelled_us), rel=1e-9)


@pytest.mark.privileged
@pytest.mark.slow
def test_host_costs_measure_writes_then_faults(tmp_path):
    from swaptrace.timing_calibrate import measure_host_costs

    require_root()
    dev = timing.DeviceTiming("t", "test", (4096,), (1,), ((50.0,),), ((50.0,),))
    given = timing.CpuCosts(0.0, 0.25, 7.0, "given")
    kept = measure_host_costs(dev, given, measure_write=False)
    assert kept.write_cpu_us == 7.0 and kept.reclaim_cpu_us == 0.25  # only the fault overhead is measured
    assert kept.source.startswith("fault overhead: synthetic capture") and "write overhead" not in kept.source
    both = measure_host_costs(dev, given)
    assert both.write_cpu_us > 0.0 and both.reclaim_cpu_us == 0.25
    assert "write overhead: synthetic capture" in both.source
