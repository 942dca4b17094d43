"""Synthetic request streams for the SSD model (fio-like patterns, in map units).

Every generator yields chunks ``(op, lpn, npages)`` of numpy arrays: op codes
``traceio.OP_*``, first logical unit and unit count of each request. Sizes are
in bytes at the API and must be multiples of the device's map unit.

Patterns
--------
``write`` / ``read``
    Sequential from unit 0, wrapping around the user space.
``randwrite`` / ``randread`` / ``randrw``
    Uniform random offsets aligned to the request size (``randrw`` mixes
    reads and writes, ``rwmix_read`` percent reads).
``swap``
    Random offsets, request sizes drawn from :data:`SWAP_SIZE_MIX` (the
    thesis: most swap requests are smaller than 32 KiB), ``rwmix_read``
    percent reads. ``bs`` is ignored.
``hotcold``
    Random single-request writes; ``hot_writes`` of them go to the first
    ``hot_fraction`` of the user space (Desnoyers 2012, Eq. 14 setting).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from swaptrace.core import traceio
from swaptrace.errors import ConfigError
from swaptrace.ssd.choices import PATTERNS  # noqa: F401  (re-exported)

#: (request bytes, probability) of the swap-like mix: 4-32 KiB, mostly small
SWAP_SIZE_MIX = ((4096, 0.4), (8192, 0.25), (16384, 0.2), (32768, 0.15))

Chunk = tuple[np.ndarray, np.ndarray, np.ndarray]


def hot_units(user_units: int, hot_fraction: float, bs_units: int = 1) -> int:
    """Size (units) of the hot range at the start of the space in the ``hotcold`` pattern."""
    return max(int(user_units * hot_fraction), bs_units)


def synthetic_requests(pattern: str, *, user_units: int, map_bytes: int, bs_bytes: int, volume_bytes: int,
                       rwmix_read: float = 50.0, hot_writes: float = 0.8, hot_fraction: float = 0.2,
                       seed: int = 0, chunk_requests: int = 1 << 18) -> Iterator[Chunk]:
    """Yield request chunks of ``pattern`` until ``volume_bytes`` of host I/O.

    Parameters
    ----------
    pattern : str
        One of :data:`PATTERNS`.
    user_units, map_bytes : int
        The device's logical space (units) and unit size (bytes).
    bs_bytes : int
        Request size in bytes (a multiple of ``map_bytes``; ignored by ``swap``).
    volume_bytes : int
        Host bytes to move (reads plus writes).
    rwmix_read : float
        Percent of requests that are reads (``randrw``, ``swap``).
    hot_writes, hot_fraction : float
        ``hotcold``: fraction of writes to the hot fraction of the space.
    seed : int
        Random seed.
    """
    if pattern not in PATTERNS:
        raise ConfigError(f"unknown pattern {pattern!r}; choose from {', '.join(PATTERNS)}")
    if bs_bytes <= 0 or bs_bytes % map_bytes:
        raise ConfigError(f"--bs must be a positive multiple of {map_bytes} bytes, got {bs_bytes}")
    n_bs = bs_bytes // map_bytes
    if pattern != "swap" and n_bs > user_units:
        raise ConfigError("--bs is larger than the device")
    if volume_bytes <= 0:
        raise ConfigError("--volume must be > 0")
    if not 0.0 <= rwmix_read <= 100.0:
        raise ConfigError("--rwmix-read must be a percentage")
    if pattern == "hotcold" and not (0.0 < hot_writes < 1.0 and 0.0 < hot_fraction < 1.0):
        raise ConfigError("hot/cold fractions must be in (0, 1)")
    rng = np.random.default_rng(seed)
    volume_units = -(-volume_bytes // map_bytes)
    done_units = 0
    next_seq = 0
    while done_units < volume_units:
        if pattern == "swap":
            sizes = np.array([s // map_bytes for s, _ in SWAP_SIZE_MIX], dtype=np.int64)
            probs = np.array([p for _, p in SWAP_SIZE_MIX])
            npages = rng.choice(sizes, size=chunk_requests, p=probs / probs.sum())
            npages = np.minimum(npages, user_units)
        else:
            npages = np.full(chunk_requests, n_bs, dtype=np.int64)
        cum = np.cumsum(npages)
        keep = int(np.searchsorted(cum, volume_units - done_units, side="left")) + 1
        npages = npages[:keep]
        k = len(npages)
        if pattern in ("write", "read"):
            starts = next_seq + np.concatenate(([0], np.cumsum(npages)[:-1]))
            lpn = starts % user_units
            over = lpn + npages > user_units  # a request never wraps mid-way
            lpn[over] = 0
            next_seq = int(lpn[-1] + npages[-1]) % user_units
            op = np.full(k, traceio.OP_WRITE if pattern == "write" else traceio.OP_READ, dtype=np.int8)
        elif pattern == "hotcold":
            hot = hot_units(user_units, hot_fraction, n_bs)
            slots_hot = max(hot // n_bs, 1)
            slots_cold = max((user_units - hot) // n_bs, 1)
            is_hot = rng.random(k) < hot_writes
            lpn = np.where(is_hot, rng.integers(0, slots_hot, k) * n_bs, hot + rng.integers(0, slots_cold, k) * n_bs)
            lpn = np.minimum(lpn, user_units - npages)
            op = np.full(k, traceio.OP_WRITE, dtype=np.int8)
        else:
            lpn = rng.integers(0, np.maximum(user_units // npages, 1)) * npages
            if pattern == "randwrite":
                op = np.full(k, traceio.OP_WRITE, dtype=np.int8)
            elif pattern == "randread":
                op = np.full(k, traceio.OP_READ, dtype=np.int8)
            else:
                op = np.where(rng.random(k) * 100.0 < rwmix_read, traceio.OP_READ, traceio.OP_WRITE).astype(np.int8)
        done_units += int(npages.sum())
        yield op, lpn.astype(np.int64), npages.astype(np.int64)
