"""``fio run --busy-cpus N``: CPU burners beside every measured job, never beside a fill; results read the measured job."""

from __future__ import annotations

import json
import os
import tomllib

import pytest
from click.testing import CliRunner
from fio_helpers import make_stream

from swaptrace.cli import cli
from swaptrace.fio import busy, jobs, results


@pytest.fixture(scope="module")
def read_write_jobs(tmp_path_factory):
    d = tmp_path_factory.mktemp("busyjobs")
    s = make_stream(d / "s.parquet", n=200, device_bytes=4 << 20, duration_us=2e5)
    return jobs.build_jobs(s, d / "jobs", sweep_sizes=("4k",), profile_sizes=("4k",), profile_depths=(4,)).path


def _invoke(*args):
    return CliRunner().invoke(cli, ["fio", *args])


@pytest.mark.fio
def test_burners_run_beside_measured_jobs_only(read_write_jobs, tmp_path, fio_bin):
    """One burner beside each 1 s sweep job (it got CPU, fio says), none beside the fill; one row per measured job."""
    out = tmp_path / "run"
    res = _invoke("run", str(read_write_jobs), "--target", str(tmp_path / "t.dat"), "--size", "4MiB", "--runtime", "1",
                  "--jobs", "sweep_read_4k,sweep_write_4k", "--busy-cpus", "1", "-o", str(out))
    assert res.exit_code == 0, res.output
    rows, meta = results.read_results(out / "results.parquet")
    assert sorted((r["instance"], r["direction"]) for r in rows if r["kind"] == "sweep") == \
        [("sweep_read_4k", "read"), ("sweep_write_4k", "write")]
    record = meta["run"]["busy_cpus"]
    assert record["count"] == 1
    assert sorted(record["cpu_pct"]) == ["sweep_read_4k", "sweep_write_4k"]  # the fill is not among them
    for pct in record["cpu_pct"].values():
        # a burner fio ran for the job's second: most of a CPU on an idle machine, some even under a loaded test run
        assert len(pct) == 1 and 5.0 < pct[0] <= 101.0
    raw = out / "raw"
    # one job file a step: fio runs the files of its command line one after another, the jobs of a file together
    combined = (raw / busy.combined_name("sweep_read_4k")).read_text()
    assert combined.index("[sweep_read_4k]") < combined.index(f"[{busy.BUSY_JOB}]") and "numjobs=1" in combined
    assert not (raw / busy.combined_name("precondition@sweep")).exists()
    fill_jobs = results.load_fio_json(raw / "precondition@sweep.json")["jobs"]
    assert [j["jobname"] for j in fill_jobs] == ["precondition"]
    measured = results.load_fio_json(raw / "sweep_read_4k.json")["jobs"]
    assert [j["jobname"] for j in measured] == ["sweep_read_4k", busy.BUSY_JOB]
    # the profile says under which load it was measured
    prof = tmp_path / "disk.toml"
    res = _invoke("profile", str(out), "-o", str(prof))
    assert res.exit_code == 0, res.output
    got = tomllib.loads(prof.read_text())
    assert (got["read_busy_cpus"], got["write_busy_cpus"]) == (1, 1)


def test_dry_run_names_the_burners_beside_time_based_jobs_only(read_write_jobs, tmp_path):
    res = _invoke("run", str(read_write_jobs), "--target", str(tmp_path / "t.dat"), "--size", "4MiB",
                  "--jobs", "sweep_read_4k,replay", "--busy-cpus", "2", "--dry-run")
    assert res.exit_code == 0, res.output
    files = [[p.rsplit("/", 1)[-1] for p in ln.split() if p.endswith(".fio")]
             for ln in res.output.splitlines() if "--output-format=json" in ln]
    assert all(len(f) == 1 for f in files), files  # one job file each: fio would run a second one after the first
    assert sorted({f[0] for f in files}) == ["precondition.fio", "replay.fio", busy.combined_name("sweep_read_4k")]
    assert not (tmp_path / "t.dat").exists()


@pytest.mark.parametrize("value", [str((os.cpu_count() or 1) + 1), "-1", "two"])
def test_bad_busy_cpus_one_line_exit_2(read_write_jobs, tmp_path, value):
    res = _invoke("run", str(read_write_jobs), "--target", str(tmp_path / "t.dat"), "--size", "4MiB",
                  "--jobs", "sweep_read_4k", "--runtime", "1", "--busy-cpus", value, "-o", str(tmp_path / "run"))
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1 and "busy-cpus" in res.output
    assert not (tmp_path / "t.dat").exists() and not (tmp_path / "run").exists()


