"""SHARDS spatially-hashed sampling for approximate LRU miss-ratio curves.

Waldspurger, Park, Garthwaite, Ahmad, "Efficient MRC Construction with
SHARDS", FAST 2015. A page is sampled when ``hash(page) mod P < T`` (rate
``R = T / P``, here ``P = 2^24``); sampled accesses get exact stack distances
among sampled pages (the Fenwick tree of :mod:`swaptrace.kernels.mrc.stack`),
scaled by ``1/R``. The fixed-size variant (SHARDS_max) keeps at most
``s_max`` sampled pages: when one more would enter, the page with the largest
hash (and any page sharing it) leaves, ``T`` drops to that hash, and the histogram built so far is
rescaled by ``R_new / R_old``. The caller applies the SHARDS_adj correction
(expected minus actual sampled count added to the first bucket).

A negative page ``-(p + 1)`` frees ``p`` (:mod:`swaptrace.kernels.mrc.stack`): a
sampled page leaves the stack; SHARDS_max keeps it in its sample (counted
against ``s_max``) until the threshold drops past its hash or it is touched again.
"""

from __future__ import annotations

import numpy as np

from swaptrace.kernels.jit import jit_inline, jit_noref
from swaptrace.kernels.mrc.stack import _fenwick_add, _stack_distance_one, _stack_free

HASH_BITS = 24
MODULUS = 1 << HASH_BITS


@jit_inline
def _count_distance(hist, d, rate, top):
    """One sampled access at stack distance ``d`` into ``hist``, scaled up by the sampling rate to the full
    trace's distance (bucket 0: a first access, a miss at every size)."""
    if d == 0:
        hist[0] += 1.0
    else:
        b = int(d / rate + 0.5)
        hist[min(max(b, 1), top)] += 1.0


@jit_noref
def _hash24(p):
    """splitmix64 finaliser of the page number, top 24 bits."""
    z = np.uint64(p) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.int64(z >> np.uint64(64 - HASH_BITS))


@jit_noref
def _shards_fixed_rate_chunk(pages, threshold, last, page_at, tree, reg, hist, rate):
    """Fixed rate: sample pages whose hash is below ``threshold``; hist in scaled page distances."""
    top = hist.shape[0] - 1
    frees = 0
    for i in range(pages.shape[0]):
        p = pages[i]
        if p < 0:
            frees += 1
            if _hash24(-p - 1) < threshold:
                _stack_free(last, page_at, tree, reg, -p - 1)
            continue
        if _hash24(p) >= threshold:
            continue
        reg[2] += 1  # sampled accesses
        _count_distance(hist, _stack_distance_one(last, page_at, tree, reg, p), rate, top)
    return frees


@jit_noref
def _heap_push(hh, hp, n, h, p):
    i = n
    hh[i] = h
    hp[i] = p
    while i > 0:
        parent = (i - 1) // 2
        if hh[parent] >= hh[i]:
            break
        hh[parent], hh[i] = hh[i], hh[parent]
        hp[parent], hp[i] = hp[i], hp[parent]
        i = parent
    return n + 1


@jit_noref
def _heap_pop(hh, hp, n):
    """Remove the largest hash; returns the new size (the removed entry is left at index n-1)."""
    n -= 1
    hh[0], hh[n] = hh[n], hh[0]
    hp[0], hp[n] = hp[n], hp[0]
    i = 0
    while True:
        a = 2 * i + 1
        b = a + 1
        m = i
        if a < n and hh[a] > hh[m]:
            m = a
        if b < n and hh[b] > hh[m]:
            m = b
        if m == i:
            break
        hh[m], hh[i] = hh[i], hh[m]
        hp[m], hp[i] = hp[i], hp[m]
        i = m
    return n


@jit_noref
def _shards_fixed_size_chunk(pages, s_max, last, page_at, tree, reg, hist, heap_h, heap_p, fstate):
    """SHARDS_max: at most ``s_max`` sampled pages. ``reg[3]`` is T, ``reg[4]`` the heap size;
    ``fstate[0]`` the (rescaled) sampled-access count."""
    top = hist.shape[0] - 1
    frees = 0
    for i in range(pages.shape[0]):
        p = pages[i]
        if p < 0:
            frees += 1
            if _hash24(-p - 1) < reg[3]:
                _stack_free(last, page_at, tree, reg, -p - 1)  # still in the sample (the heap): last = -2
            continue
        h = _hash24(p)
        if h >= reg[3]:
            continue
        if last[p] == -1:  # a new sampled page: admit it, then shed the largest hash if over s_max
            reg[4] = _heap_push(heap_h, heap_p, reg[4], h, p)
            if reg[4] > s_max:
                old_t = reg[3]
                reg[3] = heap_h[0]
                scale = reg[3] / old_t
                for j in range(hist.shape[0]):
                    hist[j] *= scale
                fstate[0] *= scale
                # every page whose hash is not below the new T leaves (pages can share a 24-bit hash: one
                # left behind would no longer be sampled, yet would still lengthen other pages' distances)
                dropped_new = False
                while reg[4] > 0 and heap_h[0] >= reg[3]:
                    reg[4] = _heap_pop(heap_h, heap_p, reg[4])
                    q = heap_p[reg[4]]
                    if q == p:
                        dropped_new = True
                        continue
                    tq = last[q]
                    if tq >= 0:  # (a freed page, -2, is in the sample but not in the stack)
                        _fenwick_add(tree, tq, -1)
                        page_at[tq] = -1
                        reg[1] -= 1
                    last[q] = -1
                if dropped_new:
                    continue
        rate = reg[3] / MODULUS
        fstate[0] += 1.0
        _count_distance(hist, _stack_distance_one(last, page_at, tree, reg, p), rate, top)
    return frees
