"""Replay of page accesses on real memory (the capture child's inner loop)."""

from __future__ import annotations

import numpy as np

from swaptrace.kernels.jit import jit


@jit
def replay_codes(mem, codes, page_bytes, touch_bytes):
    """Touch every access in ``codes`` on ``mem`` with real loads and stores; return a checksum of the loads.

    Parameters
    ----------
    mem : numpy.ndarray of uint8
        The memory the accesses land in: page ``p`` is bytes ``p * page_bytes .. (p + 1) * page_bytes``.
    codes : numpy.ndarray of int64
        One access each, ``page << 1 | write``.
    page_bytes : int
        Bytes per page.
    touch_bytes : int
        Stride of the bytes touched in a page (``page_bytes``: one byte per page).

    Returns
    -------
    numpy.uint64
        The sum of the bytes the loads read (so no load is optimised away); a store adds 1 to each byte it touches.
    """
    acc = np.uint64(0)
    for i in range(codes.shape[0]):
        c = codes[i]
        base = (c >> 1) * page_bytes
        if c & 1:
            for off in range(0, page_bytes, touch_bytes):
                mem[base + off] += np.uint8(1)  # a store (after the load the increment needs)
        else:
            for off in range(0, page_bytes, touch_bytes):
                acc += mem[base + off]
    return acc


def warm_up(page_bytes: int = 4096, touch_bytes: int = 4096) -> None:
    """Compile :func:`replay_codes` (or load it from numba's cache) on arrays of the child's types.

    The capture calls it in the parent before starting a child, so the child always loads the kernel from
    the on-disk cache: compiling in the child would put the compiler's memory into its measured baseline.
    """
    replay_codes(np.zeros(2 * page_bytes, dtype=np.uint8), np.array([0, 3], dtype=np.int64), page_bytes, touch_bytes)
