"""SSD device configurations: a frozen dataclass, named presets, TOML and CLI overrides.

Conventions (Desnoyers SYSTOR 2012; docs/ssd.md): with ``T`` physical and
``U`` user (logical) pages, the **spare factor** is ``S_f = (T - U) / T`` and
**over-provisioning** is ``OP = (T - U) / U``; datasheet figures such as "7 %"
or "28 %" are OP. :class:`SSDConfig` stores ``spare_factor``; ``--op`` is
converted with ``S_f = OP / (1 + OP)``.

``--op`` is the **physical** spare. The GC free-block reserve
(``gc_free_fraction`` of each die's blocks kept erased) comes out of it; what
is left, the **effective** spare ``(T_eff - U) / T_eff`` with ``T_eff = T -
reserve``, is what Desnoyers' models see (:func:`swaptrace.ssd.analytic.predict_config`).
Every output states the three: physical OP, reserve, effective OP.

The FTL maps the host in **map units** of ``map_bytes`` (4 KiB, like the swap
page); a flash page holds ``page_bytes // map_bytes`` units. Planes widen the
program and read unit (multi-plane operations) but the FTL's erase blocks are
per die: a die has ``planes * blocks_per_plane`` blocks of
``pages_per_block`` pages.

Presets
-------
``mqsim-default``
    MQSim's ``ssdconfig.xml`` (Tavakkol et al., FAST 2018): 8 channels at
    333 MT/s x 8 bit, 4 chips x 2 dies per channel, 2 planes, 2048 blocks per
    plane, 256 pages of 8 KiB, tR 75 µs, tPROG 750 µs, tBERS 3.8 ms, spare
    factor 0.07, GC when 5 % of a die's blocks are free. The host link
    (PCIe 3.0 x4, ~3.9 GB/s) is our assumption.
``femu-default``
    FEMU's black-box SSD defaults (Li et al., FAST 2018): 8 channels x 8 LUNs,
    1 plane, 256 blocks of 256 x 4 KiB pages (16 GiB raw), tR 40 µs,
    tPROG 200 µs, tBERS 2 ms, 25 % OP, foreground GC at 5 % free lines and
    background GC (FEMU: from 25 % free lines; here 15 % of a die's blocks, as
    our reserve is per die and must stay below the 20 % spare). FEMU ignores channel transfer; we give it 800 MB/s.
``nvme-tlc``
    A 970-class drive after NVMeVirt's ``SAMSUNG_970PRO`` model (Kim et al.,
    FAST 2023): 8 channels x 2 LUNs, 32 KiB pages, tR 36 µs, tPROG 185 µs,
    channel 800 MB/s, PCIe 3360 MB/s; 512 GiB raw, 7 % OP; erase 2 ms and
    1 plane are our assumptions.
``tiny``
    A small device for tests and examples (one channel, 4 dies, 64 MiB).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from swaptrace.core import bounds
from swaptrace.core.inputs import read_toml
from swaptrace.core.units import format_bytes, parse_bytes
from swaptrace.errors import ConfigError, TraceFileError

#: GC victim policies understood by the FTL kernel (name -> kernel code)
GC_POLICIES = {"greedy": 0, "fifo": 1, "random": 2, "cost-benefit": 3, "d-choices": 4}


@dataclass(frozen=True)
class SSDConfig:
    """Geometry, timing and FTL policy of one simulated SSD.

    Parameters
    ----------
    name : str
        Preset name or a label.
    channels, dies_per_channel, planes, blocks_per_plane, pages_per_block : int
        Geometry; ``dies_per_channel`` counts dies (chips x dies per chip).
    page_bytes : int
        Flash page size in bytes.
    map_bytes : int
        FTL mapping unit in bytes (the host's logical page); divides ``page_bytes``.
    read_us, program_us, erase_us : float
        tR, tPROG, tBERS in microseconds (one multi-plane operation each).
    channel_mb_s, host_mb_s : float
        Channel and host-link transfer rates in MB/s (10^6 bytes per second).
    spare_factor : float
        ``S_f = (T - U) / T`` in (0, 1).
    gc_policy : str
        One of :data:`GC_POLICIES`.
    gc_d : int
        Sample size of the ``d-choices`` policy.
    gc_free_fraction : float
        The GC free-block reserve: foreground GC runs on a die whose free
        blocks fall to ``max(1, gc_free_fraction * blocks_per_die)``. The
        reserve comes out of the physical spare (``spare_factor``), so GC works
        with the smaller :attr:`effective_spare_factor`; a large value raises WAF.
    bg_gc_free_fraction : float
        Background GC runs on idle dies below this fraction of free blocks
        (timing mode only); ``0`` disables it.
    write_buffer_bytes : int
        Device DRAM write-back buffer; host writes complete when buffered.
    gc_copyback : bool
        GC moves pages inside the die (copyback) instead of over the channel.
    separate_gc_stream : bool
        GC-relocated (colder) data goes to its own write frontier
        (hot/cold separation); otherwise relocations mix with host writes.
    hot_cold_streams : bool
        Host writes tagged cold (the ``hotcold`` pattern tags writes to its
        cold range) go to their own write frontier: separation by the host.
    """

    name: str = "custom"
    channels: int = 8
    dies_per_channel: int = 8
    planes: int = 2
    blocks_per_plane: int = 2048
    pages_per_block: int = 256
    page_bytes: int = 8192
    map_bytes: int = 4096
    read_us: float = 75.0
    program_us: float = 750.0
    erase_us: float = 3800.0
    channel_mb_s: float = 333.0
    host_mb_s: float = 3940.0
    spare_factor: float = 0.07
    gc_policy: str = "greedy"
    gc_d: int = 8
    gc_free_fraction: float = 0.05
    bg_gc_free_fraction: float = 0.0
    write_buffer_bytes: int = 64 << 20
    gc_copyback: bool = True
    separate_gc_stream: bool = False
    hot_cold_streams: bool = False

    def __post_init__(self) -> None:
        validate(self)

    # -- derived geometry -------------------------------------------------
    @property
    def dies(self) -> int:
        return self.channels * self.dies_per_channel

    @property
    def blocks_per_die(self) -> int:
        return self.planes * self.blocks_per_plane

    @property
    def blocks(self) -> int:
        return self.dies * self.blocks_per_die

    @property
    def units_per_page(self) -> int:
        return self.page_bytes // self.map_bytes

    @property
    def units_per_block(self) -> int:
        """Map units per erase block (Desnoyers' ``Np`` for the analytic model)."""
        return self.pages_per_block * self.units_per_page

    @property
    def program_units(self) -> int:
        """Map units written by one (multi-plane) program operation."""
        return self.planes * self.units_per_page

    @property
    def physical_units(self) -> int:
        """``T``: map units of raw flash."""
        return self.blocks * self.units_per_block

    @property
    def user_units(self) -> int:
        """``U = floor(T * (1 - S_f))``: map units the host can address."""
        return int(self.physical_units * (1.0 - self.spare_factor))

    @property
    def physical_bytes(self) -> int:
        return self.physical_units * self.map_bytes

    @property
    def user_bytes(self) -> int:
        return self.user_units * self.map_bytes

    @property
    def over_provisioning(self) -> float:
        """``OP = (T - U) / U``."""
        return (self.physical_units - self.user_units) / self.user_units

    @property
    def gc_min_free_blocks(self) -> int:
        """The GC free-block reserve of each die (foreground GC keeps this many blocks erased)."""
        return max(1, int(self.gc_free_fraction * self.blocks_per_die))

    # -- over-provisioning as users mean it --------------------------------
    @property
    def physical_op(self) -> float:
        """Physical over-provisioning ``(T - U) / U`` (what ``--op`` sets; a datasheet's "7 %")."""
        return self.over_provisioning

    @property
    def reserve_units(self) -> float:
        """Map units the GC reserve keeps free, on average, over the whole device.

        Foreground GC runs when a die is down to ``gc_min_free_blocks`` erased
        blocks and stops one block above, so between collections a die holds
        ``gc_min_free_blocks + 1/2`` blocks of no data on average. That space is
        taken out of the physical spare: it cannot hold invalid data waiting for
        GC, so GC sees a smaller spare than ``--op``.
        """
        return self.dies * (self.gc_min_free_blocks + 0.5) * self.units_per_block

    @property
    def reserve_fraction(self) -> float:
        """The GC reserve as a fraction of the raw flash ``T``."""
        return self.reserve_units / self.physical_units

    @property
    def effective_physical_units(self) -> float:
        """``T_eff = T - reserve``: the flash that holds valid or not-yet-collected data."""
        return self.physical_units - self.reserve_units

    @property
    def effective_spare_factor(self) -> float:
        """Spare factor GC actually works with: ``(T_eff - U) / T_eff``."""
        te = self.effective_physical_units
        return (te - self.user_units) / te

    @property
    def effective_op(self) -> float:
        """Effective over-provisioning ``(T_eff - U) / U`` (the spare left after the GC reserve)."""
        return (self.effective_physical_units - self.user_units) / self.user_units

    def op_summary(self) -> dict[str, float]:
        """Physical OP, GC reserve and effective spare (for output and metadata)."""
        return {
            "physical_op": self.physical_op,
            "spare_factor": self.spare_factor,
            "gc_reserve_blocks_per_die": self.gc_min_free_blocks,
            "gc_reserve_fraction_of_flash": self.reserve_fraction,
            "gc_reserve_op": self.reserve_units / self.user_units,
            # background GC (timing mode, idle dies) keeps more blocks erased when the host leaves it time
            "bg_gc_reserve_blocks_per_die": self.bg_gc_min_free_blocks,
            "effective_op": self.effective_op,
            "effective_spare_factor": self.effective_spare_factor,
        }

    @property
    def bg_gc_min_free_blocks(self) -> int:
        if self.bg_gc_free_fraction <= 0:
            return 0
        return max(self.gc_min_free_blocks, int(self.bg_gc_free_fraction * self.blocks_per_die))

    def describe(self) -> dict[str, Any]:
        """All fields plus the derived sizes (for metadata and ``--json``)."""
        out = dataclasses.asdict(self)
        out.update(
            physical_bytes=self.physical_bytes,
            user_bytes=self.user_bytes,
            over_provisioning=self.over_provisioning,
            units_per_block=self.units_per_block,
            dies=self.dies,
            **self.op_summary(),
        )
        return out


#: fields checked against the option bounds (blocks_per_plane is derived from --capacity, checked by its size)
_BOUNDED = tuple(f.name for f in fields(SSDConfig) if f.name in bounds.BOUNDS and f.name != "blocks_per_plane")


def validate(cfg: SSDConfig) -> None:
    """Raise :class:`ConfigError` for an impossible geometry or parameter."""
    for name in ("channels", "dies_per_channel", "planes", "blocks_per_plane", "pages_per_block", "page_bytes",
                 "map_bytes", "gc_d"):
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"ssd config: {name} must be a positive integer, got {value!r}")
    for name in _BOUNDED:  # the bounds of the options of the same name (--op, --read-us, ...): TOML files too
        bounds.check(name, getattr(cfg, name), f"ssd config: {name}")
    if cfg.page_bytes % cfg.map_bytes:
        raise ConfigError(f"ssd config: page_bytes ({cfg.page_bytes}) must be a multiple of map_bytes ({cfg.map_bytes})")
    for name in ("read_us", "program_us", "erase_us"):
        if not getattr(cfg, name) >= 0:
            raise ConfigError(f"ssd config: {name} must be >= 0, got {getattr(cfg, name)!r}")
    for name in ("channel_mb_s", "host_mb_s"):
        if not getattr(cfg, name) > 0:
            raise ConfigError(f"ssd config: {name} must be > 0, got {getattr(cfg, name)!r}")
    if not 0.0 < cfg.spare_factor < 1.0:
        raise ConfigError(f"ssd config: spare factor must be in (0, 1), got {cfg.spare_factor!r} "
                          "(spare factor = (T-U)/T; use --op for over-provisioning (T-U)/U)")
    if cfg.gc_policy not in GC_POLICIES:
        raise ConfigError(f"ssd config: unknown gc policy {cfg.gc_policy!r}; choose from {', '.join(GC_POLICIES)}")
    if not 0.0 <= cfg.gc_free_fraction < 1.0 or not 0.0 <= cfg.bg_gc_free_fraction < 1.0:
        raise ConfigError("ssd config: GC free fractions must be in [0, 1)")
    if cfg.write_buffer_bytes < cfg.map_bytes * cfg.program_units * cfg.dies:
        raise ConfigError(f"ssd config: write buffer must hold at least one program unit per die "
                          f"({cfg.map_bytes * cfg.program_units * cfg.dies} bytes)")
    if cfg.physical_units >= 2**31:
        raise ConfigError(f"ssd config: {cfg.physical_bytes} bytes of flash is too large to simulate "
                          "(use --capacity to shrink the device)")
    # Spare blocks must cover the GC reserve, the open frontiers and one block to make progress.
    spare_blocks = cfg.blocks_per_die - math.ceil(cfg.user_units / cfg.dies / cfg.units_per_block)
    frontiers = 1 + int(cfg.separate_gc_stream) + int(cfg.hot_cold_streams)
    needed = cfg.gc_min_free_blocks + frontiers + 1
    if spare_blocks < needed:
        raise ConfigError(f"ssd config: only {spare_blocks} spare blocks per die, GC needs at least {needed} "
                          "(raise the spare factor or the blocks per plane, or lower gc_free_fraction)")
    if cfg.effective_spare_factor <= 0:
        raise ConfigError(f"ssd config: the GC reserve ({cfg.gc_min_free_blocks} blocks per die) leaves no spare "
                          "space (raise --op or lower --gc-free)")
    if cfg.bg_gc_min_free_blocks > spare_blocks - frontiers - 1:
        raise ConfigError(f"ssd config: background GC threshold ({cfg.bg_gc_min_free_blocks} free blocks per die) "
                          f"exceeds the {spare_blocks} spare blocks; lower bg_gc_free_fraction")


DEVICES: dict[str, SSDConfig] = {
    "mqsim-default": SSDConfig(name="mqsim-default"),
    "femu-default": SSDConfig(
        name="femu-default", channels=8, dies_per_channel=8, planes=1, blocks_per_plane=256, pages_per_block=256,
        page_bytes=4096, read_us=40.0, program_us=200.0, erase_us=2000.0, channel_mb_s=800.0, host_mb_s=3940.0,
        spare_factor=0.2, gc_free_fraction=0.05, bg_gc_free_fraction=0.15, write_buffer_bytes=64 << 20,
    ),
    "nvme-tlc": SSDConfig(
        name="nvme-tlc", channels=8, dies_per_channel=2, planes=1, blocks_per_plane=8192, pages_per_block=128,
        page_bytes=32768, read_us=36.0, program_us=185.0, erase_us=2000.0, channel_mb_s=800.0, host_mb_s=3360.0,
        spare_factor=0.07 / 1.07, gc_free_fraction=0.005, bg_gc_free_fraction=0.01, write_buffer_bytes=64 << 20,
    ),
    "tiny": SSDConfig(
        name="tiny", channels=1, dies_per_channel=4, planes=1, blocks_per_plane=64, pages_per_block=64,
        page_bytes=4096, read_us=40.0, program_us=200.0, erase_us=2000.0, channel_mb_s=800.0, host_mb_s=3940.0,
        spare_factor=0.125, gc_free_fraction=0.0, write_buffer_bytes=1 << 20,
    ),
}


def spare_from_op(op: float) -> float:
    """Spare factor ``S_f = OP / (1 + OP)`` from over-provisioning ``OP = (T-U)/U``."""
    if not op > 0:
        raise ConfigError(f"over-provisioning must be > 0, got {op!r}")
    return op / (1.0 + op)


_FIELD_TYPES = {f.name: f.type for f in fields(SSDConfig)}
_BYTE_FIELDS = {"page_bytes", "map_bytes", "write_buffer_bytes"}


def _coerce(name: str, value: Any) -> Any:
    kind = _FIELD_TYPES[name]
    try:
        if name in _BYTE_FIELDS:
            return parse_bytes(value, name)
        if kind == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "bool":
            if isinstance(value, str):
                if value.lower() in ("1", "true", "yes", "on"):
                    return True
                if value.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError
            return bool(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"ssd config: {name} = {value!r} is not a valid {kind}") from None


def read_device_toml(path: str | os.PathLike) -> dict[str, Any]:
    """The table of a device TOML file, as read: an SSD-model device (:func:`load_device`) or a measured
    device profile (:func:`swaptrace.timing.model.load_device_timing`, ``kind = "swaptrace-device-profile"``).

    The one place a device TOML is read; what its keys mean is up to the caller.

    Raises
    ------
    ConfigError
        No such file, or not readable as TOML (one line naming the file and the problem).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such device file")
    try:
        return read_toml(path, "device TOML", "cannot read device TOML")
    except TraceFileError as exc:
        raise ConfigError(str(exc)) from None


def load_device(name_or_path: str | None = None, overrides: dict[str, Any] | None = None,
                capacity_bytes: int | None = None, op: float | None = None) -> SSDConfig:
    """Build an :class:`SSDConfig` from a preset or TOML file plus overrides.

    Parameters
    ----------
    name_or_path : str, optional
        A key of :data:`DEVICES` or a TOML file whose keys are :class:`SSDConfig`
        fields (optionally ``base = "<preset>"``, ``capacity``, ``op``).
        Defaults to ``mqsim-default``.
    overrides : dict, optional
        Field values that replace the preset's (``None`` values are ignored).
    capacity_bytes : int, optional
        Wanted user capacity; sets ``blocks_per_plane`` so the user capacity
        is at least this (geometry otherwise unchanged).
    op : float, optional
        Over-provisioning ``(T-U)/U``; sets the spare factor.

    Raises
    ------
    ConfigError
        Unknown preset or key, bad value or impossible geometry.
    """
    name_or_path = name_or_path or "mqsim-default"
    values: dict[str, Any]
    if name_or_path in DEVICES:
        values = dataclasses.asdict(DEVICES[name_or_path])
    elif name_or_path.endswith(".toml") or Path(name_or_path).is_file():
        path = Path(name_or_path)
        raw = read_device_toml(path)
        if not raw:
            raise ConfigError(f"{path}: the device TOML is empty; give SSDConfig fields (or base = \"PRESET\")")
        base = raw.pop("base", None)
        if base is not None and base not in DEVICES:
            raise ConfigError(f"{path}: unknown base device {base!r}; presets: {', '.join(DEVICES)}")
        values = dataclasses.asdict(DEVICES[base]) if base else {f.name: f.default for f in fields(SSDConfig)}
        values["name"] = path.stem
        if "capacity" in raw and capacity_bytes is None:
            capacity_bytes = parse_bytes(raw.pop("capacity"), "capacity")
        if "op" in raw:
            op_raw = bounds.check("op", raw.pop("op"), f"{path}: op")  # as --op: (0, 100]
            op = op_raw if op is None else op
        unknown = sorted(set(raw) - set(_FIELD_TYPES))
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}")
        values.update({k: _coerce(k, v) for k, v in raw.items()})
    else:
        raise ConfigError(f"unknown device {name_or_path!r}; presets: {', '.join(DEVICES)} (or a .toml file)")
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key not in _FIELD_TYPES:
            raise ConfigError(f"ssd config: unknown parameter {key!r}")
        values[key] = _coerce(key, value)
    if op is not None:
        values["spare_factor"] = spare_from_op(op)
    if capacity_bytes is not None:
        values["blocks_per_plane"] = _blocks_for_capacity(values, capacity_bytes)
    try:
        return SSDConfig(**values)
    except ConfigError as exc:
        if capacity_bytes is None or "spare blocks per die" not in str(exc):
            raise
        raise ConfigError(f"{exc}; at this over-provisioning {values['name']} needs --capacity "
                          f"{_smallest_capacity(values, capacity_bytes)} or more (or a larger --op)") from None


def _smallest_capacity(values: dict[str, Any], capacity_bytes: int) -> str:
    """The smallest power-of-two capacity (from ``capacity_bytes`` up) at which the device has room for GC."""
    cap = 1 << max(int(capacity_bytes).bit_length(), 20)
    while cap <= 1 << 60:
        try:
            SSDConfig(**{**values, "blocks_per_plane": _blocks_for_capacity(values, cap)})
            return format_bytes(cap).replace(".0 ", "").replace(" ", "")
        except ConfigError:
            cap <<= 1
    return "(none)"


def _blocks_for_capacity(values: dict[str, Any], capacity_bytes: int) -> int:
    if capacity_bytes <= 0:
        raise ConfigError("capacity must be > 0")
    spare = float(values["spare_factor"])
    if not 0.0 < spare < 1.0:
        raise ConfigError(f"ssd config: spare factor must be in (0, 1), got {spare!r}")
    per_block_row = (values["channels"] * values["dies_per_channel"] * values["planes"] * values["pages_per_block"]
                     * values["page_bytes"])
    blocks = math.ceil(capacity_bytes / (1.0 - spare) / per_block_row)
    return max(blocks, 1)
