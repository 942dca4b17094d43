"""The time model's inputs: the stream reader's two branches (emulator and captured kernel), a capture's
baseline (``baseline_compute``) and the measured compute time (``measure_compute``), the denominator of
every slowdown. Expected values are worked by hand from docs/timing.md, not taken from the code."""

from __future__ import annotations

import numpy as np
import pytest

from swaptrace.core.traceio import (
    CAUSE_DISCARD,
    CAUSE_FAULT,
    CAUSE_READAHEAD,
    CAUSE_RECLAIM,
    CAUSE_UNKNOWN,
    OP_DISCARD,
    OP_READ,
    OP_WRITE,
    TraceWriter,
)
from swaptrace.errors import ConfigError, TraceFileError
from swaptrace.timing import model as timing

R, W, D = OP_READ, OP_WRITE, OP_DISCARD
F, RA, RC, U, DC = CAUSE_FAULT, CAUSE_READAHEAD, CAUSE_RECLAIM, CAUSE_UNKNOWN, CAUSE_DISCARD


def _stream(path, rows, meta):
    t, step, op, length, cause = (np.array(c) for c in zip(*rows, strict=True))
    n = len(rows)
    with TraceWriter(path, "swapio", {"page_bytes": 4096, "first_step": 0, **meta}) as w:
        w.write(t_us=t.astype(np.float64), step=step.astype(np.uint32), op=op.astype(np.int8),
                offset=np.arange(n, dtype=np.uint64) * 4096, length=length.astype(np.uint32),
                cause=cause.astype(np.int8))
    return path


# (t_us, step, op, length, cause); a kernel capture's t_us is wall time, in us
KERNEL_ROWS = [
    (1000.0, 0, R, 4096, U),     # burst 0: two reads 10 us apart (< 50 us: one burst, docs/timing.md)
    (1010.0, 0, R, 8192, RA),    # readahead: not waited for
    (1100.0, 0, W, 4096, RC),    # burst 1: op changes
    (1120.0, 0, W, 4096, RC),    # 20 us later: same burst
    (1121.0, 0, D, 4096, DC),    # discards are dropped before anything else
    (1200.0, 0, W, 4096, RC),    # 80 us after the last write: a new burst (2)
    (5000.0, 1, R, 4096, F),     # burst 3: next step
    (5030.0, 1, R, 4096, F),     # 30 us: same burst
    (5031.0, 1, R, 4096, RA),
]


def test_captured_kernel_stream_places_requests_by_rank_and_splits_bursts_by_gap(tmp_path):
    req = timing.read_stream(_stream(tmp_path / "k.swapio.parquet", KERNEL_ROWS, {"source": "kernel", "steps": 2}))
    assert req.source == "kernel" and req.nsteps == 2
    assert req.step.tolist() == [0, 0, 0, 0, 0, 1, 1, 1]  # the discard is gone
    # rank in the step over the step's (kept) requests: step 0 has 5, step 1 has 3
    np.testing.assert_allclose(req.frac, [0 / 5, 1 / 5, 2 / 5, 3 / 5, 4 / 5, 0 / 3, 1 / 3, 2 / 3])
    assert req.burst.tolist() == [0, 0, 1, 1, 2, 3, 3, 3]
    # the process waits for fault reads and, in a capture, for reads of unknown cause
    assert req.waits.tolist() == [True, False, False, False, False, True, True, False]
    assert req.nbytes.tolist() == [4096, 8192, 4096, 4096, 4096, 4096, 4096, 4096]


def test_emulator_stream_places_requests_by_time_over_step_us(tmp_path):
    rows = [(250.0, 0, R, 4096, F), (250.0, 0, R, 4096, RA), (900.0, 0, R, 4096, F), (1500.0, 1, W, 4096, RC),
            (1500.0, 1, W, 4096, RC)]
    req = timing.read_stream(_stream(tmp_path / "e.swapio.parquet", rows,
                                     {"source": "emulator", "steps": 2, "params": {"step_us": 1000.0}}))
    np.testing.assert_allclose(req.frac, [0.25, 0.25, 0.9, 0.5, 0.5])
    # emulated bursts share one t_us exactly: any gap starts a new one
    assert req.burst.tolist() == [0, 0, 1, 2, 2]
    assert req.waits.tolist() == [True, False, True, False, False]


def test_the_same_rows_read_as_emulator_output_are_not_split_by_the_kernel_gap(tmp_path):
    # the 50 us rule is the capture's alone: as an emulator stream the first two reads are two bursts
    req = timing.read_stream(_stream(tmp_path / "e.swapio.parquet", KERNEL_ROWS[:2],
                                     {"source": "emulator", "steps": 1, "params": {"step_us": 2000.0}}))
    assert req.burst.tolist() == [0, 1]
    # a read of unknown cause may be the fault's (only captures write that cause): waited for whatever the source
    assert req.waits.tolist() == [True, False]


def test_stream_out_of_step_order_is_refused(tmp_path):
    rows = [(0.0, 1, R, 4096, F), (1.0, 0, R, 4096, F)]
    with pytest.raises(TraceFileError, match="step order"):
        timing.read_stream(_stream(tmp_path / "o.swapio.parquet", rows, {"source": "kernel", "steps": 2}))


