"""Byte sizes as people write them: ``4k``, ``128KiB``, ``2GiB``, ``1.5G``, ``4096``.

Binary multiples throughout (k = KiB = 1024), as fio and the kernel use them.
"""

from __future__ import annotations

import re

from swaptrace.errors import ConfigError

_MULTIPLIERS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tib": 1 << 40,
    "p": 1 << 50,
    "pb": 1 << 50,
    "pib": 1 << 50,
    "e": 1 << 60,
    "eb": 1 << 60,
    "eib": 1 << 60,
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")


#: the largest size any option takes: 1 EiB, far beyond any device, and still exact in int64 offsets
MAX_BYTES = 1 << 60


def parse_bytes(text: str | int, what: str = "size", *, positive: bool = False) -> int:
    """Parse a byte size; raise ConfigError naming ``what`` if it is not one.

    Parameters
    ----------
    text : str or int
        ``"4k"``, ``"128KiB"``, ``"2GiB"``, ``"0.5G"`` or a plain integer (bytes).
    what : str
        Name of the option, used in the error message.
    positive : bool
        Refuse 0 too (a budget, a capacity), not only negative sizes.

    Returns
    -------
    int
        Bytes (fractions are rounded down to whole bytes), at most :data:`MAX_BYTES`.
    """
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE_RE.match(str(text))
        if not match or match.group(2).lower() not in _MULTIPLIERS:
            raise ConfigError(f"{what}: cannot read {text!r} as a byte size (examples: 4096, 4k, 128KiB, 2GiB)")
        number = float(match.group(1)) * _MULTIPLIERS[match.group(2).lower()]
        if number > MAX_BYTES:
            raise ConfigError(f"{what}: {text!r} is above the largest size taken (1 EiB)")
        value = int(number)
    if value < 0:
        raise ConfigError(f"{what}: must not be negative, got {text!r}")
    if value > MAX_BYTES:
        raise ConfigError(f"{what}: {text!r} is above the largest size taken (1 EiB)")
    if positive and value == 0:
        raise ConfigError(f"{what}: must be above 0 bytes, got {text!r}")
    return value


def format_bytes(n: float) -> str:
    """Human-readable binary size: ``format_bytes(3 << 20) == '3.0 MiB'``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
