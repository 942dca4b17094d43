"""analysis/steps_real.py: pages per step of a swap I/O stream, against a count by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from swaptrace.core.traceio import TraceWriter

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "analysis")]

import steps_real  # noqa: E402  (analysis/ is not a package)


def test_pages_per_step_counts_each_op_in_its_step(tmp_path):
    # step 0: a 2-page read and a 1-page write; step 2: a 3-page write and a 1-page read; step 1: nothing
    path = tmp_path / "s.swapio.parquet"
    with TraceWriter(path, "swapio", {"source": "emulator", "page_bytes": 4096}) as w:
        w.write(t_us=np.array([0.0, 1.0, 2.0, 3.0]), step=np.array([0, 0, 2, 2], np.uint32),
                op=np.array([0, 1, 1, 0], np.int8), offset=np.array([0, 8192, 16384, 4096], np.uint64),
                length=np.array([8192, 4096, 12288, 4096], np.uint32), cause=np.array([0, 2, 2, 0], np.int8))
    read, written = steps_real.pages_per_step(path)
    assert read.tolist() == [2, 0, 1]
    assert written.tolist() == [1, 0, 3]
