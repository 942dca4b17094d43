"""Circular doubly-linked lists on ``next``/``prev`` int arrays with sentinel heads.

A list is identified by its sentinel index ``h`` (stored past the elements);
``next[h]`` is the head (most recent) and ``prev[h]`` the tail (oldest).
"""

from __future__ import annotations

from swaptrace._kernels._jit import jit_inline


@jit_inline
def _push_head(nxt, prv, h, x):
    """Insert ``x`` right after the sentinel ``h`` (most recent end)."""
    first = nxt[h]
    nxt[x] = first
    prv[x] = h
    prv[first] = x
    nxt[h] = x


@jit_inline
def _push_tail(nxt, prv, h, x):
    """Insert ``x`` right before the sentinel ``h`` (oldest end)."""
    last = prv[h]
    nxt[last] = x
    prv[x] = last
    nxt[x] = h
    prv[h] = x


@jit_inline
def _unlink(nxt, prv, x):
    """Remove ``x`` from whatever list holds it."""
    a = prv[x]
    b = nxt[x]
    nxt[a] = b
    prv[b] = a


@jit_inline
def _move_head(nxt, prv, h, x):
    """Move ``x`` to the most recent end of list ``h``."""
    if nxt[h] != x:
        _unlink(nxt, prv, x)
        _push_head(nxt, prv, h, x)
