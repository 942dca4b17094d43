"""CLOCK (second chance): a FIFO whose tail page is spared once if referenced.

Equivalent to a clock hand over a ring: new pages enter at the head with the
reference bit clear; a hit sets the bit; the hand (the tail) clears a set bit
and moves the page to the head, or evicts a page whose bit is clear.
"""

from __future__ import annotations

from swaptrace.kernels.emulate.dlist import _move_head, _push_head, _unlink
from swaptrace.kernels.emulate.evict import _evict
from swaptrace.kernels.emulate.state import C_SCANNED, O_NEXT, O_PREV, P_FOOTPRINT, R_ERROR, R_RESIDENT, REFERENCED
from swaptrace.kernels.jit import jit_noref


@jit_noref
def _clock_hit(b, m, page):
    """Access to a resident page: set its reference bit."""
    b[page] |= REFERENCED


@jit_noref
def _clock_insert(b, m, page, target):
    """A page just brought in: at the head, bit clear."""
    b[page] &= ~REFERENCED
    _push_head(m, m[O_NEXT], m[O_PREV], m[P_FOOTPRINT], page)


@jit_noref
def _clock_reclaim(b, m, f, n):
    """Advance the hand until ``n`` pages are evicted."""
    h = m[P_FOOTPRINT]
    nx, pv = m[O_NEXT], m[O_PREV]
    done = 0
    while done < n and m[R_RESIDENT] > 0 and m[R_ERROR] == 0:
        page = m[pv + 2 * h]
        m[C_SCANNED] += 1
        if b[page] & REFERENCED:
            b[page] &= ~REFERENCED
            _move_head(m, nx, pv, h, page)
        else:
            _unlink(m, nx, pv, page)
            _evict(b, m, f, page)
            done += 1
    return done
