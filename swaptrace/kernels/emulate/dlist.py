"""Circular doubly-linked lists inside ``m``: node ``i``'s links at ``m[nx + 2*i]`` and ``m[pv + 2*i]``.

The two links of a node are interleaved (``pv = nx + 1``), so moving a node
touches one cache line per neighbour instead of two. A list is identified by its sentinel index ``h``; ``next[h]`` is the head
(most recent) and ``prev[h]`` the tail (oldest).
"""

from __future__ import annotations

from swaptrace.kernels.jit import jit_noref


@jit_noref
def _push_head(m, nx, pv, h, x):
    """Insert ``x`` right after the sentinel ``h`` (most recent end)."""
    first = m[nx + 2 * h]
    m[nx + 2 * x] = first
    m[pv + 2 * x] = h
    m[pv + 2 * first] = x
    m[nx + 2 * h] = x


@jit_noref
def _push_tail(m, nx, pv, h, x):
    """Insert ``x`` right before the sentinel ``h`` (oldest end)."""
    last = m[pv + 2 * h]
    m[nx + 2 * last] = x
    m[pv + 2 * x] = last
    m[nx + 2 * x] = h
    m[pv + 2 * h] = x


@jit_noref
def _unlink(m, nx, pv, x):
    """Remove ``x`` from whatever list holds it."""
    a = m[pv + 2 * x]
    c = m[nx + 2 * x]
    m[nx + 2 * a] = c
    m[pv + 2 * c] = a


@jit_noref
def _move_head(m, nx, pv, h, x):
    """Move ``x`` to the most recent end of list ``h``."""
    if m[nx + 2 * h] != x:
        _unlink(m, nx, pv, x)
        _push_head(m, nx, pv, h, x)
