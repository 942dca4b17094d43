"""Circular doubly-linked lists inside ``m``: links at ``m[nx + i]`` / ``m[pv + i]``, sentinel heads.

A list is identified by its sentinel index ``h``; ``next[h]`` is the head
(most recent) and ``prev[h]`` the tail (oldest).
"""

from __future__ import annotations

from swaptrace._kernels._jit import jit_inline


@jit_inline
def _push_head(m, nx, pv, h, x):
    """Insert ``x`` right after the sentinel ``h`` (most recent end)."""
    first = m[nx + h]
    m[nx + x] = first
    m[pv + x] = h
    m[pv + first] = x
    m[nx + h] = x


@jit_inline
def _push_tail(m, nx, pv, h, x):
    """Insert ``x`` right before the sentinel ``h`` (oldest end)."""
    last = m[pv + h]
    m[nx + last] = x
    m[pv + x] = last
    m[nx + x] = h
    m[pv + h] = x


@jit_inline
def _unlink(m, nx, pv, x):
    """Remove ``x`` from whatever list holds it."""
    a = m[pv + x]
    c = m[nx + x]
    m[nx + a] = c
    m[pv + c] = a


@jit_inline
def _move_head(m, nx, pv, h, x):
    """Move ``x`` to the most recent end of list ``h``."""
    if m[nx + h] != x:
        _unlink(m, nx, pv, x)
        _push_head(m, nx, pv, h, x)
