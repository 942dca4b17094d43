"""iolog writing, reading, remapping and import (fio v2/v3)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from click.testing import CliRunner
from fio_helpers import make_stream, per_io_log, write_stream
from hypothesis import example, given, settings
from hypothesis import strategies as st

from swaptrace.cli import cli
from swaptrace.core import traceio
from swaptrace.errors import ConfigError, TraceFileError
from swaptrace.fio import iolog


def _expected(stream_path, remap):
    """(op, offset, length) of the stream's read/write requests after the documented remapping."""
    data = traceio.open_trace(stream_path, "swapio").read_all()
    keep = data["op"] != traceio.OP_DISCARD
    off, ln = remap.apply(data["offset"][keep], data["length"][keep])
    return data["op"][keep], off, ln


@settings(max_examples=60, deadline=None)
@example(reqs=[(2486272, 1)], target=2486273)  # found by hypothesis: the stream ends within the target, its page does not
@given(
    st.lists(st.tuples(st.integers(0, 1 << 34), st.integers(1, 1 << 20)), min_size=1, max_size=40),
    st.integers(1 << 21, 1 << 32),
)
def test_remap_stays_inside_and_aligned(reqs, target):
    off = np.array([r[0] for r in reqs], dtype=np.uint64)
    ln = np.array([r[1] for r in reqs], dtype=np.uint32)
    remap = iolog.plan_remap(int((off + ln).max()), int(ln.max()), target)
    o, n = remap.apply(off, ln)
    assert (o % 4096 == 0).all() and (n % 4096 == 0).all()
    assert (n >= ln).all() and (n - ln < 4096).all()
    assert (o + n <= target).all()
    if not remap.wrap:
        assert (o == off // 4096 * 4096).all()


def test_remap_identity_when_it_fits():
    remap = iolog.plan_remap(8192, 4096, 1 << 20)
    o, n = remap.apply(np.array([0, 4096], np.uint64), np.array([4096, 4096], np.uint32))
    assert not remap.wrap and o.tolist() == [0, 4096] and n.tolist() == [4096, 4096]


def test_remap_refuses_target_smaller_than_requests():
    with pytest.raises(ConfigError, match="too small"):
        iolog.plan_remap(1 << 30, 1 << 20, 1 << 20)


def test_v2_write_then_read_round_trips(tmp_path):
    s = make_stream(tmp_path / "s.parquet", n=300, device_bytes=64 << 20)
    remap = iolog.plan_remap(64 << 20, 8 << 12, 16 << 20)  # forces wrapping
    assert remap.wrap
    info = iolog.write_iolog_v2(traceio.open_trace(s, "swapio"), tmp_path / "r.iolog", remap)
    op, off, ln = _expected(s, remap)
    back = iolog.read_iolog(tmp_path / "r.iolog")
    assert back.version == 2 and back.files == (iolog.LOG_FILE_NAME,)
    np.testing.assert_array_equal(back.op, op)
    np.testing.assert_array_equal(back.offset, off)
    np.testing.assert_array_equal(back.length, ln)
    assert info.requests == len(op) and info.discards_dropped == 300 - len(op)
    # waits are absolute ms since fio start: lead + stream time, non-decreasing
    t = traceio.open_trace(s, "swapio").read_all()["t_us"][traceio.open_trace(s, "swapio").read_all()["op"] != 2]
    expect_ms = iolog.LEAD_MS + np.floor((t - t[0]) / 1000.0)
    np.testing.assert_array_equal(back.t_us / 1000.0, expect_ms)


def test_max_requests_truncates(tmp_path):
    s = make_stream(tmp_path / "s.parquet", n=200)
    remap = iolog.plan_remap(16 << 20, 1 << 15, 16 << 20)
    info = iolog.write_iolog_v2(traceio.open_trace(s, "swapio"), tmp_path / "r.iolog", remap, max_requests=50)
    assert info.truncated and info.requests == 50
    assert len(iolog.read_iolog(tmp_path / "r.iolog").op) == 50


@pytest.mark.fio
def test_null_replay_reproduces_stream(tmp_path, fio_bin):
    """Replaying our v2 log with the null engine issues exactly the remapped stream."""
    s = make_stream(tmp_path / "s.parquet", n=400, device_bytes=48 << 20, duration_us=3e5)
    remap = iolog.plan_remap(48 << 20, 8 << 12, 8 << 20)
    iolog.write_iolog_v2(traceio.open_trace(s, "swapio"), tmp_path / "r.iolog", remap, timed=True)
    rows = per_io_log(fio_bin, ["--name=replay", "--ioengine=null", f"--read_iolog={tmp_path / 'r.iolog'}",
                                f"--replay_redirect={tmp_path / 'never-created'}", "--replay_no_stall=1"], tmp_path)
    op, off, ln = _expected(s, remap)
    assert [r[0] for r in rows] == op.tolist()
    assert [r[2] for r in rows] == off.tolist()
    assert [r[1] for r in rows] == ln.tolist()
    assert not (tmp_path / "never-created").exists()  # the null engine never touches the target


@pytest.mark.fio
def test_fio_read_iolog_still_overrides_write_iolog(tmp_path, fio_bin):
    """The reason replays are recorded with per-I/O logs: 3.33 drops write_iolog in a replay."""
    s = make_stream(tmp_path / "s.parquet", n=20)
    iolog.write_iolog_v2(traceio.open_trace(s, "swapio"), tmp_path / "r.iolog", iolog.plan_remap(16 << 20, 32768, 16 << 20))
    subprocess.run([fio_bin, "--name=r", "--ioengine=null", f"--read_iolog={tmp_path / 'r.iolog'}",
                    f"--replay_redirect={tmp_path / 'x'}", f"--write_iolog={tmp_path / 'w.log'}",
                    "--output-format=json", f"--output={tmp_path / 'o.json'}"], check=True, capture_output=True)
    if (tmp_path / "w.log").exists():
        pytest.fail("this fio writes write_iolog during replay; the per-I/O log workaround can go")


@pytest.mark.fio
def test_import_of_fio_write_iolog_round_trips(tmp_path, fio_bin):
    """fio's own v3 write_iolog -> swapio -> our v2 log -> null replay: same requests throughout."""
    target = tmp_path / "t.dat"
    rows = per_io_log(fio_bin, ["--name=gen", "--ioengine=null", f"--filename={target}", "--size=8m",
                                "--rw=randrw", "--bssplit=4k/60:8k/25:64k/15", "--norandommap=1",
                                "--number_ios=300", f"--write_iolog={tmp_path / 'fio.iolog'}"], tmp_path, "gen")
    first = iolog.read_iolog(tmp_path / "fio.iolog")
    assert first.version == 3 and first.files == (str(target),)
    assert list(zip(first.op.tolist(), first.length.tolist(), first.offset.tolist(), strict=True)) == rows
    out = iolog.import_iolog(tmp_path / "fio.iolog", tmp_path / "imp.parquet")
    tf = traceio.open_trace(out, "swapio")
    assert tf.meta["source"] == "fio" and tf.meta["summary"]["requests"]["read"] == int((first.op == 0).sum())
    data = tf.read_all()
    np.testing.assert_array_equal(data["op"], first.op)
    np.testing.assert_array_equal(data["offset"], first.offset)
    np.testing.assert_array_equal(data["length"], first.length)
    np.testing.assert_allclose(data["t_us"], first.t_us - first.t_us.min())
    assert (np.diff(data["t_us"]) >= 0).all()
    # and back out as v2 (fits, so no remapping) and replayed: the same requests again
    remap = iolog.plan_remap(int(tf.meta["device_bytes"]), int(data["length"].max()), 8 << 20)
    assert not remap.wrap
    iolog.write_iolog_v2(tf, tmp_path / "again.iolog", remap)
    again = iolog.read_iolog(tmp_path / "again.iolog")
    np.testing.assert_array_equal(again.offset, first.offset)
    np.testing.assert_array_equal(again.length, first.length)
    replayed = per_io_log(fio_bin, ["--name=r", "--ioengine=null", f"--read_iolog={tmp_path / 'again.iolog'}",
                                    f"--replay_redirect={target}", "--replay_no_stall=1"], tmp_path, "rep")
    assert replayed == rows


def test_read_v3_and_trim(tmp_path):
    p = tmp_path / "x.log"
    p.write_text("fio version 3 iolog\n10 /d add\n20 /d open\n100 /d write 0 4096\n250 /d trim 8192 4096\n"
                 "400 /d sync 0 0\n900 /d read 4096 8192\n950 /d close\n")
    r = iolog.read_iolog(p)
    assert r.op.tolist() == [traceio.OP_WRITE, traceio.OP_DISCARD, traceio.OP_READ]
    assert r.t_us.tolist() == [100.0, 250.0, 900.0]
    assert r.skipped == {"add": 1, "open": 1, "sync": 1, "close": 1}
    out = iolog.import_iolog(p, tmp_path / "s.parquet")
    data = traceio.open_trace(out, "swapio").read_all()
    assert data["t_us"].tolist() == [0.0, 150.0, 800.0]
    assert data["cause"].tolist() == [traceio.CAUSE_UNKNOWN, traceio.CAUSE_DISCARD, traceio.CAUSE_UNKNOWN]


def test_import_bad_inputs(tmp_path):
    (tmp_path / "junk.log").write_text("hello\n")
    with pytest.raises(TraceFileError, match="not a fio v2/v3 iolog"):
        iolog.read_iolog(tmp_path / "junk.log")
    two = tmp_path / "two.log"
    two.write_text("fio version 2 iolog\n/a read 0 4096\n/b write 0 4096\n")
    with pytest.raises(ConfigError, match="2 files"):
        iolog.import_iolog(two, tmp_path / "o.parquet")
    assert not (tmp_path / "o.parquet").exists()
    iolog.import_iolog(two, tmp_path / "o.parquet", file="/b")
    assert traceio.open_trace(tmp_path / "o.parquet", "swapio").num_rows == 1
    empty = tmp_path / "empty.log"
    empty.write_text("fio version 2 iolog\n/a add\n/a open\n/a close\n")
    with pytest.raises(TraceFileError, match="no read, write or trim"):
        iolog.import_iolog(empty, tmp_path / "e.parquet")
    bad = tmp_path / "bad.log"
    bad.write_text("fio version 2 iolog\n/a read zero 4096\n")
    with pytest.raises(TraceFileError, match=r"bad.log:2"):
        iolog.read_iolog(bad)


def test_import_cli(tmp_path):
    p = tmp_path / "x.log"
    p.write_text("fio version 2 iolog\n/d add\n/d wait 5 0\n/d write 0 4096\n/d wait 7 0\n/d read 4096 8192\n")
    runner = CliRunner()
    res = runner.invoke(cli, ["fio", "import", str(p), "-o", str(tmp_path / "s.parquet")])
    assert res.exit_code == 0, res.output
    data = traceio.open_trace(tmp_path / "s.parquet", "swapio").read_all()
    assert data["t_us"].tolist() == [0.0, 2000.0]
    res = runner.invoke(cli, ["fio", "import", str(p), "-o", str(tmp_path / "s.parquet")])
    assert res.exit_code == 2 and "exists" in res.output
    res = runner.invoke(cli, ["fio", "import", str(tmp_path / "nope.log"), "-o", str(tmp_path / "n.parquet")])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1


def test_stream_extent(tmp_path):
    s = write_stream(tmp_path / "s.parquet", [0, 1, 2], [0, 1, 2], [0, 8192, 1 << 30], [4096, 8192, 4096])
    end, max_len, n = iolog.stream_extent(traceio.open_trace(s, "swapio"))
    assert (end, max_len, n) == (16384, 8192, 2)  # the discard far away does not count
