"""Log-structured swap: the ``linux`` run's evictions and faults replayed onto an append-only log.

State is a handful of plain arrays (see :func:`new_log_state` in
:mod:`swaptrace.designs.log`): per page ``flags``/``loc``/``ver``/``pf_seq``/
``pf_ver``, per slot ``slot_page``/``slot_ver``, per segment ``seg_live``/
``seg_state``/``seg_time``, a free-segment stack, the prefetch ring, the output
columns and the register array ``r`` (``R_*``, ``C_*``, ``P_*`` below).

The log: evicted pages are appended to the open segment (the head); every
``P_CHUNK`` appended slots the head's new part is written as one request, so a
segment of ``P_SEG`` slots is written sequentially (one request per segment when
the two are equal). A page's old slot dies when the page is written to in memory
or appended again. When free segments fall below ``P_LOW`` the cleaner picks
victims (greedy: fewest live slots; cost-benefit: largest ``(1 - u) age / (1 + u)``,
Rosenblum & Ousterhout, "The Design and Implementation of a Log-Structured File
System", ACM TOCS 10(1), 1992, section 3.6) and appends their live pages to the
head until ``P_HIGH`` segments are free. A segment whose last live slot dies is
free at once (and, with ``P_DISCARD``, discarded: a zone reset on a zoned device).

Versions (the shadow map): ``ver[page]`` counts the page's writes; a slot keeps
the version it was written with; every swap-in compares the two and counts a
mismatch in ``C_BAD_VERSION`` (0 in a correct run).
"""

from __future__ import annotations

import numpy as np

from swaptrace.kernels.jit import jit

# ---- page flags
IN_MEM = 1  #: the page has a frame (the linux run's residency, as far as this log has seen it)
DIRTY = 2  #: the frame differs from the page's slot (or it has none)

SEG_FREE, SEG_OPEN, SEG_CLOSED = 0, 1, 2
VICTIM_GREEDY, VICTIM_COST_BENEFIT = 0, 1
SWAPIN_PAGE, SWAPIN_SEGMENT = 0, 1
OP_READ, OP_WRITE, OP_DISCARD = 0, 1, 2  # traceio.OP_*
CAUSE_FAULT, CAUSE_READAHEAD, CAUSE_RECLAIM, CAUSE_DISCARD = 0, 1, 2, 3  # traceio.CAUSE_*
ERR_FULL = 1  # no free segment and no victim with a dead slot
ERR_OUT_FULL = 2  # output columns overflowed (the caller's margin is too small: a bug)

# ---- registers
R_HEAD = 0  # open segment, -1 if none
R_FILL = 1  # slots appended to it
R_WRITTEN = 2  # of which already written
R_NFREE = 3
R_OUT_N = 4
R_PF_HEAD = 5  # prefetch ring: oldest entry
R_PF_N = 6
R_SEQ = 7  # prefetch entries so far (their sequence numbers)
R_ERROR = 8
R_NOW = 9  # index of the access being processed (from the run's first)
R_EV = 10  # evictions consumed so far
R_LIVE = 11  # live slots
R_STEP = 12  # step of the access being processed
R_SEEN = 13  # its index within the step
# counters
C_PAGES_IN = 16  # swap-ins (pages a fault needed from swap)
C_PAGES_OUT = 17  # pages appended by evictions
C_CLEAN_DROPS = 18  # evictions of clean pages with a live slot: no write
C_READ_REQ = 19
C_WRITE_REQ = 20
C_READ_PAGES = 21  # pages read (faults, prefetch and cleaning)
C_WRITE_PAGES = 22  # pages written (evictions and cleaning)
C_CLEAN_READ_PAGES = 23
C_CLEAN_WRITE_PAGES = 24  # live pages the cleaner moved
C_CLEANED = 25  # victim segments cleaned
C_PF_ISSUED = 26  # neighbours read with a fault
C_PF_HIT = 27  # faults served by the prefetch buffer
C_PF_WASTED = 28  # prefetched pages dropped unused
C_BUF_HIT = 29  # faults on a page still in the head's unwritten part
C_BAD_VERSION = 30  # swap-ins that returned another version than the last written (the shadow map)
C_ZERO_FILL = 31
C_DISCARDS = 32
C_SLOT_FREES = 33  # slots that died
C_IGNORED_EVICTIONS = 34  # linux evicted a page this log never had in memory (read ahead, never used)
C_FAULT_READS = 35  # read requests of faults
# parameters
P_SEG = 40  # slots per segment
P_STRIDE = 41  # slots between segment starts (>= P_SEG: a zone's size vs its capacity)
P_NSEGS = 42
P_CHUNK = 43  # slots per write request
P_PAGE_BYTES = 44
P_VICTIM = 45
P_SWAPIN = 46
P_PF_CAP = 47
P_LOW = 48
P_HIGH = 49
P_DISCARD = 50
P_OUT_CAP = 51
P_FREE_AT_HALF = 52  # free a swapped-in page's slot when more than half the slots are live (vm_swap_full)
P_PF_WINDOW = 53  # slots of the aligned window a segment swap-in reads (clipped to the segment)
NREGS = 56


