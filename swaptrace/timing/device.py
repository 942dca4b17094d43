"""A device's latency by request size and queue depth: from an SSD model preset or TOML, or a measured profile.

Reading a device's name or file loads nothing heavy, so ``swaptrace time --device nope`` answers at once;
numpy and the timing kernel load when a table is built or looked up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from swaptrace.core import bounds
from swaptrace.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

#: request sizes (bytes) and queue depths of the tables built from an SSD model
TABLE_SIZES = tuple(4096 << i for i in range(9))  # 4 KiB .. 1 MiB
TABLE_DEPTHS = (1, 2, 4, 8, 16, 32)
#: ``kind`` of a measured device profile TOML
PROFILE_KIND = "swaptrace-device-profile"



@dataclass(frozen=True)
class DeviceTiming:
    """Mean latency of a device by request size and queue depth, for reads and for writes.

    Parameters
    ----------
    name : str
        Label (a preset name, or the profile's).
    source : str
        Where the numbers come from (``ssd-model``, ``fio``, ...).
    sizes_bytes : tuple of int
        Request sizes of the rows, ascending.
    depths : tuple of int
        Queue depths of the columns, ascending, the first 1.
    read_latency_us, write_latency_us : tuple of tuple of float
        ``[size][depth]`` mean latency of one request, microseconds.
    """

    name: str
    source: str
    sizes_bytes: tuple[int, ...]
    depths: tuple[int, ...]
    read_latency_us: tuple[tuple[float, ...], ...]
    write_latency_us: tuple[tuple[float, ...], ...]
    notes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        import numpy as np

        sizes, depths = list(self.sizes_bytes), list(self.depths)
        if not sizes or sizes != sorted(set(sizes)) or sizes[0] <= 0:
            raise ConfigError(f"device {self.name}: sizes_bytes must be positive and ascending, got {sizes}")
        if not depths or depths != sorted(set(depths)) or depths[0] != 1:
            raise ConfigError(f"device {self.name}: depths must be ascending and start at 1, got {depths}")
        for what, table in (("read", self.read_latency_us), ("write", self.write_latency_us)):
            arr = np.asarray(table, dtype=np.float64)
            if arr.shape != (len(sizes), len(depths)):
                raise ConfigError(f"device {self.name}: {what} latency table is {arr.shape}, expected "
                                  f"{len(sizes)} sizes x {len(depths)} depths")
            bound = bounds.BOUNDS["latency_us"]  # an hour at most: 1e308 would overflow the step sums to nan
            if not np.all(np.isfinite(arr)) or np.any(arr <= bound.lo) or np.any(arr > bound.hi):
                raise ConfigError(f"device {self.name}: {what} latencies must be positive numbers of at most "
                                  f"{bound.hi:g} us")

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``sizes, depths, read, write`` as float64 arrays (the kernel's input)."""
        import numpy as np

        f = np.float64
        return (np.asarray(self.sizes_bytes, f), np.asarray(self.depths, f),
                np.ascontiguousarray(self.read_latency_us, f), np.ascontiguousarray(self.write_latency_us, f))

    def latency_us(self, op: str, nbytes: int, depth: int = 1) -> float:
        """Mean latency of one request (interpolated as the kernel does)."""
        sizes, depths, read, write = self.arrays()
        from swaptrace.kernels.timing import steps as kt

        return float(kt._lat(sizes, depths, read if op == "read" else write, float(nbytes), float(depth)))

    def to_toml(self) -> str:
        """The device as a profile TOML (what :func:`load_device_timing` reads back)."""
        def row(values):
            return "[" + ", ".join(f"{v:.3f}" for v in values) + "]"

        lines = [
            f'kind = "{PROFILE_KIND}"',
            f'name = "{self.name}"',
            f'source = "{self.source}"',
            "sizes_bytes = [" + ", ".join(str(s) for s in self.sizes_bytes) + "]",
            "depths = [" + ", ".join(str(d) for d in self.depths) + "]",
            "",
        ]
        for key, value in sorted(self.notes.items()):
            lines.insert(3, f"{key} = {_toml_value(value)}")
        for what, table in (("read", self.read_latency_us), ("write", self.write_latency_us)):
            lines += [f"[{what}]", "# mean latency in microseconds: one row per size, one column per depth",
                      "latency_us = [", *[f"  {row(r)}," for r in table], "]", ""]
        return "\n".join(lines)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def device_from_ssd(cfg, waf: float | None = None) -> DeviceTiming:
    """Latency table of an SSD model configuration (:class:`swaptrace.ssd.config.SSDConfig`).

    A read of ``L`` bytes covers ``n = ceil(L / page_bytes)`` flash pages striped over the dies: at
    depth 1 it takes ``ceil(n / dies) * tR`` plus its transfer over ``min(n, channels)`` channels and
    the host link. Writes complete once in the device's write buffer (host and channel transfer), but
    sustained they cannot outrun programming: ``dies * program bytes / tPROG`` divided by the
    steady-state write amplification of the FTL's GC policy (Desnoyers, SYSTOR 2012; greedy
    ``wa_greedy``). At depth ``q`` a request's latency is ``q`` over the throughput (Little's law),
    the throughput being the smallest of ``q / lat1``, the dies' rate and the links' rate.

    ``waf`` replaces that prediction when the write amplification is known otherwise: 1 on a zoned
    device (no device GC), or what the SSD model measured on a given stream (a sequential log's is
    near 1, random 4 KiB writes' near the steady-state value).
    """
    from swaptrace.ssd import analytic

    if waf is not None:
        if not (math.isfinite(waf) and waf >= 1.0):
            raise ConfigError(f"device {cfg.name}: write amplification must be a number >= 1, got {waf!r}")
    else:
        waf = analytic.predict_waf(cfg.gc_policy, cfg.spare_factor, cfg.units_per_block)
    if not waf >= 1.0:  # policies without a closed form: greedy's is the closest
        waf = analytic.predict_waf("greedy", cfg.spare_factor, cfg.units_per_block)
    host, chan = cfg.host_mb_s, cfg.channel_mb_s  # MB/s = bytes/us
    prog_bytes_us = cfg.dies * cfg.program_units * cfg.map_bytes / cfg.program_us / waf
    read_rows, write_rows = [], []
    for size in TABLE_SIZES:
        n = -(-size // cfg.page_bytes)
        r1 = math.ceil(n / cfg.dies) * cfg.read_us + size / (chan * min(n, cfg.channels)) + size / host
        w1 = size / host + size / (chan * min(n, cfg.channels))
        read_cap = min(cfg.dies / (n * cfg.read_us), host / size, chan * cfg.channels / size)  # requests/us
        write_cap = min(prog_bytes_us / size, host / size, chan * cfg.channels / size)
        read_rows.append(tuple(q / min(q / r1, read_cap) for q in TABLE_DEPTHS))
        write_rows.append(tuple(q / min(q / w1, write_cap) for q in TABLE_DEPTHS))
    return DeviceTiming(cfg.name, "ssd-model", TABLE_SIZES, TABLE_DEPTHS, tuple(read_rows), tuple(write_rows),
                        notes={"waf": round(float(waf), 4)})


def load_device_timing(name_or_path: str) -> DeviceTiming:
    """A device by SSD model preset name, SSD model TOML, or measured profile TOML (``kind`` = profile).

    Raises
    ------
    ConfigError
        Unknown preset, unreadable or invalid file (one line naming the file and the problem).
    """
    from swaptrace.ssd import config as ssdconfig

    if name_or_path in ssdconfig.DEVICES:
        return device_from_ssd(ssdconfig.DEVICES[name_or_path])
    path = Path(name_or_path)
    if not path.suffix == ".toml" and not path.is_file():
        raise ConfigError(f"unknown device {name_or_path!r}; presets: {', '.join(ssdconfig.DEVICES)} "
                          "(or an SSD model or profile .toml file)")
    raw = ssdconfig.read_device_toml(path)
    if raw.get("kind") != PROFILE_KIND:
        return device_from_ssd(ssdconfig.load_device(str(path)))
    try:
        notes = {k: v for k, v in raw.items() if k not in ("kind", "name", "source", "sizes_bytes", "depths",
                                                            "read", "write")}
        return DeviceTiming(
            name=str(raw.get("name", path.stem)),
            source=str(raw.get("source", "profile")),
            sizes_bytes=tuple(_number(s, int) for s in raw["sizes_bytes"]),
            depths=tuple(_number(d, int) for d in raw["depths"]),
            read_latency_us=tuple(tuple(_number(v, float) for v in r) for r in raw["read"]["latency_us"]),
            write_latency_us=tuple(tuple(_number(v, float) for v in r) for r in raw["write"]["latency_us"]),
            notes=notes,
        )
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a valid device profile (missing or bad {exc})") from None


def _number(value: Any, kind: type) -> int | float:
    """A TOML number as ``kind``: strings, booleans, infinities and fractional counts are refused (ValueError)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"value {value!r}")
    if kind is int and not float(value).is_integer():
        raise ValueError(f"count {value!r}")
    return kind(value)
