"""Swap on a loop device: file -> ``losetup`` -> ``mkswap`` -> ``swapon``, and back.

The backing file is preallocated with ``fallocate`` and the loop device
opened with ``--direct-io=on`` so swap I/O does not pass through (and get
charged to) the page cache of the backing file -- since Linux 5.12 loop
workers charge that cache to the issuing memory cgroup, which would feed
back into the very reclaim being measured. The device is marked
non-rotational (``queue/rotational = 0``) by default so the kernel treats it
as an SSD: per-CPU cluster slot allocation and VMA-based readahead
(docs/capture.md; mm/swapfile.c ``swapon``, mm/swap_state.c
``swap_use_vma_readahead``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from swaptrace.core import blockdev
from swaptrace.errors import PrivilegeError, ToolError

SWAP_PRIORITY = 32767  # highest: our device is used before any other swap


def _run(*args: str) -> str:
    tool = shutil.which(args[0]) or (f"/usr/sbin/{args[0]}" if Path(f"/usr/sbin/{args[0]}").exists() else None)
    if tool is None:
        raise ToolError(f"{args[0]} is not installed (package util-linux)")
    res = subprocess.run([tool, *args[1:]], capture_output=True, text=True)
    if res.returncode != 0:
        raise ToolError(f"{' '.join(args)} failed: {res.stderr.strip() or res.stdout.strip() or res.returncode}")
    return res.stdout


def parse_block_stat(text: str) -> dict[str, int]:
    """Counters of a ``/sys/block/<dev>/stat`` line (Documentation/block/stat.rst).

    Returns completed requests and 512-byte sectors per direction, and the
    milliseconds requests spent in flight (``read_ms``, ``write_ms``: summed
    over requests, so ``write_ms / write_ios`` is the mean write latency) and
    the device was busy (``busy_ms``). The times are recorded because
    reclaim can free a written page only once its write completes, so the
    device's speed is part of the conditions a capture was taken in (research/notes/calibration.md,
    *Taken in turn*).
    """
    f = [int(x) for x in text.split()]
    if len(f) < 11:
        raise ValueError(f"a block stat line has at least 11 fields, got {len(f)}: {text.strip()!r}")
    return {"read_ios": f[0], "read_sectors": f[2], "read_ms": f[3], "write_ios": f[4], "write_sectors": f[6],
            "write_ms": f[7], "busy_ms": f[9], "discard_ios": f[11] if len(f) > 11 else 0}


@dataclass
class SwapDevice:
    """A swap area on a loop device over ``path``; use :meth:`setup` then :meth:`teardown`.

    ``make_swap=False`` sets up the loop device alone, exactly as a capture's swap sits on it, and no swap
    area: the device whose latency a capture's faults wait for, for fio to measure (a loop device adds a
    worker's hop to each request over the backing file's own latency).
    """

    path: Path
    size_bytes: int
    rotational: bool = False
    make_swap: bool = True
    loop: str | None = None
    active: bool = False
    created_file: bool = False
    facts: dict = field(default_factory=dict)

    def setup(self) -> None:
        self.path = Path(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        size = (int(self.size_bytes) + (1 << 20) - 1) & ~((1 << 20) - 1)
        with open(self.path, "wb") as fh:
            self.created_file = True
            try:
                os.posix_fallocate(fh.fileno(), 0, size)
            except OSError as exc:
                raise ToolError(f"cannot allocate swap file {self.path} ({size} bytes): {exc.strerror}") from None
        self.loop = _run("losetup", "--direct-io=on", "-f", "--show", str(self.path)).strip()
        queue = Path("/sys/block") / Path(self.loop).name / "queue"
        try:
            (queue / "rotational").write_text("1" if self.rotational else "0")
        except OSError:
            pass  # reported in facts; the kernel keeps the backing device's value
        if self.make_swap:
            _run("mkswap", self.loop)
            try:
                _run("swapon", "-p", str(SWAP_PRIORITY), self.loop)
            except ToolError as exc:
                raise PrivilegeError(f"swapon failed ({exc}); capture needs root and swap support") from None
            self.active = True
        self.facts = {
            "loop_device": self.loop,
            "device": list(blockdev.device_numbers(self.loop)),
            "device_bytes": size,
            "rotational": _read(queue / "rotational"),
            "max_sectors_kb": _read(queue / "max_sectors_kb"),
            "scheduler": _read(queue / "scheduler"),
        }

    @property
    def device(self) -> tuple[int, int]:
        if self.loop is None:
            raise RuntimeError("swap device not set up")
        return blockdev.device_numbers(self.loop)

    def stat(self) -> dict:
        """The loop device's counters (:func:`parse_block_stat`)."""
        return parse_block_stat((Path("/sys/block") / Path(self.loop).name / "stat").read_text())

    def teardown(self) -> None:
        """swapoff, detach, delete -- each step attempted even if an earlier one fails."""
        errors = []
        if self.loop is not None and (self.active or self.loop in blockdev.swap_areas()):
            try:
                _run("swapoff", self.loop)
                self.active = False
            except ToolError as exc:
                errors.append(str(exc))
        if self.loop is not None:
            try:
                _run("losetup", "-d", self.loop)
                self.loop = None
            except ToolError as exc:
                errors.append(str(exc))
        if self.created_file:
            Path(self.path).unlink(missing_ok=True)
            self.created_file = False
        if errors:
            raise ToolError("; ".join(errors))


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def remove_swap_leftovers(marker: str, alive) -> list[str]:
    """Undo swap areas, loop devices and files whose backing file name contains ``marker``.

    ``alive(name)`` says whether the owning capture is still running (then it
    is left alone). Returns what was removed.
    """
    removed = []
    swaps = set(blockdev.swap_areas())
    for loop, backing in blockdev.loop_devices().items():
        name = Path(backing.replace(" (deleted)", "")).name
        if marker not in name or alive(name):
            continue
        if loop in swaps:
            _run("swapoff", loop)
            removed.append(f"swapon {loop}")
        _run("losetup", "-d", loop)
        removed.append(f"loop {loop} ({backing})")
    return removed
