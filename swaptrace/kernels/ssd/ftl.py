"""Page-mapped FTL with garbage collection and die/channel timing (numba).

State is a namedtuple of plain arrays (:class:`FTLState`, built by
``swaptrace.ssd.simulate``); every function here sees arrays and scalars only.
Blocks are numbered ``die * blocks_per_die + i``; map unit (slot) ``s`` lives in
block ``s // Np``. Each die runs its own GC over its own blocks and has one
write frontier per stream: 0 = host writes, 1 = GC relocations when they are
separated, 2 = host writes tagged cold (hot/cold separation by the host).

GC decisions (the slow twin in ``tests/naive_ssd.py`` makes the same ones):

* foreground GC runs on die ``d`` when a frontier needs a new block and the
  die has ``<= gc_min`` free blocks, until it has more;
* ``greedy``: fewest valid units; ties go to the block whose valid count
  changed (or which closed) most recently;
* ``fifo``: the block closed longest ago;
* ``cost-benefit``: largest ``(1-u)/(2u) * age`` (age in host unit writes since
  the block closed), ties to the lower block number;
* ``random`` / ``d-choices``: uniform over closed blocks / fewest valid among
  ``d`` uniform samples (splitmix64 random numbers);
* a victim's valid units are rewritten in slot order, then it is erased and
  appended to the die's free queue (blocks are taken from its head).

Timing follows MQSim (Tavakkol et al., FAST 2018): each die and channel has a next-free time. A
read occupies its die for tR and then the channel for the transfer; host writes
go to a write-back buffer and are programmed per die in full program units
(channel transfer, then tPROG); GC occupies the die for its reads, programs and
the erase (copyback) and, without copyback, the channel for two transfers per
moved unit.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from llvmlite import ir
from numba import carray
from numba.core import cgutils, types
from numba.extending import intrinsic

from swaptrace.kernels.jit import jit, jit_inline

# -- integer parameters (ip) -------------------------------------------------------
P_NDIES, P_NCHAN, P_BPD, P_NP, P_USER, P_PU = 0, 1, 2, 3, 4, 5
P_POLICY, P_GC_MIN, P_BG_MIN, P_GC_D, P_SEPARATE, P_COPYBACK = 6, 7, 8, 9, 10, 11
P_QD, P_USE_TS, P_BUF, P_TIMING = 12, 13, 14, 15
N_IP = 16
# -- float parameters (fp), microseconds ---------------------------------------------
F_READ, F_PROG, F_ERASE, F_UNIT_CHAN, F_UNIT_HOST = 0, 1, 2, 3, 4
N_FP = 5
# -- scalars and counters (sc) --------------------------------------------------------
S_RR_DIE, S_RR_COUNT, S_CLOCK, S_BUF_K, S_ERR = 0, 1, 2, 3, 5
C_HOST_W, C_HOST_R, C_GC_UNITS, C_ERASES, C_DISCARD, C_FG_GC, C_BG_GC = 10, 11, 12, 13, 14, 15, 16
N_SC = 20
# -- times (tf) -------------------------------------------------------------------------
T_LINK, T_LAST_ISSUE, T_MAX_DONE = 0, 1, 2
N_TF = 4

GREEDY, FIFO, RANDOM, COST_BENEFIT, D_CHOICES = 0, 1, 2, 3, 4
FREE, OPEN, CLOSED, VICTIM = 0, 1, 2, 3
OP_READ, OP_WRITE, OP_DISCARD = 0, 1, 2
ERR_NONE, ERR_NO_FREE_BLOCK, ERR_NO_PROGRESS = 0, 1, 2

FTLState = namedtuple(
    "FTLState",
    [
        "ip", "fp", "sc", "tf", "rng",
        "l2p", "p2l", "valid", "wp", "bstate", "close_seq",
        "free_q", "free_head", "free_n", "open_blk",
        "bhead", "bnext", "bprev",
        "fifo_q", "fifo_head", "fifo_n",
        "closed", "closed_pos", "closed_n",
        "die_free", "chan_free", "pend_n", "pend_slot", "pend_t", "buf_rel", "buf_die", "qslots",
    ],
)


@intrinsic
def _voidptr(typingctx, address):
    """An integer address as a ``void *`` (for :func:`_raw`)."""
    sig = types.voidptr(address)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return sig, codegen


@intrinsic
def _prefetch_address(typingctx, address):
    """Hint the CPU to fetch the cache line at ``address`` (``llvm.prefetch``, for writing)."""
    sig = types.void(address)

    def codegen(context, builder, signature, args):
        ptr = builder.inttoptr(args[0], ir.PointerType(ir.IntType(8)))
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32])
        # the intrinsic's name carries the pointer type (p0 or p0i8 with older LLVM)
        fn = builder.module.declare_intrinsic("llvm.prefetch", [ptr.type], fnty)
        builder.call(fn, [ptr, ir.Constant(i32, 1), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@jit_inline
def _prefetch(a, i):
    """Prefetch element ``i`` of ``a``: the mapping tables are larger than the caches and
    accessed at random, so fetching a few requests ahead hides most of the memory latency."""
    _prefetch_address(a.ctypes.data + i * a.itemsize)


@jit_inline
def _raw(a):
    """A view of ``a`` without a reference count.

    Numba increments and decrements an array's (atomic) reference count each
    time a helper touches a member of the state tuple; across the branches of
    the FTL that costs microseconds per write. Views made here have no
    meminfo, so those operations become no-ops. Only valid while the caller
    holds the real arrays (the entry kernels below do, for their duration).
    """
    return carray(_voidptr(a.ctypes.data), a.shape, a.dtype)


@jit_inline
def _raw_state(st):
    """The state tuple with every array replaced by its :func:`_raw` view."""
    return FTLState(
        _raw(st.ip), _raw(st.fp), _raw(st.sc), _raw(st.tf), _raw(st.rng),
        _raw(st.l2p), _raw(st.p2l), _raw(st.valid), _raw(st.wp), _raw(st.bstate), _raw(st.close_seq),
        _raw(st.free_q), _raw(st.free_head), _raw(st.free_n), _raw(st.open_blk),
        _raw(st.bhead), _raw(st.bnext), _raw(st.bprev),
        _raw(st.fifo_q), _raw(st.fifo_head), _raw(st.fifo_n),
        _raw(st.closed), _raw(st.closed_pos), _raw(st.closed_n),
        _raw(st.die_free), _raw(st.chan_free), _raw(st.pend_n), _raw(st.pend_slot), _raw(st.pend_t),
        _raw(st.buf_rel), _raw(st.buf_die), _raw(st.qslots),
    )


@jit_inline
def _rand(rng):
    """splitmix64: next 64-bit random number from the state ``rng[0]``."""
    rng[0] += np.uint64(0x9E3779B97F4A7C15)
    z = rng[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@jit_inline
def _rand_below(rng, n):
    """Uniform integer in [0, n) (modulo reduction; bias negligible for small n)."""
    return np.int64(_rand(rng) % np.uint64(n))


@jit_inline
def _bucket_insert(st, d, b, v):
    """Push block b on the greedy list of valid count v (most recent first)."""
    h = st.bhead[d, v]
    st.bnext[b] = h
    st.bprev[b] = -1
    if h >= 0:
        st.bprev[h] = b
    st.bhead[d, v] = b


@jit_inline
def _bucket_remove(st, d, b, v):
    """Unlink block b from the greedy list of valid count v."""
    p = st.bprev[b]
    n = st.bnext[b]
    if p >= 0:
        st.bnext[p] = n
    else:
        st.bhead[d, v] = n
    if n >= 0:
        st.bprev[n] = p


@jit_inline
def _close(st, d, b):
    """A full frontier block joins the GC candidates."""
    st.bstate[b] = CLOSED
    st.close_seq[b] = st.sc[S_CLOCK]
    i = st.closed_n[d]
    st.closed[d, i] = b
    st.closed_pos[b] = i
    st.closed_n[d] = i + 1
    policy = st.ip[P_POLICY]
    if policy == GREEDY:
        _bucket_insert(st, d, b, st.valid[b])
    elif policy == FIFO:
        bpd = st.ip[P_BPD]
        st.fifo_q[d, (st.fifo_head[d] + st.fifo_n[d]) % bpd] = b
        st.fifo_n[d] += 1


@jit_inline
def _unclose(st, d, b):
    """Remove victim b from the GC candidate structures."""
    i = st.closed_pos[b]
    last = st.closed_n[d] - 1
    moved = st.closed[d, last]
    st.closed[d, i] = moved
    st.closed_pos[moved] = i
    st.closed_n[d] = last
    policy = st.ip[P_POLICY]
    if policy == GREEDY:
        _bucket_remove(st, d, b, st.valid[b])
    elif policy == FIFO:
        # the FIFO victim is always the head of the ring
        st.fifo_head[d] = (st.fifo_head[d] + 1) % st.ip[P_BPD]
        st.fifo_n[d] -= 1


@jit_inline
def _invalidate(st, slot):
    """Mark a physical unit dead (overwrite or discard)."""
    np_ = st.ip[P_NP]
    b = slot // np_
    st.p2l[slot] = -1
    v = st.valid[b]
    st.valid[b] = v - 1
    if st.bstate[b] == CLOSED and st.ip[P_POLICY] == GREEDY:
        d = b // st.ip[P_BPD]
        _bucket_remove(st, d, b, v)
        _bucket_insert(st, d, b, v - 1)


@jit_inline
def _take_free(st, d):
    """Pop the head of die d's free queue (-1 if empty)."""
    if st.free_n[d] == 0:
        return -1
    h = st.free_head[d]
    b = st.free_q[d, h]
    st.free_head[d] = (h + 1) % st.ip[P_BPD]
    st.free_n[d] -= 1
    st.bstate[b] = OPEN
    st.wp[b] = 0
    return b


