"""A zoned-namespace (ZNS) SSD model: zones, write pointers, resets, an open-zone limit, no device GC.

The device's flash, channels and timings are an :class:`~swaptrace.ssd.config.SSDConfig`'s;
the zone layout is :class:`ZNSConfig`'s. A zoned device does no garbage collection:
the host writes each zone sequentially and resets it when its data is dead, so the
device's write amplification is 1 and the host's cleaning is the only amplification
(Bjørling et al., "ZNS: Avoiding the Block Interface Tax for Flash-based SSDs",
USENIX ATC 2021; NVMe Zoned Namespace Command Set 1.1). Kernel: :mod:`swaptrace.kernels.ssd.zns`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from swaptrace.core import traceio
from swaptrace.core.units import format_bytes
from swaptrace.errors import ConfigError
from swaptrace.kernels.ssd import zns as kz
from swaptrace.ssd.config import SSDConfig

_ERRORS = {
    kz.ERR_NOT_AT_WP: "a write does not start at its zone's write pointer",
    kz.ERR_PAST_CAP: "a write goes past its zone's capacity",
    kz.ERR_READ_UNWRITTEN: "a read lies past its zone's write pointer (unwritten data)",
    kz.ERR_OPEN_LIMIT: "a write would open more zones than the open-zone limit",
    kz.ERR_BAD_RESET: "a discard is not exactly one whole zone (zone reset)",
    kz.ERR_OUTSIDE: "a request lies outside the device",
}


@dataclass(frozen=True)
class ZNSConfig:
    """Zone layout of a zoned device.

    Attributes
    ----------
    zone_bytes : int
        Zone size (the distance between zone starts).
    zone_capacity_bytes : int or None
        Writable bytes per zone (default: the zone size).
    max_open_zones : int
        Zones that may be open (written, not full) at once.
    iodepth : int
        Outstanding requests in the replay (closed loop).
    """

    zone_bytes: int = 16 << 20
    zone_capacity_bytes: int | None = None
    max_open_zones: int = 14
    iodepth: int = 32

    @property
    def capacity_bytes(self) -> int:
        return self.zone_capacity_bytes or self.zone_bytes

    def check(self, device: SSDConfig) -> None:
        mb = device.map_bytes
        if self.zone_bytes < mb or self.zone_bytes % mb:
            raise ConfigError(f"--zone-size must be a positive multiple of {mb} B, got {format_bytes(self.zone_bytes)}")
        cap = self.capacity_bytes
        if cap < mb or cap % mb or cap > self.zone_bytes:
            raise ConfigError(f"--zone-capacity must be a multiple of {mb} B and at most the zone size, "
                              f"got {format_bytes(cap)}")
        if self.max_open_zones < 1 or self.iodepth < 1:
            raise ConfigError("--max-open-zones and the queue depth must be at least 1")

    def describe(self) -> dict[str, Any]:
        return {"zone_bytes": self.zone_bytes, "zone_capacity_bytes": self.capacity_bytes,
                "max_open_zones": self.max_open_zones, "iodepth": self.iodepth}


class ZNSDevice:
    """A zoned SSD that requests are replayed on in order (every zone empty at the start)."""

    def __init__(self, device: SSDConfig, zones: ZNSConfig, nzones: int):
        zones.check(device)
        if nzones * zones.capacity_bytes > device.physical_bytes:
            raise ConfigError(f"{nzones} zones of {format_bytes(zones.capacity_bytes)} exceed the device's flash "
                              f"({format_bytes(device.physical_bytes)})")
        self.device, self.zones, self.nzones = device, zones, int(nzones)
        self.z, self.t, self.wp, self.die_free, self.ch_free, self.ring = kz.new_zns_arrays(
            self.nzones, device.dies, device.channels, zones.iodepth)
        mb = device.map_bytes
        z, t = self.z, self.t
        z[kz.Z_ZONE], z[kz.Z_CAP], z[kz.Z_NZONES] = zones.zone_bytes // mb, zones.capacity_bytes // mb, nzones
        z[kz.Z_PROG], z[kz.Z_DIES], z[kz.Z_DIES_PER_CH] = device.program_units, device.dies, device.dies_per_channel
        z[kz.Z_BLOCK_PROGS], z[kz.Z_IODEPTH], z[kz.Z_MAX_OPEN] = device.pages_per_block, zones.iodepth, zones.max_open_zones
        t[kz.T_READ], t[kz.T_PROG], t[kz.T_ERASE] = device.read_us, device.program_us, device.erase_us
        t[kz.T_XFER_US_PER_UNIT] = mb / device.channel_mb_s  # bytes / (10^6 B/s) = us
        t[kz.T_HOST_US_PER_UNIT] = mb / device.host_mb_s

    def run(self, op: np.ndarray, offset_bytes: np.ndarray, length_bytes: np.ndarray) -> np.ndarray:
        """Replay requests; return each one's completion time (us). ConfigError on a zone rule broken."""
        mb = self.device.map_bytes
        offset = np.asarray(offset_bytes, np.int64)
        length = np.asarray(length_bytes, np.int64)
        if np.any(offset % mb) or np.any(length % mb):
            raise ConfigError(f"a request is not aligned to {mb} B")
        done = np.zeros(offset.size, np.float64)
        n = kz.zns_run(self.z, self.t, self.wp, self.die_free, self.ch_free, self.ring,
                        np.ascontiguousarray(op, np.int8), offset // mb, length // mb, done)
        if n < offset.size:
            err = int(self.z[kz.Z_ERROR])
            i = int(self.z[kz.Z_ERR_REQ])
            raise ConfigError(f"zoned device: {_ERRORS[err]} (request at byte {int(offset[i])}, "
                              f"{int(length[i])} bytes, op {int(op[i])})")
        return done

    def summary(self) -> dict[str, Any]:
        """Counters and bandwidth so far (the FTL replay's summary keys where they apply)."""
        z, mb = self.z, self.device.map_bytes
        elapsed = float(self.t[kz.T_END])
        host_w, host_r = int(z[kz.Z_HOST_W]) * mb, int(z[kz.Z_HOST_R]) * mb
        return {
            "device": f"{self.device.name} (zoned)",
            "zones": self.zones.describe() | {"nzones": self.nzones},
            "requests": int(z[kz.Z_REQS]),
            "host_write_bytes": host_w,
            "host_read_bytes": host_r,
            "flash_write_bytes": host_w,
            "gc_write_bytes": 0,
            "zone_resets": int(z[kz.Z_RESETS]),
            "gc_erases": int(z[kz.Z_ERASES]),
            "waf": 1.0 if host_w else None,
            "max_open_zones_seen": int(z[kz.Z_MAX_OPEN_SEEN]),
            "simulated_time_us": elapsed,
            "throughput_mb_s": (host_w + host_r) / elapsed if elapsed > 0 else None,
            "write_mb_s": host_w / elapsed if elapsed > 0 else None,
            "read_mb_s": host_r / elapsed if elapsed > 0 else None,
        }


def replay_zoned(stream: os.PathLike, device: SSDConfig, zones: ZNSConfig, *,
                 progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Replay a swapio stream written for a zoned device (the ``zoned`` design's) on a ZNS SSD.

    The stream's ``device_bytes`` gives the number of zones. Returns the summary
    (:meth:`ZNSDevice.summary`); ConfigError if the stream breaks a zone rule.
    """
    tf = traceio.open_trace(stream, "swapio")
    device_bytes = int(tf.meta.get("device_bytes") or 0)
    if device_bytes <= 0:
        raise ConfigError(f"{stream}: no device_bytes in the stream's metadata")
    dev = ZNSDevice(device, zones, -(-device_bytes // zones.zone_bytes))
    for b in tf.iter_batches(["op", "offset", "length"]):
        dev.run(b["op"], b["offset"].astype(np.int64), b["length"].astype(np.int64))
        if progress is not None:
            progress(len(b["op"]))
    return dev.summary()
