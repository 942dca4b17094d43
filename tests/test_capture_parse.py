"""ftrace text -> swap I/O stream: recorded sample lines, edge cases, invariants (no root needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swaptrace.capture.convert import infer_causes, parse_lines, to_stream
from swaptrace.compare import stream_summary, summarize_requests
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
    open_trace,
)

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "ftrace_block_rq_issue.txt"  # recorded by `swaptrace capture --raw-trace` on Linux 6.18
EDGES = DATA / "ftrace_edge_cases.txt"


def _lines(path):
    return path.read_text().splitlines()


def test_recorded_sample_parses_completely():
    lines = _lines(SAMPLE)
    issues = [ln for ln in lines if "block_rq_issue:" in ln]
    parsed = parse_lines(lines, device=(7, 0))
    assert parsed.malformed == 0 and parsed.lost_events == 0 and parsed.flushes == 0
    assert parsed.requests == len(issues) == 210
    # every request field comes straight from its line: sector*512, bytes
    for line, off, length in zip(issues, parsed.offset, parsed.length, strict=True):
        fields = line.split("block_rq_issue:")[1].split()
        assert int(fields[4]) * 512 == off
        assert int(fields[2]) == length
        assert int(fields[6]) * 512 == length
    assert [w for _, w, _ in parsed.markers] == ["start", "step", "step", "step", "step", "end"]


def test_recorded_sample_stream():
    parsed = parse_lines(_lines(SAMPLE), device=(7, 0))
    s = to_stream(parsed)
    assert np.all(np.diff(s.t_us) >= 0) and s.t_us[0] >= 0 and s.before_start == 0
    assert np.all(np.diff(s.step.astype(np.int64)) >= 0)
    assert set(np.unique(s.step)) <= {0, 1, 2, 3}
    # writes in the sample all come from reclaim; reads are faults or unknown
    assert np.all(s.cause[s.op == OP_WRITE] == CAUSE_RECLAIM)
    assert set(np.unique(s.cause[s.op == OP_READ])) <= {CAUSE_FAULT, CAUSE_UNKNOWN, CAUSE_READAHEAD}
    assert int(np.count_nonzero(s.op == OP_READ)) == 145 and int(np.count_nonzero(s.op == OP_WRITE)) == 65
    assert s.duration_us > s.t_us[-1]


def test_edge_cases_are_counted_not_fatal():
    parsed = parse_lines(_lines(EDGES), device=(7, 3))
    assert parsed.malformed == 3  # truncated line, garbage, non-numeric bytes
    assert parsed.lost_events == 7  # "CPU:1 [LOST 7 EVENTS]"
    assert parsed.flushes == 1  # FF with 0 bytes
    assert parsed.other_events == 3  # other device, other event, foreign marker text
    assert parsed.requests == 6
    ops = parsed.op.tolist()
    assert ops.count(OP_DISCARD) == 1 and ops.count(OP_WRITE) == 2 and ops.count(OP_READ) == 3
    # tgid column, missing irq flags and the old format without ioprio all parse
    assert 902 in parsed.pid.tolist()
    assert 153600 in parsed.offset.tolist()


def test_edge_cases_stream_steps_and_causes():
    s = to_stream(parse_lines(_lines(EDGES), device=(7, 3)), first_step=5)
    assert s.step.tolist() == [5, 5, 5, 5, 6, 6]
    assert s.t_us.tolist() == [100.0, 200.0, 250.0, 300.0, 1500.0, 1600.0]  # exact integer-ns arithmetic
    assert s.duration_us == 2000.0
    assert s.cause.tolist() == [CAUSE_RECLAIM, CAUSE_READAHEAD, CAUSE_DISCARD, CAUSE_FAULT, CAUSE_FAULT, CAUSE_RECLAIM]


def test_device_filter_and_no_filter():
    lines = _lines(EDGES)
    assert parse_lines(lines).requests == 7  # the 8,0 request is kept without a filter
    assert parse_lines(lines, device=(7, 9)).requests == 0


def test_empty_and_markerless_input():
    s = to_stream(parse_lines([]), first_step=3)
    assert len(s.t_us) == 0 and s.duration_us == 0.0
    lines = [ln for ln in _lines(SAMPLE) if "tracing_mark_write" not in ln]
    s = to_stream(parse_lines(lines), first_step=7)
    assert np.all(s.step == 7) and s.t_us[0] == 0.0


def test_read_bursts():
    line = "python-1 [000] .....   10.{us:06d}: block_rq_issue: 7,0 R 4096 () {sec} + 8 be,0,4 [python]"
    lines = [line.format(us=0, sec=8), line.format(us=10, sec=800), line.format(us=500, sec=16)]
    causes = infer_causes(parse_lines(lines))
    assert causes.tolist() == [CAUSE_UNKNOWN, CAUSE_UNKNOWN, CAUSE_FAULT]


_RWBS = st.sampled_from(["R", "W", "WS", "RA", "RM", "D", "DS", "FF", "N", "WFS"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), _RWBS, st.integers(0, 256), st.integers(0, 2**40)), max_size=20),
       st.lists(st.text(max_size=60), max_size=5))
def test_generated_lines_round_trip(requests, junk):
    lines, expected = [], []
    for i, (us, rwbs, sectors, sector) in enumerate(sorted(requests)):
        nbytes = sectors * 512
        lines.append(f"  task-{i} [001] .....  {5 + us / 1e6:.6f}: block_rq_issue: 7,0 {rwbs} {nbytes} () "
                     f"{sector} + {sectors} be,0,4 [task]")
        has_data = any(c in rwbs for c in "RWD") and nbytes > 0
        if has_data:
            expected.append((sector * 512, nbytes))
    parsed = parse_lines(lines + [j.replace("\n", " ") for j in junk], device=(7, 0))
    assert list(zip(parsed.offset.tolist(), parsed.length.tolist(), strict=True)) == expected
    assert parsed.requests + parsed.flushes == len(lines)


def test_stream_file_summary(tmp_path):
    s = to_stream(parse_lines(_lines(SAMPLE), device=(7, 0)))
    out = tmp_path / "x.swapio.parquet"
    with TraceWriter(out, "swapio", {"source": "kernel", "page_bytes": 4096, "steps": 4, "first_step": 0}) as w:
        w.write(t_us=s.t_us, step=s.step, op=s.op, offset=s.offset, length=s.length, cause=s.cause)
    back = open_trace(out, kind="swapio").read_all()
    assert np.array_equal(back["cause"], s.cause) and np.array_equal(back["offset"], s.offset)
    summary = stream_summary(out)
    direct = summarize_requests(s.op, s.length, 4096)
    for key in ("pages_in", "pages_out", "bytes_read", "bytes_written", "requests", "request_size_hist"):
        assert summary[key] == direct[key]
    assert summary["pages_in"] + summary["pages_out"] == int(s.length.sum()) // 4096


@pytest.mark.parametrize("text", ["", "#", "   ", "CPU:0 [LOST 3 EVENTS]", "##### CPU 0 buffer started ####"])
def test_noise_lines_are_not_malformed(text):
    p = parse_lines([text])
    assert p.malformed == 0 and p.requests == 0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.booleans()), max_size=60), st.sampled_from([4096, 8192, 16384]))
def test_replay_kernel_matches_naive(accesses, page_bytes):
    from naive_capture import naive_replay

    from swaptrace.kernels.capture.replay import replay_codes

    codes = np.array([(p << 1) | int(w) for p, w in accesses], dtype=np.int64)
    mem = np.zeros(8 * page_bytes, dtype=np.uint8)
    ref = bytearray(8 * page_bytes)
    got = replay_codes(mem, codes, page_bytes, 4096)
    want = naive_replay(ref, codes, page_bytes, 4096)
    assert int(got) == want and bytes(mem) == bytes(ref)


def test_block_stat_line_gives_counts_and_latencies():
    from swaptrace.capture.swapdev import parse_block_stat

    # a loop device after a capture (17 fields since Linux 5.5: discard and flush counters added)
    line = "    6758        0    82232     681     1103        0   237048    4214        0     1900     4895     0 0 0 0 0 0\n"
    s = parse_block_stat(line)
    assert (s["read_ios"], s["read_sectors"], s["read_ms"]) == (6758, 82232, 681)
    assert (s["write_ios"], s["write_sectors"], s["write_ms"]) == (1103, 237048, 4214)
    assert s["busy_ms"] == 1900 and s["discard_ios"] == 0
    old = parse_block_stat(" ".join(line.split()[:11]))  # before 4.18: no discard fields
    assert old["discard_ios"] == 0 and old["write_ms"] == 4214
    with pytest.raises(ValueError, match="at least 11 fields"):
        parse_block_stat("1 2 3")
