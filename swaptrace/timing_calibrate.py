"""Micro-benchmark of what a swap-in fault costs on this machine beyond the device's read latency (root).

The time model (:mod:`swaptrace.timing`) charges each fault the device's read latency, queued behind the
device's backlog, plus ``fault_cpu_us``. On a real machine a fault costs more than the in-process
micro-benchmark of :func:`swaptrace.timing.measure_cpu_costs` sees: the swap-in path itself
(mm/memory.c ``do_swap_page``, mm/swap_state.c ``swapin_readahead``), the memory cgroup's direct
reclaim that makes room for the page (mm/vmscan.c), the wake-up of the faulting task when its read
completes, and -- for swap on a loop device -- the loop worker's hop. :func:`measure_fault_overhead`
measures all of it at once with a **synthetic** workload that is none of the models the time model is
validated on:

1. an access trace of ``steps`` steps, each touching ``touches`` pages drawn uniformly at random
   (seeded) from a ``pages``-page footprint, every other touch a store;
2. ``swaptrace capture`` of it at ``fraction`` of the footprint, no compute, with its unlimited baseline;
3. the time model on the capture's own stream, with the capture's baseline as compute time and no
   per-fault cost;
4. the overhead per fault is (measured time - modelled time) / major faults, at least 0.

That number is then given to the model as ``fault_cpu_us`` for every other stream.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace import timing
from swaptrace.traceio import TraceWriter, read_metadata


@dataclass(frozen=True)
class FaultOverhead:
    """Result of :func:`measure_fault_overhead` (microseconds)."""

    overhead_us: float
    measured_us: float
    modelled_us: float
    major_faults: int
    details: dict[str, Any]


def synthetic_trace(out: str | os.PathLike, *, pages: int = 8192, steps: int = 10, touches: int = 3000,
                    seed: int = 0) -> Path:
    """Write the calibration workload: uniform random pages, every other touch a store."""
    rng = np.random.default_rng(seed)
    meta = {
        "page_bytes": 4096, "footprint_pages": pages, "footprint_bytes": pages * 4096, "steps": steps,
        "first_step": 0, "seed": seed, "preset": "fault-calibration",
        "regions": [{"name": "uniform", "kind": "table", "first_page": 0, "pages": pages}],
        "spec": {"name": "fault-calibration", "batch_size": 1},
    }
    with TraceWriter(out, "access", meta, force=True) as w:
        for s in range(steps):
            page = rng.integers(0, pages, size=touches).astype(np.uint64)
            w.write(step=np.full(touches, s, dtype=np.uint32), page=page,
                    write=(np.arange(touches) % 2 == 1), region=np.zeros(touches, dtype=np.uint16))
        return w.path


def measure_fault_overhead(device: timing.DeviceTiming, *, pages: int = 8192, steps: int = 10,
                           touches: int = 3000, fraction: float = 0.25, seed: int = 0,
                           work_dir: str | os.PathLike | None = None, cpu: timing.CpuCosts | None = None) -> FaultOverhead:
    """Capture the synthetic workload and return the per-fault time the model does not explain (root)."""
    from swaptrace.capture.session import capture

    with tempfile.TemporaryDirectory(prefix="swaptrace-faultcost-", dir=work_dir) as tmp:
        trace = synthetic_trace(Path(tmp) / "calib.access.parquet", pages=pages, steps=steps, touches=touches,
                                seed=seed)
        stream = Path(tmp) / "calib.kernel.swapio.parquet"
        capture(trace, stream, memory_fraction=fraction, compute=None, unlimited_run=True, force=True)
        k = read_metadata(stream)["kernel"]
        req = timing.read_stream(stream)
        comp = timing.baseline_compute(stream, req.nsteps)
        base = cpu if cpu is not None else timing.measure_cpu_costs()
        res = timing.simulate(req, device, comp, timing.CpuCosts(0.0, base.reclaim_cpu_us, base.write_cpu_us))
        measured = float(sum(k["step_wall_us"]))
        faults = int(sum(k["step_major_faults"]))
        overhead = max(measured - res.total_us, 0.0) / max(faults, 1)
        return FaultOverhead(overhead, measured, res.total_us, faults, {
            "pages": pages, "steps": steps, "touches": touches, "fraction": fraction, "seed": seed,
            "unlimited_us": float(k["unlimited"]["total_us"]), "loadavg": [k.get("loadavg_start"), k.get("loadavg_end")],
            "device": device.name,
        })
