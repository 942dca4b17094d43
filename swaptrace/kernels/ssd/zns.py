"""A zoned (ZNS) SSD: zones with write pointers, no device garbage collection, a die/channel timing model.

Zone ``z`` covers map units ``[z * zone, z * zone + cap)`` (``zone`` = the zone
size, ``cap`` = its capacity; NVMe Zoned Namespace Command Set 1.1, sections 2.1
and 3.4). A write must start at its zone's write pointer and stay within the
capacity (a zone append places it there); a read must lie below the pointer; a
discard of a whole zone is a zone reset (the pointer back to the start and the
zone's flash erased). A zone that is written but not full is open; at most
``max_open`` may be open. Violations stop the run with an error code.

Timing: a zone's program units are striped over the dies in turn, starting at a
die that depends on the zone. A write's units each cross their die's channel and
are programmed (``program_us``); a read's units are read (``read_us``) and then
cross the channel; a reset erases the zone's share of blocks on each die
(``erase_us`` each, in parallel); every request also crosses the host link. Up to
``iodepth`` requests are outstanding: request ``i`` starts when request
``i - iodepth`` completes (a closed loop, as the FTL model's replay).
"""

from __future__ import annotations

import numpy as np

from swaptrace.kernels.jit import jit, jit_inline

OP_READ, OP_WRITE, OP_DISCARD = 0, 1, 2
ERR_NOT_AT_WP = 1  # a write not at its zone's write pointer
ERR_PAST_CAP = 2  # a write past the zone capacity
ERR_READ_UNWRITTEN = 3  # a read at or past the write pointer
ERR_OPEN_LIMIT = 4  # a write would open one zone too many
ERR_BAD_RESET = 5  # a discard that is not exactly one whole zone
ERR_OUTSIDE = 6  # a request outside the device

# registers (int64) ...
Z_ZONE = 0  # map units per zone
Z_CAP = 1  # map units of capacity per zone
Z_NZONES = 2
Z_PROG = 3  # map units per program unit (planes x flash page)
Z_DIES = 4
Z_DIES_PER_CH = 5
Z_BLOCK_PROGS = 6  # program units per (multi-plane) erase block
Z_IODEPTH = 7
Z_OPEN = 8  # zones open now
Z_MAX_OPEN = 9
Z_ERROR = 10
Z_ERR_REQ = 11  # index of the request that failed
Z_HOST_W = 12  # host map units written
Z_HOST_R = 13
Z_RESETS = 14
Z_ERASES = 15  # blocks erased
Z_REQS = 16
Z_MAX_OPEN_SEEN = 17
NZREG = 24
# ... and times (float64)
T_READ = 0
T_PROG = 1
T_ERASE = 2
T_XFER_US_PER_UNIT = 3  # channel transfer time of one map unit
T_HOST_US_PER_UNIT = 4
T_HOST_FREE = 5
T_END = 6  # the latest completion so far
NTREG = 8


@jit_inline
def _stripe(off, nu, prog, zone, p, dies, dpc):
    """``(die, channel, first unit, end unit)`` of program unit ``p`` of a request of ``nu`` units at ``off``
    in ``zone``: a zone's program units are striped over the dies, starting at die ``zone``."""
    d = (zone + p) % dies
    return d, d // dpc, max(off, p * prog), min(off + nu, (p + 1) * prog)


