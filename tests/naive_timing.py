"""Reference for the time model (swaptrace.timing.model), written from docs/timing.md "The model", not from the kernel.

The model as documented, in this module's terms:

* The **device** is one first-in first-out server (:class:`FifoDevice`). A request handed to it at ``t``
  starts when the server is free, ``begin = max(t, free)``; at queue depth ``q`` it holds the server for
  ``lat(L, q) / q`` (the device's throughput at that depth, Little's law) and its own latency ends at
  ``begin + lat(L, q)``. ``q`` is the size of the request's burst, capped at the deepest depth of the table.
* The **process** runs the steps one after another. Step ``s`` computes ``C_s = A_s + D_s``; a burst of the
  step is issued at ``step start + frac * A_s + (the step's stall so far)``. Write bursts are handed to the
  device and not waited for; a read burst is waited for until the latest end of the reads it needs
  (``waits``). The wait is split into *queueing*, from the issue to the start of the first needed read, and
  *fault wait*, the rest.
* **CPU**: ``fault_cpu`` per burst waited for; ``reclaim_cpu`` per page read in; ``write_cpu`` per page
  written. Both delay the process like a wait.
* The step's time is its compute plus its stall (waits and CPU).

The latency table (docs/timing.md "Where every constant comes from", ``DeviceTiming``): between table
points, linear in depth and linear in log(size); below the smallest size or depth, the first value; above
the largest size, proportional to size; above the deepest depth, proportional to depth. It is computed here
with :func:`numpy.interp`, size first then depth (bilinear interpolation does not depend on the order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


def lat(sizes, depths, table, nbytes, depth):
    """Mean latency (us) of a request of ``nbytes`` at queue depth ``depth``; ``table[size][depth]``."""
    table = np.asarray(table, dtype=float)
    sizes = np.asarray(sizes, dtype=float)
    depths = np.asarray(depths, dtype=float)
    if nbytes >= sizes[-1]:
        by_depth = table[-1] * (nbytes / sizes[-1])
    else:
        by_depth = np.array([np.interp(math.log(nbytes), np.log(sizes), table[:, j]) for j in range(len(depths))])
    if depth >= depths[-1]:
        return float(by_depth[-1] * depth / depths[-1])
    return float(np.interp(depth, depths, by_depth))


@dataclass
class FifoDevice:
    """A first-in first-out server: ``free`` is when it has done everything handed to it (us)."""

    free: float = 0.0

    def serve(self, t: float, latency: float, depth: int) -> tuple[float, float]:
        """Hand over a request at ``t``; returns ``(begin, end of its latency)``."""
        begin = max(t, self.free)
        self.free = begin + latency / depth
        return begin, begin + latency


@dataclass
class StepTimes:
    compute: float = 0.0
    wait: float = 0.0
    queue: float = 0.0
    fault_cpu: float = 0.0
    reclaim_cpu: float = 0.0
    waits: int = 0
    stalls: list = field(default_factory=lambda: [0.0])  # each thread's stall in the step

    @property
    def step(self) -> float:
        return self.compute + max(self.stalls)


def _bursts(requests):
    out: list[list[dict]] = []
    for r in requests:
        if out and out[-1][0]["burst"] == r["burst"]:
            out[-1].append(r)
        else:
            out.append([r])
    return out


def simulate(requests, nsteps, access_us, dense_us, sizes, depths, read_lat, write_lat, fault_cpu, reclaim_cpu,
             write_cpu, page_bytes, threads=1):
    """``requests``: dicts (step, frac, op 0 read / 1 write, nbytes, waits, burst) in issue order.

    ``threads`` (docs/timing.md "Threads"): the ``b``-th burst of a step (from 0) belongs to thread
    ``b mod threads``, which issues it at share ``f`` of the step's access time after its own stall so far;
    a read burst of ``n`` requests is at depth ``n * threads``; the device takes the bursts in the order they
    are issued (at one time, the lower thread's first).

    Returns per-step dicts (step, compute, wait, queue, fault_cpu, reclaim_cpu, waits).
    """
    device = FifoDevice()
    by_step: dict[int, list[list[dict]]] = {}
    for b in _bursts(requests):
        by_step.setdefault(b[0]["step"], []).append(b)
    out = []
    start = 0.0
    for s in range(nsteps):
        st = StepTimes(compute=access_us[s] + dense_us[s], stalls=[0.0] * threads)
        queues: list[list[tuple[float, list[dict]]]] = [[] for _ in range(threads)]
        for b, burst in enumerate(by_step.get(s, [])):
            queues[b % threads].append((burst[0]["frac"], burst))
        while any(queues):
            # every thread's next burst, issued after that thread's stall so far; the earliest goes first
            k, issued = min(((k, start + q[0][0] * access_us[s] + st.stalls[k]) for k, q in enumerate(queues) if q),
                            key=lambda c: (c[1], c[0]))
            burst = queues[k].pop(0)[1]
            pages = sum(r["nbytes"] for r in burst) / page_bytes
            if burst[0]["op"] == 1:
                depth = min(len(burst), depths[-1])
                for r in burst:
                    device.serve(issued, lat(sizes, depths, write_lat, r["nbytes"], depth), depth)
                st.reclaim_cpu += write_cpu * pages
                st.stalls[k] += write_cpu * pages
                continue
            depth = min(len(burst) * threads, depths[-1])
            served = [device.serve(issued, lat(sizes, depths, read_lat, r["nbytes"], depth), depth) for r in burst]
            needed = [times for r, times in zip(burst, served, strict=True) if r["waits"]]
            st.reclaim_cpu += reclaim_cpu * pages
            st.stalls[k] += reclaim_cpu * pages
            if needed:
                first_begin = needed[0][0]
                last_end = max(end for _, end in needed)
                st.queue += first_begin - issued
                st.wait += last_end - first_begin
                st.fault_cpu += fault_cpu
                st.waits += 1
                st.stalls[k] += (last_end - issued) + fault_cpu
        out.append(dict(step=st.step, compute=st.compute, wait=st.wait, queue=st.queue, fault_cpu=st.fault_cpu,
                        reclaim_cpu=st.reclaim_cpu, waits=st.waits))
        start += st.step
    return out


def requests_from_swapio(path):
    """An emulator's ``swapio`` file as :func:`simulate`'s requests, read with pyarrow from docs/timing.md.

    Discards are not device time; a request sits at ``t_us / params.step_us`` minus its step within its
    step (emulated streams, clipped to the step); one burst is the consecutive requests of one step with the
    same op issued at the same instant (a fault's page and its readahead; a reclaim pass's writes); the
    process waits for reads of cause ``fault`` (or ``unknown``). Returns ``(requests, nsteps, page_bytes)``.
    """
    import json

    import pyarrow.parquet as pq

    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[b"swaptrace"])
    assert meta.get("source", "emulator") != "kernel", "a capture's stream is placed by rank: not this reader"
    step_us = float(meta["params"]["step_us"])
    first = int(meta.get("first_step", 0))
    rows = table.to_pylist()
    reqs, last = [], None
    for r in rows:
        if r["op"] == "discard":
            continue
        step = int(r["step"]) - first
        key = (step, r["op"], r["t_us"])
        if key != last:
            burst = reqs[-1]["burst"] + 1 if reqs else 0
            last = key
        reqs.append({"step": step, "frac": min(max(r["t_us"] / step_us - step, 0.0), 1.0),
                     "op": 0 if r["op"] == "read" else 1, "nbytes": float(r["length"]),
                     "waits": r["op"] == "read" and r["cause"] in ("fault", "unknown"), "burst": burst})
    return reqs, int(meta["steps"]), int(meta["page_bytes"])


def mean_step_us(path, device, step_compute_us):
    """Mean step time (us) and slowdown of an emulator stream on ``device`` (a DeviceTiming's table), every
    step computing ``step_compute_us`` (requests spread over it), no kernel CPU costs (sum(step) / sum(C))."""
    reqs, nsteps, page_bytes = requests_from_swapio(path)
    steps = simulate(reqs, nsteps, [step_compute_us] * nsteps, [0.0] * nsteps, device.sizes_bytes, device.depths,
                     device.read_latency_us, device.write_latency_us, 0.0, 0.0, 0.0, page_bytes)
    total = sum(s["step"] for s in steps)
    return total / nsteps, (total / (nsteps * step_compute_us) if step_compute_us else None)
