"""Block-device probing: fake /proc and /sys trees, then real loop devices (root only).

The privileged tests make a loop device over a file in ``tmp_path`` and put
it in use in one way each -- held ``O_EXCL`` by another process, backing a
second loop device, mounted in another mount namespace -- then check that
``blockdev`` sees it and ``fio run`` refuses it. Every one detaches its loop
devices and kills its helper processes in a ``finally`` / fixture.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import require_root

from swaptrace.cli import cli
from swaptrace.core import blockdev
from swaptrace.core.blockdev import Device
from swaptrace.errors import ConfigError
from swaptrace.fio import runner

# --------------------------------------------------------------------------- fake trees


def _sys_tree(root: Path) -> Path:
    """A /sys with disk sdz (259:0, partitions sdz1 259:1 and sdz2 259:2; dm-3 on sdz2) and loop7 backed by a file."""
    sys_root = root / "sys"
    disk = sys_root / "devices" / "sdz"
    for part, num in (("sdz1", "259:1"), ("sdz2", "259:2")):
        (disk / part / "holders").mkdir(parents=True)
        (disk / part / "partition").write_text("1\n")
        (disk / part / "dev").write_text(num + "\n")
    (disk / "holders").mkdir()
    (disk / "dev").write_text("259:0\n")
    (disk / "sdz2" / "holders" / "dm-3").mkdir()
    cls = sys_root / "class" / "block"
    cls.mkdir(parents=True)
    for name, target in (("sdz", disk), ("sdz1", disk / "sdz1"), ("sdz2", disk / "sdz2")):
        (cls / name).symlink_to(target)
    loop = sys_root / "block" / "loop7" / "loop"
    loop.mkdir(parents=True)
    (loop / "backing_file").write_text(f"{root / 'backing.img'}\n")
    return sys_root


def _proc_tree(root: Path, other_ns_mounts: str = "", swaps: str = "") -> Path:
    proc = root / "proc"
    mine = "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
    for pid, ns, text in (("self", "mnt:[4026531841]", mine), ("1", "mnt:[4026531841]", mine),
                          ("4242", "mnt:[4026532999]", mine + other_ns_mounts)):
        (proc / pid / "ns").mkdir(parents=True)
        (proc / pid / "ns" / "mnt").symlink_to(ns)  # dangling, as readlink sees the real one
        (proc / pid / "mountinfo").write_text(text)
    (proc / "swaps").write_text("Filename\tType\tSize\tUsed\tPriority\n" + swaps)
    return proc


SDZ = Device("/dev/sdz", "sdz", "259:0")


def test_partitions_and_holders_from_sysfs(tmp_path):
    sys_root = _sys_tree(tmp_path)
    assert [(p.name, p.devnum) for p in blockdev.partitions(SDZ, sys_root=sys_root)] == [("sdz1", "259:1"),
                                                                                           ("sdz2", "259:2")]
    assert blockdev.holders(SDZ, sys_root=sys_root) == ["dm-3 (on sdz2)"]
    assert blockdev.holders(Device("/dev/sdz1", "sdz1", "259:1"), sys_root=sys_root) == []
    assert blockdev.holders(Device("/dev/nope", "nope", "1:1"), sys_root=sys_root) == []


def test_mount_of_a_partition_in_another_namespace_is_found(tmp_path):
    sys_root = _sys_tree(tmp_path)
    other = "97 22 259:1 / /data rw - ext4 /dev/sdz1 rw\n"
    proc = _proc_tree(tmp_path, other_ns_mounts=other)
    assert blockdev.mounts(SDZ, proc_root=proc, sys_root=sys_root) == ["/data (mount namespace of pid 4242)"]
    # a device with no mount anywhere
    assert blockdev.mounts(Device("/dev/sdy", "sdy", "259:9"), proc_root=proc, sys_root=sys_root) == []


def test_mount_in_our_namespace_is_named_plainly_and_once(tmp_path):
    sys_root = _sys_tree(tmp_path)
    proc = _proc_tree(tmp_path)
    text = (proc / "self" / "mountinfo").read_text() + "98 22 259:0 / /mnt rw - ext4 /dev/sdz rw\n"
    for pid in ("self", "1"):
        (proc / pid / "mountinfo").write_text(text)
    assert blockdev.mounts(SDZ, proc_root=proc, sys_root=sys_root) == ["/mnt"]


def test_unreadable_or_vanished_process_is_skipped(tmp_path):
    sys_root = _sys_tree(tmp_path)
    proc = _proc_tree(tmp_path)
    (proc / "4242" / "mountinfo").unlink()  # the process ended between listing and reading
    assert blockdev.mounts(SDZ, proc_root=proc, sys_root=sys_root) == []


def test_swap_areas_and_entries(tmp_path):
    f = tmp_path / "swapfile"
    f.write_bytes(b"")
    proc = _proc_tree(tmp_path, swaps=f"{f}  file  1024  0  -2\n/dev/none partition 1 0 -3\n")
    assert blockdev.swap_areas(proc_root=proc) == [str(f), "/dev/none"]
    assert blockdev.swap_entries(f, proc_root=proc) == [str(f)]
    assert blockdev.swap_entries(tmp_path / "other", proc_root=proc) == []
    assert blockdev.swap_areas(proc_root=tmp_path / "no-proc") == []


def test_loop_devices_and_backing(tmp_path):
    sys_root = _sys_tree(tmp_path)
    assert blockdev.loop_devices(sys_root=sys_root) == {"/dev/loop7": str(tmp_path / "backing.img")}
    assert blockdev.loops_backed_by(tmp_path / "backing.img", sys_root=sys_root) == ["/dev/loop7"]
    assert blockdev.loops_backed_by(tmp_path / "other.img", sys_root=sys_root) == []


def test_magic_signatures():
    blank = bytearray(0x10100)
    assert blockdev.magic_signatures(bytes(blank)) == []
    ext = bytearray(blank)
    ext[0x438:0x43A] = b"\x53\xef"
    assert blockdev.magic_signatures(bytes(ext)) == ["ext2/3/4"]
    swap = bytearray(blank)
    swap[0xFF6:0x1000] = b"SWAPSPACE2"
    assert "Linux swap" in blockdev.magic_signatures(bytes(swap))
    gpt = bytearray(blank)
    gpt[0x1FE:0x200] = b"\x55\xaa"
    gpt[0x200:0x208] = b"EFI PART"
    assert blockdev.magic_signatures(bytes(gpt)) == ["DOS partition table / boot sector", "GPT partition table"]


def test_regular_file_is_not_a_block_device(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x")
    assert not blockdev.is_block_device(f)
    with pytest.raises(ConfigError, match="not a block device"):
        blockdev.probe(f)
    with pytest.raises(ConfigError, match="not a block device"):
        blockdev.open_exclusive(f)


# --------------------------------------------------------------------------- real loop devices (root)

DEVICE_BYTES = 32 << 20


def _need(*tools: str) -> None:
    require_root()
    missing = [t for t in ("losetup", *tools) if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")


def _losetup(backing: str) -> str:
    proc = subprocess.run(["losetup", "-f", "--show", backing], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot create a loop device here: {proc.stderr.strip()}")
    return proc.stdout.strip()


@pytest.fixture
def loop_dev(tmp_path):
    """A fresh loop device over a 32 MiB file, detached afterwards."""
    _need()
    backing = tmp_path / "loop.img"
    with open(backing, "wb") as fh:
        fh.truncate(DEVICE_BYTES)
    dev = _losetup(str(backing))
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


@contextlib.contextmanager
def _helper(args: list[str]):
    """A helper process that prints ``ready`` once it holds what it holds; killed on exit."""
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            line = proc.stdout.readline().strip()
            if line != "ready":
                proc.kill()
                pytest.skip(f"helper did not start: {proc.stderr.read().strip() or line}")
            yield proc
        finally:
            proc.kill()
            proc.wait(timeout=30)


def _fio_refuses(dev: str, tmp_path: Path, match: str) -> None:
    """``check_target`` raises, and ``swaptrace fio run`` exits 2 with one line naming the reason."""
    with pytest.raises(ConfigError, match=match):
        runner.check_target(dev, 8 << 20, allow_device=True, force=True)
    jobs_dir = tmp_path / "no-jobs-needed"
    jobs_dir.mkdir(exist_ok=True)
    res = CliRunner().invoke(cli, ["fio", "run", str(jobs_dir), "--target", dev, "--size", "8MiB",
                                   "--allow-device", "--force"])
    assert res.exit_code == 2


@pytest.mark.privileged
def test_free_loop_device_is_not_in_use_and_opens_exclusively(loop_dev):
    assert blockdev.in_use(loop_dev) == []
    fd = blockdev.open_exclusive(loop_dev)
    try:
        with pytest.raises(ConfigError, match="busy"):  # a second exclusive opener is refused
            blockdev.open_exclusive(loop_dev)
    finally:
        os.close(fd)
    os.close(blockdev.open_exclusive(loop_dev))


@pytest.mark.privileged
def test_refused_while_another_process_holds_it_exclusively(loop_dev, tmp_path):
    code = f"import os, time; fd = os.open({loop_dev!r}, os.O_RDONLY | os.O_EXCL); print('ready', flush=True); " \
           "time.sleep(120)"
    with _helper([sys.executable, "-c", code]):
        with pytest.raises(ConfigError, match="busy"):
            blockdev.open_exclusive(loop_dev)
        # nothing in /proc or /sys shows an O_EXCL opener: the open itself is the check fio run relies on
        jobs_dir = tmp_path / "jobs"
        _make_jobs(jobs_dir)
        with pytest.raises(ConfigError, match="busy"):
            runner.run_jobs(jobs_dir, loop_dev, size_bytes=8 << 20, allow_device=True, force=True,
                            only=["sweep_read_4k"], precondition=False, echo=lambda s: None)
        res = CliRunner().invoke(cli, ["fio", "run", str(jobs_dir), "--target", loop_dev, "--size", "8MiB",
                                       "--allow-device", "--jobs", "sweep_read_4k", "--no-precondition"])
        assert res.exit_code == 2 and "busy" in res.output and len(res.output.strip().splitlines()) == 1
    os.close(blockdev.open_exclusive(loop_dev))  # free again once the holder is gone


@pytest.mark.privileged
def test_refused_while_it_backs_another_loop_device(loop_dev, tmp_path):
    upper = _losetup(loop_dev)
    try:
        assert blockdev.loops_backed_by(loop_dev) == [upper]
        assert any("backing device of" in r for r in blockdev.in_use(loop_dev))
        _fio_refuses(loop_dev, tmp_path, "backing device of")
    finally:
        subprocess.run(["losetup", "-d", upper], capture_output=True)
    assert blockdev.in_use(loop_dev) == []


@pytest.mark.privileged
def test_refused_while_mounted_in_another_mount_namespace(loop_dev, tmp_path):
    _need("unshare", "mkfs.ext4", "mount")
    subprocess.run(["mkfs.ext4", "-q", "-F", loop_dev], check=True, capture_output=True)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = f"mount {loop_dev} {mnt} && echo ready && exec sleep 120"
    with _helper(["unshare", "-m", "--propagation", "private", "sh", "-c", script]) as helper:
        # our namespace does not see the mount; the scan of other processes' mountinfo does
        assert str(mnt) not in Path("/proc/self/mountinfo").read_text()
        found = blockdev.mounts(blockdev.probe(loop_dev))
        assert found and all("mount namespace of pid" in m for m in found), found
        assert str(mnt) in found[0]
        with pytest.raises(ConfigError, match="busy"):
            blockdev.open_exclusive(loop_dev)
        _fio_refuses(loop_dev, tmp_path, "is mounted")
        helper.kill()
        helper.wait(timeout=30)
    # the namespace died with its last process, and the mount with it
    for _ in range(50):
        if not blockdev.mounts(blockdev.probe(loop_dev)):
            break
        time.sleep(0.1)
    assert blockdev.in_use(loop_dev) == []


def _make_jobs(folder: Path) -> None:
    from fio_helpers import make_stream

    from swaptrace.fio import jobs

    s = make_stream(folder.parent / "s.parquet", n=200, device_bytes=4 << 20, duration_us=2e5)
    jobs.build_jobs(s, folder, sweep_sizes=("4k",))