def test_measured_job_and_burner_cpu_by_hand():
    """Whatever the order fio lists them in, the measured job is the one not named as a burner."""
    burner = {"jobname": busy.BUSY_JOB, "usr_cpu": 97.5, "sys_cpu": 1.5}
    measured = {"jobname": "sweep_read_4k", "usr_cpu": 3.0, "sys_cpu": 20.0}
    assert busy.measured_job([burner, measured]) is measured
    assert busy.measured_job([measured, burner]) is measured
    assert busy.measured_job([burner]) is None
    assert busy.burner_cpu_pct([measured, burner, {**burner, "usr_cpu": 50.0, "sys_cpu": 0.0}]) == [99.0, 50.0]
    assert busy.applies_to({"kind": "sweep", "time_based": True})
    assert not busy.applies_to({"kind": "replay", "time_based": False})
    assert not busy.applies_to({"kind": "precondition", "time_based": False})
    assert not busy.applies_to({"kind": "steady", "time_based": True})
    text = busy.combined_text("[sweep_read_4k]\nrw=randread\n\n\n", 3)
    assert text.startswith("[sweep_read_4k]\nrw=randread\n\n;")
    assert f"[{busy.BUSY_JOB}]" in text and "numjobs=3" in text and "ioengine=cpuio" in text \
        and "cpuload=100" in text and "runtime=${SWAPTRACE_RUNTIME}" in text
    with pytest.raises(ValueError):
        busy.job_text(0)


def test_parse_reads_the_measured_job_when_a_burner_is_listed_first(tmp_path):
    out = {"fio version": "fio-3.33", "jobs": [
        {"jobname": busy.BUSY_JOB, "error": 0, "usr_cpu": 99.0, "sys_cpu": 0.0, "read": {"total_ios": 0},
         "write": {"total_ios": 0}},
        {"jobname": "sweep_read_4k", "error": 0, "read": {"total_ios": 10, "io_bytes": 40960, "bw_bytes": 4096.0,
                                                          "iops": 1.0, "runtime": 10000}, "write": {"total_ios": 0}},
    ]}
    path = tmp_path / "x.json"
    path.write_text(json.dumps(out))
    rows = results.parse_fio_json(path, "sweep_read_4k", {"name": "sweep_read_4k", "group": "sweep", "kind": "sweep",
                                                          "request_bytes": 4096})
    assert [(r["instance"], r["direction"], r["ios"]) for r in rows] == [("sweep_read_4k", "read", 10)]


def _write_fake_run(folder, read_lat_us, write_lat_us, busy_cpus, sizes):
    """A ``fio run`` folder written by hand: depth-1 sweeps of ``sizes`` whose mean latency is the given one at
    4 KiB and grows as the square root of the size."""
    from swaptrace.fio.runner import Step

    raw = folder / "raw"
    raw.mkdir(parents=True)
    parsed = []
    for op, lat4k in (("read", read_lat_us), ("write", write_lat_us)):
        for size in sizes:
            name, lat = f"sweep_{op}_{size >> 10}k", lat4k * (size / 4096) ** 0.5
            out = {"jobs": [{"jobname": name, "error": 0, "job options": {"ioengine": "psync"},
                             op: {"lat_ns": {"mean": lat * 1e3}}}]}
            (raw / f"{name}.json").write_text(json.dumps(out))
            job = {"name": name, "group": "sweep", "kind": "sweep"}
            parsed.append((Step(name, job, 1), [{
                "instance": name, "job": name, "group": "sweep", "kind": "sweep", "direction": op,
                "request_bytes": size, "pattern": "random", "io_bytes": size * 100, "ios": 100, "bw_bytes": 1e6,
                "iops": 1e6 / lat, "clat_p50_us": lat, "clat_p99_us": lat, "clat_p999_us": lat,
                "runtime_ms": 1000.0, "trace_duration_ms": float("nan"), "expected_ios": float("nan")}]))
    run = {"target": "/tmp/t", "fio": "fio-3.33", "busy_cpus": {"count": busy_cpus} if busy_cpus else None}
    results.write_run_results(folder, parsed, {"jobs": []}, run)


def test_reads_from_takes_the_read_table_of_the_other_run(tmp_path):
    """Reads from the busy run, writes from the idle one, each table's load recorded; other sizes refused."""
    from swaptrace.errors import ConfigError
    from swaptrace.timing import device_profile

    idle, busy_run, other = tmp_path / "idle", tmp_path / "busy", tmp_path / "other"
    for folder, r, w, n, sizes in ((idle, 60.0, 70.0, 0, (4096, 16384)), (busy_run, 120.0, 130.0, 2, (4096, 16384)),
                                   (other, 120.0, 130.0, 2, (4096, 65536))):
        _write_fake_run(folder, r, w, n, sizes)
    prof = device_profile.build_profile(idle, reads_from=busy_run)
    assert prof.read_latency_us == ((120.0,), (240.0,)) and prof.write_latency_us == ((70.0,), (140.0,))
    assert (prof.notes["read_busy_cpus"], prof.notes["write_busy_cpus"]) == (2, 0)
    assert prof.notes["reads_run_dir"] == str(busy_run.resolve())
    plain = device_profile.build_profile(idle)
    assert plain.read_latency_us == ((60.0,), (120.0,)) and "reads_run_dir" not in plain.notes
    with pytest.raises(ConfigError, match="same jobs"):
        device_profile.build_profile(idle, reads_from=other)
    res = _invoke("profile", str(idle), "--reads-from", str(other), "-o", str(tmp_path / "p.toml"))
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1 and not (tmp_path / "p.toml").exists()
    res = _invoke("profile", str(idle), "--reads-from", str(busy_run), "-o", str(tmp_path / "p.toml"))
    assert res.exit_code == 0, res.output
    assert tomllib.loads((tmp_path / "p.toml").read_text())["read"]["latency_us"] == [[120.0], [240.0]]
