"""Kernel profiles: the constants that make the ``linux`` policy match one kernel setup.

The emulator's mechanisms (lists, priority levels, writeback, readahead) live in
:mod:`swaptrace.emulate`; the few numbers that had to be chosen against a real
kernel -- how fast the device writes against the scan, how much device time the
process's own work gives it, which statistics reclaim reads -- live in a versioned
TOML file with what each was chosen on and how it scored on captures that played
no part in choosing it (``docs/calibration.md``). ``--profile NAME|FILE`` picks one;
the shipped profiles are ``swaptrace/profiles/*.toml``.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from swaptrace.core.inputs import check_named_file
from swaptrace.errors import ConfigError

DEFAULT_PROFILE = "linux-6.x-cgroup1"
#: settings a profile gives the ``linux`` policy, and their types
LINUX_KEYS: dict[str, type] = {
    "scan_priorities": bool,
    "zero_page": bool,
    "zeromap": bool,
    "stats_flush_steps": int,
    "writeback_completion": str,
    "write_cost": int,
    "fill_write_credit": int,
    "writeback_lag": int,
    "write_latency": int,
    "plug_rules": bool,
}
#: settings a profile may leave out (profiles written before them stay valid), and their values then
LINUX_OPTIONAL: dict[str, Any] = {"write_latency": 0, "zeromap": True, "plug_rules": False}
#: the range of each integer setting: the same bounds as the emulate options that override them
LINUX_RANGES: dict[str, tuple[int, int]] = {
    "stats_flush_steps": (0, (1 << 32) - 1),
    "write_cost": (1, 1 << 20),
    "fill_write_credit": (0, 1 << 20),
    "writeback_lag": (0, 1 << 30),
    "write_latency": (0, 1 << 30),
}
_TOP_KEYS = {"name", "description", "kernel", "swaptrace_version", "linux", "ensemble", "fit"}


@dataclass(frozen=True)
class Ensemble:
    """Runs whose spread stands for the kernel's run-to-run spread.

    Attributes
    ----------
    write_costs : tuple of int
        Device speeds (pages isolated per page written), one run each.
    room_offsets : tuple of float
        Budget offsets as fractions of the budget (``-0.005`` is 0.5 % less room).
    """

    write_costs: tuple[int, ...]
    room_offsets: tuple[float, ...]

    @property
    def size(self) -> int:
        return len(self.write_costs) * len(self.room_offsets)


@dataclass(frozen=True)
class KernelProfile:
    """A parsed profile file (see the module docstring)."""

    name: str
    description: str
    kernel: str
    linux: dict[str, Any]
    ensemble: Ensemble | None
    fit: tuple[dict[str, Any], ...] = field(default=())
    source: str = ""

    def describe(self) -> dict[str, Any]:
        """The profile as recorded in a stream's metadata (``params.profile``)."""
        return {"name": self.name, "kernel": self.kernel, "source": self.source}


def profile_names() -> list[str]:
    """Names of the shipped profiles."""
    folder = resources.files("swaptrace") / "profiles"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


@cache
def load_profile(name_or_path: str | None = None) -> KernelProfile:
    """Load a shipped profile by name, or a profile ``.toml`` file; :class:`ConfigError` if unusable."""
    name_or_path = name_or_path or DEFAULT_PROFILE
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        path = Path(name_or_path)
        check_named_file(path, "kernel profile (TOML)", "profile file", ConfigError)
        source = str(path)
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            raise ConfigError(f"{source}: not a text (TOML) file") from None
    else:
        if name_or_path not in profile_names():
            raise ConfigError(f"unknown profile {name_or_path!r}; choose one of {', '.join(profile_names())} "
                              "or give a .toml file")
        text = (resources.files("swaptrace") / "profiles" / f"{name_or_path}.toml").read_text()
        source = f"swaptrace/profiles/{name_or_path}.toml"
    try:
        raw = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: not a valid TOML file ({exc})") from None
    return _parse(raw, source)


def _parse(raw: dict[str, Any], source: str) -> KernelProfile:
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {', '.join(sorted(unknown))}")
    if not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ConfigError(f"{source}: a profile needs a name")
    linux = raw.get("linux", {})
    if not isinstance(linux, dict):
        raise ConfigError(f"{source}: [linux] must be a table")
    for key, value in linux.items():
        kind = LINUX_KEYS.get(key)
        if kind is None:
            raise ConfigError(f"{source}: unknown [linux] key {key!r}; known: {', '.join(LINUX_KEYS)}")
        if type(value) is not kind:
            raise ConfigError(f"{source}: [linux] {key} must be {kind.__name__}, got {value!r}")
        if key in LINUX_RANGES and not LINUX_RANGES[key][0] <= value <= LINUX_RANGES[key][1]:
            low, high = LINUX_RANGES[key]
            raise ConfigError(f"{source}: [linux] {key} must be in [{low}, {high}], got {value}")
    missing = set(LINUX_KEYS) - set(linux) - set(LINUX_OPTIONAL)
    if missing:
        raise ConfigError(f"{source}: [linux] lacks {', '.join(sorted(missing))}")
    return KernelProfile(name=raw["name"], description=str(raw.get("description", "")),
                         kernel=str(raw.get("kernel", "")), linux={**LINUX_OPTIONAL, **linux},
                         ensemble=_parse_ensemble(raw.get("ensemble"), source),
                         fit=tuple(raw.get("fit", ())), source=source)


def _parse_ensemble(raw: Any, source: str) -> Ensemble | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"write_costs", "room_offsets"}:
        raise ConfigError(f"{source}: [ensemble] needs exactly write_costs and room_offsets")
    costs, offsets = raw["write_costs"], raw["room_offsets"]
    low, high = LINUX_RANGES["write_cost"]
    if not isinstance(costs, list) or not costs or not all(type(c) is int and low <= c <= high for c in costs):
        raise ConfigError(f"{source}: [ensemble] write_costs must be integers in [{low}, {high}]")
    if not isinstance(offsets, list) or not offsets or not all(isinstance(d, int | float) and math.isfinite(d) and -0.5 < d < 0.5 for d in offsets):
        raise ConfigError(f"{source}: [ensemble] room_offsets must be fractions in (-0.5, 0.5)")
    return Ensemble(tuple(costs), tuple(float(d) for d in offsets))
