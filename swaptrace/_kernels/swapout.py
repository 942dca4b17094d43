"""Evicting one page: allocate a slot if needed, write it if needed (shared by all policies)."""

from __future__ import annotations

from swaptrace._kernels._jit import jit_inline
from swaptrace._kernels.merge import OP_WRITE, _submit
from swaptrace._kernels.slots import _alloc_slot
from swaptrace._kernels.swapstate import (
    C_CLEAN_DROPS,
    C_EVICTIONS,
    C_PAGES_OUT,
    DIRTY,
    R_RESIDENT,
    TOUCHED,
)

CAUSE_RECLAIM = 2  # traceio.CAUSE_RECLAIM


@jit_inline
def _evict(st, page):
    """Drop ``page`` (already unlinked from its list): dirty or slot-less pages are written."""
    reg = st.reg
    if (st.flags[page] & DIRTY) or st.slot[page] < 0:
        if st.slot[page] < 0:
            if _alloc_slot(st, page) < 0:
                return
        _submit(st, OP_WRITE, st.slot[page], CAUSE_RECLAIM)
        reg[C_PAGES_OUT] += 1
    else:
        reg[C_CLEAN_DROPS] += 1
    st.flags[page] = TOUCHED
    reg[R_RESIDENT] -= 1
    reg[C_EVICTIONS] += 1