def _capture_with_baseline(path, unlimited, steps=3):
    meta = {"source": "kernel", "steps": steps}
    if unlimited is not None:
        meta["kernel"] = {"unlimited": unlimited}
    return _stream(path, [(0.0, 0, R, 4096, F)], meta)


def test_baseline_compute_reads_the_captures_unlimited_run(tmp_path):
    path = _capture_with_baseline(tmp_path / "c.swapio.parquet",
                                  {"replay_us": [100.0, 200.0, 300.0], "compute_us": [10.0, 20.0, 30.0]})
    comp = timing.baseline_compute(path, 3)
    assert comp.access_us.tolist() == [100.0, 200.0, 300.0]
    assert comp.dense_us.tolist() == [10.0, 20.0, 30.0]
    assert str(path) in comp.source


def test_baseline_compute_refuses_a_capture_without_one_or_of_another_length(tmp_path):
    with pytest.raises(TraceFileError, match="baseline"):
        timing.baseline_compute(_capture_with_baseline(tmp_path / "a.swapio.parquet", None), 3)
    with pytest.raises(TraceFileError, match="baseline"):
        timing.baseline_compute(_capture_with_baseline(tmp_path / "b.swapio.parquet", {"replay_us": [1.0] * 3}), 3)
    with pytest.raises(ConfigError, match="2 steps, the stream 3"):
        timing.baseline_compute(_capture_with_baseline(tmp_path / "c.swapio.parquet",
                                                       {"replay_us": [1.0, 2.0], "compute_us": [0.0, 0.0]}), 3)


def _access_trace(path, counts, footprint=4096, spec=None):
    """Step k touches counts[k] pages (a store each), spread over the footprint."""
    steps = np.repeat(np.arange(len(counts)), counts)
    pages = (np.arange(steps.size) * 2654435761) % footprint
    meta = {"page_bytes": 4096, "footprint_pages": footprint, "footprint_bytes": footprint * 4096,
            "regions": [{"name": "t", "kind": "table", "first_page": 0, "pages": footprint}],
            "first_step": 0, "steps": len(counts)}
    if spec:
        meta["spec"] = spec
    with TraceWriter(path, "access", meta) as w:
        w.write(step=steps.astype(np.uint32), page=pages.astype(np.uint64), write=np.ones(steps.size, bool),
                region=np.zeros(steps.size, np.uint16))
    return path


@pytest.mark.parametrize("in_process", [True, False])
def test_measure_compute_times_each_step_by_its_accesses(tmp_path, monkeypatch, in_process):
    # alternating heavy (400 k touches) and light (400) steps: a touch costs ~1-10 ns, so a heavy step takes
    # ~0.4-4 ms and a light one ~4 us plus timer overhead; the medians of three are compared at a factor 5,
    # which leaves room for one preempted light step on a shared machine (a median of three ignores it)
    counts = [400_000, 400, 400_000, 400, 400_000, 400]
    if in_process:
        for v in timing._ONE_THREAD:
            monkeypatch.setenv(v, "1")
    else:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    comp = timing.measure_compute(_access_trace(tmp_path / "a.access.parquet", counts))
    assert comp.access_us.shape == (6,) and comp.dense_us.shape == (6,)
    assert np.all(comp.access_us > 0)
    # no MLP in the trace's spec: the dense time is two clock reads apart (~1 us; 50 us allows a preemption in one)
    assert np.median(comp.dense_us) < 50
    heavy, light = np.median(comp.access_us[0::2]), np.median(comp.access_us[1::2])
    assert heavy > 5 * light, comp.access_us


def test_measure_compute_runs_the_specs_mlp_after_each_step(tmp_path, monkeypatch):
    for v in timing._ONE_THREAD:
        monkeypatch.setenv(v, "1")
    spec = {"bottom_mlp": [13, 256, 64], "top_mlp": [64, 256, 1], "batch_size": 256}
    comp = timing.measure_compute(_access_trace(tmp_path / "m.access.parquet", [100, 100, 100], spec=spec), 2)
    assert comp.access_us.shape == (2,)  # nsteps cuts the trace's steps
    assert np.all(comp.dense_us > 0)
    assert "MLP" in comp.source


def test_slowdown_denominator_is_the_compute_time(tmp_path):
    # one fault of 4 KiB at depth 1 (table: 100 us) in a step of given compute 1000 us: 1100 / 1000
    dev = timing.DeviceTiming("t", "test", (4096,), (1,), ((100.0,),), ((50.0,),))
    path = _stream(tmp_path / "s.swapio.parquet", [(0.0, 0, R, 4096, F)], {"source": "kernel", "steps": 1})
    res = timing.predict(path, dev, step_compute_us=1000.0, cpu=timing.CpuCosts(0.0, 0.0, 0.0))
    assert res.compute_us.tolist() == [1000.0]
    assert res.slowdown == pytest.approx(1100.0 / 1000.0)
