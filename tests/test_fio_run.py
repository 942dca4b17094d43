"""Running job folders on a small file target, results parsing, safety refusals, compare."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fio_helpers import make_stream

from swaptrace.cli import cli
from swaptrace.core import traceio
from swaptrace.errors import ConfigError, ToolError, TraceFileError
from swaptrace.figures.fio import save_run_figures
from swaptrace.fio import compare, jobs, results, runner

SIZE = 8 << 20


@pytest.fixture(scope="module")
def small_jobs(tmp_path_factory):
    d = tmp_path_factory.mktemp("fiojobs")
    s = make_stream(d / "s.parquet", n=400, device_bytes=6 << 20, duration_us=4e5)
    # two sweep sizes, and one size at one queue depth for the profile jobs (a job per direction: the full
    # 4 sizes x 2 depths are 16 more seconds of fio running the same job file with other numbers)
    folder = jobs.build_jobs(s, d / "jobs", sweep_sizes=("4k", "128k"), profile_sizes=("4k",),
                             profile_depths=(4,)).path
    # the sequential writes and the synthetic job run 1 x --runtime rather than 4 x and 2 x (made for a real drive
    # filling up; 7 s here): 1 s still gives each bandwidth log 3 or 4 windows of 250 ms (2 are asked for below).
    # write_rand keeps its 4 x: bandwidth_decline needs 4 windows or more. The factor is the manifest's,
    # read by the runner alone (and checked there, whoever wrote it)
    manifest = json.loads((folder / jobs.MANIFEST).read_text())
    for j in manifest["jobs"]:
        if j["name"] in ("write_seq", "write_seq_128k", "synthetic"):
            j["runtime_factor"] = 1
    (folder / jobs.MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return folder


@pytest.fixture(scope="module")
def full_run(small_jobs, tmp_path_factory):
    """Every job of a small folder on an 8 MiB file, 1 s per time-based job but write_rand's 4 s (about 20 s)."""
    if runner.shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    target = tmp_path_factory.mktemp("target") / "t.dat"
    lines: list[str] = []
    outcome = runner.run_jobs(small_jobs, target, size_bytes=SIZE, runtime_s=1, echo=lines.append)
    # the library writes no figures (figures are drawn by the CLI and the report); draw them as the CLI does
    assert not list(outcome.out_dir.glob("*.png"))
    save_run_figures(outcome.out_dir)
    return outcome, target, lines


@pytest.mark.fio
@pytest.mark.slow
def test_full_run_parses(full_run, small_jobs):
    outcome, target, lines = full_run
    rows, meta = results.read_results(outcome.out_dir)
    manifest = jobs.load_manifest(small_jobs)
    ran = {r["instance"] for r in rows}
    # every job but the steady-state rounds, which run only with --steady (tests/test_fio_steady.py)
    assert {j["name"] for j in manifest["jobs"] if j["group"] != "steady"} <= ran
    assert {"qd_read_4k_qd4", "qd_write_4k_qd4"} <= ran  # the profile group (libaio at depth 4) ran too
    assert "steady_randwrite" not in ran
    assert {"precondition@sweep", "precondition@write_seq", "precondition@write_rand"} <= ran
    for r in rows:
        assert r["ios"] > 0 and r["bw_bytes"] > 0 and r["runtime_ms"] > 0
        assert 0 < r["clat_p50_us"] <= r["clat_p99_us"] <= r["clat_p999_us"]
        if r["request_bytes"]:
            assert r["io_bytes"] == r["ios"] * r["request_bytes"], r["instance"]
        if r["kind"] == "sweep" and r["request_bytes"]:
            # bandwidth, IOPS and size agree (fio rounds bw to whole bytes/s)
            assert r["bw_bytes"] == pytest.approx(r["iops"] * r["request_bytes"], rel=0.02)
    for r in rows:
        if r["kind"] == "replay":
            assert r["ios"] == r["expected_ios"]  # the whole (short) log ran
            assert r["trace_duration_ms"] == pytest.approx(manifest["replay"]["trace_duration_ms"])
    timed = next(r for r in rows if r["instance"] == "replay")
    fast = next(r for r in rows if r["instance"] == "replay_no_stall")
    assert timed["runtime_ms"] >= 0.9 * timed["trace_duration_ms"]  # paced by the waits
    assert fast["runtime_ms"] < timed["runtime_ms"]
    pre = next(r for r in rows if r["instance"] == "precondition@sweep")
    assert pre["io_bytes"] == 2 * SIZE
    assert {"request_size_gain", "request_size_gain_read", "request_size_gain_write",
            "sequential_write_gain", "sequential_write_gain_128k", "bandwidth_decline"} <= set(meta["ratios"])
    assert meta["run"]["size_bytes"] == SIZE and meta["run"]["fio"].startswith("fio-")
    assert len(lines) >= len(rows) // 2
    assert (small_jobs / "runs" / "latest").resolve() == outcome.out_dir.resolve()
    assert "sweep_read_4k" in (outcome.out_dir / "results.txt").read_text()
    for png in ("bandwidth_vs_request_size.png", "bandwidth_vs_written.png"):
        assert (outcome.out_dir / png).stat().st_size > 1000