@jit_inline
def _push_free(st, d, b):
    """Append an erased block to die d's free queue."""
    bpd = st.ip[P_BPD]
    st.free_q[d, (st.free_head[d] + st.free_n[d]) % bpd] = b
    st.free_n[d] += 1
    st.bstate[b] = FREE
    st.wp[b] = 0


@jit_inline
def _pick_victim(st, d):
    """GC victim on die d under the configured policy (-1 if none)."""
    policy = st.ip[P_POLICY]
    np_ = st.ip[P_NP]
    if policy == GREEDY:
        for v in range(np_ + 1):
            b = st.bhead[d, v]
            if b >= 0:
                return b
        return -1
    if policy == FIFO:
        if st.fifo_n[d] == 0:
            return -1
        return st.fifo_q[d, st.fifo_head[d]]
    n = st.closed_n[d]
    if n == 0:
        return -1
    if policy == RANDOM:
        return st.closed[d, _rand_below(st.rng, n)]
    if policy == D_CHOICES:
        best = -1
        best_v = np_ + 1
        for _ in range(st.ip[P_GC_D]):
            b = st.closed[d, _rand_below(st.rng, n)]
            if st.valid[b] < best_v:
                best = b
                best_v = st.valid[b]
        return best
    # cost-benefit (Rosenblum & Ousterhout; Kawaguchi et al. for flash)
    best = -1
    best_score = -1.0
    now = st.sc[S_CLOCK]
    for j in range(n):
        b = st.closed[d, j]
        v = st.valid[b]
        if v == 0:
            score = np.inf
        else:
            u = v / np_
            score = (1.0 - u) / (2.0 * u) * (now - st.close_seq[b])
        if score > best_score or (score == best_score and b < best):
            best = b
            best_score = score
    return best


