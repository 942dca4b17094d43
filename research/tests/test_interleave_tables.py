"""research/interleave.py: pages in over the shared steps, the per-run facts of a kernel stream, the tables."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from research_scripts import load

from swaptrace.compare import stream_profile
from swaptrace.core.traceio import OP_READ, OP_WRITE, TraceWriter

_DIR = Path(__file__).parents[1]  # research/
sys.path[:0] = [str(_DIR), str(_DIR.parent / "analysis")]  # interleave imports analysis/calibrate.py
interleave = load("interleave")


def _stream(path, rows, n_steps, kernel=None):
    """A swap I/O stream from ``(step, op, pages)`` rows; ``kernel`` becomes its ``kernel`` metadata."""
    steps, ops, pages = (np.asarray(c) for c in zip(*rows, strict=True))
    n = len(rows)
    meta = {"source": "kernel", "page_bytes": 4096, "first_step": 0, "steps": n_steps}
    if kernel is not None:
        meta["kernel"] = kernel
    with TraceWriter(path, "swapio", meta) as w:
        w.write(t_us=np.arange(n, dtype=np.float64), step=steps.astype(np.uint32), op=ops.astype(np.int8),
                offset=np.arange(n, dtype=np.uint64) * 4096 * 64, length=(pages * 4096).astype(np.uint32),
                cause=np.zeros(n, np.int8))
    return path


ROWS = [(1, OP_WRITE, 4), (2, OP_READ, 6), (2, OP_WRITE, 2), (3, OP_READ, 5), (5, OP_READ, 100)]


def test_shared_steps_stop_at_the_shorter_trace(tmp_path):
    p = stream_profile(_stream(tmp_path / "s.swapio.parquet", ROWS, n_steps=6))
    assert interleave.shared_steps_pages_in(p, 4) == 11  # steps 0-3: the 100 pages of step 5 are not shared
    assert interleave.shared_steps_pages_in(p, 6) == 111


def test_run_facts_of_a_kernel_stream(tmp_path):
    kernel = {"step_lists": {"step": list(range(6)), "active_anon_pages": [0, 0, 7, 9, 9, 9],
                             "inactive_anon_pages": [5] * 6},
              "loop_stat_delta": {"write_ios": 4, "write_ms": 10, "read_ios": 3}, "loadavg_start": 0.5}
    p = _stream(tmp_path / "k.swapio.parquet", ROWS, n_steps=6, kernel=kernel)
    f = interleave.run_facts(p, 4)
    # memory fills in step 1 (its first write); step 2 reads 6 pages and ends with 7 pages active
    assert f == {"pages_in_shared": 11, "fill_step": 1, "after_fill": 6, "active_after_fill": 7,
                 "write_ms_per_request": 2.5, "loadavg_start": 0.5}
    # an emulator's stream has no kernel facts; a capture from before the device's times were kept has no latency
    e = _stream(tmp_path / "e.swapio.parquet", ROWS, n_steps=6)
    assert set(interleave.run_facts(e, 4)) == {"pages_in_shared", "fill_step", "after_fill"}
    old = _stream(tmp_path / "o.swapio.parquet", ROWS, n_steps=6, kernel={"loop_stat_delta": {"write_ios": 4}})
    assert interleave.run_facts(old, 4)["write_ms_per_request"] is None


def test_markdown_summarises_each_length():
    runs = [{"round": 0, "steps": 20, "pages_in_shared": 100, "fill_step": 9, "after_fill": 40, "active_after_fill": 3,
             "write_ms_per_request": 4.26, "loadavg_start": 0.3},
            {"round": 0, "steps": 60, "pages_in_shared": 90, "fill_step": 9, "after_fill": 30, "active_after_fill": None,
             "write_ms_per_request": None, "loadavg_start": None},
            {"round": 1, "steps": 20, "pages_in_shared": 120, "fill_step": 9, "after_fill": 50},
            {"round": 1, "steps": 60, "pages_in_shared": 80, "fill_step": 9, "after_fill": 20}]
    emulator = {"20": {"pages_in_shared": 70, "after_fill": 10}, "60": {"pages_in_shared": 70, "after_fill": 10}}
    md = interleave.markdown(runs, emulator, "demo", 0.2, 150 << 20, 20)
    assert "| 0 | 20 | 100 | 40 (10) | 3 | 4.3 | 0.30 |" in md
    assert "| 0 | 60 | 90 | 30 (10) | - | - | - |" in md
    assert "| 20 | 110 (100 … 120) | 45 (40 … 50) | 70 | 10 |" in md
    assert "| 60 | 85 (80 … 90) | 25 (20 … 30) | 70 | 10 |" in md
