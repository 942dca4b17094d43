"""How much more memory this process can get: the machine's, and its memory cgroup's.

:func:`memory_room` is what a command compares an estimate of what it is about to allocate with
(``swaptrace train``: :func:`swaptrace.workload.train.memory_need`). It is the smaller of

* **the machine**: ``MemAvailable`` (memory the kernel can hand out without swapping, reclaimable page cache
  included) plus ``SwapFree``, both from ``/proc/meminfo``; swap counts because a process under a limit
  (``swaptrace capture -- CMD`` runs its program so, on purpose) keeps running with part of itself swapped;
* **the process's memory cgroup** (``/proc/self/cgroup``; the hierarchy's mount point from
  ``/proc/self/mountinfo``), at its own level and every ancestor's, where a limit is set:

  - cgroup v2: ``memory.max − memory.current``, plus swap: the smaller of ``SwapFree`` and
    ``memory.swap.max − memory.swap.current``;
  - cgroup v1: ``memory.limit_in_bytes − memory.usage_in_bytes`` plus ``SwapFree``, and at most
    ``memory.memsw.limit_in_bytes − memory.memsw.usage_in_bytes`` where swap accounting is on (v1 reports
    "no limit" as a number near 2^63: anything at or above 2^62 is read as none).

A file that cannot be read leaves its part out (a machine without ``/proc/meminfo`` counts its physical memory
instead); the room is never made up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from swaptrace.core.units import format_bytes

#: a cgroup v1 limit at or above this is "no limit" (the kernel reports PAGE_COUNTER_MAX pages, about 2^63 bytes)
V1_NO_LIMIT = 1 << 62


@dataclass(frozen=True)
class MemoryRoom:
    """Bytes this process can still get, and what bounds them, for a message."""

    bytes: int
    why: str


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _number(path: Path) -> int | None:
    """A cgroup file's number; None when missing, unreadable or ``max`` (no limit)."""
    text = _read(path)
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isdigit() else None


def _meminfo(root: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (_read(root / "proc/meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return out


def _mounts(root: Path) -> tuple[Path | None, Path | None]:
    """Mount points of the cgroup v2 hierarchy and of the v1 memory controller (None where absent)."""
    v2 = v1 = None
    for line in (_read(root / "proc/self/mountinfo") or "").splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        point = fields[4]
        if tail[0] == "cgroup2" and v2 is None:
            v2 = Path(point)
        elif tail[0] == "cgroup" and "memory" in tail[2].split(",") and v1 is None:
            v1 = Path(point)
    return v2, v1


def _groups(root: Path) -> tuple[str | None, str | None]:
    """The process's cgroup path in the v2 hierarchy and in the v1 memory controller's."""
    v2 = v1 = None
    for line in (_read(root / "proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
        elif "memory" in parts[1].split(","):
            v1 = parts[2]
    return v2, v1


def _levels(root: Path, mount: Path, group: str) -> list[Path]:
    """The group's folder and its ancestors' up to the hierarchy's root (the mount point)."""
    top = root / mount.relative_to("/")
    here = top / group.lstrip("/")
    if not here.is_dir():
        return []
    levels = [here]
    while levels[-1] != top and top in levels[-1].parents:
        levels.append(levels[-1].parent)
    return levels


def _cgroup_v2(levels: list[Path], swap_free: int) -> tuple[int, str] | None:
    ram = swap = None
    for d in levels:
        limit, used = _number(d / "memory.max"), _number(d / "memory.current")
        if limit is not None and used is not None:
            room = max(0, limit - used)
            if ram is None or room < ram[0]:
                ram = (room, f"cgroup {d.name or '/'}: memory.max {format_bytes(limit)}, {format_bytes(used)} used")
        slimit, sused = _number(d / "memory.swap.max"), _number(d / "memory.swap.current")
        if slimit is not None and sused is not None:
            swap = max(0, slimit - sused) if swap is None else min(swap, max(0, slimit - sused))
    if ram is None:
        return None
    swap_room = swap_free if swap is None else min(swap, swap_free)
    return ram[0] + swap_room, f"{ram[1]}, {format_bytes(swap_room)} of swap free to it"


def _cgroup_v1(levels: list[Path], swap_free: int) -> tuple[int, str] | None:
    ram = both = None
    for d in levels:
        limit, used = _number(d / "memory.limit_in_bytes"), _number(d / "memory.usage_in_bytes")
        if limit is not None and used is not None and limit < V1_NO_LIMIT:
            room = max(0, limit - used)
            if ram is None or room < ram[0]:
                ram = (room, f"cgroup {d.name or '/'}: memory.limit_in_bytes {format_bytes(limit)}, "
                             f"{format_bytes(used)} used")
        mlimit, mused = _number(d / "memory.memsw.limit_in_bytes"), _number(d / "memory.memsw.usage_in_bytes")
        if mlimit is not None and mused is not None and mlimit < V1_NO_LIMIT:
            both = max(0, mlimit - mused) if both is None else min(both, max(0, mlimit - mused))
    if ram is None:
        return None
    total = ram[0] + swap_free if both is None else min(ram[0] + swap_free, both)
    return total, f"{ram[1]}, {format_bytes(total - ram[0])} of swap free to it"


def memory_room(root: Path = Path("/")) -> MemoryRoom:
    """The bytes this process can still get (see the module docstring) and why.

    Parameters
    ----------
    root : Path
        Where ``/proc`` and the cgroup mounts are read from (a test's fake tree; ``/`` otherwise).
    """
    info = _meminfo(root)
    swap_free = info.get("SwapFree", 0)
    if "MemAvailable" in info:
        machine = info["MemAvailable"] + swap_free
        why = f"this machine has {format_bytes(info['MemAvailable'])} available and {format_bytes(swap_free)} of free swap"
    else:
        machine = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        why = f"this machine has {format_bytes(machine)} of memory"
    best = MemoryRoom(machine, why)
    (mount2, mount1), (group2, group1) = _mounts(root), _groups(root)
    for mount, group, read in ((mount2, group2, _cgroup_v2), (mount1, group1, _cgroup_v1)):
        if mount is None or group is None:
            continue
        found = read(_levels(root, mount, group), swap_free)
        if found is not None and found[0] < best.bytes:
            best = MemoryRoom(found[0], found[1])
    return best
