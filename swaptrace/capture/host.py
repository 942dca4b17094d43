"""The machine a capture runs on: what it needs, what it records of it, and one capture at a time.

A capture needs root, a memory cgroup hierarchy, tracefs and util-linux's swap tools
(:func:`check_privileges`); a work folder on a disk and zswap off (:func:`check_machine`); the
machine to itself (:func:`hold_capture_lock`, :func:`refuse_other_swap`). What it records of the
kernel (:func:`kernel_facts`, :func:`vmstat`) goes into the stream's ``kernel`` metadata.
"""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
from pathlib import Path
from typing import Any

from swaptrace.capture import cgroup as cg
from swaptrace.capture import tracing
from swaptrace.core import blockdev
from swaptrace.errors import ConfigError, PrivilegeError, ToolError

#: held (``flock``) for the whole of a capture: two at once would share the swap device's traffic and the CPUs
LOCK_PATH = Path("/run/swaptrace-capture.lock")
#: the /proc/vmstat counters a run's delta keeps
VMSTAT_KEYS = ("pswpin", "pswpout", "pgmajfault", "pgfault", "swpin_zero", "swpout_zero", "thp_swpout")


def vmstat() -> dict[str, int]:
    """The machine-wide swap and fault counters of ``/proc/vmstat`` (:data:`VMSTAT_KEYS`; pages or events)."""
    out = {}
    for line in Path("/proc/vmstat").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key in VMSTAT_KEYS:
            out[key] = int(value)
    return out


def _read_sys(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _fs_type(path: Path) -> str | None:
    """Filesystem type of the mount holding ``path`` (from /proc/mounts)."""
    target = Path(path).resolve()
    while not target.exists() and target != target.parent:
        target = target.parent
    best, kind = "", None
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3:
            mount = parts[1].replace("\\040", " ")
            if (str(target) == mount or str(target).startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
                best, kind = mount, parts[2]
    return kind


def kernel_facts() -> dict[str, Any]:
    """Kernel settings that shape swap behaviour (kernel Documentation/admin-guide/sysctl/vm.rst)."""
    return {
        "kernel": platform.release(),
        "page_cluster": _read_sys("/proc/sys/vm/page-cluster"),
        "swappiness": _read_sys("/proc/sys/vm/swappiness"),
        "vma_ra_enabled": _read_sys("/sys/kernel/mm/swap/vma_ra_enabled"),
        "thp": _read_sys("/sys/kernel/mm/transparent_hugepage/enabled"),
        "mglru": _read_sys("/sys/kernel/mm/lru_gen/enabled"),
        "zswap": _read_sys("/sys/module/zswap/parameters/enabled"),
        "cpus": os.cpu_count(),
    }


def check_privileges() -> None:
    """PrivilegeError unless root with a memory cgroup, tracefs and swap tools."""
    if os.geteuid() != 0:
        raise PrivilegeError("capture needs root (it creates a swap device, a memory cgroup and a tracefs instance)")
    cg.memory_hierarchy()
    tracing.tracefs_root()
    for tool in ("losetup", "mkswap", "swapon", "swapoff"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists() and not Path(f"/sbin/{tool}").exists():
            raise ToolError(f"{tool} is not installed (package util-linux)")


def check_machine(work_base: Path) -> None:
    """:func:`check_privileges`, then ConfigError if the swap file would live in RAM or be compressed there.

    Parameters
    ----------
    work_base : Path
        The folder the capture's work folder (and swap file) goes in: not tmpfs or ramfs.
    """
    check_privileges()
    kind = _fs_type(work_base)
    if kind in ("tmpfs", "ramfs"):
        raise ConfigError(f"{work_base} is on {kind}: a swap file there lives in RAM; use --work-dir on a disk")
    if (_read_sys("/sys/module/zswap/parameters/enabled") or "N").upper().startswith("Y"):
        raise ConfigError("zswap is enabled, so swapped pages are compressed in RAM instead of written to the "
                          "device; disable it for a capture: echo N > /sys/module/zswap/parameters/enabled")


def hold_capture_lock(path: Path) -> int:
    """Take the capture lock without waiting; return its descriptor (closing it releases the lock).

    Raises
    ------
    ConfigError
        Another capture holds it (its pid, written into the file, is named).
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise ConfigError(f"another capture is running (pid {holder} holds {path}); wait for it to finish") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def refuse_other_swap() -> None:
    """ConfigError when any swap area is active: the kernel would share the capture's swap traffic with it."""
    areas = blockdev.swap_areas()
    if areas:
        raise ConfigError(f"swap is already active on {', '.join(areas)}; the kernel would spread the capture's "
                          f"swap I/O over it: swapoff it for the capture")
