"""CLOCK (second chance): a FIFO whose tail page is spared once if referenced.

Equivalent to a clock hand over a ring: new pages enter at the head with the
reference bit clear; a hit sets the bit; the hand (the tail) clears a set bit
and moves the page to the head, or evicts a page whose bit is clear.
"""

from __future__ import annotations

from swaptrace._kernels._jit import jit_inline
from swaptrace._kernels.dlist import _move_head, _push_head, _unlink
from swaptrace._kernels.swapout import _evict
from swaptrace._kernels.swapstate import C_SCANNED, P_FOOTPRINT, R_ERROR, R_RESIDENT, REFERENCED


@jit_inline
def _clock_hit(st, page):
    """Access to a resident page: set its reference bit."""
    st.flags[page] |= REFERENCED


@jit_inline
def _clock_insert(st, page, target):  # noqa: ARG001
    """A page just brought in: at the head, bit clear."""
    st.flags[page] &= ~REFERENCED
    _push_head(st.lnext, st.lprev, st.prm[P_FOOTPRINT], page)


@jit_inline
def _clock_reclaim(st, n):
    """Advance the hand until ``n`` pages are evicted."""
    h = st.prm[P_FOOTPRINT]
    done = 0
    while done < n and st.reg[R_RESIDENT] > 0 and st.reg[R_ERROR] == 0:
        page = st.lprev[h]
        st.reg[C_SCANNED] += 1
        if st.flags[page] & REFERENCED:
            st.flags[page] &= ~REFERENCED
            _move_head(st.lnext, st.lprev, h, page)
        else:
            _unlink(st.lnext, st.lprev, page)
            _evict(st, page)
            done += 1
    return done
