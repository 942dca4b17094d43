"""``swaptrace sweep``: points as Dask tasks, one result file per point, resumable, robust to a lost worker."""

from __future__ import annotations

import json
import os
import signal

import naive_timing
import numpy as np
import pyarrow.parquet as pq
import pytest
from cli_helpers import run_cli, the_error

from swaptrace.emulate import emulate
from swaptrace.errors import ConfigError
from swaptrace.parallel.cluster import SCHEDULER_ENV
from swaptrace.parallel.sweep import finished_keys, read_results, run_sweep
from swaptrace.parallel.sweep_spec import SweepSpec, load_sweep_spec
from swaptrace.ssd.config import load_device
from swaptrace.timing import model as timing

pytest.importorskip("distributed", reason="the dask extra is not installed")

SMALL = dict(presets=("tiny",), steps=4, memory_fractions=(0.3, 0.6), policies=("linux", "lru"))
#: what the end-to-end sweep runs: the small SSD preset (its steady state takes milliseconds, a real
#: drive's seconds) and a given compute time per step
RUN = {**SMALL, "devices": ("tiny",), "step_compute_us": 1000.0}


def test_points_are_the_product_of_the_axes_with_distinct_stable_keys(tmp_path):
    spec = SweepSpec(**SMALL, devices=("nvme-tlc", "mqsim-default"))
    points = spec.points()
    assert len(points) == 1 * 2 * 2 * 2
    assert len({p.key for p in points}) == len(points)
    assert [p.key for p in SweepSpec(**SMALL, devices=("nvme-tlc", "mqsim-default")).points()] == [p.key for p in points]
    assert SweepSpec(**{**SMALL, "seed": 1}).points()[0].key != SweepSpec(**SMALL).points()[0].key


