"""Kernels that install a sampled steady state into an FTL state (``swaptrace.ssd.steady``).

The sampler decides, per block, how many of its units hold static data
(``n_static``, always the first units of the block) and with which
probability each other unit holds data of the randomly overwritten pool
(``p_dyn``). These kernels do the per-unit work that would be too slow or too
memory hungry in numpy for a 512 GiB drive (2^27 units):

* :func:`fill_slots` draws the pool units (splitmix64 uniforms), marks static
  and pool units in ``p2l`` and counts valid units per block;
* :func:`adjust_pool` adds or removes pool units at random until the device
  holds exactly the pool's size (the draw is binomial, the pool is not);
* :func:`pool_order` orders the pool for :func:`assign_lbas`: the swap
  partition's units at uniformly random places, the background's in order;
* :func:`assign_lbas` gives the marked units their logical numbers, static
  ones in order and pool ones in :func:`pool_order`'s order, and fills ``l2p``;
* :func:`install_blocks` closes the data blocks in the order given (oldest
  first, with their close times) through the FTL's own ``_close``, so the GC
  structures (greedy buckets, FIFO ring, closed lists) are what the FTL
  builds, and puts the other blocks in the free queues.

The slow twin is ``tests/naive_ssd.py:naive_steady_install``.
"""

from __future__ import annotations

import numpy as np

from swaptrace.kernels.jit import jit
from swaptrace.kernels.ssd.ftl import CLOSED, FREE, P_BPD, P_NP, S_CLOCK, _close, _rand, _raw_state

#: ``p2l`` markers between :func:`fill_slots` and :func:`assign_lbas`
MARK_STATIC, MARK_POOL = -2, -3


@jit
def _uniform(rng):
    """A uniform double in [0, 1) from the top 53 bits of splitmix64."""
    return np.float64(_rand(rng) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@jit
def fill_slots(p2l, valid, np_, n_static, p_dyn, rng):
    """Mark static units and draw pool units block by block; returns the number of pool units.

    Block ``b``'s units ``0 .. n_static[b]-1`` are static; each other unit is a
    pool unit with probability ``p_dyn[b]`` (one uniform draw per unit, in unit order).
    """
    nb = valid.shape[0]
    pool = 0
    for b in range(nb):
        base = b * np_
        ns = n_static[b]
        p = p_dyn[b]
        v = 0
        for i in range(np_):
            if i < ns:
                p2l[base + i] = MARK_STATIC
                v += 1
            elif p > 0.0 and _uniform(rng) < p:
                p2l[base + i] = MARK_POOL
                v += 1
            else:
                p2l[base + i] = -1
        valid[b] = v
        pool += v - min(ns, np_)
    return pool


@jit
def adjust_pool(p2l, valid, np_, blocks, delta, rng):
    """Add (``delta > 0``) or remove (``delta < 0``) pool units at uniformly random units of ``blocks``.

    The caller guarantees that ``blocks`` have room for (or hold) ``|delta|``
    pool units; a unit is picked by (block, offset) uniformly and skipped when
    it cannot change.
    """
    n = blocks.shape[0]
    while delta != 0:
        b = np.int64(blocks[np.int64(_rand(rng) % np.uint64(n))])
        slot = b * np_ + np.int64(_rand(rng) % np.uint64(np_))
        if delta > 0 and p2l[slot] == -1:
            p2l[slot] = MARK_POOL
            valid[b] += 1
            delta -= 1
        elif delta < 0 and p2l[slot] == MARK_POOL:
            p2l[slot] = -1
            valid[b] -= 1
            delta += 1


@jit
def pool_order(pool, n_swap, rng):
    """``pool`` (background units, then ``n_swap`` swap units last) reordered: swap units at random places.

    The swap units take ``n_swap`` distinct places drawn uniformly from the ``len(pool)`` places (Floyd's
    sampling: for ``j`` from ``len(pool) - n_swap`` up, ``t = r % (j + 1)``, and ``j`` itself if ``t`` is
    taken), in uniformly random order (a Fisher-Yates shuffle of the drawn places: for ``i`` from
    ``n_swap - 1`` down to 1, swap place ``i`` with place ``r % (i + 1)``); swap unit ``k`` (in logical
    order) goes to the ``k``-th place. The background units fill the other places in order. ``r`` are
    successive splitmix64 outputs; ``r % m`` is biased by less than ``m / 2**64``. Cost ``O(len(pool))``
    with ``O(n_swap)`` random draws, against a full shuffle's ``len(pool)``.
    """
    n = pool.shape[0]
    b = n - n_swap
    taken = np.zeros(n, dtype=np.uint8)
    places = np.empty(n_swap, dtype=np.int64)
    for i in range(n_swap):
        j = b + i
        t = np.int64(_rand(rng) % np.uint64(j + 1))
        if taken[t]:
            t = j
        taken[t] = 1
        places[i] = t
    for i in range(n_swap - 1, 0, -1):
        k = np.int64(_rand(rng) % np.uint64(i + 1))
        places[i], places[k] = places[k], places[i]
    out = np.empty(n, dtype=pool.dtype)
    for k in range(n_swap):
        out[places[k]] = pool[b + k]
    nxt = 0
    for p in range(n):
        if not taken[p]:
            out[p] = pool[nxt]
            nxt += 1
    return out


@jit
def assign_lbas(p2l, l2p, static_lbas, pool_lbas):
    """Give marked units their logical units (static in order, pool from ``pool_lbas``); fill ``l2p``."""
    i_s = 0
    i_p = 0
    for slot in range(p2l.shape[0]):
        m = p2l[slot]
        if m == MARK_STATIC:
            lpn = static_lbas[i_s]
            i_s += 1
        elif m == MARK_POOL:
            lpn = pool_lbas[i_p]
            i_p += 1
        else:
            continue
        p2l[slot] = lpn
        l2p[lpn] = slot
    return i_s, i_p


@jit
def install_blocks(state, closed_order, close_seq, free_blocks, clock):
    """Close ``closed_order`` (oldest first, close times ``close_seq``) and queue ``free_blocks``.

    Every block starts FREE (a new state); blocks are numbered die-major, so a
    block's die is ``b // blocks_per_die``.
    """
    st = _raw_state(state)
    np_ = st.ip[P_NP]
    bpd = st.ip[P_BPD]
    nd = st.free_n.shape[0]
    for d in range(nd):
        st.free_head[d] = 0
        st.free_n[d] = 0
        st.closed_n[d] = 0
        st.fifo_head[d] = 0
        st.fifo_n[d] = 0
    for i in range(free_blocks.shape[0]):
        b = free_blocks[i]
        d = b // bpd
        st.free_q[d, st.free_n[d]] = b
        st.free_n[d] += 1
        st.bstate[b] = FREE
        st.wp[b] = 0
    for i in range(closed_order.shape[0]):
        b = np.int64(closed_order[i])
        st.sc[S_CLOCK] = close_seq[i]
        st.wp[b] = np_
        _close(st, b // bpd, b)
    st.sc[S_CLOCK] = clock
    for i in range(closed_order.shape[0]):
        if st.bstate[closed_order[i]] != CLOSED:
            return -1
    return 0
