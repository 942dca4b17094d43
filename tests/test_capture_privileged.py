"""Real-kernel capture (root, swap, memory cgroup, tracefs): stream vs counters, cleanup, SIGKILL recovery.

Each test skips with the reason when the machine cannot run a capture.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import require_root

from swaptrace.core.traceio import TraceWriter, open_trace
from swaptrace.errors import SwaptraceError

pytestmark = pytest.mark.privileged

PREFIX = "swaptrace-capture-"


def require_capture() -> None:
    require_root()
    from swaptrace.capture import check_privileges

    try:
        check_privileges()
    except SwaptraceError as exc:
        pytest.skip(f"capture is not possible here: {exc}")


def zipf_trace(path: Path, pages: int = 38400, steps: int = 20, per_step: int = 20000, seed: int = 0) -> Path:
    """A 150 MiB footprint updated at Zipf(1.2) pages, half loads, half stores."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(pages)
    meta = {"page_bytes": 4096, "footprint_pages": pages, "footprint_bytes": pages * 4096, "first_step": 0,
            "steps": steps, "regions": [{"name": "t", "kind": "table", "first_page": 0, "pages": pages}]}
    with TraceWriter(path, "access", meta) as w:
        for s in range(steps):
            page = perm[(rng.zipf(1.2, per_step) - 1) % pages]
            w.write(step=np.full(per_step, s, np.uint32), page=page.astype(np.uint64),
                    write=rng.random(per_step) < 0.5, region=np.zeros(per_step, np.uint16))
    return path


def ours_left() -> list[str]:
    """Everything of ours visible in the kernel: swap areas, loop devices, cgroups, tracefs instances."""
    from swaptrace.capture.cgroup import list_groups
    from swaptrace.capture.tracing import list_instances
    from swaptrace.core.blockdev import loop_devices, swap_areas

    loops = {dev: f for dev, f in loop_devices().items() if PREFIX in f}
    left = [f"loop {d} {f}" for d, f in loops.items()]
    left += [f"swap {s}" for s in swap_areas() if s in loops or PREFIX in s]
    left += [f"cgroup {p}" for p in list_groups(PREFIX)]
    left += [f"instance {p}" for p in list_instances(PREFIX)]
    left += [f"folder {p}" for p in Path("/var/tmp").glob(PREFIX + "*")]
    return left


def test_small_capture_matches_counters_and_cleans_up(tmp_path):
    require_capture()
    from swaptrace.capture import capture

    assert ours_left() == [], "leftovers before the test"
    trace = zipf_trace(tmp_path / "z.access.parquet")
    t0 = time.monotonic()
    res = capture(trace, tmp_path / "z.kernel.swapio.parquet", memory_bytes=16 << 20, timeout_s=60)
    assert time.monotonic() - t0 < 60
    assert ours_left() == []
    tf = open_trace(res.path, kind="swapio")
    assert tf.meta["source"] == "kernel" and tf.num_rows > 0
    assert res.lost_events == 0 and res.malformed_lines == 0
    # every page the kernel counted as swapped out was seen on the device (global counter: within 5%)
    assert res.pswpout > 0 and abs(res.pages_out - res.pswpout) <= 0.05 * res.pswpout
    assert res.pages_in > 0 and abs(res.pages_in - res.pswpin) <= 0.05 * max(res.pswpin, 1)
    cols = tf.read_all()
    assert np.all(np.diff(cols["t_us"]) >= 0) and np.all(cols["length"] % 4096 == 0)
    assert int(cols["step"].max()) <= 19
    assert np.all(cols["offset"] + cols["length"] <= tf.meta["device_bytes"])
    k = tf.meta["kernel"]
    assert len(k["step_wall_us"]) == 20 and k["unlimited"] is not None and res.slowdown > 0
    # LRU list sizes at each step's end: the model's pages fill the budget, within the cgroup's limit (the
    # budget sits on top of a baseline that may shrink a little, e.g. page cache, so it is no exact bound)
    lists = k["step_lists"]
    assert lists["step"] == list(range(20))
    resident = np.add(lists["active_anon_pages"], lists["inactive_anon_pages"])
    assert (16 << 20) // 4096 // 2 < resident.max() <= k["limit_bytes"] // 4096
    assert k["baseline_locked"] is True
    assert k["requests_missing_vs_device"] <= 0  # every request the loop device served is in the stream
    dev = k["loop_stat_delta"]  # the device's own time: writes took some, and no more than the run's wall time
    assert dev["write_ios"] > 0 and 0 < dev["write_ms"] and 0 < dev["busy_ms"] <= k["total_us"] / 1e3 + 1000
    assert tf.meta["summary"]["pswpout"] == res.pswpout
    assert k["reclaim"] is None  # not asked for
    # faults per step (getrusage deltas around each step) add up to the run's; nothing major happens between steps
    assert len(k["step_major_faults"]) == len(k["step_minor_faults"]) == 20
    assert 0.9 * k["minor_faults"] <= sum(k["step_minor_faults"]) <= k["minor_faults"]
    assert sum(k["step_major_faults"]) == res.summary["major_faults"] > 0
    # the model had its budget, no more: the rest of the process held its baseline to the end (the child's
    # resident model pages, subtracted from the cgroup's usage). Below zero the model had a little less: the
    # usage counter's per-CPU charge stock at the end (up to 256 KiB a CPU) and slab growing during the run
    assert k["baseline_squeezed"] is True
    assert 0 < k["model_resident_end_bytes"] <= k["limit_bytes"] - k["baseline_bytes"]
    assert -(2 << 20) <= k["room_gain_bytes"] <= 256 << 10
    # stalls of both runs, step by step from GO: only the limited run can wait for swap-ins (no swap before it)
    d = k["delays"]
    assert d["limited"]["steps"] == list(range(20)) == d["free"]["steps"]
    assert d["limited"]["total"]["swapin_us"] > 0 and d["free"]["total"]["swapin_us"] == 0
    assert sum(d["limited"]["step_wall_us"]) <= k["total_us"] * 1.5 + 1e6
    assert set(k["load"]["limited"]) >= {"load_before", "load_after", "other_cpu_s"} and "limited" in k["psi"]