@jit_inline
def _frontier_next(st, d, stream):
    """Next unit of the block open on die d for ``stream``; -1 (the full block closed) if it has none."""
    np_ = st.ip[P_NP]
    b = st.open_blk[d, stream]
    if b >= 0 and st.wp[b] < np_:
        slot = b * np_ + st.wp[b]
        st.wp[b] += 1
        return slot
    if b >= 0:
        _close(st, d, b)
        st.open_blk[d, stream] = -1
    return -1


@jit_inline
def _alloc_nogc(st, d, stream):
    """Next unit on die d's frontier for ``stream``, opening a free block if needed; -1 if none."""
    slot = _frontier_next(st, d, stream)
    if slot >= 0:
        return slot
    np_ = st.ip[P_NP]
    b = _take_free(st, d)
    if b < 0:
        st.sc[S_ERR] = ERR_NO_FREE_BLOCK
        return -1
    st.open_blk[d, stream] = b
    st.wp[b] = 1
    return b * np_


@jit_inline
def _gc_once(st, d, now):
    """Clean one victim block on die d; False (and S_ERR set) if impossible."""
    np_ = st.ip[P_NP]
    b = _pick_victim(st, d)
    # a full victim frees nothing; under greedy that means no block has any dead unit
    if b < 0 or (st.valid[b] >= np_ and st.ip[P_POLICY] == GREEDY):
        st.sc[S_ERR] = ERR_NO_PROGRESS
        return False
    _unclose(st, d, b)
    st.bstate[b] = VICTIM
    stream = 1 if st.ip[P_SEPARATE] else 0
    pu = st.ip[P_PU]
    base = b * np_
    moved = 0
    reads = 0
    last_group = -1
    for i in range(np_):
        if i + 8 < np_:
            ahead = st.p2l[base + i + 8]
            if ahead >= 0:
                _prefetch(st.l2p, ahead)
        lpn = st.p2l[base + i]
        if lpn >= 0:
            ns = _alloc_nogc(st, d, stream)
            if ns < 0:
                return False
            st.p2l[ns] = lpn
            st.l2p[lpn] = ns
            st.valid[ns // np_] += 1
            st.p2l[base + i] = -1
            moved += 1
            group = i // pu
            if group != last_group:
                reads += 1
                last_group = group
    st.valid[b] = 0
    _push_free(st, d, b)
    st.sc[C_GC_UNITS] += moved
    st.sc[C_ERASES] += 1
    if st.ip[P_TIMING]:
        start = max(st.die_free[d], now)
        programs = (moved + pu - 1) // pu
        st.die_free[d] = start + reads * st.fp[F_READ] + programs * st.fp[F_PROG] + st.fp[F_ERASE]
        if not st.ip[P_COPYBACK]:
            c = d % st.ip[P_NCHAN]
            cs = max(st.chan_free[c], start)
            st.chan_free[c] = cs + 2.0 * moved * st.fp[F_UNIT_CHAN]
    return True


@jit_inline
def _alloc(st, d, stream, now):
    """Next unit for a host write on die d; foreground GC first when the die is short of free blocks."""
    slot = _frontier_next(st, d, stream)
    if slot >= 0:
        return slot
    while st.free_n[d] <= st.ip[P_GC_MIN]:
        st.sc[C_FG_GC] += 1
        if not _gc_once(st, d, now):
            return -1
    return _alloc_nogc(st, d, stream)


@jit_inline
def _host_write_unit(st, lpn, now, stream):
    """Map one host unit to the next slot of frontier ``stream`` (0, or 2 = cold); returns its die or -1."""
    old = st.l2p[lpn]
    if old >= 0:
        _invalidate(st, old)
    d = st.sc[S_RR_DIE]
    slot = _alloc(st, d, stream, now)
    if slot < 0:
        return -1
    st.l2p[lpn] = slot
    st.p2l[slot] = lpn
    st.valid[slot // st.ip[P_NP]] += 1
    st.sc[C_HOST_W] += 1
    st.sc[S_CLOCK] += 1
    st.sc[S_RR_COUNT] += 1
    if st.sc[S_RR_COUNT] == st.ip[P_PU]:
        st.sc[S_RR_COUNT] = 0
        st.sc[S_RR_DIE] = (d + 1) % st.ip[P_NDIES]
    return d


@jit_inline
def _discard_unit(st, lpn):
    """TRIM one host unit."""
    old = st.l2p[lpn]
    if old >= 0:
        _invalidate(st, old)
        st.l2p[lpn] = -1
    st.sc[C_DISCARD] += 1


@jit_inline
def _flush_die(st, d):
    """Program die d's pending buffered units: channel transfer, then tPROG."""
    n = st.pend_n[d]
    if n == 0:
        return
    c = d % st.ip[P_NCHAN]
    cs = max(st.chan_free[c], st.pend_t[d])
    ce = cs + n * st.fp[F_UNIT_CHAN]
    st.chan_free[c] = ce
    ps = max(st.die_free[d], ce)
    pe = ps + st.fp[F_PROG]
    st.die_free[d] = pe
    for j in range(n):
        st.buf_rel[st.pend_slot[d, j]] = pe
    st.pend_n[d] = 0
    st.pend_t[d] = 0.0


@jit
def flush_all(state):
    """Program every partly filled unit (end of a run)."""
    st = _raw_state(state)
    for d in range(st.ip[P_NDIES]):
        _flush_die(st, d)


@jit_inline
def _issue_time(st, arrival):
    """In-order issue under the queue-depth limit (and stream timestamps if used).

    ``qslots`` is a binary min-heap of the completion times of the ``QD``
    outstanding requests: a request issues when the earliest of them is done
    (the heap's root), and :func:`_queue_done` puts its own completion time in
    that place. Same issue times as a scan for the minimum, in O(log QD).
    """
    t = st.tf[T_LAST_ISSUE]
    if st.ip[P_USE_TS] and arrival > t:
        t = arrival
    slot = -1
    if st.ip[P_QD] > 0:
        slot = 0
        if st.qslots[0] > t:
            t = st.qslots[0]
    st.tf[T_LAST_ISSUE] = t
    return t, slot


@jit_inline
def _queue_done(st, done):
    """Replace the heap's root (the slot the request took) by its completion time and sift it down."""
    q = st.qslots
    n = st.ip[P_QD]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and q[c + 1] < q[c]:
            c += 1
        if q[c] >= done:
            break
        q[i] = q[c]
        i = c
    q[i] = done


@jit
def _background_gc(st, t):
    """Idle dies below the background threshold collect until busy again or above it."""
    bg = st.ip[P_BG_MIN]
    for d in range(st.ip[P_NDIES]):
        while st.die_free[d] < t and st.free_n[d] < bg:
            st.sc[C_BG_GC] += 1
            if not _gc_once(st, d, st.die_free[d]):
                st.sc[S_ERR] = ERR_NONE  # nothing worth collecting: stop quietly
                break


@jit_inline
def _read_request(st, lpn0, n, t):
    """Time a host read of units [lpn0, lpn0+n); returns its completion time."""
    np_ = st.ip[P_NP]
    bpd = st.ip[P_BPD]
    pu = st.ip[P_PU]
    nd = st.ip[P_NDIES]
    nc = st.ip[P_NCHAN]
    done = t
    group_key = np.int64(-(1 << 62))
    group_die = 0
    group_n = 0
    for k in range(n + 1):
        if k < n:
            lpn = lpn0 + k
            slot = st.l2p[lpn]
            if slot >= 0:
                d = (slot // np_) // bpd
                key = np.int64(slot // pu)
            else:  # never written: served as a read of the die it would stripe to
                d = (lpn // pu) % nd
                key = np.int64(-2 - lpn // pu)
            if key == group_key:
                group_n += 1
                continue
        if group_n > 0:
            c = group_die % nc
            s = max(t, st.die_free[group_die])
            ready = s + st.fp[F_READ]
            cs = max(ready, st.chan_free[c])
            ce = cs + group_n * st.fp[F_UNIT_CHAN]
            st.chan_free[c] = ce
            st.die_free[group_die] = ce
            if ce > done:
                done = ce
        if k < n:
            group_key = key
            group_die = d
            group_n = 1
    unit_host = st.fp[F_UNIT_HOST]
    ls = max(t, st.tf[T_LINK])
    st.tf[T_LINK] = ls + n * unit_host
    return max(done + unit_host, st.tf[T_LINK])


@jit
def run_requests(state, op, lpn, npages, t_us, streams, out_done, out_lat, out_flash, out_erases):
    """Run requests in order; write frontier from ``streams`` (empty: all 0); per-request outputs if
    ``out_done`` is non-empty. Returns an error code."""
    st = _raw_state(state)
    timing = st.ip[P_TIMING] != 0
    record = out_done.shape[0] > 0
    bg = st.ip[P_BG_MIN] > 0
    buf_n = st.ip[P_BUF]
    pu = st.ip[P_PU]
    unit_host = st.fp[F_UNIT_HOST]
    n_req = op.shape[0]
    tagged = streams.shape[0] > 0
    for i in range(n_req):
        _prefetch_ahead(st, lpn, i, n_req)
        o = op[i]
        l0 = np.int64(lpn[i])
        n = np.int64(npages[i])
        t = 0.0
        qslot = -1
        done = 0.0
        if timing:
            t, qslot = _issue_time(st, t_us[i])
            if bg:
                _background_gc(st, t)
            done = t
        if o == OP_WRITE:
            ls = max(t, st.tf[T_LINK])
            if timing:
                st.tf[T_LINK] = ls + n * unit_host
            adm = t
            stream = np.int64(streams[i]) if tagged else np.int64(0)
            for k in range(n):
                d = _host_write_unit(st, l0 + k, t, stream)
                if d < 0:
                    return st.sc[S_ERR]
                if timing:
                    kb = st.sc[S_BUF_K]
                    bs = kb % buf_n
                    st.sc[S_BUF_K] = kb + 1
                    if st.buf_rel[bs] < 0.0:
                        _flush_die(st, st.buf_die[bs])
                    a = ls + (k + 1) * unit_host
                    if st.buf_rel[bs] > a:
                        a = st.buf_rel[bs]
                    if adm > a:
                        a = adm
                    adm = a
                    st.buf_rel[bs] = -1.0
                    st.buf_die[bs] = d
                    st.pend_slot[d, st.pend_n[d]] = bs
                    st.pend_n[d] += 1
                    if a > st.pend_t[d]:
                        st.pend_t[d] = a
                    if st.pend_n[d] == pu:
                        _flush_die(st, d)
            done = adm
        elif o == OP_READ:
            st.sc[C_HOST_R] += n
            if timing:
                done = _read_request(st, l0, n, t)
        else:
            for k in range(n):
                _discard_unit(st, l0 + k)
        if timing:
            if qslot >= 0:
                _queue_done(st, done)
            if done > st.tf[T_MAX_DONE]:
                st.tf[T_MAX_DONE] = done
        if record:
            out_done[i] = done
            out_lat[i] = done - t
            out_flash[i] = st.sc[C_HOST_W] + st.sc[C_GC_UNITS]
            out_erases[i] = st.sc[C_ERASES]
    return ERR_NONE


@jit_inline
def _prefetch_ahead(st, lpns, i, n):
    """Two-stage prefetch: the mapping entry 16 requests ahead, the physical entry 8 ahead."""
    if i + 16 < n:
        _prefetch(st.l2p, lpns[i + 16])
    if i + 8 < n:
        old = st.l2p[lpns[i + 8]]
        if old >= 0:
            _prefetch(st.p2l, old)
