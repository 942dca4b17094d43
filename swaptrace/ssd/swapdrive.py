"""The drive a swap stream is put on by ``swaptrace run``, ``sweep`` and ``designs``: one rule for all three.

A preset keeps its real size and geometry (a capacity resizes it if given); the swap area is a
partition at the drive's start and the rest of the drive holds :data:`BACKGROUND`, installed in
its sampled steady state (:mod:`swaptrace.ssd.steady`; a few seconds for a 512 GiB drive), so a
short stream meets a drive's real garbage collection from its first write. A ``.toml`` device file
is taken as it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from swaptrace.ssd.choices import BACKGROUND
from swaptrace.ssd.config import SSDConfig, load_device
from swaptrace.ssd.run import SSDResult, replay
from swaptrace.ssd.steady import Background


def swap_drive(device: str, *, capacity_bytes: int | None = None) -> SSDConfig:
    """The SSD a swap stream is replayed on.

    Parameters
    ----------
    device : str
        SSD preset name, or a device ``.toml`` (taken as it is).
    capacity_bytes : int, optional
        Resize a preset to this many bytes of user capacity (default: its real size).
    """
    if device.endswith(".toml"):
        return load_device(device)
    return load_device(device, capacity_bytes=capacity_bytes)


def replay_on_swap_drive(stream: str | os.PathLike, cfg: SSDConfig, *, out: str | os.PathLike | None = None,
                         force: bool = False, progress: Callable[[int], None] | None = None) -> SSDResult:
    """Replay a ``swapio`` stream on ``cfg`` with the swap partition at its start and :data:`BACKGROUND` behind it.

    ``out``, ``force`` and ``progress`` are as :func:`swaptrace.ssd.run.replay` (timeline file,
    overwrite, requests done).
    """
    return replay(stream, cfg, out=out, precondition="steady", background=Background(**BACKGROUND), force=force,
                  progress=progress)
