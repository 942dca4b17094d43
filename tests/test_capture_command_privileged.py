"""``capture -- CMD`` under the real kernel: the stream, steps, memory by phase, and every exit path.

Each test runs a tiny program (tens of MiB, well under a second of work) and skips with the reason
when the machine cannot capture. After each, nothing of ours may be left: no swap area, loop device,
cgroup, tracefs instance or work folder (``ours_left``, the same listing as the trace capture's tests),
no output file, and no process of the program.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from signal_helpers import default_sigint
from test_capture_privileged import PREFIX, require_capture
from test_capture_privileged import ours_left as everything_left

from swaptrace.cli import cli
from swaptrace.core.traceio import open_trace

pytestmark = pytest.mark.privileged

MiB = 1 << 20
PY = sys.executable
CLI = "import sys; from swaptrace.cli import cli; sys.exit(cli())"
REPO = str(Path(__file__).resolve().parent.parent)

# start-up maps and writes TOTAL MiB; training (STEPS marked steps) writes only the first HOT MiB of it
PROGRAM = """
import mmap, sys, time
from swaptrace.markers import mark, mark_step
total, hot, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
m = mmap.mmap(-1, total << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for i in range(0, total << 20, 4096):
    m[i] = 1
for s in range(steps):
    mark_step()
    for i in range(0, hot << 20, 4096):
        m[i] = (m[i] + 1) & 255
    time.sleep(0.002)  # training outlasts the capture's lag behind the markers (it clears the bits at the first)
mark("end")
"""


def ours_left() -> list[str]:
    """:func:`test_capture_privileged.ours_left` less what live captures of other processes hold now.

    Other people's captures may start the moment ours releases the lock; what they hold is theirs. A
    capture in this process, or in one that has ended, must have left nothing.
    """
    def foreign(item: str) -> bool:
        m = re.search(re.escape(PREFIX) + r"(\d+)", item)
        return m is not None and int(m.group(1)) != os.getpid() and Path(f"/proc/{m.group(1)}").exists()

    return [x for x in everything_left() if not foreign(x)]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.fixture(autouse=True)
def _capture_machine(monkeypatch):
    require_capture()
    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])  # the program imports swaptrace.markers
    assert ours_left() == [], "leftovers before the test"
    yield
    assert ours_left() == []


def _invoke(args):
    return CliRunner().invoke(cli, ["capture", *args], catch_exceptions=False)


def test_marked_program_stream_steps_and_memory(tmp_path):
    out = tmp_path / "p.swapio.parquet"
    # 300 steps of ~4 ms, so that training gets more than one smaps reading besides the one at its end marker
    # (every 0.1 s, fewer when a reading is slow): with 100 steps runs took 2 readings and most measured
    # 18.4-18.7 MiB referenced, but one in a clean-clone `make test` measured 15.8, below the hot set
    steps_run = 300
    res = _invoke(["--memory", "48MiB", "-o", str(out), "--json", "--", PY, "-c", PROGRAM, "64", "16", str(steps_run)])
    assert res.exit_code == 0, res.output
    s = json.JSONDecoder().raw_decode(res.output, res.output.index("{"))[0]  # warnings follow on stderr
    tf = open_trace(out, kind="swapio")
    assert tf.meta["source"] == "kernel" and tf.meta["step_offset"] == 1 and tf.meta["startup_step"] == 0
    # start-up wrote 64 MiB into a 48 MiB group: at least 16 MiB had to go out, most of it during start-up
    assert s["pages_out"] >= 16 * MiB // 4096 and s["startup"]["pages_out"] > 0
    steps = tf.read_all(["step"])["step"]
    assert set(np.unique(steps)) <= set(range(steps_run + 1)) and tf.meta["steps"] == steps_run + 1  # start-up 0
    lim, free = s["runs"]["limited"], s["runs"]["unlimited"]
    assert lim["step_numbers"] == list(range(steps_run)) == free["step_numbers"]
    assert len(lim["step_wall_us"]) == steps_run
    assert lim["startup_s"] > 0 and lim["training_s"] > 0 and free["training_s"] > 0 and s["slowdown"] > 0
    # memory by kind: the group never held more than its limit (+1 MiB, the OOM guard's nudge) and swapped
    assert lim["peak"]["run"]["usage"] <= 49 * MiB and lim["peak"]["run"]["swap"] >= 16 * MiB
    # unlimited: all 64 MiB resident at the end of start-up; training touched the hot 16 MiB (plus the
    # interpreter's own few MiB of heap and stack, bounded here by 12 MiB)
    assert free["peak"]["startup"]["anon"] >= 64 * MiB
    ref = free["referenced"]
    assert ref["anon_resident_startup_bytes"] >= 64 * MiB
    assert 16 * MiB <= ref["anon_referenced_training_bytes"] <= 28 * MiB, ref
    assert s["reclaim_agents"]["active"] is not None and "page_cache" in s
    # the stream is an ordinary kernel stream for the other commands
    cmp = CliRunner().invoke(cli, ["compare", str(out), str(out)])
    assert cmp.exit_code == 0 and "match" in cmp.output, cmp.output
    ins = CliRunner().invoke(cli, ["inspect", str(out)])
    assert ins.exit_code == 0 and "swapio" in ins.output and f"steps       {steps_run + 1}" in ins.output


def test_unmarked_program_gets_time_windows(tmp_path):
    out = tmp_path / "w.swapio.parquet"
    prog = PROGRAM.replace("mark_step()", "pass").replace('mark("end")', "")
    res = _invoke(["--memory", "32MiB", "--no-baseline", "--window", "0.05", "-o", str(out), "--",
                   PY, "-c", prog, "40", "8", "3"])
    assert res.exit_code == 0, res.output
    tf = open_trace(out, kind="swapio")
    assert tf.meta["step_offset"] == 0 and tf.meta["startup_step"] is None and tf.meta["window_s"] == 0.05
    cols = tf.read_all(["t_us", "step"])
    assert len(cols["step"]) > 0
    assert np.array_equal(cols["step"], np.floor(np.maximum(cols["t_us"], 0) / 50_000).astype(np.uint32))
    assert tf.meta["steps"] >= int(cols["step"].max()) + 1 and tf.meta["kernel"]["limited"]["marks"] == 0


def test_shell_program_marks_steps(tmp_path):
    out = tmp_path / "sh.swapio.parquet"
    loop = 'for i in 0 1 2; do echo "swaptrace step $i" > "$SWAPTRACE_MARKER"; sleep 0.05; done'
    res = _invoke(["--memory", "16MiB", "-o", str(out), "--", "sh", "-c", loop])
    assert res.exit_code == 0, res.output
    k = open_trace(out, kind="swapio").meta["kernel"]
    assert k["limited"]["step_numbers"] == [0, 1, 2] == k["unlimited"]["step_numbers"]
    # each step sleeps 50 ms (plus a fork and an echo: well under 50 ms more)
    assert all(50_000 <= w < 100_000 for w in k["step_wall_us"][:2]), k["step_wall_us"]


def test_failing_program_is_one_line_and_leaves_nothing(tmp_path):
    out = tmp_path / "f.swapio.parquet"
    prog = "import sys; print('first', file=sys.stderr); print('it broke', file=sys.stderr); sys.exit(3)"
    res = CliRunner().invoke(cli, ["capture", "--memory", "16MiB", "-o", str(out), "--", PY, "-c", prog])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert "exited with status 3 in the unlimited run: it broke" in res.output and PY in res.output
    assert not out.exists() and not any(tmp_path.glob(".f*"))


def test_program_over_its_limit_and_swap_is_an_oom_line(tmp_path):
    out = tmp_path / "oom.swapio.parquet"
    res = CliRunner().invoke(cli, ["capture", "--memory", "16MiB", "--swap-size", "4MiB", "--no-baseline",
                                   "-o", str(out), "--", PY, "-c", PROGRAM, "48", "1", "1"])
    assert res.exit_code == 2 and "OOM killer" in res.output and "too small" in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1 and not out.exists()


# --------------------------------------------------------------------------- signals


SLOW = """
import os, subprocess, sys, time
from swaptrace.markers import mark_step
kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # a grandchild of the capture
for s in range(2400):
    mark_step()
    time.sleep(0.05)
"""


def _start(tmp_path, name):
    """A CLI capture of SLOW in a subprocess, returned once the limited run's group holds the program's tree."""
    out = tmp_path / name
    proc = subprocess.Popen([PY, "-c", CLI, "capture", "--memory", "64MiB", "--no-baseline", "-o", str(out), "--",
                             PY, "-c", SLOW], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(),
                            preexec_fn=default_sigint)
    from swaptrace.capture.cgroup import memory_hierarchy

    procs = memory_hierarchy()[1] / f"{PREFIX}{proc.pid}" / "cgroup.procs"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"capture ended early: {proc.stderr.read().decode()[-500:]}")
        pids = procs.read_text().split() if procs.exists() else []
        if len(pids) >= 2:  # the program and its child
            return proc, out, [int(p) for p in pids]
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    pytest.fail("the program never started in the limited group")


def _gone(pids, timeout_s=10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if Path(f"/proc/{p}").exists() and "Z" not in _state(p)]
        if not alive:
            return True
        time.sleep(0.05)
    return False


def _state(pid) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_capture_ends_the_program_and_cleans_up(tmp_path, sig):
    proc, out, pids = _start(tmp_path, "int.swapio.parquet")
    os.kill(proc.pid, sig)
    try:
        proc.wait(timeout=30)
    finally:
        proc.stderr.close()
    assert proc.returncode == 130  # "Interrupted; partial outputs were removed."
    assert _gone(pids), "the program's processes outlived the capture"
    assert not out.exists() and not any(tmp_path.glob(".int*"))


def test_killed_capture_takes_the_program_with_it_and_cleanup_removes_the_rest(tmp_path):
    from swaptrace.capture import find_leftovers

    proc, out, pids = _start(tmp_path, "kill.swapio.parquet")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    # the direct child by PR_SET_PDEATHSIG, its child by the watchdog that empties the group
    assert _gone(pids), "the program's processes outlived a SIGKILLed capture"
    left = find_leftovers()
    assert any("cgroup" in x for x in left) and any("loop" in x for x in left), left
    res = CliRunner().invoke(cli, ["capture", "--cleanup"])
    assert res.exit_code == 0 and "cgroup" in res.output
    assert ours_left() == [] and find_leftovers() == [] and not out.exists()


def test_killed_program_fails_the_capture(tmp_path):
    proc, out, pids = _start(tmp_path, "prog.swapio.parquet")
    os.kill(pids[0], signal.SIGKILL)  # the program itself (the first task in its group)
    try:
        proc.wait(timeout=30)
        err = proc.stderr.read().decode()
    finally:
        proc.stderr.close()
    assert proc.returncode == 2 and "was killed by SIGKILL in the limited run" in err, err
    assert len(err.strip().splitlines()) == 1
    assert _gone(pids) and not out.exists()


def test_trace_reclaim_counts_the_programs_reclaim_by_step(tmp_path):
    """``--trace-reclaim -- CMD``: the limited run's memcg reclaim calls counted per step, start-up as step 0
    (64 MiB written into 48 MiB must reclaim there), and every call in the raw trace's text."""
    out, raw = tmp_path / "r.swapio.parquet", tmp_path / "r.trace.txt"
    steps_run = 20
    res = _invoke(["--memory", "48MiB", "-o", str(out), "--no-baseline", "--trace-reclaim", "--raw-trace", str(raw),
                   "--json", "--", PY, "-c", PROGRAM, "64", "16", str(steps_run)])
    assert res.exit_code == 0, res.output
    rec = open_trace(out, kind="swapio").meta["kernel"]["reclaim"]
    assert rec["steps"] == list(range(steps_run + 1)) and rec["missing_events"] == []
    calls = rec["calls"]
    # start-up reclaimed, and so did the first training step (the hot 16 MiB, written first, went out during
    # start-up and come back); steps 2 .. 19 rewrite a resident hot set: none
    assert len(calls) == steps_run + 1 and calls[0] > 0 and calls[1] > 0 and calls[2:steps_run] == [0] * (steps_run - 2)
    begins = raw.read_text(errors="replace").count("mm_vmscan_memcg_reclaim_begin:")
    assert sum(calls) + rec["unfinished_calls"] + rec["outside_calls"] == begins  # every call counted once