def test_toml_spec_and_options(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[sweep]\npresets = ["tiny"]\nsteps = 4\nmemory = ["8MiB", "16MiB"]\npolicies = ["lru"]\n')
    spec = load_sweep_spec(f, steps=6, devices=("mqsim-default",))
    assert spec.memory == (8 << 20, 16 << 20) and spec.steps == 6 and spec.devices == ("mqsim-default",)
    f.write_text('presets = ["tiny"]\nmemory = ["8MiB"]\nstep_compute_us = 250\n')
    assert load_sweep_spec(f).points()[0].step_compute_us == 250.0
    assert load_sweep_spec(f, step_compute_us=0.0).step_compute_us == 0.0  # an option overrides, 0 included
    f.write_text('presets = ["tiny"]\nmemory = ["8MiB"]\nstep_compute_us = -1\n')
    with pytest.raises(ConfigError, match="step compute time"):
        load_sweep_spec(f).check()
    f.write_text('presets = ["tiny"]\nbudget = 3\n')
    with pytest.raises(ConfigError, match="unknown key"):
        load_sweep_spec(f)


@pytest.mark.parametrize("args, message", [
    (["--preset", "tiny", "--memory-fraction", "0.5", "--policy", "fifo"], "unknown policy"),
    (["--preset", "tiny"], "at least one budget"),
    (["--memory-fraction", "0.5"], "at least one trace or preset"),
    (["--preset", "tiny", "--memory-fraction", "1.5"], "1.5 is not in the range 0<x<=1"),  # the option's type refuses it
    (["--preset", "nosuch", "--memory-fraction", "0.5"], "nosuch"),
    (["--preset", "tiny", "--memory-fraction", "0.5", "--step-compute-us", "-1"], "--step-compute-us"),
    (["--preset", "tiny", "--memory-fraction", "0.5", "--step-compute-us", "nan"], "--step-compute-us"),
])
def test_bad_sweeps_are_refused_before_anything_runs(tmp_path, args, message):
    r = run_cli("sweep", *args, "-o", tmp_path / "out")
    assert message in the_error(r)
    assert not (tmp_path / "out").exists()


def test_sweep_writes_one_row_per_point_equal_to_a_direct_run_and_resumes(tmp_path, monkeypatch):
    out = tmp_path / "out"
    r = run_cli("sweep", "--preset", "tiny", "--steps", 4, "--memory-fraction", 0.3, "--memory-fraction", 0.6,
                "--policy", "linux", "--policy", "lru", "--device", "tiny", "--step-compute-us", 1000, "--workers", 2,
                "-o", out, "--plot", tmp_path / "s.png")
    assert r.exit_code == 0, r.output
    table = read_results(out)
    assert table.num_rows == 4 and len(set(table.column("key").to_pylist())) == 4
    assert pq.read_table(out).num_rows == 4  # the folder is one Parquet dataset
    assert (tmp_path / "s.png").stat().st_size > 0
    # oracle: the same point emulated directly in this process
    row = next(x for x in table.to_pylist() if x["policy"] == "lru" and x["memory_fraction"] == 0.3)
    direct = emulate(row["trace"], tmp_path / "d.swapio.parquet", policy="lru", memory_fraction=0.3, workers=1)
    assert (row["pages_in"], row["pages_out"], row["faults"]) == (direct.pages_in, direct.pages_out, direct.faults)
    assert row["waf"] is None or row["waf"] >= 1.0
    # the SSD columns: the same stream replayed by `swaptrace ssd replay` with the drive state docs/ssd.md states
    # for the pipeline (the swap partition at the drive's start; the rest 80 % full, half of it overwritten at
    # random, the swap area used before; sampled steady state), not the product's shared helper
    r = run_cli("ssd", "replay", tmp_path / "d.swapio.parquet", "--device", "tiny", "--precondition", "steady",
                "--fill", 0.8, "--overwritten", 0.5, "--swap-prior", "pool", "--swap-offset", 0, "--json")
    assert r.exit_code == 0, r.output
    replayed = json.loads(r.output)
    assert (row["waf"], row["throughput_mb_s"]) == (replayed.get("waf"), replayed["throughput_mb_s"])
    # step time: the time model's reference (tests/naive_timing.py, from docs/timing.md) on the stream, given
    # 1000 us of compute per step, no kernel CPU costs, on the tiny drive's latency table
    step_us, _ = naive_timing.mean_step_us(tmp_path / "d.swapio.parquet", timing.device_from_ssd(load_device("tiny")),
                                           1000.0)
    assert row["step_compute_us"] == 1000.0
    # the same terms summed in another order (a few hundred of ~1e3 us): 1e-12 relative
    assert row["step_time_us"] == pytest.approx(step_us, rel=1e-12)
    assert row["step_time_us"] > 1000.0  # it faulted, and waiting for swap-ins costs time on top of compute
    assert row["read_requests"] + row["write_requests"] > 0
    # a rerun runs nothing; a widened sweep runs only its new points
    before = {p: p.stat().st_mtime_ns for p in out.glob("point-*.parquet")}
    again = run_sweep(SweepSpec(**RUN), out, workers=1)
    assert (again.ran, again.skipped) == (0, 4)
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=50) as cluster, Client(cluster) as client:
        monkeypatch.setenv(SCHEDULER_ENV, cluster.scheduler_address)  # an existing cluster, found by the variable
        wider = run_sweep(SweepSpec(**{**RUN, "policies": ("linux", "lru", "clock")}), out, workers=2)
        pids = set(client.run(os.getpid).values())
    assert (wider.ran, wider.skipped, wider.failed) == (2, 4, [])
    clock_rows = [x for x in read_results(out).to_pylist() if x["policy"] == "clock"]
    assert {int(x["worker"].rsplit(":", 1)[1]) for x in clock_rows} <= pids
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())
    assert read_results(out).num_rows == 6