@jit
def _emit(r, out_i, out_f, op, slot, npages, cause):
    """One output row at the current access: offset and length from slot units."""
    i = r[R_OUT_N]
    if i >= r[P_OUT_CAP]:
        r[R_ERROR] = ERR_OUT_FULL
        return
    pb = r[P_PAGE_BYTES]
    out_i[0, i] = r[R_STEP]
    out_i[1, i] = op
    out_i[2, i] = slot * pb
    out_i[3, i] = npages * pb
    out_i[4, i] = cause
    out_f[i] = r[R_SEEN]
    r[R_OUT_N] = i + 1
    if op == OP_READ:
        r[C_READ_REQ] += 1
        r[C_READ_PAGES] += npages
    elif op == OP_WRITE:
        r[C_WRITE_REQ] += 1
        r[C_WRITE_PAGES] += npages
    else:
        r[C_DISCARDS] += 1


@jit
def _seg_of(r, slot):
    return slot // r[P_STRIDE]


@jit
def _free_segment(r, seg_state, free_stack, out_i, out_f, s):
    seg_state[s] = SEG_FREE
    free_stack[r[R_NFREE]] = s
    r[R_NFREE] += 1
    if r[P_DISCARD]:
        _emit(r, out_i, out_f, OP_DISCARD, s * r[P_STRIDE], r[P_SEG], CAUSE_DISCARD)


@jit
def _kill_slot(r, slot_page, seg_live, seg_state, free_stack, out_i, out_f, slot):
    """The slot's page has a newer version elsewhere (or none needed): the slot dies."""
    slot_page[slot] = -1
    s = _seg_of(r, slot)
    seg_live[s] -= 1
    r[R_LIVE] -= 1
    r[C_SLOT_FREES] += 1
    if seg_live[s] == 0 and seg_state[s] == SEG_CLOSED:
        _free_segment(r, seg_state, free_stack, out_i, out_f, s)


@jit
def _write_head(r, out_i, out_f, cause):
    """Write the head's appended, unwritten slots as one request."""
    n = r[R_FILL] - r[R_WRITTEN]
    if n > 0:
        _emit(r, out_i, out_f, OP_WRITE, r[R_HEAD] * r[P_STRIDE] + r[R_WRITTEN], n, cause)
        r[R_WRITTEN] = r[R_FILL]


@jit
def _pick_victim(r, seg_live, seg_state, seg_time):
    """The closed segment to clean, -1 if none has a dead slot."""
    best, best_score = -1, -1.0
    seg = r[P_SEG]
    for s in range(r[P_NSEGS]):
        if seg_state[s] != SEG_CLOSED or seg_live[s] >= seg:
            continue
        if r[P_VICTIM] == VICTIM_GREEDY:
            score = float(seg - seg_live[s])
        else:
            u = seg_live[s] / seg
            score = (1.0 - u) * float(r[R_NOW] - seg_time[s] + 1) / (1.0 + u)
        if score > best_score:
            best, best_score = s, score
    return best