@jit
def zns_run(z, t, wp, die_free, ch_free, done_ring, op, unit, nunits, res_done):
    """Replay requests (``unit``/``nunits`` in map units); write each one's completion time into ``res_done``.

    Returns the number of requests processed (fewer on an error, ``z[Z_ERROR]`` set).
    """
    zone, cap, nz = z[Z_ZONE], z[Z_CAP], z[Z_NZONES]
    prog, dies, dpc = z[Z_PROG], z[Z_DIES], z[Z_DIES_PER_CH]
    qd = z[Z_IODEPTH]
    n = op.shape[0]
    for i in range(n):
        k = z[Z_REQS]
        start = 0.0
        if k >= qd:
            start = done_ring[k % qd]
        u0, nu, o = unit[i], nunits[i], op[i]
        zi = u0 // zone
        off = u0 - zi * zone
        if u0 < 0 or nu <= 0 or zi >= nz:
            z[Z_ERROR], z[Z_ERR_REQ] = ERR_OUTSIDE, i
            return i
        # the host link first (commands and data share it)
        h = max(t[T_HOST_FREE], start) + nu * t[T_HOST_US_PER_UNIT]
        t[T_HOST_FREE] = h
        end = h
        if o == OP_DISCARD:
            if off != 0 or nu != zone:
                z[Z_ERROR], z[Z_ERR_REQ] = ERR_BAD_RESET, i
                return i
            w = wp[zi]
            if w > 0:
                if w < cap:
                    z[Z_OPEN] -= 1
                progs = -(-w // prog)  # program units written: their blocks are erased
                progs_per_die = -(-progs // dies)
                per_die = -(-progs_per_die // z[Z_BLOCK_PROGS])  # blocks each die erases
                used = min(progs, dies)
                first = zi % dies
                for d0 in range(used):
                    d = (first + d0) % dies
                    e = max(die_free[d], h) + per_die * t[T_ERASE]
                    die_free[d] = e
                    end = max(end, e)
                z[Z_ERASES] += per_die * used
            wp[zi] = 0
            z[Z_RESETS] += 1
        elif o == OP_WRITE:
            if off != wp[zi]:
                z[Z_ERROR], z[Z_ERR_REQ] = ERR_NOT_AT_WP, i
                return i
            if off + nu > cap:
                z[Z_ERROR], z[Z_ERR_REQ] = ERR_PAST_CAP, i
                return i
            if off == 0:
                if z[Z_OPEN] >= z[Z_MAX_OPEN]:
                    z[Z_ERROR], z[Z_ERR_REQ] = ERR_OPEN_LIMIT, i
                    return i
                z[Z_OPEN] += 1
                z[Z_MAX_OPEN_SEEN] = max(z[Z_MAX_OPEN_SEEN], z[Z_OPEN])
            for p in range(off // prog, (off + nu - 1) // prog + 1):
                d, c, lo, hi = _stripe(off, nu, prog, zi, p, dies, dpc)
                x = max(ch_free[c], h) + (hi - lo) * t[T_XFER_US_PER_UNIT]
                ch_free[c] = x
                e = max(die_free[d], x) + t[T_PROG]
                die_free[d] = e
                end = max(end, e)
            wp[zi] = off + nu
            if wp[zi] == cap:
                z[Z_OPEN] -= 1
            z[Z_HOST_W] += nu
        else:
            if off + nu > wp[zi]:
                z[Z_ERROR], z[Z_ERR_REQ] = ERR_READ_UNWRITTEN, i
                return i
            for p in range(off // prog, (off + nu - 1) // prog + 1):
                d, c, lo, hi = _stripe(off, nu, prog, zi, p, dies, dpc)
                r = max(die_free[d], h) + t[T_READ]
                die_free[d] = r
                x = max(ch_free[c], r) + (hi - lo) * t[T_XFER_US_PER_UNIT]
                ch_free[c] = x
                end = max(end, x)
            z[Z_HOST_R] += nu
        res_done[i] = end
        done_ring[k % qd] = end
        t[T_END] = max(t[T_END], end)
        z[Z_REQS] = k + 1
    return n


def new_zns_arrays(nzones: int, dies: int, channels: int, iodepth: int):
    """``(z, t, wp, die_free, ch_free, done_ring)`` for a fresh device (every zone empty)."""
    return (np.zeros(NZREG, np.int64), np.zeros(NTREG, np.float64), np.zeros(nzones, np.int64),
            np.zeros(dies, np.float64), np.zeros(channels, np.float64), np.zeros(max(iodepth, 1), np.float64))