@pytest.mark.fio
@pytest.mark.slow
def test_experiment_bw_logs_parse(full_run):
    outcome, _, _ = full_run
    bw = traceio.open_trace(outcome.bwlog_path, "fio-bwlog").read_all()
    inst = bw["instance"].astype(str)
    for name in ("sweep_read_4k", "sweep_write_128k", "write_seq", "write_seq_128k", "write_rand", "sweep_write_mix"):
        assert (inst == name).sum() >= 2, name  # 1 s at 250 ms windows
    w = bw["direction"].astype(str) == "write"
    assert (np.diff(bw["run_written_bytes"][w]) >= 0).all()
    assert (bw["bw_bytes"] >= 0).all()
    one = results.find_bw_logs(outcome.out_dir / "raw", "write_rand")
    assert len(one) == 1 and one[0].name == "write_rand_bw.1.log"
    arr = results.parse_bw_log(one[0])
    assert set(arr["direction"].tolist()) == {1}
    # the integrated volume of write_rand is close to what fio reports for it
    rows, _ = results.read_results(outcome.results_path)
    reported = next(r["io_bytes"] for r in rows if r["instance"] == "write_rand")
    integrated = bw["job_bytes"][inst == "write_rand"].max()
    # the bandwidth log averages 250 ms windows of a 1 s job: the last, partial window may be missing (up to
    # 25 % of the volume) and the first holds fio's start-up; 0.35 = one window plus 10 % for that ramp
    assert integrated == pytest.approx(reported, rel=0.35)


@pytest.mark.fio
@pytest.mark.slow
def test_target_was_created_and_filled(full_run):
    _, target, _ = full_run
    assert target.stat().st_size == SIZE
    with open(target, "rb") as fh:
        head = np.frombuffer(fh.read(1 << 20), dtype=np.uint8).reshape(-1, 4096)
    assert head.any(axis=1).all()  # every block holds data (nothing left as a hole of zeros)
    try:
        assert os.getxattr(target, runner.TARGET_XATTR) == b"fio-target"
    except OSError:
        pytest.skip("file system without user xattrs")


@pytest.mark.fio
@pytest.mark.slow
def test_cli_results_and_compare(full_run, tmp_path):
    outcome, _, _ = full_run
    cr = CliRunner()
    res = cr.invoke(cli, ["fio", "results", str(outcome.out_dir)])
    assert res.exit_code == 0 and "sequential_write_gain" in res.output
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"request_size_gain": 1.8, "sequential_write_gain": 4.1, "bandwidth_decline": 0.5}))
    res = cr.invoke(cli, ["fio", "compare", str(outcome.results_path), "--model", str(model)])
    assert res.exit_code == 0, res.output
    assert "1.80x" in res.output and "4.10x" in res.output and "4.37x" in res.output
    res = cr.invoke(cli, ["fio", "compare", str(outcome.out_dir), "--model", str(model), "--json"])
    table = json.loads(res.output)["ratios"]
    assert table[1]["ratio"] == "sequential_write_gain" and table[1]["measured"] > 0
    (tmp_path / "bad.json").write_text("{not json")
    res = cr.invoke(cli, ["fio", "compare", str(outcome.out_dir), "--model", str(tmp_path / "bad.json")])
    assert res.exit_code == 2 and "not JSON" in res.output


