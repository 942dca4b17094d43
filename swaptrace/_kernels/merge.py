"""Block-layer plug merging of one reclaim batch or one fault's reads.

Inside a ``blk_plug`` each bio is tried against the most recently added
request only (``blk_attempt_plug_merge``): it merges when it starts where
that request ends, has the same direction, and the result stays within the
request size limit (``max_sectors_kb``). A merged read that contains the
faulting page has cause ``fault``; otherwise the cause of its first page.
"""

from __future__ import annotations

from swaptrace._kernels._jit import jit_inline
from swaptrace._kernels.swapstate import (
    C_BYTES_READ,
    C_BYTES_WRITTEN,
    C_REQ_READ,
    C_REQ_WRITE,
    F_NOW_US,
    P_MAX_REQ_PAGES,
    P_PAGE_BYTES,
    R_OUT_N,
    R_PEND_CAUSE,
    R_PEND_N,
    R_PEND_OP,
    R_PEND_SLOT,
    R_STEP,
)

OP_READ, OP_WRITE = 0, 1  # traceio.OP_READ / OP_WRITE
CAUSE_FAULT = 0


@jit_inline
def _flush(st):
    """Issue the plugged request, if any, as one output row."""
    reg = st.reg
    if reg[R_PEND_OP] < 0:
        return
    i = reg[R_OUT_N]
    pb = st.prm[P_PAGE_BYTES]
    nbytes = reg[R_PEND_N] * pb
    st.out_t[i] = st.freg[F_NOW_US]
    st.out_step[i] = reg[R_STEP]
    st.out_op[i] = reg[R_PEND_OP]
    st.out_off[i] = reg[R_PEND_SLOT] * pb
    st.out_len[i] = nbytes
    st.out_cause[i] = reg[R_PEND_CAUSE]
    reg[R_OUT_N] = i + 1
    if reg[R_PEND_OP] == OP_READ:
        reg[C_REQ_READ] += 1
        reg[C_BYTES_READ] += nbytes
    else:
        reg[C_REQ_WRITE] += 1
        reg[C_BYTES_WRITTEN] += nbytes
    reg[R_PEND_OP] = -1


@jit_inline
def _submit(st, op, slot, cause):
    """Add a one-page bio for ``slot``; back-merge it or start a new request."""
    reg = st.reg
    if (
        reg[R_PEND_OP] == op
        and slot == reg[R_PEND_SLOT] + reg[R_PEND_N]
        and reg[R_PEND_N] < st.prm[P_MAX_REQ_PAGES]
    ):
        reg[R_PEND_N] += 1
        if cause == CAUSE_FAULT:
            reg[R_PEND_CAUSE] = CAUSE_FAULT
        return
    _flush(st)
    reg[R_PEND_OP] = op
    reg[R_PEND_SLOT] = slot
    reg[R_PEND_N] = 1
    reg[R_PEND_CAUSE] = cause
