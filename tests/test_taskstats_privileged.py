"""Task delay accounting under the real kernel: a sleeper, an O_DIRECT reader, a capture that swaps in.

Root only (skipped with the reason otherwise, or when the kernel has no TASKSTATS family). Each test
turns ``kernel.task_delayacct`` on through :func:`~swaptrace.capture.taskstats.enable_delayacct` (or a
capture does) and checks the value is back as it was, after success, failure, SIGTERM and SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_capture_command_privileged import _env, _gone, _start
from test_capture_command_privileged import ours_left as our_leftovers
from test_capture_privileged import require_capture

from swaptrace.capture import taskstats as ts
from swaptrace.cli import cli
from swaptrace.core.traceio import open_trace

pytestmark = pytest.mark.privileged

SYSCTL = Path("/proc/sys/kernel/task_delayacct")
PY = sys.executable


def _sysctl() -> str:
    return SYSCTL.read_text().strip()


@pytest.fixture
def delayacct():
    """Root and a TASKSTATS family; delay accounting on for the test, its value checked back afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root (kernel.task_delayacct, taskstats of other tasks)")
    try:
        ts.TaskstatsSocket().close()
    except OSError as exc:
        pytest.skip(f"no taskstats here: {exc}")
    before = _sysctl() if SYSCTL.exists() else None
    restore = ts.enable_delayacct()
    try:
        yield
    finally:
        restore()
    assert (_sysctl() if SYSCTL.exists() else None) == before


def _exit_stats(argv) -> dict:
    """Run ``argv`` to its end; the final stats of its (single-threaded) process from the exit listener."""
    with ts.TaskstatsSocket(listen=True) as listen:
        proc = subprocess.run(argv, check=True, capture_output=True)
        del proc
        deadline, found = time.monotonic() + 5, []
        while time.monotonic() < deadline:
            found += listen.exits()
            mine = [s for s in found if s["ac_comm"] and s["ac_ppid"] == os.getpid()]
            if mine:
                return mine[-1]
            time.sleep(0.02)
    pytest.fail("no exit record of the child arrived")


def test_a_sleeper_waits_for_nothing(delayacct):
    s = _exit_stats(["sleep", "0.3"])
    # it ran about a millisecond in two bursts; a CPU wait per wake-up is bounded by the scheduler's latency
    # (a few ms per runnable task; the machine may be at load ~10 here): 100 ms holds under that, and
    # the 300 ms it slept is not a delay of any kind
    assert s["cpu_delay_total"] < 100e6 and s["cpu_count"] >= 1
    assert s["blkio_delay_total"] < 20e6 and s["swapin_delay_total"] == 0 and s["freepages_delay_total"] == 0
    assert s["ac_etime"] >= 290_000  # µs: it did live 0.3 s


READER = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 1 << 20)  # page-aligned, as O_DIRECT needs
while os.readv(fd, [buf]):
    pass
"""


def test_a_direct_reader_waits_for_block_io(delayacct):
    path = Path("/var/tmp") / f"swaptrace-taskstats-test-{os.getpid()}.dat"
    try:
        with open(path, "wb") as fh:
            fh.write(os.urandom(8 << 20))
            fh.flush()
            os.fsync(fh.fileno())
        s = _exit_stats([PY, "-c", READER, str(path)])
    finally:
        path.unlink(missing_ok=True)
    # eight synchronous 1 MiB reads that bypass the page cache. Each is a block I/O wait when the reader sleeps
    # for it; one that completed before the reader got back to waiting (preempted after submitting it, on a
    # busy machine: one of eight was, with the parallel tests running beside this) is not a wait
    assert 1 <= s["blkio_count"] and s["blkio_delay_total"] > 0
    assert s["read_bytes"] >= 8 << 20


PROGRAM = """
import mmap, sys
from swaptrace.markers import mark_step
m = mmap.mmap(-1, 48 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for i in range(0, 48 << 20, 4096):
    m[i] = 1
for s in range(3):
    mark_step()
    for i in range(0, 48 << 20, 4096):
        m[i] = (m[i] + 1) & 255
"""


def _capture_env(monkeypatch):
    require_capture()
    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])
    assert our_leftovers() == [], "leftovers before the test"


def test_a_capture_measures_swapin_delay_and_restores_the_sysctl(tmp_path, monkeypatch):
    _capture_env(monkeypatch)
    before = _sysctl()
    out = tmp_path / "s.swapio.parquet"
    res = CliRunner().invoke(cli, ["capture", "--memory", "24MiB", "-o", str(out), "--json", "--", PY, "-c",
                                   PROGRAM], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert _sysctl() == before and our_leftovers() == []
    k = open_trace(out, kind="swapio").meta["kernel"]
    lim, free = k["delays"]["limited"], k["delays"]["free"]
    # 48 MiB touched four times through a 24 MiB limit: every pass after the first swaps pages back in
    assert lim["total"]["swapin_us"] > 0 and lim["total"]["swapin_count"] > 0
    assert free["total"]["swapin_us"] == 0  # no swap exists during the unlimited run
    assert lim["steps"] == [0, 1, 2, 3] and len(lim["swapin_us"]) == 4 and sum(lim["swapin_us"]) == \
        lim["total"]["swapin_us"]
    assert set(k["psi"]["limited"]["total"]) == {"memory_some_us", "memory_full_us", "io_some_us", "io_full_us"}
    assert set(k["load"]) == {"free", "limited"} and k["load"]["limited"]["other_cpu_s"] >= 0
    ins = CliRunner().invoke(cli, ["inspect", str(out)])
    assert ins.exit_code == 0 and "swap-in" in ins.output, ins.output
    json.JSONDecoder().raw_decode(res.output, res.output.index("{"))


def test_a_failing_capture_restores_the_sysctl(tmp_path, monkeypatch):
    _capture_env(monkeypatch)
    before = _sysctl()
    res = CliRunner().invoke(cli, ["capture", "--memory", "24MiB", "-o", str(tmp_path / "f.swapio.parquet"), "--",
                                   PY, "-c", "import sys; sys.exit(3)"])
    assert res.exit_code == 2 and _sysctl() == before and our_leftovers() == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_an_ended_capture_restores_the_sysctl(tmp_path, monkeypatch, sig):
    _capture_env(monkeypatch)
    before = _sysctl()
    proc, out, pids = _start(tmp_path, "t.swapio.parquet")
    assert _sysctl() == "1"  # on while the capture runs
    os.kill(proc.pid, sig)
    try:
        proc.wait(timeout=30)
    finally:
        proc.stderr.close()
    assert _gone(pids)
    if sig == signal.SIGKILL:  # no undo ran: the note names the value, and the clean-up puts it back
        from swaptrace.capture import find_leftovers

        assert any("task_delayacct" in x for x in find_leftovers())
        res = CliRunner().invoke(cli, ["capture", "--cleanup"])
        assert res.exit_code == 0 and "task_delayacct" in res.output, res.output
    assert _sysctl() == before and our_leftovers() == [] and not out.exists()
