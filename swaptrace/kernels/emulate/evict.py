"""Evicting one page: allocate a slot if needed, write it if needed (shared by all policies).

A dirty page of zeros (``ZEROED``) with ``P_ZEROMAP`` gets its slot but no write: Linux >= 6.12 checks a
folio's contents in ``swap_writeout`` (mm/page_io.c, ``is_folio_zero_filled``), marks the slot in the swap
device's zero map and frees the folio in the same reclaim pass (vmstat ``swpout_zero``).
"""

from __future__ import annotations

from swaptrace.kernels.emulate.plug import _submit
from swaptrace.kernels.emulate.slots import _alloc_slot
from swaptrace.kernels.emulate.state import (
    C_CLEAN_DROPS,
    C_EVICTIONS,
    C_PAGES_OUT,
    C_ZERO_OUT,
    CAUSE_RECLAIM,
    DIRTY,
    O_EV_AT,
    O_EV_PAGE,
    O_SLOT,
    OP_WRITE,
    P_EV_CAP,
    P_ZEROMAP,
    R_EV_AT,
    R_EV_N,
    R_RESIDENT,
    TOUCHED,
    ZEROED,
)
from swaptrace.kernels.jit import jit_noref


@jit_noref
def _evict(b, m, f, page):
    """Drop ``page`` (already unlinked from its list): dirty or slot-less pages are written (zeros are not)."""
    so = m[O_SLOT]
    fl = b[page]
    if (fl & DIRTY) or m[so + page] < 0:
        if m[so + page] < 0:
            if _alloc_slot(b, m, page) < 0:
                return
        if (fl & ZEROED) and m[P_ZEROMAP]:
            m[C_ZERO_OUT] += 1
        else:
            _submit(m, f, OP_WRITE, m[so + page], CAUSE_RECLAIM)
            m[C_PAGES_OUT] += 1
    else:
        m[C_CLEAN_DROPS] += 1
    b[page] = TOUCHED | (fl & ZEROED)  # the contents stay zeros on swap
    m[R_RESIDENT] -= 1
    m[C_EVICTIONS] += 1
    if m[P_EV_CAP] > 0:  # the swap designs replay this run's evictions (swaptrace.designs)
        n = m[R_EV_N]
        m[m[O_EV_AT] + n] = m[R_EV_AT]
        m[m[O_EV_PAGE] + n] = page
        m[R_EV_N] = n + 1