def test_capture_with_reclaim_tracepoints_counts_each_step(tmp_path):
    require_capture()
    from swaptrace.capture import capture
    from swaptrace.capture.reclaim import COUNTERS

    trace = zipf_trace(tmp_path / "r.access.parquet", steps=6)
    res = capture(trace, tmp_path / "r.kernel.swapio.parquet", memory_bytes=16 << 20, unlimited_run=False,
                  trace_reclaim=True, timeout_s=60)
    assert ours_left() == []  # the extra events went with the tracefs instance
    k = open_trace(res.path, kind="swapio").meta["kernel"]
    rc = k["reclaim"]
    if rc["missing_events"]:
        pytest.skip(f"this kernel lacks {rc['missing_events']}")
    assert rc["steps"] == list(range(6))
    assert all(len(rc[c]) == 6 for c in COUNTERS)
    t = rc["totals"]
    assert t == {c: sum(rc[c]) for c in COUNTERS}
    assert t["calls"] > 0 and rc["malformed"] == 0 and rc["unfinished_calls"] == 0
    # each isolated page has one outcome: freed, kept (referenced), activated, or written and put back
    assert t["scanned"] >= t["reclaimed"] + t["kept"] + t["activated"]
    # a call stops once it freed 32 pages, so calls free at least 32 on average when memory is full
    assert t["reclaimed"] >= 16 * t["calls"]
    assert sum(rc["priority_calls"]) == t["calls"]
    assert t["flushes"] >= 5  # memory.stat is read after every step (step_lists), which flushes
    # memory fills within the first steps (16 MiB budget, ~10k stores per step over 150 MiB): reclaim after
    assert all(c > 0 for c in rc["calls"][3:])


def test_cli_capture_requires_budget_and_refuses_existing(tmp_path):
    require_capture()
    from click.testing import CliRunner

    from swaptrace.cli import cli

    trace = zipf_trace(tmp_path / "z.access.parquet", steps=2, per_step=100)
    out = tmp_path / "o.swapio.parquet"
    runner = CliRunner()
    res = runner.invoke(cli, ["capture", str(trace), "-o", str(out)])
    assert res.exit_code == 2 and "--memory" in res.output
    out.write_text("x")
    res = runner.invoke(cli, ["capture", str(trace), "-o", str(out), "--memory", "8MiB"])
    assert res.exit_code == 2 and "exists" in res.output
    assert ours_left() == []


