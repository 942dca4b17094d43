"""Slow, obviously-correct references for the capture and compare stages."""

from __future__ import annotations

import numpy as np


def naive_replay(mem: bytearray, codes, page_bytes: int, touch_bytes: int) -> int:
    """Touch each page of ``codes`` (page << 1 | write) at every ``touch_bytes``; sum of the loaded bytes."""
    acc = 0
    for c in (int(x) for x in codes):
        base = (c >> 1) * page_bytes
        for off in range(0, page_bytes, touch_bytes):
            if c & 1:
                mem[base + off] = (mem[base + off] + 1) % 256
            else:
                acc += mem[base + off]
    return acc


def naive_ks(a, b) -> float:
    """Two-sample KS statistic from the definition on expanded samples."""
    if len(a) == 0 and len(b) == 0:
        return 0.0
    if len(a) == 0 or len(b) == 0:
        return 1.0
    a, b = np.sort(np.asarray(a)), np.sort(np.asarray(b))
    return float(max(abs(np.searchsorted(a, x, side="right") / len(a) - np.searchsorted(b, x, side="right") / len(b))
                     for x in np.concatenate([a, b])))
