"""Bounds of the numbers a user gives, shared by the command-line options and the TOML files of the same name.

A value in a device TOML (``op = 1000``), a kernel profile or a host-costs file gets the same check as the
option of the same name (``--op``): the click types of those options are made from this table
(``swaptrace.commands.common.bounded``) and the file readers call :func:`check` on it, so the two cannot
drift apart.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from swaptrace.errors import ConfigError

#: the largest time of one CPU or flash operation taken (us): an hour, far above any real one
MAX_US = 3.6e9


@dataclass(frozen=True)
class Bound:
    """A closed (or, where marked, open) range of a number; ``integer`` refuses fractions and booleans."""

    lo: float
    hi: float
    min_open: bool = False
    max_open: bool = False
    integer: bool = False

    def describe(self) -> str:
        return f"{'(' if self.min_open else '['}{self.lo:g}, {self.hi:g}{')' if self.max_open else ']'}"

    def contains(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value > self.lo if self.min_open else value >= self.lo
        below = value < self.hi if self.max_open else value <= self.hi
        return above and below


#: name (the option without ``--``, dashes as underscores; the TOML key) -> its bound
BOUNDS: dict[str, Bound] = {
    # SSD model (ssd --device TOML, --op, --channels, ...)
    "op": Bound(0, 100, min_open=True),
    "spare_factor": Bound(0, 1, min_open=True, max_open=True),
    "channels": Bound(1, 1 << 10, integer=True),
    "dies_per_channel": Bound(1, 1 << 10, integer=True),
    "planes": Bound(1, 1 << 6, integer=True),
    "blocks_per_plane": Bound(1, 1 << 24, integer=True),
    "pages_per_block": Bound(1, 1 << 16, integer=True),
    "gc_d": Bound(1, 1 << 10, integer=True),
    "read_us": Bound(0, 1e9),
    "program_us": Bound(0, 1e9),
    "erase_us": Bound(0, 1e9),
    "channel_mb_s": Bound(0, 1e9, min_open=True),
    "host_mb_s": Bound(0, 1e9, min_open=True),
    "gc_free_fraction": Bound(0, 1, max_open=True),
    "bg_gc_free_fraction": Bound(0, 1, max_open=True),
    # host costs (time --fault-cpu-us ..., --costs TOML)
    "fault_cpu_us": Bound(0, MAX_US),
    "reclaim_cpu_us": Bound(0, MAX_US),
    "write_cpu_us": Bound(0, MAX_US),
    "step_compute_us": Bound(0, MAX_US),
    # a measured device profile's latencies (time --device disk.toml)
    "latency_us": Bound(0, MAX_US, min_open=True),
    # a capture's memory readings (runtime-profile CAPTURE): bytes, at most the largest size any option takes
    "memory_reading_bytes": Bound(0, 1 << 60),
    # threads a step's faults are shared over (time --threads; a recording's cpu.threads): far above any machine's
    "threads": Bound(1, 4096, integer=True),
}


def check(name: str, value: Any, where: str) -> float | int:
    """``value`` if it is a number within ``BOUNDS[name]``; else a one-line :class:`ConfigError`.

    Parameters
    ----------
    name : str
        Key of :data:`BOUNDS`.
    value : any
        The value read (a TOML value may be a string or a boolean: both refused).
    where : str
        What to name in the message: the file and key (``disk.toml: op``) or the option (``--op``).
    """
    bound = BOUNDS[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: {value!r} is not a number")
    if bound.integer and isinstance(value, float):
        if not value.is_integer():
            raise ConfigError(f"{where}: {value!r} is not a whole number")
        value = int(value)
    if not bound.contains(float(value)):
        raise ConfigError(f"{where}: {value!r} is outside {bound.describe()}")
    return value


def within(name: str, value: Any) -> bool:
    """Whether ``value`` passes :func:`check` for ``name`` (for metadata whose bad value means "not measured")."""
    try:
        check(name, value, name)
    except ConfigError:
        return False
    return True


def physical_memory_bytes() -> int:
    """This machine's physical memory (bytes), or 2^62 where it cannot be read."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def check_allocation(nbytes: float, what: str, hint: str) -> None:
    """Refuse, before allocating, a run whose tables would need more than this machine's physical memory.

    Parameters
    ----------
    nbytes : float
        What the run would allocate (an estimate from its sizes).
    what : str
        What allocates it, for the message ("the log design with 1.0 TiB segments").
    hint : str
        The option to change ("give a smaller --segment-size").
    """
    have = physical_memory_bytes()
    if nbytes > have:
        raise ConfigError(f"{what} would need {nbytes / (1 << 30):,.1f} GiB of memory, more than this machine's "
                          f"{have / (1 << 30):,.1f} GiB; {hint}")
