"""Block-layer plug merging of one plug's writes or one fault's reads.

A plug is one fault's reads, or the writes of one reclaim call -- of one
priority level with the ``linux`` policy's levels (``shrink_lruvec`` plugs
each level, and a sleep flushes the plug; :mod:`.linux_lists` calls
:func:`_flush` there). Inside a ``blk_plug`` each bio is tried against the
most recently added request only (``blk_attempt_plug_merge``,
block/blk-merge.c): it merges when it starts where that request ends or
ends where it starts (a back or a front merge), has the same direction,
and the result stays within the request size limit (``max_sectors_kb``,
and ``max_segments`` one-page segments: 512 KiB on a loop device, the
default). A merged read that contains the
faulting page has cause ``fault``; otherwise the cause of its first page.
Each row's time column holds the index of the causing access within its
step; :class:`swaptrace.emulate.Emulator` turns it into ``t_us``.
"""

from __future__ import annotations

from swaptrace.kernels.emulate.state import (
    C_BYTES_READ,
    C_BYTES_WRITTEN,
    C_REQ_READ,
    C_REQ_WRITE,
    CAUSE_FAULT,
    ERR_OUT_FULL,
    F_NOW,
    F_OUT_T,
    O_OUT_CAUSE,
    O_OUT_LEN,
    O_OUT_OFF,
    O_OUT_OP,
    O_OUT_STEP,
    OP_READ,
    P_MAX_REQ_PAGES,
    P_OUT_CAP,
    P_PAGE_BYTES,
    R_ERROR,
    R_OUT_N,
    R_PEND_CAUSE,
    R_PEND_N,
    R_PEND_OP,
    R_PEND_SLOT,
    R_STEP,
)
from swaptrace.kernels.jit import jit_noref


@jit_noref
def _flush(m, f):
    """Issue the plugged request, if any, as one output row (``P_OUT_CAP = 0``: counted only)."""
    op = m[R_PEND_OP]
    if op < 0:
        return
    pb = m[P_PAGE_BYTES]
    nbytes = m[R_PEND_N] * pb
    cap = m[P_OUT_CAP]
    if cap > 0:
        i = m[R_OUT_N]
        if i >= cap:  # cannot happen while max_rows_per_access bounds an access's requests
            m[R_ERROR] = ERR_OUT_FULL
            m[R_PEND_OP] = -1
            return
        f[F_OUT_T + i] = f[F_NOW]
        m[m[O_OUT_STEP] + i] = m[R_STEP]
        m[m[O_OUT_OP] + i] = op
        m[m[O_OUT_OFF] + i] = m[R_PEND_SLOT] * pb
        m[m[O_OUT_LEN] + i] = nbytes
        m[m[O_OUT_CAUSE] + i] = m[R_PEND_CAUSE]
        m[R_OUT_N] = i + 1
    if op == OP_READ:
        m[C_REQ_READ] += 1
        m[C_BYTES_READ] += nbytes
    else:
        m[C_REQ_WRITE] += 1
        m[C_BYTES_WRITTEN] += nbytes
    m[R_PEND_OP] = -1


@jit_noref
def _merges(m, op, slot):
    """Whether a one-page bio for ``slot`` merges into the plugged request, at its end or at its start.

    ``blk_try_merge`` (block/blk-merge.c) gives a back merge when the bio starts where the request ends and a
    front merge when it ends where the request starts; ``blk_attempt_bio_merge`` takes either.
    """
    if m[R_PEND_OP] != op or m[R_PEND_N] >= m[P_MAX_REQ_PAGES]:
        return False
    return slot == m[R_PEND_SLOT] + m[R_PEND_N] or slot == m[R_PEND_SLOT] - 1


@jit_noref
def _submit(m, f, op, slot, cause):
    """Add a one-page bio for ``slot``; merge it at either end of the plugged request or start a new one."""
    if _merges(m, op, slot):
        if slot < m[R_PEND_SLOT]:  # front merge: the request now starts at the bio
            m[R_PEND_SLOT] = slot
        m[R_PEND_N] += 1
        if cause == CAUSE_FAULT:
            m[R_PEND_CAUSE] = CAUSE_FAULT
        return
    _flush(m, f)
    m[R_PEND_OP] = op
    m[R_PEND_SLOT] = slot
    m[R_PEND_N] = 1
    m[R_PEND_CAUSE] = cause
