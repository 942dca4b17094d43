"""research/startup_calls.py: the twin's start-up reclaim calls, counted call by call."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from research_scripts import load

sys.path.insert(0, str(Path(__file__).parents[2] / "tests"))
from naive_emulate import write_access_trace  # noqa: E402

startup_calls = load("startup_calls")


def _trace(tmp_path):
    """Start-up stores to 3,000 fresh pages, then loads of the first 500 (read back), one step after it."""
    pages = np.r_[np.arange(3000), np.arange(500), np.arange(10)]
    writes = np.r_[np.ones(3000, bool), np.zeros(510, bool)]
    steps = np.r_[np.zeros(3500, np.int64), np.ones(10, np.int64)]
    return write_access_trace(tmp_path / "s.access.parquet", pages, writes, steps, 3000)


def test_the_calls_written_pages_add_up_to_the_products_start_up_writes(tmp_path):
    """Each call's written pages, summed, are the pages the product's emulator writes in step 0 (the numba
    kernel, not the twin the script runs); every call scans at least what it writes."""
    from swaptrace import emulate_trace
    trace = _trace(tmp_path)
    calls = startup_calls.emulator_calls(trace, 1000 * 4096, 1, 4 * 3000 * 4096, 10_000)
    res = emulate_trace(trace, tmp_path / "s.swapio.parquet", memory_bytes=1000 * 4096, write_cost=1,
                  swap_bytes=4 * 3000 * 4096)
    import pyarrow.parquet as pq
    t = pq.read_table(res.path, columns=["step", "op", "length"])
    step0 = (t["step"].to_numpy() == 0) & (np.asarray(t["op"].to_pylist()) == "write")
    assert sum(w for _, w in calls) == int(t["length"].to_numpy()[step0].sum()) // 4096 > 0
    assert all(s >= w for s, w in calls) and len(calls) > 1


def test_a_missing_file_is_one_line_and_exit_2(tmp_path, capsys):
    assert startup_calls.main([str(tmp_path / "none.parquet"), "--memory", "4096"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err