@pytest.mark.fio
def test_small_cli_run(small_jobs, tmp_path, fio_bin):
    target = tmp_path / "t.dat"
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, ["fio", "run", str(small_jobs), "--target", str(target), "--size", "4MiB",
                                   "--runtime", "1", "--jobs", "sweep_read_4k", "--no-precondition", "-o", str(out)])
    assert res.exit_code == 0, res.output
    rows, _ = results.read_results(out / "results.parquet")
    assert [(r["instance"], r["direction"]) for r in rows] == [("sweep_read_4k", "read")]
    assert rows[0]["io_bytes"] == rows[0]["ios"] * 4096
    assert "sweep_read_4k" in res.output
    assert (out / "bandwidth_vs_written.png").stat().st_size > 1000  # the command draws the run's figures
    res = CliRunner().invoke(cli, ["fio", "run", str(small_jobs), "--target", str(target), "--size", "4MiB",
                                   "--jobs", "sweep_read_4k", "-o", str(out)])
    assert res.exit_code == 2 and "exists" in res.output


def test_relative_paths_work(small_jobs, tmp_path, fio_bin, monkeypatch):
    """fio runs inside the jobs folder, so relative output and target paths must be resolved first."""
    monkeypatch.chdir(tmp_path)
    jobs = os.path.relpath(small_jobs, tmp_path)
    res = CliRunner().invoke(cli, ["fio", "run", jobs, "--target", "t.dat", "--size", "4MiB", "--runtime", "1",
                                   "--jobs", "sweep_read_4k", "--no-precondition", "-o", "rel/run"])
    assert res.exit_code == 0, res.output
    rows, _ = results.read_results(tmp_path / "rel" / "run" / "results.parquet")
    assert rows[0]["io_bytes"] == rows[0]["ios"] * 4096


