"""Generator kernels: draw a batch of steps' embedding indices, then emit page accesses.

``draw_steps`` fills, for every (step, table) of a batch of steps, each sample's
bag size, the row ids of all lookups (table-major, bag order; bounded-Zipf or
uniform ranks; repeats within a bag dropped for ``unique_in_bag`` tables) and
the sorted unique rows; blocks of :data:`BLOCK` lookups have their own random
streams and are independent, so it runs them with ``prange``, each writing
its own slice.
``emit_accesses`` turns them into page accesses in program order; it is resumable:
it stops when the output buffer is full and records where in ``cursor``.
The pure-Python twin is ``tests/naive_generate.py``.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from swaptrace.kernels.generate.zipf import _stream, _uniform, _zipf_draw
from swaptrace.kernels.jit import jit, jit_parallel

#: lookups per random stream: (step, table) index lists are drawn in blocks of this many lookups,
#: each from its own stream, so one big table's draws spread over all cores. Part of the trace
#: definition: changing it changes every trace.
BLOCK = 4096
LANE_BAGS = 0  # stream lane of a (step, table)'s bag sizes; block b draws ranks on lane 1 + 2b, reuse on 2 + 2b

PHASE_FORWARD, PHASE_MLP_READ, PHASE_SCRATCH, PHASE_BACKWARD, PHASE_MLP_WRITE, PHASE_MLP_STATE, PHASE_DONE = range(7)


@jit
def _bag_sizes(seed, step, t, batch, bag_vals, bag_cdf, bag_lo, bag_hi, pool_uniform, sizes):
    """Bag sizes of one (step, table) into ``sizes`` (one per sample); returns their sum.

    A fixed size, a size drawn per sample from the table's distribution, or
    (``pool_uniform``) a size uniform in ``1 .. bag_vals[bag_lo]``; draws come
    from the (step, table)'s lane :data:`LANE_BAGS`.
    """
    if bag_hi - bag_lo == 1 and not pool_uniform:
        for b in range(batch):
            sizes[b] = bag_vals[bag_lo]
        return batch * bag_vals[bag_lo]
    state = _stream(np.uint64(seed), np.uint64(step), np.uint64(t), np.uint64(LANE_BAGS))
    total = 0
    for b in range(batch):
        u, state = _uniform(state)
        if pool_uniform:
            size = 1 + np.int64(u * bag_vals[bag_lo])
        else:
            j = bag_lo
            while j < bag_hi - 1 and u >= bag_cdf[j]:
                j += 1
            size = bag_vals[j]
        sizes[b] = size
        total += size
    return total


@jit
def _unique_bags(vals, sizes):
    """Sort each bag of ``vals`` (bag b holds ``sizes[b]`` values, back to back) and drop repeats, in place.

    The bags are compacted to the front of ``vals`` and ``sizes`` updated;
    returns the values kept.
    """
    read = 0
    write = 0
    for b in range(sizes.shape[0]):
        m = sizes[b]
        bag = vals[read:read + m]
        if m <= 32:  # insertion sort: no allocation for the small bags of most models
            for i in range(1, m):
                v = bag[i]
                j = i - 1
                while j >= 0 and bag[j] > v:
                    bag[j + 1] = bag[j]
                    j -= 1
                bag[j + 1] = v
        else:
            bag.sort()
        kept = 0
        for i in range(m):
            if i == 0 or bag[i] != bag[i - 1]:
                vals[write + kept] = bag[i]  # write + kept <= read + i: never overwrites an unread value
                kept += 1
        sizes[b] = kept
        read += m
        write += kept
    return write


@jit
def _unique_sorted(src, dst, n_rows):
    """Sorted distinct values of ``src`` (all in [0, n_rows)) into ``dst``; returns how many."""
    m = src.shape[0]
    if m == 0:
        return 0
    if n_rows <= 256 * m:
        # a bitmap is O(m + n_rows / 64) and beats sorting even for 40M-row tables
        words = np.zeros((n_rows + 63) >> 6, dtype=np.uint64)
        one = np.uint64(1)
        for i in range(m):
            v = src[i]
            words[v >> 6] |= one << np.uint64(v & 63)
        c = 0
        for w in range(words.shape[0]):
            x = words[w]
            while x:
                low = x & (~x + one)  # lowest set bit
                dst[c] = (w << 6) + _bit_index(low)
                c += 1
                x ^= low
        return c
    tmp = np.sort(src)
    c = 0
    for i in range(m):
        if i == 0 or tmp[i] != tmp[i - 1]:
            dst[c] = tmp[i]
            c += 1
    return c


@jit
def _bit_index(x):
    """Index of the single set bit of x (a power of two): a binary search over halves of the word."""
    i = 0
    shift = 32
    while shift > 0:
        if x >= np.uint64(1) << np.uint64(shift):
            x >>= np.uint64(shift)
            i += shift
        shift >>= 1
    return i


@jit_parallel
def draw_steps(seed, step0, nsteps, batch, n_rows, zs, zh_x1, zh_n, zbig_s, sa, sb, scatter, dist_uniform,
          bag_vals, bag_cdf, bag_off, pool_uniform, bag_unique, tbl_off, stride, reuse, prev_fresh, prev_drawn,
          have_prev, fresh_only, fresh, idx, uniq, drawn, lens, ulens, bag_lens):
    """Indices of steps [step0, step0 + nsteps) for every table (see module docstring).

    ``fresh``/``idx``/``uniq`` hold slot ``si * stride + tbl_off[t]`` per (step, table),
    ``bag_lens`` slot ``(si * n_tables + t) * batch`` (each sample's bag size).
    ``drawn`` gets the lookups drawn, ``lens`` those kept after ``bag_unique``
    tables drop repeats within a bag. With ``reuse > 0``, ``idx`` differs from
    ``fresh``: position i of a step takes the previous step's fresh index at i
    with probability ``reuse``. ``fresh_only`` stops after the fresh draws.
    """
    n_tables = n_rows.shape[0]
    units = nsteps * n_tables
    for u in prange(units):
        t = u % n_tables
        drawn[u] = _bag_sizes(seed, step0 + u // n_tables, t, batch, bag_vals, bag_cdf, bag_off[t],
                              bag_off[t + 1], pool_uniform[t], bag_lens[u * batch:(u + 1) * batch])
    first_block = np.zeros(units + 1, dtype=np.int64)
    for u in range(units):
        first_block[u + 1] = first_block[u] + (drawn[u] + BLOCK - 1) // BLOCK
    n_blocks = first_block[units]
    block_unit = np.empty(n_blocks, dtype=np.int64)
    for u in range(units):
        for j in range(first_block[u], first_block[u + 1]):
            block_unit[j] = u
    for j in prange(n_blocks):
        u = block_unit[j]
        si = u // n_tables
        t = u % n_tables
        b = j - first_block[u]
        base = si * stride + tbl_off[t]
        lo = b * BLOCK
        hi = min(drawn[u], lo + BLOCK)
        n = n_rows[t]
        state = _stream(np.uint64(seed), np.uint64(step0 + si), np.uint64(t), np.uint64(1 + 2 * b))
        for i in range(lo, hi):
            if dist_uniform[t]:
                x, state = _uniform(state)
                k = 1 + np.int64(x * n)  # x < 1, so k <= n
            else:
                k, state = _zipf_draw(state, n, zs[t], zh_x1[t], zh_n[t], zbig_s[t])
            if scatter:
                fresh[base + i] = (sa[t] * (k - 1) + sb[t]) % n
            else:
                fresh[base + i] = k - 1
    if fresh_only:
        return
    if reuse > 0.0:
        _mix_reuse(seed, step0, n_tables, first_block, block_unit, tbl_off, stride, reuse, prev_fresh, prev_drawn,
                   have_prev, fresh, idx, drawn)
    for u in prange(units):
        t = u % n_tables
        lo = (u // n_tables) * stride + tbl_off[t]
        if bag_unique[t]:
            lens[u] = _unique_bags(idx[lo:lo + drawn[u]], bag_lens[u * batch:(u + 1) * batch])
        else:
            lens[u] = drawn[u]
        ulens[u] = _unique_sorted(idx[lo:lo + lens[u]], uniq[lo:lo + lens[u]], n_rows[t])


@jit_parallel
def _mix_reuse(seed, step0, n_tables, first_block, block_unit, tbl_off, stride, reuse, prev_fresh, prev_drawn,
               have_prev, fresh, idx, drawn):
    """``idx`` from ``fresh``: each position takes the previous step's fresh index with probability ``reuse``."""
    for j in prange(block_unit.shape[0]):
        u = block_unit[j]
        si = u // n_tables
        t = u % n_tables
        b = j - first_block[u]
        step = step0 + si
        base = si * stride + tbl_off[t]
        if si > 0:
            plen = drawn[u - n_tables]
            pbase = (si - 1) * stride + tbl_off[t]
            pvalid = True
            psrc = fresh
        else:
            plen = prev_drawn[t]
            pbase = tbl_off[t]
            pvalid = have_prev
            psrc = prev_fresh
        if step == 0:
            pvalid = False
        state = _stream(np.uint64(seed), np.uint64(step), np.uint64(t), np.uint64(2 + 2 * b))
        for i in range(b * BLOCK, min(drawn[u], (b + 1) * BLOCK)):
            x, state = _uniform(state)
            if pvalid and x < reuse and i < plen:
                idx[base + i] = psrc[pbase + i]
            else:
                idx[base + i] = fresh[base + i]


@jit(inline="always")  # a call per access with five array arguments costs more than the access
def _put(n, step, page, w, region, dedup, stamp, seen, out_step, out_page, out_write, out_region):
    """Append one access (unless ``dedup`` finds it done this step); returns the new count."""
    if dedup:
        if stamp[w, page] == np.uint32(step + 1):
            return n
        stamp[w, page] = np.uint32(step + 1)
    out_step[n] = step
    out_page[n] = page
    out_write[n] = w == 1
    out_region[n] = region
    return n + 1


@jit
def emit_accesses(cursor, step0, nsteps, idx, uniq, lens, ulens, tbl_off, stride, shift,
          t_first_byte, t_row_bytes, t_region, s_first_byte, s_row_bytes, s_array_bytes, s_region, s_arrays,
          mlp_first, mlp_pages, mlp_region, mst_first, mst_pages, mst_region, scr_first, scr_pages, scr_region,
          item_max, dedup, stamp, track, seen, start, out_step, out_page, out_write, out_region):
    """Page accesses of the drawn steps into the output arrays from row ``start`` on.

    ``cursor`` = [step index in batch, phase, table, position]; updated in place.
    Returns the row after the last one written; the batch is finished when
    ``cursor[0] == nsteps``.
    """
    cap = out_page.shape[0]
    n_tables = t_region.shape[0]
    si = cursor[0]
    phase = cursor[1]
    t = cursor[2]
    pos = cursor[3]
    n = start
    while si < nsteps:
        step = step0 + si
        base = si * stride
        if phase == PHASE_FORWARD:
            while t < n_tables:
                length = lens[si * n_tables + t]
                fb = t_first_byte[t]
                rb = t_row_bytes[t]
                reg = t_region[t]
                lo = base + tbl_off[t]
                while pos < length:
                    if n + item_max > cap:
                        cursor[0], cursor[1], cursor[2], cursor[3] = si, phase, t, pos
                        return n
                    off = fb + idx[lo + pos] * rb
                    for p in range(off >> shift, ((off + rb - 1) >> shift) + 1):
                        n = _put(n, step, p, 0, reg, dedup, stamp, seen, out_step, out_page, out_write, out_region)
                    pos += 1
                t += 1
                pos = 0
            phase = PHASE_MLP_READ
            t = 0
            pos = 0
        if phase == PHASE_MLP_READ or phase == PHASE_SCRATCH:
            while phase == PHASE_MLP_READ or phase == PHASE_SCRATCH:
                if phase == PHASE_MLP_READ:
                    first, pages, reg, w = mlp_first, mlp_pages, mlp_region, 0
                else:
                    first, pages, reg, w = scr_first, scr_pages, scr_region, 1
                while pos < pages:
                    if n + item_max > cap:
                        cursor[0], cursor[1], cursor[2], cursor[3] = si, phase, t, pos
                        return n
                    if track:
                        seen[first + pos] = 1
                    n = _put(n, step, first + pos, w, reg, dedup, stamp, seen, out_step, out_page, out_write, out_region)
                    pos += 1
                phase += 1
                pos = 0
        if phase == PHASE_BACKWARD:
            while t < n_tables:
                ulen = ulens[si * n_tables + t]
                fb = t_first_byte[t]
                rb = t_row_bytes[t]
                reg = t_region[t]
                sfb = s_first_byte[t]
                srb = s_row_bytes[t]
                sab = s_array_bytes[t]
                sreg = s_region[t]
                lo = base + tbl_off[t]
                while pos < ulen:
                    if n + item_max > cap:
                        cursor[0], cursor[1], cursor[2], cursor[3] = si, phase, t, pos
                        return n
                    row = uniq[lo + pos]
                    for c in range(s_arrays):
                        off = sfb + c * sab + row * srb
                        p0 = off >> shift
                        p1 = (off + srb - 1) >> shift
                        if track:
                            for p in range(p0, p1 + 1):
                                seen[p] = 1
                        for w in range(2):
                            for p in range(p0, p1 + 1):
                                n = _put(n, step, p, w, sreg, dedup, stamp, seen, out_step, out_page, out_write, out_region)
                    off = fb + row * rb
                    p0 = off >> shift
                    p1 = (off + rb - 1) >> shift
                    for p in range(p0, p1 + 1):
                        if track:
                            seen[p] = 1  # every forward row is updated here: forward needs no marking
                    for w in range(2):
                        for p in range(p0, p1 + 1):
                            n = _put(n, step, p, w, reg, dedup, stamp, seen, out_step, out_page, out_write, out_region)
                    pos += 1
                t += 1
                pos = 0
            phase = PHASE_MLP_WRITE
            t = 0
            pos = 0
        if phase == PHASE_MLP_WRITE or phase == PHASE_MLP_STATE:
            while phase == PHASE_MLP_WRITE or phase == PHASE_MLP_STATE:
                if phase == PHASE_MLP_WRITE:
                    first, pages, reg = mlp_first, mlp_pages, mlp_region
                else:
                    first, pages, reg = mst_first, mst_pages, mst_region
                while pos < pages:
                    if n + item_max > cap:
                        cursor[0], cursor[1], cursor[2], cursor[3] = si, phase, t, pos
                        return n
                    if track:
                        seen[first + pos] = 1
                    n = _put(n, step, first + pos, 1, reg, dedup, stamp, seen, out_step, out_page, out_write, out_region)
                    pos += 1
                phase += 1
                pos = 0
        si += 1
        phase = PHASE_FORWARD
        t = 0
        pos = 0
    cursor[0], cursor[1], cursor[2], cursor[3] = si, phase, t, pos
    return n


# -- parallel emission (no de-duplication): the batch cut into segments in program order --------

SEG_FORWARD, SEG_PAGES, SEG_BACKWARD = 0, 1, 2


@jit
def plan_segments(nsteps, n_tables, lens, ulens, seg_items, mlp_pages, mst_pages, scr_pages, fill, segs):
    """Segments of a batch in program order, rows (step index, kind, code, lo, hi) of ``segs``.

    Returns how many; writes them only if ``fill``. The code is the table for
    ``SEG_FORWARD``/``SEG_BACKWARD``, and for ``SEG_PAGES`` 0 = MLP read,
    1 = scratch write, 2 = MLP write, 3 = MLP-state write.
    """
    c = 0
    for si in range(nsteps):
        for part in range(6):
            if part == 0 or part == 3:
                kind = SEG_FORWARD if part == 0 else SEG_BACKWARD
                for t in range(n_tables):
                    total = lens[si * n_tables + t] if part == 0 else ulens[si * n_tables + t]
                    for lo in range(0, total, seg_items):
                        if fill:
                            segs[c, 0], segs[c, 1], segs[c, 2] = si, kind, t
                            segs[c, 3], segs[c, 4] = lo, min(total, lo + seg_items)
                        c += 1
            else:
                code = 0 if part == 1 else (1 if part == 2 else (2 if part == 4 else 3))
                total = mlp_pages if code == 0 or code == 2 else (scr_pages if code == 1 else mst_pages)
                for lo in range(0, total, seg_items):
                    if fill:
                        segs[c, 0], segs[c, 1], segs[c, 2] = si, SEG_PAGES, code
                        segs[c, 3], segs[c, 4] = lo, min(total, lo + seg_items)
                    c += 1
    return c


@jit
def _row_pages(first_byte, nbytes, shift):
    return ((first_byte + nbytes - 1) >> shift) - (first_byte >> shift) + 1


@jit_parallel
def count_segments(segs, idx, uniq, tbl_off, stride, shift, t_first_byte, t_row_bytes, s_first_byte,
                    s_row_bytes, s_array_bytes, s_arrays, counts):
    """Rows each segment emits, into ``counts``."""
    for j in prange(segs.shape[0]):
        si, kind, t, lo, hi = segs[j, 0], segs[j, 1], segs[j, 2], segs[j, 3], segs[j, 4]
        base = si * stride + tbl_off[t]
        rb = t_row_bytes[t]
        fb = t_first_byte[t]
        c = 0
        if kind == SEG_PAGES:
            c = hi - lo
        elif kind == SEG_FORWARD:
            for i in range(lo, hi):
                c += _row_pages(fb + idx[base + i] * rb, rb, shift)
        else:
            srb = s_row_bytes[t]
            for i in range(lo, hi):
                row = uniq[base + i]
                c += 2 * _row_pages(fb + row * rb, rb, shift)
                for a in range(s_arrays):
                    c += 2 * _row_pages(s_first_byte[t] + a * s_array_bytes[t] + row * srb, srb, shift)
        counts[j] = c


@jit
def _emit_rw(off, nbytes, shift, step, region, track, seen, out_step, out_page, out_write, out_region, n):
    """The pages of bytes ``[off, off + nbytes)`` read, then written (an optimizer's read-modify-write), as rows
    from ``n`` on; marks them in ``seen`` when ``track``. Returns the next free row."""
    for w in range(2):
        for p in range(off >> shift, ((off + nbytes - 1) >> shift) + 1):
            if track:
                seen[p] = 1
            out_step[n] = step
            out_page[n] = p
            out_write[n] = w == 1
            out_region[n] = region
            n += 1
    return n


@jit_parallel
def emit_segments(segs, first, last, offsets, start, n_chunks, step0, idx, uniq, tbl_off, stride, shift,
                   t_first_byte, t_row_bytes, t_region, s_first_byte, s_row_bytes, s_array_bytes, s_region, s_arrays,
                   mlp_first, mlp_region, mst_first, mst_region, scr_first, scr_region, track, seen,
                   out_step, out_page, out_write, out_region):
    """Emit segments [first, last) in parallel; segment j starts at row ``start + offsets[j] - offsets[first]``.

    The segments are split into ``n_chunks`` runs of about equal output, one per parallel iteration.
    """
    total = offsets[last] - offsets[first]
    for ch in prange(n_chunks):
        # segments whose first row falls in this chunk's share of the output
        target_lo = offsets[first] + total * ch // n_chunks
        target_hi = offsets[first] + total * (ch + 1) // n_chunks
        j0 = first + np.searchsorted(offsets[first:last], target_lo)
        j1 = first + np.searchsorted(offsets[first:last], target_hi)
        if ch == n_chunks - 1:
            j1 = last
        for j in range(j0, j1):
            si, kind, t, lo, hi = segs[j, 0], segs[j, 1], segs[j, 2], segs[j, 3], segs[j, 4]
            step = step0 + si
            n = start + offsets[j] - offsets[first]
            if kind == SEG_PAGES:
                if t == 0:
                    pfirst, reg, w = mlp_first, mlp_region, False
                elif t == 1:
                    pfirst, reg, w = scr_first, scr_region, True
                elif t == 2:
                    pfirst, reg, w = mlp_first, mlp_region, True
                else:
                    pfirst, reg, w = mst_first, mst_region, True
                for p in range(pfirst + lo, pfirst + hi):
                    if track:
                        seen[p] = 1
                    out_step[n] = step
                    out_page[n] = p
                    out_write[n] = w
                    out_region[n] = reg
                    n += 1
                continue
            base = si * stride + tbl_off[t]
            rb = t_row_bytes[t]
            fb = t_first_byte[t]
            reg = t_region[t]
            if kind == SEG_FORWARD:
                for i in range(lo, hi):
                    off = fb + idx[base + i] * rb
                    for p in range(off >> shift, ((off + rb - 1) >> shift) + 1):
                        out_step[n] = step
                        out_page[n] = p
                        out_write[n] = False
                        out_region[n] = reg
                        n += 1
                continue
            srb = s_row_bytes[t]
            sreg = s_region[t]
            for i in range(lo, hi):
                row = uniq[base + i]
                for a in range(s_arrays):
                    off = s_first_byte[t] + a * s_array_bytes[t] + row * srb
                    n = _emit_rw(off, srb, shift, step, sreg, track, seen, out_step, out_page, out_write,
                                 out_region, n)
                n = _emit_rw(fb + row * rb, rb, shift, step, reg, track, seen, out_step, out_page, out_write,
                             out_region, n)


@jit
def tally_pages(write, region, region_counts):
    """Add each row's region to ``region_counts`` and return how many rows are writes (one pass)."""
    writes = 0
    for i in range(write.shape[0]):
        writes += write[i]
        region_counts[region[i]] += 1
    return writes
