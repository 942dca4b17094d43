"""research/step_writes.py: each step's writes by size and by old or new offsets, worked out by hand."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from research_scripts import load

step_writes = load("step_writes")


def _stream(path, rows):
    step, op, off, n = zip(*rows, strict=True)
    pq.write_table(pa.table({"step": list(step), "op": list(op), "offset": [o * 4096 for o in off],
                             "length": [k * 4096 for k in n]}), path)
    return path


def test_pages_are_counted_old_once_an_earlier_write_covered_them(tmp_path):
    # step 0: 4 pages at 10..13 (new), a read (ignored), 1 page at 20 (new)
    # step 1: 1 page at 11 (old), 3 pages at 12..14 (12, 13 old; 14 new), 1 page at 14 (old: the request before)
    s = _stream(tmp_path / "s.parquet", [(0, "write", 10, 4), (0, "read", 30, 2), (0, "write", 20, 1),
                                         (1, "write", 11, 1), (1, "write", 12, 3), (1, "write", 14, 1)])
    got = step_writes.step_writes(s)
    assert got == {0: {"single_old": 0, "single_new": 1, "multi_old": 0, "multi_new": 4},
                   1: {"single_old": 2, "single_new": 0, "multi_old": 2, "multi_new": 1}}
    assert "| 1 | 2 / 2 | 0 / 0 | 2 / 2 | 1 / 1 |" in step_writes.table(got, got)


def test_a_missing_file_is_one_line_and_exit_2(tmp_path, capsys):
    assert step_writes.main([str(tmp_path / "k.parquet"), str(tmp_path / "e.parquet")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err
