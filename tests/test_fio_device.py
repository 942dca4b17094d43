"""Block-device safety of ``fio run``, on a loop device over a small file (root only).

Every test detaches its loop device (and unmounts / swapoffs) in a ``finally``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from conftest import require_root
from fio_helpers import make_stream

from swaptrace.cli import cli
from swaptrace.core import blockdev
from swaptrace.errors import ConfigError
from swaptrace.fio import jobs, results, runner

pytestmark = pytest.mark.privileged
DEVICE_BYTES = 64 << 20


def _need(*tools):
    require_root()
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")


@contextlib.contextmanager
def loop_device(tmp_path):
    backing = tmp_path / "loop.img"
    with open(backing, "wb") as fh:
        fh.truncate(DEVICE_BYTES)
    proc = subprocess.run(["losetup", "-f", "--show", str(backing)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot create a loop device here: {proc.stderr.strip()}")
    dev = proc.stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


@pytest.fixture(scope="module")
def dev_jobs(tmp_path_factory):
    d = tmp_path_factory.mktemp("devjobs")
    s = make_stream(d / "s.parquet", n=200, device_bytes=4 << 20, duration_us=2e5)
    return jobs.build_jobs(s, d / "jobs", sweep_sizes=("4k",)).path


def test_blank_device_needs_allow_device_then_runs(tmp_path, dev_jobs):
    _need("losetup", "fio")
    with loop_device(tmp_path) as dev:
        with pytest.raises(ConfigError, match="--allow-device"):
            runner.check_target(dev, 8 << 20)
        t = runner.check_target(dev, 8 << 20, allow_device=True)
        assert t.is_device and t.current_bytes == DEVICE_BYTES
        with pytest.raises(ConfigError, match="less than --size"):
            runner.check_target(dev, 128 << 20, allow_device=True)
        tries = []

        def echo(line):  # while fio runs, the device is ours alone: an O_EXCL open must fail
            with contextlib.suppress(ConfigError):
                os.close(blockdev.open_exclusive(dev, write=False))
                tries.append("opened")
                return
            tries.append("refused")

        out = runner.run_jobs(dev_jobs, dev, size_bytes=8 << 20, runtime_s=1, allow_device=True,
                              only=["sweep_write_4k", "replay_no_stall"], precondition=False,
                              out_dir=tmp_path / "run", echo=echo)
        assert tries and set(tries) == {"refused"}
        os.close(blockdev.open_exclusive(dev))  # and released after the run
        rows, meta = results.read_results(out.out_dir)
        assert meta["run"]["target_is_device"] is True
        assert {r["instance"] for r in rows} == {"sweep_write_4k", "replay_no_stall"}


def test_refuses_filesystem_signature(tmp_path, dev_jobs):
    _need("losetup", "mkfs.ext4")
    with loop_device(tmp_path) as dev:
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
        with pytest.raises(ConfigError, match="holds data.*ext4"):
            runner.check_target(dev, 8 << 20, allow_device=True)
        sigs = blockdev.signatures(dev)
        assert any("(magic bytes)" in s for s in sigs) and any("ext4" in s for s in sigs)
        res = CliRunner().invoke(cli, ["fio", "run", str(dev_jobs), "--target", dev, "--size", "8MiB",
                                       "--allow-device"])
        assert res.exit_code == 2 and "holds data" in res.output
        # --force waives only the signature check; a dry run writes nothing
        runner.run_jobs(dev_jobs, dev, size_bytes=8 << 20, allow_device=True, force=True, dry_run=True,
                        echo=lambda s: None)
        assert "ext4" in " ".join(blockdev.signatures(dev))


def test_refuses_partition_table_signature(tmp_path):
    _need("losetup")
    with loop_device(tmp_path) as dev:
        with open(dev, "r+b") as fh:  # a protective-MBR boot signature, written by hand
            fh.seek(0x1FE)
            fh.write(b"\x55\xaa")
        with pytest.raises(ConfigError, match="holds data"):
            runner.check_target(dev, 8 << 20, allow_device=True)


def test_refuses_mounted_device(tmp_path):
    _need("losetup", "mkfs.ext4", "mount", "umount")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with loop_device(tmp_path) as dev:
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
        proc = subprocess.run(["mount", dev, str(mnt)], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount here: {proc.stderr.strip()}")
        try:
            with pytest.raises(ConfigError, match="is mounted"):
                runner.check_target(dev, 8 << 20, allow_device=True, force=True)
        finally:
            subprocess.run(["umount", str(mnt)], capture_output=True)


def test_refuses_active_swap(tmp_path):
    _need("losetup", "mkswap", "swapon", "swapoff")
    with loop_device(tmp_path) as dev:
        subprocess.run(["mkswap", dev], check=True, capture_output=True)
        proc = subprocess.run(["swapon", dev], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot swapon here: {proc.stderr.strip()}")
        try:
            assert blockdev.swap_entries(dev) == [dev]
            with pytest.raises(ConfigError, match="active swap"):
                runner.check_target(dev, 8 << 20, allow_device=True, force=True)
        finally:
            subprocess.run(["swapoff", dev], capture_output=True)


def test_refuses_loop_backing_file_and_swap_file(tmp_path):
    _need("losetup")
    with loop_device(tmp_path) as dev:
        assert blockdev.loops_backed_by(tmp_path / "loop.img") == [dev]
        with pytest.raises(ConfigError, match="backing file of"):
            runner.check_target(tmp_path / "loop.img", 8 << 20, force=True)
    if shutil.which("mkswap") is None or shutil.which("swapon") is None:
        return
    swapfile = tmp_path / "swapfile"
    with open(swapfile, "wb") as fh:
        fh.write(b"\0" * (16 << 20))
    swapfile.chmod(0o600)
    subprocess.run(["mkswap", str(swapfile)], check=True, capture_output=True)
    proc = subprocess.run(["swapon", str(swapfile)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot swapon a file here: {proc.stderr.strip()}")
    try:
        with pytest.raises(ConfigError, match="active swap file"):
            runner.check_target(swapfile, 8 << 20, force=True)
    finally:
        subprocess.run(["swapoff", str(swapfile)], capture_output=True)


def test_purge_refuses_a_mounted_device_and_discards_a_free_one(tmp_path, dev_jobs):
    _need("losetup", "mkfs.ext4", "mount", "umount", "fio")
    from swaptrace.fio.steady import SteadyOptions

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    opts = SteadyOptions(round_s=1, rounds=2, cap_s=2, fill_cap_s=10, purge=True)
    with loop_device(tmp_path) as dev:
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
        proc = subprocess.run(["mount", dev, str(mnt)], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount here: {proc.stderr.strip()}")
        try:  # no option overrides a mount: the purge never starts, the file system stays
            with pytest.raises(ConfigError, match="is mounted"):
                runner.run_jobs(dev_jobs, dev, size_bytes=8 << 20, allow_device=True, force=True, steady=opts,
                                only=["steady_randwrite"], out_dir=tmp_path / "run", echo=lambda s: None)
        finally:
            subprocess.run(["umount", str(mnt)], capture_output=True)
        assert any("ext4" in s for s in blockdev.signatures(dev))
        out = runner.run_jobs(dev_jobs, dev, size_bytes=8 << 20, allow_device=True, force=True, steady=opts,
                              only=["steady_randwrite"], out_dir=tmp_path / "run", echo=lambda s: None)
        _, meta = results.read_results(out.out_dir)
        assert meta["run"]["preconditioning"]["purge"].startswith("BLKDISCARD of the whole device")