@pytest.mark.slow
def test_a_worker_killed_mid_sweep_loses_no_point_and_leaves_nothing_half_written(tmp_path):
    from distributed import Client, LocalCluster

    spec = SweepSpec(presets=("tiny",), steps=12, memory_fractions=(0.2, 0.35, 0.5, 0.65), policies=("linux", "lru"),
                     devices=("tiny",))
    out = tmp_path / "out"
    killed: list[tuple[int, list[str]]] = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=50) as cluster, Client(cluster) as client:

        def kill_a_busy_worker(_n: int) -> None:
            if killed:
                return
            busy = {addr: list(keys) for addr, keys in client.processing().items() if keys}
            points = {a: k for a, k in busy.items() if any(str(x).startswith("point-") for x in k)}
            if not points:
                return
            victim, keys = next(iter(points.items()))
            pid = client.run(os.getpid, workers=[victim])[victim]
            os.kill(pid, signal.SIGKILL)
            killed.append((pid, keys))

        result = run_sweep(spec, out, scheduler=cluster.scheduler_address, progress=kill_a_busy_worker)
    assert killed, "no worker was busy with a point when the first point finished"
    assert result.failed == []
    expected = {p.key for p in spec.points()}
    table = read_results(out)
    assert sorted(table.column("key").to_pylist()) == sorted(expected)  # no duplicate, none missing
    assert finished_keys(out) == expected
    lost = {str(k)[len("point-"):] for k in killed[0][1]}
    assert lost <= expected
    assert not [p for p in out.rglob("*") if p.name.endswith(".partial")]  # nothing half-written left
    for f in out.glob("point-*.parquet"):
        assert pq.read_table(f).num_rows == 1
    np.testing.assert_array_less(0, table.column("accesses").to_numpy())


def test_longest_points_are_submitted_first():
    from swaptrace.parallel.sweep import cost_hint

    spec = SweepSpec(presets=("tiny",), steps=4, memory_fractions=(0.2, 0.6), policies=("lru", "linux"))
    order = sorted(spec.points(), key=lambda p: -cost_hint(p, 1000))
    assert [(p.policy, p.memory_fraction) for p in order] == [("linux", 0.2), ("linux", 0.6), ("lru", 0.2),
                                                              ("lru", 0.6)]
    assert cost_hint(order[0], 2000) == 2 * cost_hint(order[0], 1000)


def _damage_data_page(path) -> None:
    """Overwrite the middle of one column's data pages, keeping the footer: the file opens, reading fails."""
    col = pq.ParquetFile(path).metadata.row_group(0).column(1)
    start = min(o for o in (col.dictionary_page_offset, col.data_page_offset) if o is not None)
    assert col.total_compressed_size > 64
    with open(path, "r+b") as f:
        f.seek(start + 24)
        f.write(b"\xff" * (col.total_compressed_size - 48))


def test_a_failing_point_is_reported_the_others_written_and_a_rerun_retries_it(tmp_path):
    import shutil

    from swaptrace.workload.generate import generate_trace

    good = generate_trace("tiny", tmp_path / "good.access.parquet", steps=3, seed=0)
    bad = tmp_path / "bad.access.parquet"
    shutil.copy(good, bad)
    _damage_data_page(bad)
    out = tmp_path / "out"
    args = ["sweep", "--trace", good, "--trace", bad, "--memory-fraction", 0.3, "--policy", "lru", "--device", "tiny",
            "--workers", 1, "-o", out]
    spec = SweepSpec(traces=(str(good), str(bad)), memory_fractions=(0.3,), policies=("lru",), devices=("tiny",))
    bad_key = next(p.key for p in spec.points() if p.trace == str(bad.resolve()))
    good_key = next(p.key for p in spec.points() if p.trace == str(good.resolve()))
    r = run_cli(*args)
    # the sweep finishes the other point, reports the failed one (its key and its error's first line, which
    # names the damaged file) and exits 1, not 0 (a result is missing) nor 2 (the input was valid when checked)
    assert r.exit_code == 1, r.output
    failed = [line for line in r.output.splitlines() if line.startswith("point ")]
    assert failed == [line for line in failed if line.startswith(f"point {bad_key} failed: ") and str(bad) in line]
    assert len(failed) == 1 and "Traceback" not in r.output
    assert finished_keys(out) == {good_key}
    assert read_results(out).column("key").to_pylist() == [good_key]
    assert not list(out.glob(".point-*")) and not list(out.glob("*.partial"))  # nothing half-written
    # the failed point has no file, so a rerun runs it (and only it) again
    again = run_sweep(spec, out, workers=1)
    assert (again.ran, again.skipped, [k for k, _ in again.failed]) == (0, 1, [bad_key])
    shutil.copy(good, bad)  # the input repaired: the rerun completes the sweep
    fixed = run_sweep(spec, out, workers=1)
    assert (fixed.ran, fixed.skipped, fixed.failed) == (1, 1, [])
    assert finished_keys(out) == {good_key, bad_key}
