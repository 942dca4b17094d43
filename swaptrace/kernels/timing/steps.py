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
def _simulate(step, frac, op, nbytes, waits, burst, access_us, dense_us, sizes, depths, read_lat, write_lat,
              fault_cpu_us, reclaim_cpu_us_page, write_cpu_us_page, page_bytes, out):
    """Per-step times of a request stream (see :func:`swaptrace.timing.model.predict` for the model)."""
    nsteps = access_us.shape[0]
    n = step.shape[0]
    dmax = depths[depths.shape[0] - 1]
    t = 0.0  # process clock (us)
    dev = 0.0  # the device is busy until this time (us)
    i = 0
    for s in range(nsteps):
        start = t
        stall = 0.0
        while i < n and step[i] == s:
            j = i
            while j < n and burst[j] == burst[i]:
                j += 1
            issue = start + frac[i] * access_us[s] + stall
            k = j - i
            q = k if k < dmax else dmax
            if op[i] == 1:  # writes: async, they only occupy the device; reclaim pays CPU to start them
                for r in range(i, j):
                    dev = max(dev, issue) + _lat(sizes, depths, write_lat, nbytes[r], q) / q
                    cpu = write_cpu_us_page * (nbytes[r] / page_bytes)
                    stall += cpu
                    out[s, OUT_RECLAIM_CPU] += cpu
            else:  # reads of one fault: the process waits for those it needs, queued behind the device's backlog
                done = issue
                first_start = -1.0
                need = False
                for r in range(i, j):
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
                    stall += cpu
                    out[s, OUT_RECLAIM_CPU] += cpu
                if need:
                    queue = first_start - issue
                    out[s, OUT_QUEUE] += queue
                    out[s, OUT_WAIT] += done - issue - queue
                    out[s, OUT_FAULT_CPU] += fault_cpu_us
                    out[s, OUT_WAITS] += 1.0
                    stall += done - issue + fault_cpu_us
            i = j
        out[s, OUT_COMPUTE] = access_us[s] + dense_us[s]
        out[s, OUT_STEP] = access_us[s] + dense_us[s] + stall
        t = start + out[s, OUT_STEP]
    return dev
