"""analysis/calibrate.py's table helpers: the step-after-fill split, the band's smoothed error and target count."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from swaptrace.core.traceio import OP_READ, OP_WRITE, TraceWriter

_SPEC = importlib.util.spec_from_file_location("calibrate", Path(__file__).parents[1] / "analysis" / "calibrate.py")
calibrate = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(calibrate)


def _stream(path, rows, n_steps):
    """A swap I/O stream from ``(step, op, pages)`` rows."""
    steps, ops, pages = (np.asarray(c) for c in zip(*rows, strict=True))
    n = len(rows)
    with TraceWriter(path, "swapio", {"source": "kernel", "page_bytes": 4096, "first_step": 0, "steps": n_steps}) as w:
        w.write(t_us=np.arange(n, dtype=np.float64), step=steps.astype(np.uint32), op=ops.astype(np.int8),
                offset=np.arange(n, dtype=np.uint64) * 4096 * 64, length=(pages * 4096).astype(np.uint32),
                cause=np.zeros(n, np.int8))
    return path


def test_fill_split(tmp_path):
    # steps 0-1 only fault pages in; step 2 is the first to write (memory full); step 3 reads 7 + 2 pages
    p = _stream(tmp_path / "s.swapio.parquet",
                [(2, OP_WRITE, 5), (3, OP_READ, 7), (3, OP_WRITE, 3), (3, OP_READ, 2), (4, OP_READ, 4),
                 (4, OP_WRITE, 1)], n_steps=5)
    assert calibrate.fill_split(p) == {"fill_step": 2, "after_fill": 9, "rest": 4}
    # cut at a given step (another stream's fill): the step after it is 2, which reads nothing
    assert calibrate.fill_split(p, fill=1) == {"fill_step": 1, "after_fill": 0, "rest": 13}
    # a fill in the last step has no step after it
    assert calibrate.fill_split(p, fill=4)["after_fill"] == 0


def test_fill_markdown_sorts_runs():
    md = calibrate.fill_markdown([{"preset": "demo", "fraction": 0.175, "memory_bytes": 131 << 20, "fill_step": 7,
                                   "kernel_after_fill": [5189, 3396, 4911], "kernel_rest": [10339, 8505, 9230],
                                   "emulator_after_fill": 2611, "emulator_rest": 8228}])
    assert "| 8 | 3396, 4911, 5189 | 2611 | 8505, 9230, 10339 | 8228 |" in md
    assert calibrate.fill_markdown([]) == ""


def test_smoothed_error_and_target():
    # medians 20 and 25: the band says -20 % although two budgets are exact
    assert calibrate.smoothed_error([10, 20, 30, 25, 5], [10, 25, 40, 25, 5]) == pytest.approx(20 / 25 - 1)
    assert calibrate.within_target([0.15, -0.15, 0.1500001, -0.2, 0.0]) == 3
    assert calibrate.within_target([]) == 0