def test_dry_run_writes_nothing(small_jobs, tmp_path):
    target = tmp_path / "t.dat"
    before = sorted(p.name for p in small_jobs.iterdir())
    res = CliRunner().invoke(cli, ["fio", "run", str(small_jobs), "--target", str(target), "--size", "8MiB",
                                   "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "--output-format=json" in res.output and "SWAPTRACE_TARGET=" in res.output
    assert res.output.count("precondition.fio") == 3
    assert not target.exists()
    assert sorted(p.name for p in small_jobs.iterdir()) == before


def _run_cli(args):
    res = CliRunner().invoke(cli, ["fio", "run", *args])
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    return res.output


def test_refusals_leave_target_untouched(small_jobs, tmp_path):
    target = tmp_path / "t.dat"
    assert "too small" in _run_cli([str(small_jobs), "--target", str(target), "--size", "1MiB"])
    assert "unknown job(s) nope" in _run_cli([str(small_jobs), "--target", str(target), "--jobs", "sweep_read_4k,nope"])
    assert "is a folder" in _run_cli([str(small_jobs), "--target", str(tmp_path), "--size", "8MiB"])
    assert "not a job folder" in _run_cli([str(tmp_path / "nojobs"), "--target", str(target)])
    assert "byte size" in _run_cli([str(small_jobs), "--target", str(target), "--size", "lots"])
    assert not target.exists()
    foreign = tmp_path / "precious.dat"
    foreign.write_bytes(b"x" * 4096)
    assert "not created by swaptrace" in _run_cli([str(small_jobs), "--target", str(foreign), "--size", "8MiB"])
    assert foreign.read_bytes() == b"x" * 4096
    runner.check_target(foreign, SIZE, force=True)  # allowed when forced
    assert "neither a regular file" in _run_cli([str(small_jobs), "--target", "/dev/null", "--size", "8MiB"])
    assert "under /dev" in _run_cli([str(small_jobs), "--target", "/dev/swaptrace-nope", "--size", "8MiB"])


def test_missing_fio(small_jobs, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(ToolError, match="not found"):
        runner.find_fio()
    target = tmp_path / "t.dat"
    out = _run_cli([str(small_jobs), "--target", str(target), "--size", "8MiB"])
    assert "fio: not found" in out
    assert not target.exists()
    # a dry run still shows the commands
    res = CliRunner().invoke(cli, ["fio", "run", str(small_jobs), "--target", str(target), "--dry-run"])
    assert res.exit_code == 0 and "fio --output-format=json" in res.output


@pytest.mark.parametrize(("version_text", "message"), [("fio-2.1.10", "too old"), ("hello", "did not report")])
def test_bad_fio_version(tmp_path, version_text, message):
    fake = tmp_path / "fio"
    fake.write_text(f"#!/bin/sh\necho {version_text}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(ToolError, match=message):
        runner.find_fio(str(fake))


def _root_block_device() -> str | None:
    dev = os.stat("/").st_dev
    sysdev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if not sysdev.exists():
        return None
    name = Path(os.path.realpath(sysdev)).name
    path = f"/dev/{name}"
    return path if os.path.exists(path) and stat.S_ISBLK(os.stat(path).st_mode) else None


def test_refuses_block_device_without_allow_and_mounted_root():
    dev = _root_block_device()
    if dev is None:
        pytest.skip("the root file system is not on a block device here")
    with pytest.raises(ConfigError, match="--allow-device"):
        runner.check_target(dev, SIZE)
    with pytest.raises(ConfigError, match="is mounted"):
        runner.check_target(dev, SIZE, allow_device=True, force=True)


def test_fio_json_with_leading_notes(tmp_path):
    p = tmp_path / "o.json"
    doc = {"jobs": [{"jobname": "x", "error": 0, "job_runtime": 1000,
                     "read": {"total_ios": 10, "io_bytes": 40960, "bw_bytes": 40960.0, "iops": 10.0, "runtime": 1000,
                              "clat_ns": {"percentile": {"50.000000": 1000, "99.000000": 5000, "99.900000": 9000}}},
                     "write": {"total_ios": 0}}]}
    p.write_text("note: both iodepth >= 1 and synchronous I/O engine are selected\nfio: something\n" + json.dumps(doc))
    job = {"name": "sweep_read_4k", "group": "sweep", "kind": "sweep", "request_bytes": 4096, "pattern": "random"}
    rows = results.parse_fio_json(p, "sweep_read_4k", job)
    assert len(rows) == 1 and rows[0]["clat_p99_us"] == 5.0 and rows[0]["io_bytes"] == 40960
    doc["jobs"][0]["error"] = 5
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceFileError, match="error 5"):
        results.parse_fio_json(p, "x", job)
    p.write_text("fio: total garbage\n")
    with pytest.raises(TraceFileError, match="no JSON"):
        results.load_fio_json(p)


def test_measured_ratios_definition():
    def row(job, d, bw):
        return {"job": job, "direction": d, "bw_bytes": bw, "trace_duration_ms": float("nan"), "runtime_ms": 1.0}

    rows = [row("sweep_read_mix", "read", 100.0), row("sweep_read_128k", "read", 200.0),
            row("sweep_write_mix", "write", 50.0), row("sweep_write_128k", "write", 400.0),
            row("write_seq", "write", 300.0), row("write_rand", "write", 60.0)]
    manifest = {"replay": {"read_bytes": 1000, "write_bytes": 1000}}
    r = compare.measured_ratios(rows, manifest)
    assert r["request_size_gain_read"] == 2.0 and r["request_size_gain_write"] == 8.0
    assert r["request_size_gain"] == pytest.approx((1000 / 100 + 1000 / 50) / (1000 / 200 + 1000 / 400))
    assert r["sequential_write_gain"] == 5.0
    assert "sequential_write_gain" not in compare.measured_ratios(rows[:4], manifest)


def test_failing_fio_leaves_no_results(small_jobs, tmp_path):
    fake = tmp_path / "fio"
    fake.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo fio-3.33; exit 0; fi\n'
                    'echo "fio: pid=1, err=5/file:io_u.c:1889, func=io_u error, error=Input/output error" >&2\nexit 1\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    out = tmp_path / "run"
    with pytest.raises(ToolError, match="fio failed on job precondition@sweep.*Input/output error"):
        runner.run_jobs(small_jobs, tmp_path / "t.dat", size_bytes=SIZE, only=["sweep_read_4k"], out_dir=out,
                        fio=str(fake), echo=lambda s: None)
    assert not out.exists() and not list(tmp_path.glob(".run.*"))
