"""`swaptrace time` and `swaptrace fio profile` end to end: outputs, determinism, one-line errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from cli_helpers import run_cli, the_error

from swaptrace.core import traceio
from swaptrace.emulate import emulate
from swaptrace.fio import results as resmod
from swaptrace.timing import device_profile as profile
from swaptrace.timing import model as timing
from swaptrace.workload.generate import generate_trace


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    d = tmp_path_factory.mktemp("timing")
    trace = generate_trace("tiny", d / "t.access.parquet", steps=4, seed=1)
    out = d / "t.swapio.parquet"
    emulate(trace, out, memory_fraction=0.2, ensemble=False)
    return out


def test_time_writes_steps_and_prints_breakdown(stream, tmp_path):
    out = tmp_path / "steps.parquet"
    r = run_cli("time", stream, "--device", "nvme-tlc", "--step-compute-us", 20000, "--fault-cpu-us", 2,
                "--reclaim-cpu-us", 0.5, "-o", out)
    assert r.exit_code == 0, r.output
    for word in ("slowdown", "fault wait", "queueing", "reclaim CPU", "compute"):
        assert word in r.output
    tf = traceio.open_trace(out, "timing-steps")
    cols = tf.read_all()
    assert cols["step"].tolist() == [0, 1, 2, 3]
    parts = cols["compute_us"] + cols["fault_wait_us"] + cols["queue_us"] + cols["fault_cpu_us"] + cols["reclaim_cpu_us"]
    np.testing.assert_allclose(parts, cols["step_us"], rtol=1e-12)
    s = tf.meta["summary"]
    assert s["slowdown"] == pytest.approx(cols["step_us"].sum() / (4 * 20000.0))
    # faults waited for: the emulator's major faults (each fault burst holds one faulting read)
    meta = traceio.read_metadata(stream)
    assert int(cols["faults_waited"].sum()) == meta["summary"]["major_faults"]


def test_time_is_deterministic_with_given_costs(stream):
    args = ("time", stream, "--device", "mqsim-default", "--step-compute-us", 1000, "--fault-cpu-us", 1,
            "--reclaim-cpu-us", 1, "--json")
    a, b = run_cli(*args), run_cli(*args)
    assert a.exit_code == 0 and json.loads(a.output) == json.loads(b.output)


def test_slower_device_predicts_more_time(stream, tmp_path):
    fast = timing.DeviceTiming("fast", "t", (4096,), (1,), ((10.0,),), ((10.0,),))
    slow = timing.DeviceTiming("slow", "t", (4096,), (1,), ((100.0,),), ((100.0,),))
    cpu = timing.CpuCosts(0.0, 0.0, 0.0)
    a = timing.predict(stream, fast, step_compute_us=1000.0, cpu=cpu)
    b = timing.predict(stream, slow, step_compute_us=1000.0, cpu=cpu)
    assert b.total_us > a.total_us > 4000.0
    # without queueing, every waited fault costs its read: at least faults x latency
    assert b.total_us >= 4000.0 + int(b.faults_waited.sum()) * 100.0 - 1e-6


def test_measured_compute_replays_every_step(stream):
    r = timing.predict(stream, "nvme-tlc", compute="mlp", cpu=timing.CpuCosts())
    assert r.compute_us.shape == (4,) and np.all(r.compute_us > 0)
    assert r.slowdown is not None and r.slowdown >= 1.0


def test_stream_without_its_trace_is_one_line(stream, tmp_path):
    import shutil

    lonely = tmp_path / "s.swapio.parquet"
    shutil.copy(stream, lonely)
    meta = traceio.read_metadata(stream)
    err = the_error(run_cli("time", lonely, "--device", "nvme-tlc", "--trace", tmp_path / "gone.access.parquet"))
    assert "gone.access.parquet: no such file" in err  # refused before the command's work
    # given compute time needs no trace
    ok = run_cli("time", lonely, "--device", "nvme-tlc", "--step-compute-us", 10, "--fault-cpu-us", 0,
                 "--reclaim-cpu-us", 0)
    assert ok.exit_code == 0, ok.output
    assert meta["trace"]


@pytest.mark.parametrize("device_text", ["x = ", 'kind = "swaptrace-device-profile"\n'])
def test_bad_device_file_is_one_line_and_no_output(stream, tmp_path, device_text):
    bad = tmp_path / "bad.toml"
    bad.write_text(device_text)
    out = tmp_path / "steps.parquet"
    err = the_error(run_cli("time", stream, "--device", bad, "--step-compute-us", 1, "-o", out))
    assert "bad.toml" in err
    assert not out.exists() and not list(tmp_path.glob("*.partial"))


def test_not_a_stream_is_one_line(tmp_path):
    p = tmp_path / "x.parquet"
    p.write_text("nope")
    assert "not a Parquet file" in the_error(run_cli("time", p, "--device", "nvme-tlc"))


# --------------------------------------------------------------------------- fio profile


def _fake_run(folder, points):
    """A `fio run` folder with results.parquet and raw JSON: points = {(dir, size, depth): latency_us}."""
    raw = folder / "raw"
    raw.mkdir(parents=True)
    rows = []
    for (direction, size, depth), lat in points.items():
        name = f"sweep_{direction}_{size}" if depth == 1 else f"qd_{direction}_{size}_qd{depth}"
        iops = depth / lat * 1e6
        rows.append({"instance": name, "job": name, "group": "sweep" if depth == 1 else "profile", "kind": "sweep",
                     "direction": direction, "request_bytes": size, "pattern": "random", "io_bytes": 1, "ios": 100,
                     "bw_bytes": iops * size, "iops": iops, "clat_p50_us": lat, "clat_p99_us": lat, "clat_p999_us": lat,
                     "runtime_ms": 1000.0, "trace_duration_ms": math.nan, "expected_ios": math.nan})
        engine = "psync" if depth == 1 else "libaio"
        (raw / f"{name}.json").write_text(json.dumps({"jobs": [{
            "jobname": name, "job options": {"ioengine": engine, "iodepth": str(depth), "rw": "randread"},
            direction: {"total_ios": 100, "lat_ns": {"mean": lat * 1000.0}}}]}))
    with traceio.TraceWriter(folder / resmod.RESULTS_NAME, "fio-results", {"run": {"target": "/tmp/x"}}) as w:
        w.write_table(resmod.rows_to_table(rows))


def test_profile_from_a_run_folder(tmp_path):
    pts = {("read", 4096, 1): 50.0, ("read", 65536, 1): 200.0, ("write", 4096, 1): 40.0, ("write", 65536, 1): 300.0,
           ("read", 4096, 4): 80.0, ("write", 4096, 4): 120.0, ("read", 65536, 4): 500.0}
    _fake_run(tmp_path / "run", pts)
    out = tmp_path / "disk.toml"
    r = run_cli("fio", "profile", tmp_path / "run", "-o", out)
    assert r.exit_code == 0, r.output
    dev = timing.load_device_timing(str(out))
    assert dev.sizes_bytes == (4096, 65536) and dev.depths == (1, 4)
    assert dev.latency_us("read", 4096, 1) == pytest.approx(50.0)
    assert dev.latency_us("read", 65536, 4) == pytest.approx(500.0)
    # the missing 64 KiB write at depth 4 takes the 4 KiB write's depth ratio (120 / 40)
    # the profile TOML keeps 3 decimals (DeviceTiming.to_toml): at most 5e-4 us, read back at a table point
    assert dev.latency_us("write", 65536, 4) == pytest.approx(300.0 * 3.0, abs=5e-4)


def test_profile_falls_back_to_littles_law(tmp_path):
    pts = {("read", 4096, 1): 50.0, ("write", 4096, 1): 40.0}
    _fake_run(tmp_path / "run", pts)
    for p in (tmp_path / "run" / "raw").glob("*.json"):
        p.unlink()
    dev = profile.build_profile(tmp_path / "run")
    assert dev.latency_us("read", 4096, 1) == pytest.approx(50.0)


def test_profile_of_a_folder_without_results_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "disk.toml"
    assert "no fio results" in the_error(run_cli("fio", "profile", tmp_path / "empty", "-o", out))
    assert not out.exists()
    _fake_run(tmp_path / "readonly", {("read", 4096, 1): 50.0})
    assert "depth 1" in the_error(run_cli("fio", "profile", tmp_path / "readonly", "-o", out))
    assert not out.exists()


def test_report_in_a_fresh_process_shows_the_time_model(stream, tmp_path):
    """The report reads timing.parquet without the time stage having run in the same process."""
    import shutil
    import subprocess
    import sys

    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(stream, folder / "swapio.parquet")
    r = run_cli("time", folder / "swapio.parquet", "--device", "nvme-tlc", "--step-compute-us", 5000,
                "--fault-cpu-us", 1, "--reclaim-cpu-us", 1, "-o", folder / "timing.parquet")
    assert r.exit_code == 0, r.output
    proc = subprocess.run([sys.executable, "-c", "from swaptrace.cli import cli; cli()", "report", str(folder)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = (folder / "report" / "report.md").read_text()
    assert "## Training time (time model)" in text and "| SSD model (nvme-tlc) |" in text
    assert (folder / "report" / "step_time.png").stat().st_size > 1000


def test_host_costs_file_round_trips_and_drives_the_prediction(stream, tmp_path):
    costs = tmp_path / "host.toml"
    first = run_cli("time", stream, "--device", "nvme-tlc", "--step-compute-us", 5000, "--fault-cpu-us", 30,
                    "--reclaim-cpu-us", 0.3, "--write-cpu-us", 12, "--save-costs", costs, "--json")
    assert first.exit_code == 0, first.output
    assert timing.load_costs(costs) == timing.CpuCosts(30.0, 0.3, 12.0, source=f"{costs}: given")
    again = run_cli("time", stream, "--device", "nvme-tlc", "--step-compute-us", 5000, "--costs", costs, "--json")
    assert again.exit_code == 0, again.output
    a, b = json.loads(first.output), json.loads(again.output)
    assert b["slowdown"] == a["slowdown"] and b["mean_step_us"] == a["mean_step_us"]
    # an option overrides the file's value: a dearer write makes a slower step
    dearer = run_cli("time", stream, "--device", "nvme-tlc", "--step-compute-us", 5000, "--costs", costs,
                     "--write-cpu-us", 50, "--json")
    assert json.loads(dearer.output)["slowdown"] > b["slowdown"]


@pytest.mark.parametrize(("text", "words"), [
    ("not toml [", "not a host-costs TOML"),
    ('kind = "swaptrace-device-profile"\n', "not a host-costs file"),
    ('kind = "swaptrace-host-costs"\nfault_cpu_us = 1\nreclaim_cpu_us = 1\n', "without write_cpu_us"),
    ('kind = "swaptrace-host-costs"\nfault_cpu_us = -1\nreclaim_cpu_us = 1\nwrite_cpu_us = 1\n', "fault-cpu-us"),
    *[(f'kind = "swaptrace-host-costs"\nfault_cpu_us = 3\nreclaim_cpu_us = 1\nwrite_cpu_us = 1\n'
       f'fault_cpu_us_range = {spread}\n', words)
      for spread, words in (("[4, 5]", "does not hold fault_cpu_us 3"), ("[5, 1]", "does not hold"),
                            ("[1]", "[lowest, highest]"), ('["a", 5]', "[lowest, highest]"),
                            ("[true, 5]", "[lowest, highest]"), ("3", "[lowest, highest]"))],
])
def test_bad_host_costs_file_is_one_line(stream, tmp_path, text, words):
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    saved = tmp_path / "saved.toml"
    r = run_cli("time", stream, "--device", "nvme-tlc", "--costs", bad, "--save-costs", saved)
    assert r.exit_code == 2 and words in the_error(r)
    assert not saved.exists()
    r = run_cli("run", "--preset", "tiny", "--time-costs", bad, "-o", tmp_path / "run")
    assert r.exit_code == 2 and words in the_error(r)
    assert not (tmp_path / "run").exists()


def test_measure_fault_overhead_refuses_given_costs(stream, tmp_path):
    costs = tmp_path / "host.toml"
    timing.save_costs(timing.CpuCosts(1.0, 1.0, 1.0), costs)
    r = run_cli("time", stream, "--device", "nvme-tlc", "--costs", costs, "--measure-fault-overhead")
    assert r.exit_code == 2 and "leave out" in the_error(r)


def test_a_costs_files_spread_gives_the_slowdown_at_both_ends(stream, tmp_path):
    """The prediction at the file's fault cost, and the slowdowns at the spread's ends equal the predictions
    made with those costs given alone; a given --fault-cpu-us replaces the measured cost and its spread."""
    costs = tmp_path / "host.toml"
    timing.save_costs(timing.CpuCosts(30.0, 0.3, 12.0, "measured", fault_cpu_us_range=(20.0, 60.0)), costs)
    base = ["time", stream, "--device", "nvme-tlc", "--step-compute-us", 5000]
    r = run_cli(*base, "--costs", costs, "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    at = {f: json.loads(run_cli(*base, "--fault-cpu-us", f, "--reclaim-cpu-us", 0.3, "--write-cpu-us", 12,
                                "--json").output)["slowdown"] for f in (20, 30, 60)}
    assert got["slowdown"] == at[30] and got["slowdown_range"] == [at[20], at[60]]
    assert at[20] < at[30] < at[60] and got["cpu_costs"]["fault_cpu_us_range"] == [20.0, 60.0]
    text = run_cli(*base, "--costs", costs).output
    assert f"({at[20]:.2f}-{at[60]:.2f}x over the fault cost's measured 20.0-60.0 us)" in text
    given = json.loads(run_cli(*base, "--costs", costs, "--fault-cpu-us", 100, "--json").output)
    assert "slowdown_range" not in given and "fault_cpu_us_range" not in given["cpu_costs"]


def test_a_costs_files_write_spread_prices_with_the_fault_spread_and_a_given_write_cost_drops_it(stream, tmp_path):
    """Both spreads: the ends are (fault low, write low) and (fault high, write high), each equal to the
    prediction with those costs given; a given --write-cpu-us replaces the write cost and its spread only."""
    costs = tmp_path / "host.toml"
    timing.save_costs(timing.CpuCosts(30.0, 0.3, 12.0, "measured", fault_cpu_us_range=(20.0, 60.0),
                                      write_cpu_us_range=(3.0, 40.0)), costs)
    base = ["time", stream, "--device", "nvme-tlc", "--step-compute-us", 5000]
    got = json.loads(run_cli(*base, "--costs", costs, "--json").output)

    def at(f, w):
        return json.loads(run_cli(*base, "--fault-cpu-us", f, "--reclaim-cpu-us", 0.3, "--write-cpu-us", w,
                                  "--json").output)["slowdown"]

    assert got["slowdown"] == at(30, 12) and got["slowdown_range"] == [at(20, 3), at(60, 40)]
    assert got["cpu_costs"]["write_cpu_us_range"] == [3.0, 40.0]
    text = run_cli(*base, "--costs", costs).output
    assert "over the fault cost's measured 20.0-60.0 us and the write cost's measured 3.0-40.0 us)" in text
    given = json.loads(run_cli(*base, "--costs", costs, "--write-cpu-us", 12, "--json").output)
    assert "write_cpu_us_range" not in given["cpu_costs"] and given["cpu_costs"]["fault_cpu_us_range"] == [20.0, 60.0]
    assert given["slowdown_range"] == [at(20, 12), at(60, 12)]


def test_fault_overhead_runs_reach_the_measurement_and_the_costs_file(stream, tmp_path, monkeypatch):
    """--fault-overhead-runs is the count of fault captures measure_host_costs takes (scripted here: the
    captures themselves are tests/test_timing_calibrate.py's, as root); the spread it returns is saved."""
    from swaptrace.timing import calibrate

    asked = []

    def scripted(device, cpu, *, measure_write, fault_runs):
        asked.append(fault_runs)
        return timing.CpuCosts(40.0, cpu.reclaim_cpu_us, 10.0, "scripted", fault_cpu_us_range=(30.0, 55.0))

    monkeypatch.setattr(calibrate, "measure_host_costs", scripted)
    costs = tmp_path / "host.toml"
    r = run_cli("time", stream, "--device", "nvme-tlc", "--compute", "none", "--measure-fault-overhead",
                "--fault-overhead-runs", 4, "--save-costs", costs)
    assert r.exit_code == 0, r.output
    assert asked == [4] and timing.load_costs(costs).fault_cpu_us_range == (30.0, 55.0)
    assert run_cli("time", stream, "--device", "nvme-tlc", "--compute", "none", "--measure-fault-overhead",
                   "--save-costs", tmp_path / "default.toml", "--force").exit_code == 0
    assert asked == [4, 3]  # three captures unless told


def test_busy_reads_note_names_a_profile_measured_idle_for_a_program_on_every_cpu(stream, tmp_path):
    """The note comes exactly when a measured profile's reads were idle and the threads occupy every CPU."""
    from swaptrace.commands.time import busy_reads_note

    def dev(source, **notes):
        return timing.DeviceTiming("d", source, (4096,), (1,), ((60.0,),), ((60.0,),), notes=notes)

    assert "2 threads occupy this machine's 2 CPUs" in busy_reads_note(dev("fio", read_busy_cpus=0), 2, 2)
    assert busy_reads_note(dev("fio"), 4, 2) is not None  # a profile from before the busy runs: reads idle
    assert busy_reads_note(dev("fio", read_busy_cpus=2), 2, 2) is None  # reads measured busy
    assert busy_reads_note(dev("fio", read_busy_cpus=0), 1, 2) is None  # a CPU left free
    assert busy_reads_note(dev("ssd-model"), 2, 2) is None  # not a measured profile
    assert busy_reads_note(dev("fio"), 2, None) is None  # CPUs unknown
    # the command prints it for a stream run on every CPU of this machine with an idle profile
    import os

    path = tmp_path / "disk.toml"
    path.write_text(dev("fio", read_busy_cpus=0).to_toml())
    cpus = os.cpu_count() or 1
    r = run_cli("time", stream, "--device", path, "--step-compute-us", 1000, "--fault-cpu-us", 1,
                "--reclaim-cpu-us", 1, "--threads", cpus, "--json")
    assert r.exit_code == 0, r.output
    assert "fio run --busy-cpus" in json.loads(r.output)["note"]
    path.write_text(dev("fio", read_busy_cpus=cpus).to_toml())
    r = run_cli("time", stream, "--device", path, "--step-compute-us", 1000, "--fault-cpu-us", 1,
                "--reclaim-cpu-us", 1, "--threads", cpus, "--json")
    assert r.exit_code == 0 and "note" not in json.loads(r.output)
