"""A memory cgroup for the replaying child (cgroup v1 or v2).

v1 (``/sys/fs/cgroup/memory``): ``memory.limit_in_bytes``,
``memory.usage_in_bytes``, ``memory.max_usage_in_bytes``; v2 (a ``cgroup2``
mount whose ``cgroup.controllers`` lists ``memory``): ``memory.max``,
``memory.current``, ``memory.peak`` (Documentation/admin-guide/cgroup-v1/memory.rst,
cgroup-v2.rst). The group is created at the root of the memory hierarchy
under a name that carries the owning process id, so a later run can tell a
leftover from a live capture.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from swaptrace.errors import PrivilegeError

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")


def memory_hierarchy() -> tuple[int, Path]:
    """``(version, root)`` of the memory controller; PrivilegeError if there is none."""
    if (V1_ROOT / "memory.limit_in_bytes").exists():
        return 1, V1_ROOT
    controllers = V2_ROOT / "cgroup.controllers"
    if controllers.exists() and "memory" in controllers.read_text().split():
        return 2, V2_ROOT
    raise PrivilegeError("no memory cgroup controller is mounted (need cgroup v1 memory or cgroup v2 with memory)")


class MemoryCgroup:
    """Create, limit, read and remove one memory cgroup."""

    def __init__(self, name: str):
        self.version, self.root = memory_hierarchy()
        self.name = name
        self.path = self.root / name

    def create(self) -> None:
        if self.version == 2:
            subtree = self.root / "cgroup.subtree_control"
            if "memory" not in subtree.read_text().split():
                try:
                    subtree.write_text("+memory")
                except OSError as exc:
                    raise PrivilegeError(f"cannot enable the memory controller in {self.root}: {exc.strerror}") from None
        try:
            self.path.mkdir(exist_ok=True)
        except OSError as exc:
            raise PrivilegeError(f"cannot create cgroup {self.path}: {exc.strerror}") from None

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def _file(self, v1: str, v2: str) -> Path:
        return self.path / (v1 if self.version == 1 else v2)

    def set_limit(self, limit_bytes: int | None) -> None:
        """Hard limit in bytes; ``None`` removes it."""
        f = self._file("memory.limit_in_bytes", "memory.max")
        if limit_bytes is None:
            f.write_text("-1" if self.version == 1 else "max")
        else:
            f.write_text(str(int(limit_bytes)))

    def _write_v1(self, name: str, value: str) -> bool:
        """Write a v1-only control file; False on v2 or when the kernel refuses it."""
        if self.version != 1:
            return False
        try:
            (self.path / name).write_text(value)
            return True
        except OSError:
            return False

    def disable_oom_killer(self) -> bool:
        """v1 only: make tasks wait instead of being killed when reclaim falls behind (``memory.oom_control``)."""
        return self._write_v1("memory.oom_control", "1")

    def enable_oom_killer(self) -> None:
        """v1: let the kernel OOM-kill again (tasks waiting in OOM are woken and the killer runs)."""
        self._write_v1("memory.oom_control", "0")

    def oom_kills(self) -> int | None:
        """Tasks the OOM killer has killed in this group (v1 ``oom_control`` / v2 ``memory.events``, Linux 4.13+)."""
        f = self._file("memory.oom_control", "memory.events")
        try:
            for line in f.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return None

    def swap_bytes(self) -> int | None:
        """v2 ``memory.swap.current``; None on v1 (its ``memory.stat`` has ``swap``) or without swap accounting."""
        if self.version != 2:
            return None
        try:
            return int((self.path / "memory.swap.current").read_text())
        except (OSError, ValueError):
            return None

    def kill_all(self, timeout_s: float = 5.0) -> None:
        """SIGKILL every task in the group until it is empty (v2 ``cgroup.kill`` where the kernel has it, 5.14+).

        A task may fork between reading ``cgroup.procs`` and the kill, so the pids are read and killed until
        none is left; children stay in their parent's group, so none escapes.
        """
        kill_file = self.path / "cgroup.kill"
        if self.version == 2 and kill_file.exists():
            try:
                kill_file.write_text("1")
            except OSError:
                pass
        deadline = time.monotonic() + timeout_s
        while True:
            pids = self.pids()
            if not pids or time.monotonic() > deadline:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)

    def under_oom(self) -> bool:
        if self.version != 1:
            return False
        try:
            return "under_oom 1" in (self.path / "memory.oom_control").read_text()
        except OSError:
            return False

    def usage_bytes(self) -> int:
        return int(self._file("memory.usage_in_bytes", "memory.current").read_text())

    def squeeze(self) -> bool:
        """Reclaim what the group's tasks do not pin, and return the charges held ahead to the counter.

        The usage counter also holds pages charged ahead into a per-CPU stock (``refill_stock``, up to
        ``MEMCG_CHARGE_BATCH`` = 64 pages per CPU) that no page uses yet, and the group holds page cache
        its task read while starting (a few hundred KiB); a baseline measured with either is too high, and
        the model gets it back as extra room once the stock is drawn down or the cache reclaimed. v1
        ``memory.force_empty`` drains the stock (``drain_all_stock``) and reclaims all it can -- the
        replay child has locked its own memory (``mlockall``), so what goes is cache and stray pages; v2
        ``memory.reclaim`` reclaims the same (its stock stays). Returns False where neither works.
        """
        f = self._file("memory.force_empty", "memory.reclaim")
        try:
            f.write_text("0" if self.version == 1 else str(max(self.usage_bytes(), 4096)))
            return True
        except OSError:  # v2 returns EAGAIN when it could not reclaim all it was asked to: that is expected
            return self.version == 2

    def peak_bytes(self) -> int | None:
        f = self._file("memory.max_usage_in_bytes", "memory.peak")
        try:
            return int(f.read_text().split()[0])
        except (OSError, ValueError):
            return None

    def reset_peak(self) -> None:
        """v1: start the peak usage over (v2's ``memory.peak`` cannot be reset)."""
        self._write_v1("memory.max_usage_in_bytes", "0")

    def memory_kinds(self) -> dict[str, int | None]:
        """Anon, file (page cache) and swapped bytes now: :func:`memory_kinds` of ``memory.stat``."""
        return memory_kinds(self.stat(), self.version, self.swap_bytes())

    def stat(self) -> dict[str, int]:
        """``memory.stat`` as integers (v1 adds ``kernel``: kmem usage, page tables and slab)."""
        out = {}
        if self.version == 1:
            try:
                out["kernel"] = int((self.path / "memory.kmem.usage_in_bytes").read_text())
            except (OSError, ValueError):
                pass
        for line in (self.path / "memory.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if value.strip().lstrip("-").isdigit():
                out[key] = int(value)
        return out

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in self.procs_file.read_text().split()]
        except OSError:
            return []

    def remove(self) -> None:
        remove_group(self.path)


def memory_kinds(stat: dict[str, int], version: int, swap_current: int | None = None) -> dict[str, int | None]:
    """Bytes of anonymous memory, page cache and swap charged to a group, from its ``memory.stat``.

    v1 (Documentation/admin-guide/cgroup-v1/memory.rst, 5.2): ``rss`` (anonymous and swap cache),
    ``cache`` (page cache, tmpfs/shmem included), ``swap`` (only with swap accounting); the ``total_*``
    forms include child groups and are preferred. v2 (cgroup-v2.rst): ``anon``, ``file`` (shmem included)
    and ``memory.swap.current``, passed as ``swap_current``. A kind the kernel does not report is None.
    """
    def pick(*keys: str) -> int | None:
        for key in keys:
            if key in stat:
                return int(stat[key])
        return None

    if version == 1:
        return {"anon": pick("total_rss", "rss"), "file": pick("total_cache", "cache"),
                "swap": pick("total_swap", "swap")}
    return {"anon": pick("anon"), "file": pick("file"), "swap": swap_current}


def remove_group(path: Path, timeout_s: float = 10.0) -> None:
    """Kill what is left in a cgroup of ours and ``rmdir`` it (retrying while tasks exit)."""
    if not path.exists():
        return
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except OSError:
            pids = []
        for pid in pids:  # only processes a capture of ours put there
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def list_groups(prefix: str) -> list[Path]:
    """Memory cgroups at the hierarchy root whose name starts with ``prefix``."""
    try:
        _, root = memory_hierarchy()
    except PrivilegeError:
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(prefix))
