"""Temporary outputs of a SIGKILLed command are removed by the next command writing the same output.

A temporary is ``.NAME.PID.RANDOM.partial`` (:func:`swaptrace.core.traceio.partial_name`); the next
:class:`~swaptrace.core.traceio.AtomicPath` (or partial folder) for NAME removes those whose PID is not alive
and leaves those of live processes alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swaptrace.core.traceio import AtomicPath, clear_stale_partials, make_partial_folder


def _dead_pid() -> int:
    """A pid that was alive a moment ago and is no longer (a child that has exited and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_dead_owners_partial_is_removed_and_a_live_ones_kept(tmp_path):
    out = tmp_path / "x.parquet"
    dead = tmp_path / f".x.parquet.{_dead_pid()}.abc.partial"
    live = tmp_path / f".x.parquet.{os.getppid()}.def.partial"
    other = tmp_path / f".y.parquet.{_dead_pid()}.ghi.partial"  # another output's: not ours to clear
    unrelated = tmp_path / ".x.parquet.notapid.partial"
    for p in (dead, live, other, unrelated):
        p.write_text("half")
    with AtomicPath(out, force=True) as ap:
        ap.tmp.write_text("whole")
    assert out.read_text() == "whole"
    assert not dead.exists()
    assert live.exists() and other.exists() and unrelated.exists()


def test_a_dead_owners_partial_folder_is_removed(tmp_path):
    out = tmp_path / "report"
    stale = tmp_path / f".report.{_dead_pid()}.abc.partial"
    stale.mkdir()
    (stale / "fig.png").write_bytes(b"x")
    tmp = make_partial_folder(out)
    assert not stale.exists()
    assert tmp.name.startswith(f".report.{os.getpid()}.") and tmp.name.endswith(".partial")


def test_clearing_never_touches_our_own_partials(tmp_path):
    ap = AtomicPath(tmp_path / "x", force=True)
    assert clear_stale_partials(tmp_path / "x") == []
    assert ap.tmp.exists()
    ap.discard()


def _partials(folder: Path, name: str) -> list[Path]:
    return sorted(folder.glob(f".{name}.*.partial"))


@pytest.mark.parametrize("command", ["generate", "export"])
def test_sigkill_mid_write_then_a_rerun_clears_the_partial(tmp_path, command):
    exe = Path(sys.executable).with_name("swaptrace")
    trace = tmp_path / "t.access.parquet"
    if command == "generate":
        # long enough that it is still writing when killed (tiny: about 20k accesses a step)
        args = ["generate", "--preset", "tiny", "--steps", "2000", "-o", str(tmp_path / "out.parquet")]
    else:
        subprocess.run([str(exe), "generate", "--preset", "tiny", "--steps", "300", "-o", str(trace)], check=True,
                       capture_output=True)
        args = ["export", str(trace), "--format", "csv", "-o", str(tmp_path / "out.parquet")]
    proc = subprocess.Popen([str(exe), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not _partials(tmp_path, "out.parquet") and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.fail("the command finished before it could be killed mid-write")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = _partials(tmp_path, "out.parquet")
    assert left and all(f".{proc.pid}." in p.name for p in left), left  # what SIGKILL leaves behind
    # the rerun (short) writes the same output and clears the dead run's partials
    rerun = [*args[:-2], "-o", str(tmp_path / "out.parquet"), "--force"]
    if command == "generate":
        rerun[rerun.index("2000")] = "1"
    r = subprocess.run([str(exe), *rerun], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _partials(tmp_path, "out.parquet") == []
    assert (tmp_path / "out.parquet").stat().st_size > 0
