"""Block devices: what a path is, and whether anything else is using it.

One place for the probing that ``fio run`` (before writing to a device) and
``capture`` (setting up and cleaning up its loop device) need:

* :func:`probe` resolves a path to its device (kernel name, ``major:minor``);
* :func:`mounts` looks for mounts of the device or any of its partitions in
  ``/proc/self/mountinfo`` **and** in ``/proc/PID/mountinfo`` of every
  readable process, so a mount in another mount namespace (a container,
  ``unshare -m``) is found too (Documentation/filesystems/proc.rst,
  "mountinfo");
* :func:`holders` lists devices stacked on it or its partitions (dm, md, LVM:
  ``/sys/class/block/NAME/holders``); :func:`loops_backed_by` the loop
  devices whose backing file it is -- a loop device does not show up as a
  holder nor claim its backing device exclusively, so this is the only way to
  see it;
* :func:`swap_entries` the lines of ``/proc/swaps`` that are it;
* :func:`signatures` the file system / partition-table signatures on it;
* :func:`open_exclusive` opens it with ``O_EXCL``: for a block device the
  kernel then refuses if anyone holds it exclusively -- a mounted file system,
  md/dm, another ``O_EXCL`` opener -- and, while the caller keeps the
  descriptor, refuses them in turn (block/bdev.c ``bd_prepare_to_claim``;
  open(2), "O_EXCL").

The ``proc`` and ``sys`` roots are parameters so tests can point them at a
fake tree.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from swaptrace.errors import ConfigError

PROC = Path("/proc")
SYS = Path("/sys")


@dataclass(frozen=True)
class Device:
    """A block device: the path given, its kernel name and ``major:minor``."""

    path: str
    name: str
    devnum: str


def is_block_device(path: str | os.PathLike) -> bool:
    """True when ``path`` (after symlinks) is a block device node."""
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


def device_numbers(path: str | os.PathLike) -> tuple[int, int]:
    """(major, minor) of a device node."""
    rdev = os.stat(path).st_rdev
    return os.major(rdev), os.minor(rdev)


def devnum_of(path: str | os.PathLike) -> str:
    """``major:minor`` of a device node, as sysfs and mountinfo write it."""
    return "{}:{}".format(*device_numbers(path))


def probe(path: str | os.PathLike, *, sys_root: str | os.PathLike = SYS) -> Device:
    """Resolve a path (symlinks included, e.g. ``/dev/disk/by-id/...``) to its block device.

    Raises
    ------
    ConfigError
        ``path`` is not a block device.
    """
    if not is_block_device(path):
        raise ConfigError(f"{path}: is not a block device")
    num = devnum_of(path)
    link = Path(sys_root) / "dev" / "block" / num
    name = link.resolve().name if link.exists() else Path(os.path.realpath(path)).name
    return Device(str(path), name, num)


def _class_dir(dev: Device, sys_root: str | os.PathLike) -> Path:
    return Path(sys_root) / "class" / "block" / dev.name


def partitions(dev: Device, *, sys_root: str | os.PathLike = SYS) -> list[Device]:
    """The partitions of ``dev`` (sub-folders of its sysfs folder holding a ``partition`` file)."""
    base = _class_dir(dev, sys_root)
    if not base.exists():
        return []
    out = []
    for child in sorted(base.resolve().iterdir()):
        if (child / "partition").exists() and (child / "dev").exists():
            out.append(Device(f"/dev/{child.name}", child.name, (child / "dev").read_text().strip()))
    return out


def holders(dev: Device, *, sys_root: str | os.PathLike = SYS) -> list[str]:
    """Devices stacked on ``dev`` or on any of its partitions (dm, md, LVM), by kernel name."""
    found = []
    for d in (dev, *partitions(dev, sys_root=sys_root)):
        folder = _class_dir(d, sys_root) / "holders"
        if folder.is_dir():
            found += [p.name if d is dev else f"{p.name} (on {d.name})" for p in sorted(folder.iterdir())]
    return found


def _mount_namespaces(proc_root: Path):
    """(pid or None for our own, mountinfo path) of each mount namespace we can read, ours first."""
    seen: set[str] = set()
    candidates = [("self", proc_root / "self")]
    candidates += sorted(((p.name, p) for p in proc_root.iterdir() if p.name.isdigit()), key=lambda c: int(c[0]))
    for pid, folder in candidates:
        try:
            ns = os.readlink(folder / "ns" / "mnt")
        except OSError:
            ns = f"pid {pid}"  # unreadable or a fake tree: every process counts as its own
        if ns in seen:
            continue
        seen.add(ns)
        if (folder / "mountinfo").is_file():
            yield (None if pid == "self" else pid), folder / "mountinfo"


def _mountinfo_hits(text: str, nums: set[str], real: set[str]) -> list[str]:
    """Mount points in one mountinfo text whose ``major:minor`` or source is one of ours."""
    hits = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        source = line.split(" - ", 1)[1].split()[1] if " - " in line and len(line.split(" - ", 1)[1].split()) > 1 else ""
        if fields[2] in nums or (source.startswith("/") and os.path.realpath(source) in real):
            hits.append(fields[4])
    return hits


def mounts(dev: Device, *, proc_root: str | os.PathLike = PROC, sys_root: str | os.PathLike = SYS) -> list[str]:
    """Mount points of ``dev`` or its partitions, in our mount namespace and every other readable one.

    A mount seen only in another namespace is named with a process in it:
    ``/mnt (mount namespace of pid 1234)``.
    """
    parts = partitions(dev, sys_root=sys_root)
    nums = {dev.devnum, *(p.devnum for p in parts)}
    real = {os.path.realpath(dev.path), *(os.path.realpath(p.path) for p in parts)}
    found: list[str] = []
    for pid, info in _mount_namespaces(Path(proc_root)):
        try:
            text = info.read_text()
        except OSError:  # the process ended, or we may not read it
            continue
        for point in _mountinfo_hits(text, nums, real):
            entry = point if pid is None else f"{point} (mount namespace of pid {pid})"
            if entry not in found:
                found.append(entry)
    return found


def swap_areas(*, proc_root: str | os.PathLike = PROC) -> list[str]:
    """Every device or file name listed in ``/proc/swaps`` (empty if it cannot be read)."""
    try:
        lines = (Path(proc_root) / "swaps").read_text().splitlines()[1:]
    except OSError:
        return []
    return [line.split()[0] for line in lines if line.strip()]


def swap_entries(path: str | os.PathLike, *, proc_root: str | os.PathLike = PROC) -> list[str]:
    """Entries of ``/proc/swaps`` that are ``path`` (same file after symlinks, or same device number)."""
    real = os.path.realpath(path)
    try:
        rdev = os.stat(path).st_rdev if is_block_device(path) else None
    except OSError:
        rdev = None
    hits = []
    for name in swap_areas(proc_root=proc_root):
        try:
            same = os.path.realpath(name) == real or (
                rdev is not None and is_block_device(name) and os.stat(name).st_rdev == rdev)
        except OSError:
            same = False
        if same:
            hits.append(name)
    return hits


def loop_devices(*, sys_root: str | os.PathLike = SYS) -> dict[str, str]:
    """Attached loop devices: ``/dev/loopN`` -> backing file (the data of ``losetup -a``, from sysfs)."""
    out = {}
    for backing in sorted((Path(sys_root) / "block").glob("loop*/loop/backing_file")):
        try:
            out[f"/dev/{backing.parent.parent.name}"] = backing.read_text().strip()
        except OSError:
            continue
    return out


def loops_backed_by(path: str | os.PathLike, *, sys_root: str | os.PathLike = SYS) -> list[str]:
    """Loop devices whose backing file is ``path`` (a file or a block device)."""
    real = os.path.realpath(path)
    return [loop for loop, backing in loop_devices(sys_root=sys_root).items()
            if backing.removesuffix(" (deleted)") == real]


def size_bytes(path: str | os.PathLike) -> int:
    """Size of a block device in bytes."""
    with open(path, "rb") as fh:
        return fh.seek(0, os.SEEK_END)


#: (offset, magic, name) of signatures recognised here, besides blkid/wipefs
_MAGICS = (
    (0x438, b"\x53\xef", "ext2/3/4"),
    (0x1FE, b"\x55\xaa", "DOS partition table / boot sector"),
    (0x200, b"EFI PART", "GPT partition table"),
    (0x0, b"XFSB", "xfs"),
    (0x10040, b"_BHRfS_M", "btrfs"),
    (0x0, b"LUKS\xba\xbe", "LUKS"),
    (0x218, b"LVM2 001", "LVM2 physical volume"),
    (0xFF6, b"SWAPSPACE2", "Linux swap"),
    (0xFF6, b"SWAP-SPACE", "Linux swap (old)"),
    (0x8001, b"CD001", "iso9660"),
    (0x1000, b"\x4e\x1d\xfc\xa9", "md raid (1.1/1.2)"),
    (0x3, b"NTFS    ", "ntfs"),
    (0x52, b"FAT32   ", "vfat"),
    (0x36, b"FAT1", "vfat"),
    (0x0, b"hsqs", "squashfs"),
    (0x400, b"\x10\x20\xf5\xf2", "f2fs"),
)


def magic_signatures(data: bytes) -> list[str]:
    """Names of file system / partition signatures found in the first bytes of a device."""
    found = []
    for offset, magic, name in _MAGICS:
        if data[offset:offset + len(magic)] == magic and name not in found:
            found.append(name)
    return found


def signatures(path: str | os.PathLike) -> list[str]:
    """Signatures on a block device, from ``blkid -p``, ``wipefs`` and the magic bytes."""
    found: list[str] = []
    if shutil.which("blkid"):
        proc = subprocess.run(["blkid", "-p", "-o", "export", str(path)], capture_output=True, text=True, timeout=60)
        for line in proc.stdout.splitlines():
            key, _, value = line.partition("=")
            if key in ("TYPE", "PTTYPE") and value:
                found.append(f"{value} (blkid)")
    if shutil.which("wipefs"):
        proc = subprocess.run(["wipefs", "--no-act", "--noheadings", "--output", "TYPE,OFFSET", str(path)],
                              capture_output=True, text=True, timeout=60)
        found += [f"{line.split()[0]} (wipefs)" for line in proc.stdout.splitlines() if line.strip()]
    with open(path, "rb") as fh:
        head = fh.read(0x10040 + 64)
    found += [f"{name} (magic bytes)" for name in magic_signatures(head)]
    return found


def in_use(path: str | os.PathLike, *, proc_root: str | os.PathLike = PROC,
           sys_root: str | os.PathLike = SYS) -> list[str]:
    """Why a block device must not be written: each reason one phrase; empty when nothing uses it.

    Checks mounts (every readable mount namespace), active swap, holders
    (its own and its partitions') and loop devices backed by it.
    """
    dev = probe(path, sys_root=sys_root)
    reasons = []
    found = mounts(dev, proc_root=proc_root, sys_root=sys_root)
    if found:
        reasons.append(f"is mounted (on {', '.join(found)})")
    if swap_entries(path, proc_root=proc_root):
        reasons.append("is an active swap device; swapoff it first")
    held = holders(dev, sys_root=sys_root)
    if held:
        reasons.append(f"is in use by {', '.join(held)}")
    loops = loops_backed_by(path, sys_root=sys_root)
    if loops:
        reasons.append(f"is the backing device of {', '.join(loops)}; detach it first (losetup -d)")
    return reasons


def open_exclusive(path: str | os.PathLike, *, write: bool = True) -> int:
    """Open a block device with ``O_EXCL`` and return the descriptor; the caller closes it.

    While the descriptor is open the kernel refuses other exclusive openers
    (``mount``, ``mkfs``, md/dm assembly, another ``O_EXCL`` open), so keep
    it for as long as the device must stay ours.

    Raises
    ------
    ConfigError
        The device is busy (mounted in any namespace, held by md/dm, or open
        ``O_EXCL`` by another program), or is not a block device.
    """
    if not is_block_device(path):
        raise ConfigError(f"{path}: is not a block device")
    flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_EXCL | os.O_CLOEXEC
    try:
        return os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            raise ConfigError(f"{path}: is busy (mounted, possibly in another mount namespace, held by another "
                              f"device, or opened exclusively by another program); refusing to use it") from None
        raise ConfigError(f"{path}: cannot open it exclusively: {exc.strerror}") from None
