"""capture's user-facing edges that need no root: clear errors, leftover naming, summaries."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

from swaptrace.capture import host, leftovers, replay
from swaptrace.cli import cli
from swaptrace.core.traceio import TraceWriter
from swaptrace.errors import PrivilegeError


def _trace(path, pages=64, steps=2):
    meta = {"page_bytes": 4096, "footprint_pages": pages, "footprint_bytes": pages * 4096, "first_step": 0,
            "steps": steps, "regions": [{"name": "t", "kind": "table", "first_page": 0, "pages": pages}]}
    with TraceWriter(path, "access", meta) as w:
        w.write(step=np.repeat(np.arange(steps, dtype=np.uint32), 3), page=np.arange(3 * steps, dtype=np.uint64),
                write=np.zeros(3 * steps, bool), region=np.zeros(3 * steps, np.uint16))
    return path


def test_not_root_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    trace = _trace(tmp_path / "t.access.parquet")
    res = CliRunner().invoke(cli, ["capture", str(trace), "--memory", "128KiB", "-o", str(tmp_path / "o.parquet")])
    assert res.exit_code == 2 and "needs root" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o.parquet").exists()
    with pytest.raises(PrivilegeError):
        host.check_privileges()


@pytest.mark.parametrize("args, message", [
    ([], "exactly one of --memory"),
    (["--memory", "1MiB", "--memory-fraction", "0.5"], "exactly one of --memory"),
    (["--memory-fraction", "1.5"], "0<x<=1"),
    (["--memory", "lots"], "cannot read"),
])
def test_bad_budgets(tmp_path, args, message):
    trace = _trace(tmp_path / "t.access.parquet")
    res = CliRunner().invoke(cli, ["capture", str(trace), "-o", str(tmp_path / "o.parquet"), *args])
    assert res.exit_code == 2 and message in res.output


def test_wrong_kind_and_missing_args(tmp_path):
    res = CliRunner().invoke(cli, ["capture", "-o", str(tmp_path / "o.parquet")])
    assert res.exit_code == 2 and "TRACE" in res.output
    swapio = tmp_path / "s.swapio.parquet"
    with TraceWriter(swapio, "swapio", {"page_bytes": 4096}) as w:
        w.write(t_us=np.zeros(0), step=np.zeros(0, np.uint32), op=np.zeros(0, np.int8), offset=np.zeros(0, np.uint64),
                length=np.zeros(0, np.uint32), cause=np.zeros(0, np.int8))
    res = CliRunner().invoke(cli, ["capture", str(swapio), "--memory", "1MiB", "-o", str(tmp_path / "o.parquet")])
    assert res.exit_code == 2 and "expected 'access'" in res.output


def test_leftover_names():
    me = os.getpid()
    assert leftovers._pid_of(f"swaptrace-capture-{me}") == me
    assert leftovers._pid_of(f"swaptrace-capture-{me}-free") == me
    assert leftovers._pid_of(f"swaptrace-capture-{me}.swap") == me
    assert leftovers._pid_of("swaptrace-capture-x") is None and leftovers._pid_of("other-12") is None
    assert leftovers.owner_alive(f"swaptrace-capture-{me}")
    assert not leftovers.owner_alive("swaptrace-capture-x")
    dead = 2**22 + 12345  # above the default pid_max: never a live process
    assert not leftovers.owner_alive(f"swaptrace-capture-{dead}")


def test_prepare_codes(tmp_path):
    from swaptrace.core.traceio import open_trace

    trace = _trace(tmp_path / "t.access.parquet", steps=3)
    info = replay._prepare_codes(open_trace(trace), tmp_path)
    codes = np.fromfile(info["codes"], dtype=np.int64)
    assert codes.tolist() == [p << 1 for p in range(9)]
    assert np.load(info["step_starts"]).tolist() == [0, 3, 6, 9]
    assert info["accesses"] == 9 and info["steps"] == 3


def test_page_table_bytes():
    assert replay.page_table_bytes(2 << 20) == 3 * 4096  # 1 PTE page, 1 PMD page, 1 PUD page
    assert replay.page_table_bytes((2 << 20) + 1) == 4 * 4096
    assert replay.page_table_bytes(752 << 20) == (376 + 1 + 1) * 4096  # demo: ~1.5 MiB


def test_filesystem_type_of_work_dir():
    assert host._fs_type("/proc/self") == "proc"
    assert host._fs_type("/definitely/not/here") == host._fs_type("/")


@pytest.mark.parametrize("args,named", [(["--memory", "64MiB"], "--memory"), (["{trace}"], "TRACE"),
                                        (["-o", "out.parquet"], "--output"), (["--", "true"], "-- CMD"),
                                        (["--swap-size", "1GiB"], "--swap-size")])
def test_cleanup_refuses_what_it_would_ignore(tmp_path, args, named):
    trace = tmp_path / "t.access.parquet"
    trace.write_bytes(b"")  # exists: the row is refused for being beside --cleanup, not for a missing file
    args = [a.format(trace=trace) for a in args]
    # control: --cleanup alone is not refused for its options (it may still need root: a different line)
    alone = CliRunner().invoke(cli, ["capture", "--cleanup"])
    assert "takes no" not in alone.output
    r = CliRunner().invoke(cli, ["capture", "--cleanup", *args])
    assert r.exit_code == 2, r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "--cleanup" in lines[0] and named in lines[0], r.stderr
