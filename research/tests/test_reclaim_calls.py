"""research/reclaim_calls.py: the kernel's reclaim calls from a raw capture trace (sample lines; no root)."""

from __future__ import annotations

import sys
from pathlib import Path

from research_scripts import load

sys.path.insert(0, str(Path(__file__).parents[2] / "tests"))  # the raw-trace sample of the capture tests
from test_capture_reclaim import BLOCK, trace_lines  # noqa: E402

reclaim_calls = load("reclaim_calls")


def _lines():
    """The reclaim sample with a second write request, issued between two calls (it counts for none)."""
    lines = trace_lines()
    return [*lines[:12], BLOCK.format(t="100.500000"), *lines[12:]]


def test_rows_time_each_call_and_count_the_writes_issued_during_it():
    rows = reclaim_calls.call_rows(_lines())
    assert [(r["call"], r["step"], r["min_priority"], r["scanned"], r["kept"], r["activated"], r["freed"],
             r["deactivated"], r["written"]) for r in rows] == [
        (0, 0, 10, 66, 10, 5, 32, 5, 32),  # its 128 KiB write, issued at 100.200005
        (1, 1, 12, 40, 8, 0, 32, 0, 0),
        (2, 1, 8, 32, 0, 30, 2, 16, 0)]
    assert rows[0]["gap_us"] is None and rows[1]["gap_us"] == 900_000 - 6 and rows[2]["gap_us"] == 100_000 - 2
    assert [r["duration_us"] for r in rows] == [6, 2, 3]
    assert rows[0]["start_ms"] == 200  # after the start marker at 100.000000


def test_markdown_filters_calls_and_totals_the_steps_shown():
    rows = reclaim_calls.call_rows(_lines())
    text = reclaim_calls.markdown(rows, steps=[1], min_scanned=35)
    assert "| 1 | 1 | 1100.0 | 899994 | 2 | 12 | 40 | 8 | 0 | 32 | 0 | 0 |" in text
    starts = [line[:10] for line in text.splitlines()]
    assert "| 2 | 1 | " not in starts and "| 0 | 0 | " not in starts  # scanned 32 < 35; step 0 not asked for
    assert "| 1 | 2 | 72 | 8 | 30 | 34 | 0 | 3 | 0 |" in text.splitlines()  # step 1: both calls in the totals
    assert not any(line.startswith("| 0 | 1 | 66 |") for line in text.splitlines())


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert reclaim_calls.main([str(tmp_path / "missing.txt")]) == 2
    assert capsys.readouterr().err.startswith("reclaim_calls.py: cannot read ")
    empty = tmp_path / "blocks-only.txt"
    empty.write_text(BLOCK.format(t="1.000000") + "\n")
    assert reclaim_calls.main([str(empty)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no memory-cgroup reclaim call" in err
    good = tmp_path / "trace.txt"
    good.write_text("\n".join(_lines()) + "\n")
    assert reclaim_calls.main([str(good), "--min-scanned", "-1"]) == 2
    assert reclaim_calls.main([str(good), "--steps", "0"]) == 0
    assert "| 0 | 0 | 200.0 | – | 6 | 10 | 66 | 10 | 5 | 32 | 5 | 32 |" in capsys.readouterr().out


def test_compressed_traces_read_as_plain_ones(tmp_path):
    import lzma

    plain, packed = tmp_path / "t.txt", tmp_path / "t.txt.xz"
    plain.write_text("\n".join(_lines()) + "\n")
    with lzma.open(packed, "wt") as fh:
        fh.write("\n".join(_lines()) + "\n")
    assert reclaim_calls.read_lines(packed) == reclaim_calls.read_lines(plain) == _lines()
    bad = tmp_path / "bad.txt.xz"
    bad.write_bytes(b"not xz")
    assert reclaim_calls.main([str(bad)]) == 2
