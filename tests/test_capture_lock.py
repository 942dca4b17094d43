"""One capture at a time, and none beside another swap area (no root needed: the machine checks are faked)."""

from __future__ import annotations

import os

import pytest

from swaptrace.capture import host, leftovers, replay, session
from swaptrace.core.traceio import open_trace
from swaptrace.errors import ConfigError


def test_second_lock_holder_is_refused_with_the_first_ones_pid(tmp_path):
    lock = tmp_path / "capture.lock"
    fd = host.hold_capture_lock(lock)
    try:
        assert lock.read_text().strip() == str(os.getpid())
        # flock belongs to the open file: a second open, even in this process, is another holder
        with pytest.raises(ConfigError, match=f"another capture is running \\(pid {os.getpid()} holds"):
            host.hold_capture_lock(lock)
    finally:
        os.close(fd)
    os.close(host.hold_capture_lock(lock))  # released with the descriptor


def _fake_machine(monkeypatch, tmp_path, swaps: list[str]):
    monkeypatch.setattr(host, "LOCK_PATH", tmp_path / "capture.lock")
    monkeypatch.setattr(host, "check_privileges", lambda: None)
    monkeypatch.setattr(leftovers, "cleanup_leftovers", lambda work_base=None: [])
    monkeypatch.setattr(host.blockdev, "swap_areas", lambda **kw: list(swaps))
    made = []
    monkeypatch.setattr(replay, "_prepare_codes", lambda *a: made.append("codes") or pytest.fail("set up"))
    return made


def _trace(tmp_path):
    from test_capture_privileged import zipf_trace

    return zipf_trace(tmp_path / "z.access.parquet", pages=256, steps=2, per_step=100)


def test_capture_refuses_while_another_swap_area_is_active(tmp_path, monkeypatch):
    made = _fake_machine(monkeypatch, tmp_path, ["/dev/zram0"])
    out = tmp_path / "o.swapio.parquet"
    with pytest.raises(ConfigError, match="swap is already active on /dev/zram0"):
        session.capture(_trace(tmp_path), out, memory_bytes=1 << 20, work_base=tmp_path)
    assert made == [] and not out.exists() and not any(tmp_path.glob("swaptrace-capture-*"))
    os.close(host.hold_capture_lock(host.LOCK_PATH))  # the refused capture let go of the lock


def test_capture_refuses_while_another_capture_holds_the_lock(tmp_path, monkeypatch):
    made = _fake_machine(monkeypatch, tmp_path, [])
    fd = host.hold_capture_lock(host.LOCK_PATH)
    try:
        with pytest.raises(ConfigError, match="another capture is running"):
            session.capture(_trace(tmp_path), tmp_path / "o.swapio.parquet", memory_bytes=1 << 20,
                            work_base=tmp_path)
    finally:
        os.close(fd)
    assert made == []


def test_refusal_is_one_line_exit_2_on_the_cli(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from swaptrace.cli import cli

    _fake_machine(monkeypatch, tmp_path, ["/swapfile"])
    trace = _trace(tmp_path)
    assert open_trace(trace).kind == "access"
    res = CliRunner().invoke(cli, ["capture", str(trace), "--memory", "1MiB", "-o", str(tmp_path / "o.parquet"),
                                   "--work-dir", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert "swap is already active on /swapfile" in res.output and len(res.output.strip().splitlines()) == 1