@jit
def _append(r, loc, ver, slot_page, slot_ver, seg_live, seg_state, seg_time, free_stack, out_i, out_f, page):
    """Put ``page``'s current version at the head (taking a free segment if none is open)."""
    if r[R_HEAD] < 0:
        if r[R_NFREE] == 0:
            r[R_ERROR] = ERR_FULL
            return
        r[R_NFREE] -= 1
        s = free_stack[r[R_NFREE]]
        seg_state[s] = SEG_OPEN
        r[R_HEAD] = s
        r[R_FILL] = 0
        r[R_WRITTEN] = 0
    s = r[R_HEAD]
    slot = s * r[P_STRIDE] + r[R_FILL]
    old = loc[page]
    if old >= 0:
        _kill_slot(r, slot_page, seg_live, seg_state, free_stack, out_i, out_f, old)
    slot_page[slot] = page
    slot_ver[slot] = ver[page]
    loc[page] = slot
    seg_live[s] += 1
    r[R_LIVE] += 1
    r[R_FILL] += 1
    cause = CAUSE_RECLAIM
    if r[R_FILL] - r[R_WRITTEN] >= r[P_CHUNK]:
        _write_head(r, out_i, out_f, cause)
    if r[R_FILL] == r[P_SEG]:
        _write_head(r, out_i, out_f, cause)
        seg_state[s] = SEG_CLOSED
        seg_time[s] = r[R_NOW]
        r[R_HEAD] = -1
        if seg_live[s] == 0:
            _free_segment(r, seg_state, free_stack, out_i, out_f, s)


@jit
def _clean(r, loc, ver, slot_page, slot_ver, seg_live, seg_state, seg_time, free_stack, out_i, out_f):
    """Segment cleaning: move victims' live pages to the head until ``P_HIGH`` segments are free."""
    while r[R_NFREE] < r[P_HIGH] and r[R_ERROR] == 0:
        v = _pick_victim(r, seg_live, seg_state, seg_time)
        if v < 0:
            return
        r[C_CLEANED] += 1
        base = v * r[P_STRIDE]
        run = -1
        for k in range(r[P_SEG] + 1):  # read the live runs, one request each
            live = k < r[P_SEG] and slot_page[base + k] >= 0
            if live and run < 0:
                run = k
            elif not live and run >= 0:
                _emit(r, out_i, out_f, OP_READ, base + run, k - run, CAUSE_RECLAIM)
                r[C_CLEAN_READ_PAGES] += k - run
                run = -1
        for k in range(r[P_SEG]):
            if seg_state[v] != SEG_CLOSED:  # emptied (and maybe reopened as the head): done
                break
            p = slot_page[base + k]
            if p >= 0:
                if slot_ver[base + k] != ver[p]:
                    r[C_BAD_VERSION] += 1  # a write kills the slot, so a live slot holds the latest version
                r[C_CLEAN_WRITE_PAGES] += 1
                _append(r, loc, ver, slot_page, slot_ver, seg_live, seg_state, seg_time, free_stack, out_i, out_f, p)
                if r[R_ERROR] != 0:
                    return


@jit
def _pf_push(r, pf_ring, pf_seq, pf_ver, ver, q):
    cap = r[P_PF_CAP]
    if cap == 0:
        return
    if r[R_PF_N] == cap:  # drop the oldest entry; unused if its page still points at it
        old = pf_ring[r[R_PF_HEAD]]
        oseq = r[R_SEQ] - cap
        if pf_seq[old] == oseq:
            pf_seq[old] = -1
            r[C_PF_WASTED] += 1
        r[R_PF_HEAD] = (r[R_PF_HEAD] + 1) % cap
        r[R_PF_N] -= 1
    i = (r[R_PF_HEAD] + r[R_PF_N]) % cap
    pf_ring[i] = q
    pf_seq[q] = r[R_SEQ]
    pf_ver[q] = ver[q]
    r[R_SEQ] += 1
    r[R_PF_N] += 1
    r[C_PF_ISSUED] += 1


