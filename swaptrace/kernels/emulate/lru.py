"""Exact LRU residency: one list, a hit moves the page to the head, evict from the tail."""

from __future__ import annotations

from swaptrace.kernels.emulate.dlist import _move_head, _push_head, _unlink
from swaptrace.kernels.emulate.evict import _evict
from swaptrace.kernels.emulate.state import O_NEXT, O_PREV, P_FOOTPRINT, R_ERROR, R_RESIDENT
from swaptrace.kernels.jit import jit_noref


@jit_noref
def _lru_hit(b, m, page):  # same signature for every policy
    """Access to a resident page: most recently used."""
    _move_head(m, m[O_NEXT], m[O_PREV], m[P_FOOTPRINT], page)


@jit_noref
def _lru_insert(b, m, page, target):
    """A page just brought in goes to the head."""
    _push_head(m, m[O_NEXT], m[O_PREV], m[P_FOOTPRINT], page)


@jit_noref
def _lru_reclaim(b, m, f, n):
    """Evict the ``n`` least recently used pages."""
    h = m[P_FOOTPRINT]
    nx, pv = m[O_NEXT], m[O_PREV]
    done = 0
    while done < n and m[R_RESIDENT] > 0 and m[R_ERROR] == 0:
        page = m[pv + 2 * h]
        _unlink(m, nx, pv, page)
        _evict(b, m, f, page)
        done += 1
    return done
