"""Slow, obviously-correct twin of swaptrace._kernels.timing (plain Python, one request at a time)."""

from __future__ import annotations

import math


def lat(sizes, depths, table, nbytes, depth):
    """Latency from a [size][depth] table: linear in depth, log-linear in size, proportional outside."""

    def at_depth(row):
        if depth <= depths[0]:
            return row[0]
        if depth >= depths[-1]:
            return row[-1] * depth / depths[-1]
        for j in range(len(depths) - 1):
            if depths[j] <= depth <= depths[j + 1]:
                w = (depth - depths[j]) / (depths[j + 1] - depths[j])
                return row[j] + w * (row[j + 1] - row[j])
        raise AssertionError

    col = [at_depth(list(r)) for r in table]
    if nbytes <= sizes[0]:
        return col[0]
    if nbytes >= sizes[-1]:
        return col[-1] * nbytes / sizes[-1]
    for i in range(len(sizes) - 1):
        if sizes[i] <= nbytes <= sizes[i + 1]:
            w = (math.log(nbytes) - math.log(sizes[i])) / (math.log(sizes[i + 1]) - math.log(sizes[i]))
            return col[i] + w * (col[i + 1] - col[i])
    raise AssertionError


def simulate(requests, nsteps, access_us, dense_us, sizes, depths, read_lat, write_lat, fault_cpu, reclaim_cpu,
             write_cpu, page_bytes):
    """``requests``: list of dicts (step, frac, op 0 read / 1 write, nbytes, waits, burst) in issue order.

    Returns a list of per-step dicts (step, compute, wait, queue, fault_cpu, reclaim_cpu, waits).
    """
    bursts = []  # consecutive requests of one burst id
    for r in requests:
        if bursts and bursts[-1][0]["burst"] == r["burst"]:
            bursts[-1].append(r)
        else:
            bursts.append([r])
    out = [dict(step=0.0, compute=0.0, wait=0.0, queue=0.0, fault_cpu=0.0, reclaim_cpu=0.0, waits=0) for _ in range(nsteps)]
    t, dev = 0.0, 0.0
    b = 0
    for s in range(nsteps):
        o = out[s]
        stalled = 0.0
        while b < len(bursts) and bursts[b][0]["step"] == s:
            group = bursts[b]
            b += 1
            now = t + group[0]["frac"] * access_us[s] + stalled
            q = min(len(group), depths[-1])
            if group[0]["op"] == 1:
                for r in group:
                    dev = max(dev, now) + lat(sizes, depths, write_lat, r["nbytes"], q) / q
                    o["reclaim_cpu"] += write_cpu * r["nbytes"] / page_bytes
                    stalled += write_cpu * r["nbytes"] / page_bytes
                continue
            starts, ends = [], []
            for r in group:
                begin = max(dev, now)
                one = lat(sizes, depths, read_lat, r["nbytes"], q)
                dev = begin + one / q
                if r["waits"]:
                    starts.append(begin)
                    ends.append(begin + one)
                o["reclaim_cpu"] += reclaim_cpu * r["nbytes"] / page_bytes
                stalled += reclaim_cpu * r["nbytes"] / page_bytes
            if starts:
                o["queue"] += starts[0] - now
                o["wait"] += max(ends) - starts[0]
                o["fault_cpu"] += fault_cpu
                o["waits"] += 1
                stalled += max(ends) - now + fault_cpu
        o["compute"] = access_us[s] + dense_us[s]
        o["step"] = o["compute"] + stalled
        t += o["step"]
    return out
