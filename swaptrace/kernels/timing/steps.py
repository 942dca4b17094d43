"""Step-time kernel of the time model (:mod:`swaptrace.timing.model`): one pass over a swap stream's requests."""

from __future__ import annotations

import numpy as np

from swaptrace.kernels.jit import jit

#: columns of the per-step output ``out[s, k]``
OUT_STEP, OUT_COMPUTE, OUT_WAIT, OUT_QUEUE, OUT_FAULT_CPU, OUT_RECLAIM_CPU, OUT_WAITS = 0, 1, 2, 3, 4, 5, 6
OUT_COLUMNS = 7


@jit
def _lat(sizes, depths, table, nbytes, depth):
    """Mean latency (us) of a request of ``nbytes`` at queue depth ``depth`` from a (size x depth) table.

    Log-linear in size between table sizes, proportional to size above the largest, flat below the smallest;
    linear in depth between table depths, proportional to depth above the deepest (the device is saturated).
    """
    ns, nd = sizes.shape[0], depths.shape[0]
    x = float(nbytes)
    col = np.empty(ns)
    d = float(depth)
    for i in range(ns):
        if d <= depths[0]:
            col[i] = table[i, 0]
        elif d >= depths[nd - 1]:
            col[i] = table[i, nd - 1] * d / depths[nd - 1]
        else:
            j = 0
            while depths[j + 1] < d:
                j += 1
            w = (d - depths[j]) / (depths[j + 1] - depths[j])
            col[i] = table[i, j] * (1.0 - w) + table[i, j + 1] * w
    if x <= sizes[0]:
        return col[0]
    if x >= sizes[ns - 1]:
        return col[ns - 1] * x / sizes[ns - 1]
    i = 0
    while sizes[i + 1] < x:
        i += 1
    w = (np.log(x) - np.log(sizes[i])) / (np.log(sizes[i + 1]) - np.log(sizes[i]))
    return col[i] * (1.0 - w) + col[i + 1] * w


@jit
def _serve_burst(lo, hi, lane, issue, s, threads, op, nbytes, waits, sizes, depths, read_lat, write_lat,
                 fault_cpu_us, reclaim_cpu_us_page, write_cpu_us_page, page_bytes, dev, stall, out):
    """Requests ``lo:hi`` (one burst) of thread ``lane``, issued at ``issue``: adds to the thread's stall and
    the step's terms in ``out``; returns when the device is free again."""
    dmax = depths[depths.shape[0] - 1]
    k = hi - lo
    if op[lo] == 1:  # writes: async, they only occupy the device; reclaim pays CPU to start them
        q = k if k < dmax else dmax
        for r in range(lo, hi):
            dev = max(dev, issue) + _lat(sizes, depths, write_lat, nbytes[r], q) / q
            cpu = write_cpu_us_page * (nbytes[r] / page_bytes)
            stall[lane] += cpu
            out[s, OUT_RECLAIM_CPU] += cpu
        return dev
    # reads of one fault: the thread waits for those it needs, queued behind the device's backlog
    q = k * threads if k * threads < dmax else dmax
    done = issue
    first_start = -1.0
    need = False
    for r in range(lo, hi):
        begin = max(dev, issue)
        lat = _lat(sizes, depths, read_lat, nbytes[r], q)
        dev = begin + lat / q
        if waits[r]:
            need = True
            if first_start < 0.0:
                first_start = begin
            done = max(done, begin + lat)
        # each page read in needs one freed: reclaim's CPU per page
        cpu = reclaim_cpu_us_page * (nbytes[r] / page_bytes)
        stall[lane] += cpu
        out[s, OUT_RECLAIM_CPU] += cpu
    if need:
        queue = first_start - issue
        out[s, OUT_QUEUE] += queue
        out[s, OUT_WAIT] += done - issue - queue
        out[s, OUT_FAULT_CPU] += fault_cpu_us
        out[s, OUT_WAITS] += 1.0
        stall[lane] += done - issue + fault_cpu_us
    return dev


@jit
def _simulate(step, frac, op, nbytes, waits, burst, access_us, dense_us, sizes, depths, read_lat, write_lat,
              fault_cpu_us, reclaim_cpu_us_page, write_cpu_us_page, page_bytes, threads, out):
    """Per-step times of a request stream (see :func:`swaptrace.timing.model.predict` for the model).

    ``threads`` threads share each step: every thread goes through the step's accesses over the whole access
    time, the step's bursts dealt to them in turn (burst ``b`` of the step to thread ``b mod threads``), and
    each stalls on its own bursts; a read burst of ``k`` requests meets the device at depth ``k * threads``
    (the others fault at the same rate). Bursts reach the device in the order they are issued (the earliest
    first; at one time, the lower thread's), not in the stream's order. The step ends when its last thread
    does; the terms in ``out`` are summed over the threads.
    """
    nsteps = access_us.shape[0]
    n = step.shape[0]
    stall = np.zeros(threads)  # each thread's stall so far in the step (us)
    b_first = np.empty(n, np.int64)  # the step's bursts: first request, end, share of the step before it
    b_end = np.empty(n, np.int64)
    b_at = np.empty(n)
    nxt = np.empty(threads, np.int64)  # each thread's next burst: b_first index, by steps of `threads`
    t = 0.0  # process clock (us)
    dev = 0.0  # the device is busy until this time (us)
    i = 0
    for s in range(nsteps):
        start = t
        stall[:] = 0.0
        nb = 0
        while i < n and step[i] == s:
            j = i
            while j < n and burst[j] == burst[i]:
                j += 1
            b_first[nb], b_end[nb], b_at[nb] = i, j, frac[i]
            nb += 1
            i = j
        for lane in range(threads):
            nxt[lane] = lane
        for _ in range(nb):
            lane = -1
            issue = 0.0
            for other in range(threads):  # the thread whose next burst is issued first
                b = nxt[other]
                if b < nb:
                    at = start + b_at[b] * access_us[s] + stall[other]
                    if lane < 0 or at < issue:
                        lane, issue = other, at
            b = nxt[lane]
            nxt[lane] = b + threads
            dev = _serve_burst(b_first[b], b_end[b], lane, issue, s, threads, op, nbytes, waits, sizes, depths,
                               read_lat, write_lat, fault_cpu_us, reclaim_cpu_us_page, write_cpu_us_page,
                               page_bytes, dev, stall, out)
        out[s, OUT_COMPUTE] = access_us[s] + dense_us[s]
        out[s, OUT_STEP] = access_us[s] + dense_us[s] + stall.max()
        t = start + out[s, OUT_STEP]
    return dev