@jit
def _swap_in(r, flags, loc, ver, pf_seq, pf_ver, pf_ring, slot_page, slot_ver, out_i, out_f, page):
    """A fault on a page whose contents are on the log: prefetch buffer, head buffer, or a read."""
    r[C_PAGES_IN] += 1
    slot = loc[page]
    if pf_seq[page] >= 0:
        r[C_PF_HIT] += 1
        if pf_ver[page] != ver[page]:
            r[C_BAD_VERSION] += 1
        pf_seq[page] = -1
        return
    if slot_ver[slot] != ver[page] or slot_page[slot] != page:
        r[C_BAD_VERSION] += 1
    s = _seg_of(r, slot)
    if s == r[R_HEAD] and slot - s * r[P_STRIDE] >= r[R_WRITTEN]:
        r[C_BUF_HIT] += 1
        return
    r[C_FAULT_READS] += 1
    if r[P_SWAPIN] == SWAPIN_PAGE:
        _emit(r, out_i, out_f, OP_READ, slot, 1, CAUSE_FAULT)
        return
    base = s * r[P_STRIDE]
    end = base + r[P_SEG]
    if s == r[R_HEAD]:
        end = base + r[R_WRITTEN]
    w = r[P_PF_WINDOW]  # the aligned window of the segment that holds the page (Linux's cluster readahead shape)
    base = base + ((slot - base) // w) * w
    end = min(end, base + w)
    lo, hi = slot, slot
    for k in range(base, end):  # the window's neighbours that are on the log only
        q = slot_page[k]
        if q >= 0 and q != page and not (flags[q] & IN_MEM) and pf_seq[q] < 0:
            lo = min(lo, k)
            hi = max(hi, k)
            _pf_push(r, pf_ring, pf_seq, pf_ver, ver, q)
    _emit(r, out_i, out_f, OP_READ, lo, hi - lo + 1, CAUSE_FAULT)


@jit
def _evict(r, flags, loc, ver, slot_page, slot_ver, seg_live, seg_state, seg_time, free_stack, out_i, out_f, page):
    """The linux run evicted ``page``: append it if memory has the only current copy, else drop it."""
    fl = flags[page]
    if not (fl & IN_MEM):
        r[C_IGNORED_EVICTIONS] += 1
        return
    flags[page] = 0
    if (fl & DIRTY) or loc[page] < 0:
        r[C_PAGES_OUT] += 1
        if r[R_HEAD] < 0 and r[R_NFREE] < r[P_LOW]:
            _clean(r, loc, ver, slot_page, slot_ver, seg_live, seg_state, seg_time, free_stack, out_i, out_f)
        _append(r, loc, ver, slot_page, slot_ver, seg_live, seg_state, seg_time, free_stack, out_i, out_f, page)
    else:
        r[C_CLEAN_DROPS] += 1


@jit
def log_run(r, flags, loc, ver, pf_seq, pf_ver, pf_ring, slot_page, slot_ver, seg_live, seg_state, seg_time,
             free_stack, out_i, out_f, step_seen, first_step, pages, writes, steps, base, ev_at, ev_page, start,
             out_limit):
    """Replay accesses ``start..`` of a chunk (the first is access ``base`` of the run) and the evictions
    ``ev_*`` (from ``r[R_EV]`` on, in order) that happen before each; stop early when the output has
    more than ``out_limit`` rows. Returns the index of the first access not processed."""
    n = pages.shape[0]
    ne = ev_at.shape[0]
    i = start
    while i < n and r[R_ERROR] == 0 and r[R_OUT_N] <= out_limit:
        now = base + i
        si = steps[i] - first_step
        r[R_NOW] = now
        r[R_STEP] = steps[i]
        r[R_SEEN] = step_seen[si]
        step_seen[si] += 1
        e = r[R_EV]
        while e < ne and ev_at[e] <= now:
            _evict(r, flags, loc, ver, slot_page, slot_ver, seg_live, seg_state, seg_time, free_stack, out_i, out_f,
                   ev_page[e])
            e += 1
        r[R_EV] = e
        page = pages[i]
        fl = flags[page]
        if not (fl & IN_MEM):
            if loc[page] >= 0:
                _swap_in(r, flags, loc, ver, pf_seq, pf_ver, pf_ring, slot_page, slot_ver, out_i, out_f, page)
                fl = IN_MEM
                if not writes[i] and r[P_FREE_AT_HALF] and 2 * r[R_LIVE] > r[P_NSEGS] * r[P_SEG]:
                    _kill_slot(r, slot_page, seg_live, seg_state, free_stack, out_i, out_f, loc[page])
                    loc[page] = -1
                    fl = IN_MEM | DIRTY
            else:
                r[C_ZERO_FILL] += 1
                fl = IN_MEM | DIRTY
        if writes[i]:
            ver[page] += 1
            if not (fl & DIRTY):
                fl |= DIRTY
                if loc[page] >= 0:  # the slot's copy is stale now
                    _kill_slot(r, slot_page, seg_live, seg_state, free_stack, out_i, out_f, loc[page])
                    loc[page] = -1
        flags[page] = fl
        i += 1
    return i


@jit
def log_finish(r, out_i, out_f):
    """End of the run: write the head's unwritten slots (the pages evicted last)."""
    if r[R_HEAD] >= 0:
        _write_head(r, out_i, out_f, CAUSE_RECLAIM)


def empty_columns(cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Output columns for ``cap`` rows: int64 ``(step, op, offset, length, cause)`` and float64 index in step."""
    return np.zeros((5, cap), np.int64), np.zeros(cap, np.float64)
