"""``swaptrace export STREAM --format mqsim``: MQSim's ASCII trace, line by line against the stream."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import run_cli, the_error
from test_ssd_cli import write_stream

from swaptrace.core import traceio
from swaptrace.workload.export import export_mqsim


def read_mqsim(path):
    rows = [line.split(" ") for line in path.read_text().splitlines()]
    assert all(len(r) == 5 for r in rows)  # MQSim's ASCIIItemsPerLine
    return np.array(rows, dtype=np.int64)


def test_lines_match_the_stream(tmp_path):
    stream = write_stream(tmp_path / "s.parquet", n=3000, seed=4)
    path, counts = export_mqsim(stream, tmp_path / "s.trace", swap_offset_bytes=1 << 20)
    data = traceio.open_trace(stream, "swapio").read_all()
    keep = data["op"] != traceio.OP_DISCARD
    rows = read_mqsim(path)
    assert len(rows) == keep.sum() == counts["requests"]
    assert counts["discards_dropped"] == (~keep).sum() > 0
    t, dev, lba, n, kind = rows.T
    assert np.array_equal(t, np.round(data["t_us"][keep] * 1000).astype(np.int64))
    assert np.all(np.diff(t) >= 0) and np.all(dev == 0)
    assert np.array_equal(lba * 512, data["offset"][keep].astype(np.int64) + (1 << 20))
    assert np.array_equal(n * 512, data["length"][keep].astype(np.int64))
    want = np.where(data["op"][keep] == traceio.OP_WRITE, 0, 1)  # MQSim: 0 = write, 1 = read
    assert np.array_equal(kind, want)
    assert counts["writes"] == (kind == 0).sum() and counts["reads"] == (kind == 1).sum()


def test_cli_and_errors(tmp_path):
    stream = write_stream(tmp_path / "s.parquet", n=500)
    out = tmp_path / "s.trace"
    r = run_cli("export", stream, "--format", "mqsim", "-o", out, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["requests"] == len(read_mqsim(out))
    assert "exists" in the_error(run_cli("export", stream, "--format", "mqsim", "-o", out)).lower()
    bad = tmp_path / "bad.trace"
    the_error(run_cli("export", stream, "--format", "mqsim", "-o", bad, "--swap-offset", "100"))
    assert not bad.exists()


@pytest.mark.parametrize("t_us", [[5.0, 3.0, 7.0]])
def test_arrival_times_never_go_back(tmp_path, t_us):
    from swaptrace.workload.export import mqsim_lines

    table, last = mqsim_lines(np.array(t_us), np.array([1, 0, 1], dtype=np.int8), np.array([0, 4096, 8192]),
                              np.array([4096, 4096, 4096]))
    assert table.column("t").to_pylist() == [5000, 5000, 7000] and last == 7000
