"""The ``swaptrace ssd`` commands: replay, synth, thesis, devices and their errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from swaptrace.cli import cli
from swaptrace.core import traceio
from swaptrace.ssd import load_device, replay
from swaptrace.ssd.run import read_timeline

TINY = ["--device", "tiny"]


def write_stream(path, device_bytes=16 << 20, n=4000, seed=0, with_discards=True):
    rng = np.random.default_rng(seed)
    pages = device_bytes // 4096
    sizes = rng.choice([1, 2, 4, 8], n)
    off = rng.integers(0, pages - 8, n) * 4096
    op = rng.choice([traceio.OP_READ, traceio.OP_WRITE], n, p=[0.4, 0.6]).astype(np.int8)
    if with_discards:
        op[rng.random(n) < 0.05] = traceio.OP_DISCARD
    cause = np.where(op == traceio.OP_WRITE, traceio.CAUSE_RECLAIM,
                     np.where(op == traceio.OP_READ, traceio.CAUSE_FAULT, traceio.CAUSE_DISCARD)).astype(np.int8)
    written = int(((op == traceio.OP_WRITE) * sizes).sum() * 4096)
    meta = {"source": "emulator", "page_bytes": 4096, "device_bytes": device_bytes,
            "summary": {"bytes_written": written}}
    with traceio.TraceWriter(path, "swapio", meta) as w:
        w.write(t_us=np.arange(n) * 10.0, step=np.arange(n) // 100, op=op, offset=off,
                length=(sizes * 4096).astype(np.uint32), cause=cause)
    return path


@pytest.fixture
def runner():
    return CliRunner()


def test_replay_by_stream_argument_writes_timeline(tmp_path, runner):
    stream = write_stream(tmp_path / "s.swapio.parquet")
    out = tmp_path / "x.ssd.parquet"
    res = runner.invoke(cli, ["ssd", str(stream), *TINY, "-o", str(out), "--window", "2MiB", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["waf"] >= 1.0 and summary["requests"] == 4000
    cols, meta = read_timeline(out)
    assert meta["kind"] == "ssd-timeline"
    assert meta["summary"]["requests"] == 4000
    assert len(cols["window"]) >= 3
    assert np.all(np.diff(cols["host_written_bytes"]) > 0)
    assert np.all(np.diff(cols["t_end_us"]) >= 0)
    assert int(cols["window_write_bytes"].sum()) == summary["host_write_bytes"]
    assert int(cols["flash_write_bytes"].sum()) == summary["flash_write_bytes"]
    assert int(cols["gc_erases"].sum()) == summary["gc_erases"]
    assert int(cols["requests"].sum()) == 4000
    # refuses to overwrite without --force
    again = runner.invoke(cli, ["ssd", str(stream), *TINY, "-o", str(out)])
    assert again.exit_code == 2 and "--force" in again.output
    forced = runner.invoke(cli, ["ssd", "replay", str(stream), *TINY, "-o", str(out), "--force"])
    assert forced.exit_code == 0, forced.output


def test_replay_options_before_the_stream(tmp_path, runner):
    stream = write_stream(tmp_path / "s.parquet", n=300)
    res = runner.invoke(cli, ["ssd", "--device", "tiny", "--iodepth", "4", str(stream), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["requests"] == 300
    assert runner.invoke(cli, ["ssd", "--help"]).exit_code == 0


def test_replay_library_and_text_summary(tmp_path, runner):
    stream = write_stream(tmp_path / "s.parquet", with_discards=False)
    result = replay(stream, load_device("tiny"), precondition="none")
    assert result.summary["discard_bytes"] == 0
    assert result.summary["host_read_bytes"] > 0
    res = runner.invoke(cli, ["ssd", str(stream), *TINY, "--precondition", "seq+rand", "--iodepth", "4"])
    assert res.exit_code == 0, res.output
    assert "WAF" in res.output and "throughput" in res.output


def test_stream_larger_than_device(tmp_path, runner):
    stream = write_stream(tmp_path / "big.parquet", device_bytes=256 << 20)
    res = runner.invoke(cli, ["ssd", str(stream), *TINY])
    assert res.exit_code == 2
    assert "larger than the SSD" in res.output and "Traceback" not in res.output
    for fit in ("modulo", "scale"):
        ok = runner.invoke(cli, ["ssd", str(stream), *TINY, "--fit", fit, "--json"])
        assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "no-such-ssd"], "unknown device"),
        (["--device", "tiny", "--pages-per-block", "0"], "--pages-per-block"),
        (["--device", "tiny", "--spare-factor", "0"], "spare"),
        (["--device", "tiny", "--op", "-0.1"], "--op"),
        (["--device", "tiny", "--op", "0.001"], "spare blocks"),
        (["--device", "tiny", "--page-size", "6000"], "multiple of map_bytes"),
        (["--device", "tiny", "--op", "0.1", "--spare-factor", "0.1"], "not both"),
    ],
)
def test_bad_device_options_are_one_line_errors(args, message, runner):
    res = runner.invoke(cli, ["ssd", "synth", "--pattern", "randwrite", "--volume", "1MiB", *args])
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_wrong_kind_and_missing_file(tmp_path, runner):
    missing = runner.invoke(cli, ["ssd", str(tmp_path / "nope.parquet"), *TINY])
    assert missing.exit_code == 2 and "no such file" in missing.output
    other = tmp_path / "t.parquet"
    with traceio.TraceWriter(other, "access", {"page_bytes": 4096}) as w:
        w.write(step=np.zeros(1), page=np.zeros(1), write=np.zeros(1, bool), region=np.zeros(1))
    res = runner.invoke(cli, ["ssd", str(other), *TINY])
    assert res.exit_code == 2 and "expected 'swapio'" in res.output


def test_synth_json_and_toml_device(tmp_path, runner):
    toml = tmp_path / "dev.toml"
    toml.write_text('base = "tiny"\ncapacity = "32MiB"\nop = 0.28\ngc_policy = "fifo"\n')
    out = tmp_path / "synth.parquet"
    res = runner.invoke(cli, ["ssd", "synth", "--pattern", "randwrite", "--bs", "4k", "--volume", "3x",
                              "--device", str(toml), "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert 1.5 < summary["waf"] < 4.0
    _cols, meta = read_timeline(out)
    assert meta["device"]["gc_policy"] == "fifo"
    assert meta["device"]["user_bytes"] >= 32 << 20
    bad = tmp_path / "bad.toml"
    bad.write_text('base = "tiny"\nchanels = 4\n')
    res = runner.invoke(cli, ["ssd", "synth", "--pattern", "write", "--device", str(bad)])
    assert res.exit_code == 2 and "chanels" in res.output


def test_synth_overrides_and_no_timing(runner):
    res = runner.invoke(cli, ["ssd", "synth", "--pattern", "hotcold", "--volume", "2x", *TINY, "--gc", "greedy",
                              "--capacity", "16MiB", "--op", "0.28", "--pages-per-block", "32", "--no-timing",
                              "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    assert s["waf"] > 1.0 and s["host_read_bytes"] == 0


def test_thesis_small_device(tmp_path, runner):
    out = tmp_path / "model.json"
    res = runner.invoke(cli, ["ssd", "thesis", "--device", "tiny", "--capacity", "32MiB", "--drive-writes", "2",
                              "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "1.75x" in res.output and "4.37x" in res.output
    data = json.loads(out.read_text())
    for key in ("request_size_gain", "sequential_write_gain", "bandwidth_decline"):
        assert isinstance(data[key], float)
    assert data["request_size_gain"] > 1.0
    assert data["sequential_write_gain"] > 1.0
    assert data["bandwidth_decline"] < 1.0
    assert data["inputs"]["device"]["name"] == "tiny"


def test_devices_lists_presets(runner):
    res = runner.invoke(cli, ["ssd", "devices", "--json"])
    assert res.exit_code == 0
    assert {"mqsim-default", "femu-default", "nvme-tlc"} <= set(json.loads(res.output))


def test_empty_stream_and_timestamps(tmp_path, runner):
    empty = tmp_path / "empty.parquet"
    with traceio.TraceWriter(empty, "swapio", {"source": "emulator", "page_bytes": 4096, "device_bytes": 1 << 20}):
        pass
    res = runner.invoke(cli, ["ssd", str(empty), *TINY, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["requests"] == 0
    stream = write_stream(tmp_path / "s.parquet", n=500)
    paced = runner.invoke(cli, ["ssd", str(stream), *TINY, "--timestamps", "--iodepth", "0", "--json"])
    assert paced.exit_code == 0, paced.output
    # 500 requests issued 10 µs apart: simulated time is at least the stream's span
    assert json.loads(paced.output)["simulated_time_us"] >= 499 * 10.0
    bad = runner.invoke(cli, ["ssd", str(stream), *TINY, "--iodepth", "0"])
    assert bad.exit_code == 2 and "--timestamps" in bad.output


def test_offset_mapping_modes():
    from swaptrace.ssd.run import map_units

    off = np.array([0, 4096, 8192 + 100, 40 * 4096], dtype=np.uint64)
    length = np.array([4096, 8192, 4096, 8192], dtype=np.uint32)
    first, n = map_units(off, length, 4096, 100, 100, "error")
    np.testing.assert_array_equal(first, [0, 1, 2, 40])
    np.testing.assert_array_equal(n, [1, 2, 2, 2])  # an unaligned request touches two units
    first, n = map_units(off, length, 4096, 16, 64, "modulo")
    np.testing.assert_array_equal(first, [0, 1, 2, 8])
    first, n = map_units(off, length, 4096, 16, 64, "scale")
    np.testing.assert_array_equal(first, [0, 0, 0, 10])
    assert np.all(first + n <= 16)


@pytest.mark.parametrize("size", ["1000", "512KiB"])
def test_real_thesis_on_the_default_drive_checks_the_swap_size(size):
    # no device option: the full nvme-tlc's 4 KiB map unit and the 1 MiB floor are checked (one line, exit 2)
    r = CliRunner().invoke(cli, ["ssd", "thesis", "--real", "--swap-size", size])
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and "--swap-size must be a multiple of 4096 bytes" in r.stderr
