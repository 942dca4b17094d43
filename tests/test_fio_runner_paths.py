"""The fio runner's target handling and clean-up, without fio: the free-space check, extending a file target,
and what SIGTERM leaves behind (nothing)."""

from __future__ import annotations

import os
import signal
from types import SimpleNamespace

import pytest

from swaptrace.errors import ConfigError
from swaptrace.fio import runner


def _free(monkeypatch, free_bytes):
    real = os.statvfs
    monkeypatch.setattr(runner.os, "statvfs",
                        lambda p: SimpleNamespace(f_bavail=free_bytes // 4096, f_frsize=4096) if p else real(p))


def test_new_target_needs_its_whole_size_free(tmp_path, monkeypatch):
    _free(monkeypatch, 1 << 20)
    runner.check_target(tmp_path / "t.dat", 1 << 20)  # exactly enough
    with pytest.raises(ConfigError, match="1.0 MiB free, the target needs 2.0 MiB more"):
        runner.check_target(tmp_path / "t.dat", 2 << 20)


def test_existing_target_needs_only_its_extension_free(tmp_path, monkeypatch):
    path = tmp_path / "t.dat"
    runner.prepare_file_target(runner.check_target(path, 3 << 20), 3 << 20)  # ours: 3 MiB
    _free(monkeypatch, 1 << 20)
    assert runner.check_target(path, 4 << 20).current_bytes == 3 << 20  # 1 MiB more: fits
    with pytest.raises(ConfigError, match="needs 2.0 MiB more"):
        runner.check_target(path, 5 << 20)


def test_extension_keeps_the_old_data_and_fills_the_rest_with_nonzero_bytes(tmp_path):
    path = tmp_path / "t.dat"
    chunk = runner.FILL_CHUNK_BYTES
    first = runner.prepare_file_target(runner.check_target(path, chunk + 4096), chunk + 4096)
    assert first == chunk + 4096 and path.stat().st_size == chunk + 4096
    head = path.read_bytes()[:chunk]
    tgt = runner.check_target(path, 2 * chunk + 8192)
    written = runner.prepare_file_target(tgt, 2 * chunk + 8192)
    data = path.read_bytes()
    assert len(data) == 2 * chunk + 8192
    # rewritten from the chunk boundary below the old end (the old end's chunk may have been partial)
    assert written == len(data) - chunk
    assert data[:chunk] == head
    tail = data[chunk:]
    assert tail.count(0) < len(tail) // 128  # pseudo-random: ~1/256 zero bytes, never a zero-filled hole
    assert runner.prepare_file_target(runner.check_target(path, 4096), 4096) == 0  # large enough: untouched


def test_sigterm_during_a_run_removes_the_partial_results_and_restores_the_handler(tmp_path, monkeypatch):
    target = tmp_path / "t.dat"
    tgt = runner.check_target(target, 1 << 20)
    final = tmp_path / "runs" / "r1"
    final.parent.mkdir()

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not interrupt the run")

    monkeypatch.setattr(runner, "_run_step", terminated)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        ctx = runner.RunContext(jobs_dir=tmp_path, manifest={}, target=tgt, target_path=target, size_bytes=1 << 20,
                                runtime_s=1, precondition=False, echo=lambda msg: None)
        runner._run_into(ctx, [object()], final)
    assert signal.getsignal(signal.SIGTERM) == before
    assert list(final.parent.iterdir()) == []  # neither the final folder nor its temporary sibling
    assert target.stat().st_size == 1 << 20  # the target itself stays (it is the user's scratch file)
