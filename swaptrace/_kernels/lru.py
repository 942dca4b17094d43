"""Exact LRU residency: one list, a hit moves the page to the head, evict from the tail."""

from __future__ import annotations

from swaptrace._kernels._jit import jit_inline
from swaptrace._kernels.dlist import _move_head, _push_head, _unlink
from swaptrace._kernels.swapout import _evict
from swaptrace._kernels.swapstate import P_FOOTPRINT, R_ERROR, R_RESIDENT


@jit_inline
def _lru_hit(st, page):
    """Access to a resident page: most recently used."""
    _move_head(st.lnext, st.lprev, st.prm[P_FOOTPRINT], page)


@jit_inline
def _lru_insert(st, page, target):  # noqa: ARG001 - same signature for every policy
    """A page just brought in goes to the head."""
    _push_head(st.lnext, st.lprev, st.prm[P_FOOTPRINT], page)


@jit_inline
def _lru_reclaim(st, n):
    """Evict the ``n`` least recently used pages."""
    h = st.prm[P_FOOTPRINT]
    done = 0
    while done < n and st.reg[R_RESIDENT] > 0 and st.reg[R_ERROR] == 0:
        page = st.lprev[h]
        _unlink(st.lnext, st.lprev, page)
        _evict(st, page)
        done += 1
    return done