def _start_capture_and_wait(tmp_path, name):
    """Start a long CLI capture in a subprocess; return it once its traced replay runs."""
    trace = zipf_trace(tmp_path / "long.access.parquet", steps=400, per_step=20000, seed=1)
    code = "import sys; from swaptrace.cli import cli; sys.exit(cli())"
    proc = subprocess.Popen([sys.executable, "-c", code, "capture", str(trace), "--memory", "16MiB", "--no-baseline",
                             "-o", str(tmp_path / name)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    from swaptrace.capture.cgroup import memory_hierarchy

    group = memory_hierarchy()[1] / f"{PREFIX}{proc.pid}"
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:  # until its cgroup has a task and its swap is on
            if proc.poll() is not None:
                pytest.fail(f"capture ended early: {proc.stderr.read().decode()[-500:]}")
            procs = (group / "cgroup.procs").read_text().split() if (group / "cgroup.procs").exists() else []
            if procs and "swap" in " ".join(ours_left()):
                break
            time.sleep(0.2)
        else:
            pytest.fail("the capture never reached the traced replay")
        time.sleep(1.0)
        return proc, [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except BaseException:
        proc.kill()
        proc.wait()
        proc.stderr.close()
        raise


def test_sigterm_capture_cleans_up_itself(tmp_path):
    require_capture()
    proc, _ = _start_capture_and_wait(tmp_path, "term.swapio.parquet")
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    finally:
        proc.stderr.close()
    assert proc.returncode == 130  # "Interrupted; partial outputs were removed."
    assert ours_left() == []
    assert not (tmp_path / "term.swapio.parquet").exists() and not any(tmp_path.glob(".term*"))


def test_sigkilled_capture_is_cleaned_by_next_run(tmp_path):
    require_capture()
    from swaptrace.capture import capture, find_leftovers

    proc, child_pids = _start_capture_and_wait(tmp_path, "killed.swapio.parquet")
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        proc.stderr.close()
    time.sleep(0.5)
    for pid in child_pids:  # the replay child dies with its parent (PR_SET_PDEATHSIG)
        assert not Path(f"/proc/{pid}").exists() or b"python" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert not (tmp_path / "killed.swapio.parquet").exists()
    left = find_leftovers()
    assert any("cgroup" in x for x in left) and any("loop" in x for x in left), left
    res = capture(zipf_trace(tmp_path / "small.access.parquet", steps=2, per_step=2000), tmp_path / "s.swapio.parquet",
                  memory_bytes=16 << 20, unlimited_run=False)
    assert any("cgroup" in x for x in res.removed_leftovers) and any("loop" in x for x in res.removed_leftovers)
    assert ours_left() == [] and find_leftovers() == []
    assert not any(tmp_path.glob(".killed*"))  # no partial output either


def test_second_capture_at_once_is_refused(tmp_path):
    require_capture()
    from swaptrace.capture import capture
    from swaptrace.errors import ConfigError

    proc, _ = _start_capture_and_wait(tmp_path, "first.swapio.parquet")
    try:
        with pytest.raises(ConfigError, match=f"another capture is running \\(pid {proc.pid} holds"):
            capture(zipf_trace(tmp_path / "second.access.parquet", steps=2, per_step=100),
                    tmp_path / "second.swapio.parquet", memory_bytes=16 << 20, unlimited_run=False)
        assert not (tmp_path / "second.swapio.parquet").exists()
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        finally:
            proc.stderr.close()
    assert ours_left() == []


def test_capture_refuses_beside_another_active_swap_area(tmp_path):
    require_capture()
    import shutil

    from swaptrace.capture import capture
    from swaptrace.errors import ConfigError

    if any(shutil.which(t) is None for t in ("losetup", "mkswap", "swapon", "swapoff")):
        pytest.skip("needs losetup, mkswap, swapon, swapoff")
    backing = tmp_path / "other.img"  # not named like ours: a swap area the capture must not share
    with open(backing, "wb") as fh:
        fh.truncate(32 << 20)
    proc = subprocess.run(["losetup", "-f", "--show", str(backing)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot create a loop device here: {proc.stderr.strip()}")
    dev = proc.stdout.strip()
    try:
        subprocess.run(["mkswap", dev], check=True, capture_output=True)
        on = subprocess.run(["swapon", dev], capture_output=True, text=True)
        if on.returncode != 0:
            pytest.skip(f"cannot swapon here: {on.stderr.strip()}")
        with pytest.raises(ConfigError, match=f"swap is already active on {dev}"):
            capture(zipf_trace(tmp_path / "z.access.parquet", steps=2, per_step=100), tmp_path / "z.swapio.parquet",
                    memory_bytes=16 << 20, unlimited_run=False)
        assert ours_left() == [] and not (tmp_path / "z.swapio.parquet").exists()
    finally:
        subprocess.run(["swapoff", dev], capture_output=True)
        subprocess.run(["losetup", "-d", dev], capture_output=True)


def test_a_loop_device_alone_is_set_up_as_a_captures_swap_and_removed(tmp_path):
    """``SwapDevice(make_swap=False)`` (what ``analysis/validate_timing.py profile --loop`` gives fio): the same
    loop device a capture swaps on -- direct I/O, non-rotational -- with no swap area; teardown removes the
    device and its file."""
    require_root()
    from swaptrace.capture.swapdev import SwapDevice
    from swaptrace.core.blockdev import loop_devices, swap_areas

    path = tmp_path / f"{PREFIX}loop-only.loop"
    dev = SwapDevice(path, 8 << 20, make_swap=False)
    try:
        dev.setup()
        sys_dir = Path("/sys/block") / Path(dev.loop).name
        assert (sys_dir / "loop" / "dio").read_text().strip() == "1"
        assert (sys_dir / "queue" / "rotational").read_text().strip() == "0"
        assert dev.loop in loop_devices() and dev.loop not in swap_areas()
        assert not dev.active and path.stat().st_size == 8 << 20
    finally:
        dev.teardown()
    assert dev.loop is None and not path.exists() and not ours_left()
