"""Slow reference for SHARDS (Waldspurger, Park, Garthwaite, Ahmad, "Efficient MRC Construction with SHARDS",
FAST 2015), written from the paper, for ``swaptrace.kernels.mrc.shards`` and ``swaptrace.mrc.shards_from_chunks``.

Fixed rate (paper section 3): an access to page ``p`` is sampled when ``hash(p) mod P < T`` (rate ``R = T/P``).
A sampled access's reuse distance is measured among sampled pages only -- here with a plain LRU stack (a
Python list, most recent first): the distance is the page's 1-based position, 0 for a first access -- and
scaled by ``1/R``, rounded to the nearest page (at least 1). Misses at cache size ``c``: first accesses plus
reuses at scaled distance ``> c``, all divided by ``R``. SHARDS_adj (section 4.2): ``N*R - sampled`` is added
to the smallest distance bucket (a hit at every size but 0).

Fixed size, SHARDS_max (section 3.2): at most ``s_max`` sampled pages. When a page new to the sample would
make ``s_max + 1``, the page with the largest hash leaves the sample and ``T`` becomes that hash (so that
page, and any with an equal or larger hash, is no longer sampled); the histogram so far and the sampled-access
count are multiplied by ``R_new / R_old``, and the new access is counted only if the new page is still below ``T``.

Free events (an alloc or a free row of the trace, given here as ``-(page + 1)``): a sampled page leaves the
stack, so its next access is a first access; SHARDS_max keeps it in its sample set (counted against
``s_max``) until the threshold drops past its hash or it comes back. Frees are not accesses (not in ``N``).

The hash is the one the product documents (a splitmix64 finaliser of the page number, its top 24 bits:
``P = 2**24``); it is restated here so the comparison with the kernel can be exact.
"""

from __future__ import annotations

import numpy as np

P = 1 << 24
_MASK = (1 << 64) - 1


def hash24(page: int) -> int:
    z = (int(page) + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    z ^= z >> 31
    return z >> 40


def _curve(hist: np.ndarray, rate: float, n: int, footprint: int, sampled: float, adjust: bool) -> np.ndarray:
    hist = hist.copy()
    if adjust and footprint >= 1:
        hist[1] += n * rate - sampled
    beyond = np.append(np.cumsum(hist[:0:-1])[::-1], 0.0)  # beyond[c] = reuses at distance > c
    misses = hist[0] + beyond
    return np.clip(misses / rate, 0.0, float(n))


def _distance(stack: list, p: int) -> int:
    if p in stack:
        d = stack.index(p) + 1
        stack.remove(p)
    else:
        d = 0
    stack.insert(0, p)
    return d


def _bucket(d: int, rate: float, footprint: int) -> int:
    return 0 if d == 0 else min(max(int(d / rate + 0.5), 1), footprint)


def shards_fixed_rate(pages, footprint: int, rate_threshold: int, adjust: bool = True) -> np.ndarray:
    """Estimated misses at sizes 0..footprint, sampling hashes below ``rate_threshold`` (out of ``P``)."""
    rate = rate_threshold / P
    hist = np.zeros(footprint + 1)
    stack: list[int] = []
    sampled = 0
    n = 0
    for p in map(int, pages):
        if p < 0:  # a free of page -p - 1
            if -p - 1 in stack:
                stack.remove(-p - 1)
            continue
        n += 1
        if hash24(p) >= rate_threshold:
            continue
        sampled += 1
        hist[_bucket(_distance(stack, p), rate, footprint)] += 1
    return _curve(hist, rate, n, footprint, sampled, adjust)


def shards_fixed_size(pages, footprint: int, s_max: int, adjust: bool = True) -> tuple[np.ndarray, float]:
    """SHARDS_max estimate at sizes 0..footprint, and the final rate."""
    threshold = P
    hist = np.zeros(footprint + 1)
    stack: list[int] = []
    sample: set[int] = set()  # the pages in the sample: the stack's, and freed ones not yet dropped
    sampled = 0.0
    n = 0
    for p in map(int, pages):
        if p < 0:
            if -p - 1 in stack:
                stack.remove(-p - 1)
            continue
        n += 1
        if hash24(p) >= threshold:
            continue
        if p not in sample and len(sample) + 1 > s_max:
            evict = max([*sample, p], key=hash24)
            new_threshold = hash24(evict)
            scale = new_threshold / threshold
            hist *= scale
            sampled *= scale
            threshold = new_threshold
            stack = [q for q in stack if hash24(q) < threshold]
            sample = {q for q in sample if hash24(q) < threshold}
            if hash24(p) >= threshold:
                continue
        sample.add(p)
        rate = threshold / P
        sampled += 1
        hist[_bucket(_distance(stack, p), rate, footprint)] += 1
    rate = threshold / P
    return _curve(hist, rate, n, footprint, sampled, adjust), rate
