"""Micro-benchmark of what a swap-in fault costs on this machine beyond the device's read latency (root).

The time model (:mod:`swaptrace.timing.model`) charges each fault the device's read latency, queued behind the
device's backlog, plus ``fault_cpu_us``. On a real machine a fault costs more than the in-process
micro-benchmark of :func:`swaptrace.timing.model.measure_cpu_costs` sees: the swap-in path itself
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

Writing a page out costs the kernel time too (mm/vmscan.c ``shrink_folio_list``: ``add_to_swap``, the
unmap with its TLB flush, ``pageout`` and the bio; in cgroup v1 also the wait for pages still under
writeback), and it comes in bursts: the step in which memory first fills writes most of the budget
at once. :func:`measure_write_overhead` measures it apart, with a workload that writes and never
faults:

1. an access trace that stores to every page of a ``pages``-page footprint once, in a seeded random
   order, over ``steps`` steps;
2. its capture at ``fraction`` of the footprint (pages leave memory, none comes back);
3. the overhead per page written is (measured time - modelled time) / pages written.

It is given to the model as ``write_cpu_us``; measure it first and hand it to
:func:`measure_fault_overhead` (``cpu``), so the fault overhead is what remains beyond the writes.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.core.traceio import TraceWriter, read_metadata
from swaptrace.timing import model as timing


@dataclass(frozen=True)
class FaultOverhead:
    """Result of :func:`measure_fault_overhead` (microseconds)."""

    overhead_us: float
    measured_us: float
    modelled_us: float
    major_faults: int
    details: dict[str, Any]


def synthetic_trace(out: str | os.PathLike, *, pages: int = 8192, steps: int = 10, touches: int = 3000,
                    seed: int = 0, writes_only: bool = False) -> Path:
    """Write a calibration workload: uniform random pages, every other touch a store; or (``writes_only``)
    a store to every page once, in random order, ``pages / steps`` per step (``touches`` unused)."""
    rng = np.random.default_rng(seed)
    name = "write-calibration" if writes_only else "fault-calibration"
    meta = {
        "page_bytes": 4096, "footprint_pages": pages, "footprint_bytes": pages * 4096, "steps": steps,
        "first_step": 0, "seed": seed, "preset": name,
        "regions": [{"name": "uniform", "kind": "table", "first_page": 0, "pages": pages}],
        "spec": {"name": name, "batch_size": 1},
    }
    order = rng.permutation(pages).astype(np.uint64) if writes_only else None
    with TraceWriter(out, "access", meta, force=True) as w:
        for s in range(steps):
            if order is not None:
                page = order[s * pages // steps:(s + 1) * pages // steps]
                write = np.ones(page.size, dtype=bool)
            else:
                page = rng.integers(0, pages, size=touches).astype(np.uint64)
                write = np.arange(touches) % 2 == 1
            w.write(step=np.full(page.size, s, dtype=np.uint32), page=page, write=write,
                    region=np.zeros(page.size, dtype=np.uint16))
        return w.path


def _capture_unexplained(trace: Path, fraction: float, device: timing.DeviceTiming,
                         cpu: timing.CpuCosts) -> tuple[float, float, dict[str, Any], dict[str, Any]]:
    """Capture ``trace`` at ``fraction`` (root) and run the model on its own stream with ``cpu``:
    measured and modelled time (us), the capture's ``kernel`` and ``summary`` metadata."""
    from swaptrace.capture.session import capture

    stream = trace.with_name(trace.name.replace(".access.", ".kernel.swapio."))
    capture(trace, stream, memory_fraction=fraction, compute=None, unlimited_run=True, force=True)
    meta = read_metadata(stream)
    req = timing.read_stream(stream)
    res = timing.simulate(req, device, timing.baseline_compute(stream, req.nsteps), cpu)
    return float(sum(meta["kernel"]["step_wall_us"])), res.total_us, meta["kernel"], meta["summary"]


def _details(k: dict[str, Any], device: timing.DeviceTiming, **workload: Any) -> dict[str, Any]:
    return {**workload, "unlimited_us": float(k["unlimited"]["total_us"]),
            "loadavg": [k.get("loadavg_start"), k.get("loadavg_end")], "device": device.name}


def measure_fault_overhead(device: timing.DeviceTiming, *, pages: int = 8192, steps: int = 10,
                           touches: int = 3000, fraction: float = 0.25, seed: int = 0,
                           work_dir: str | os.PathLike | None = None, cpu: timing.CpuCosts | None = None) -> FaultOverhead:
    """Capture the synthetic workload and return the per-fault time the model does not explain (root).

    ``cpu`` gives the reclaim and write costs the model charges (its ``fault_cpu_us`` is ignored);
    default: :func:`swaptrace.timing.model.measure_cpu_costs`, with no write cost.
    """
    base = cpu if cpu is not None else timing.measure_cpu_costs()
    with tempfile.TemporaryDirectory(prefix="swaptrace-faultcost-", dir=work_dir) as tmp:
        trace = synthetic_trace(Path(tmp) / "calib.access.parquet", pages=pages, steps=steps, touches=touches,
                                seed=seed)
        measured, modelled, k, _ = _capture_unexplained(
            trace, fraction, device, timing.CpuCosts(0.0, base.reclaim_cpu_us, base.write_cpu_us))
    faults = int(sum(k["step_major_faults"]))
    overhead = max(measured - modelled, 0.0) / max(faults, 1)
    return FaultOverhead(overhead, measured, modelled, faults, _details(
        k, device, pages=pages, steps=steps, touches=touches, fraction=fraction, seed=seed,
        write_cpu_us=base.write_cpu_us))


@dataclass(frozen=True)
class WriteOverhead:
    """Result of :func:`measure_write_overhead` (microseconds; ``overhead_us`` per page written)."""

    overhead_us: float
    measured_us: float
    modelled_us: float
    pages_out: int
    details: dict[str, Any]


def measure_write_overhead(device: timing.DeviceTiming, *, pages: int = 16384, steps: int = 10,
                           fraction: float = 0.25, seed: int = 0, work_dir: str | os.PathLike | None = None,
                           cpu: timing.CpuCosts | None = None) -> WriteOverhead:
    """Capture the write-only workload and return the time per page written the model does not explain (root).

    ``cpu`` gives the reclaim cost the model charges (its fault and write costs are ignored); default:
    :func:`swaptrace.timing.model.measure_cpu_costs`.
    """
    base = cpu if cpu is not None else timing.measure_cpu_costs()
    with tempfile.TemporaryDirectory(prefix="swaptrace-writecost-", dir=work_dir) as tmp:
        trace = synthetic_trace(Path(tmp) / "calib.access.parquet", pages=pages, steps=steps, seed=seed,
                                writes_only=True)
        measured, modelled, k, summary = _capture_unexplained(
            trace, fraction, device, timing.CpuCosts(0.0, base.reclaim_cpu_us, 0.0))
    written = int(summary["pages_out"])
    overhead = max(measured - modelled, 0.0) / max(written, 1)
    return WriteOverhead(overhead, measured, modelled, written, _details(
        k, device, pages=pages, steps=steps, fraction=fraction, seed=seed,
        major_faults=int(sum(k["step_major_faults"]))))


def measure_host_costs(device: timing.DeviceTiming, cpu: timing.CpuCosts | None = None, *,
                       measure_write: bool = True, seed: int = 0, fault_runs: int = 1) -> timing.CpuCosts:
    """This host's kernel costs for the time model (root, synthetic captures of a few seconds each).

    The write overhead first (unless ``measure_write`` is false: ``cpu``'s is kept), then the fault
    overhead beyond the write overhead's median, each ``fault_runs`` times (seeds ``seed``, ``seed + 1``,
    ...): the medians are the costs, and with two runs or more the lowest and highest of each are its
    ``fault_cpu_us_range`` / ``write_cpu_us_range``, which every prediction is then also made at (on this
    machine five fault runs measured 33-51 us, and single write runs 2.8 and 4.2 us on one boot:
    docs/timing.md). The
    reclaim cost is ``cpu``'s (default: :func:`swaptrace.timing.model.measure_cpu_costs`). The result's
    ``source`` says how each was obtained; keep it with :func:`swaptrace.timing.model.save_costs`.
    """
    from dataclasses import replace

    cpu = cpu if cpu is not None else replace(timing.measure_cpu_costs(), write_cpu_us=0.0)
    source = cpu.source
    n = max(1, fault_runs)
    if measure_write:
        writes = [measure_write_overhead(device, cpu=cpu, seed=seed + k) for k in range(n)]
        w = sorted(wo.overhead_us for wo in writes)
        if n == 1:
            cpu = replace(cpu, write_cpu_us=w[0])
            source = f"write overhead: synthetic capture ({writes[0].pages_out} pages written); {source}"
        else:
            cpu = replace(cpu, write_cpu_us=float(np.median(w)), write_cpu_us_range=(w[0], w[-1]))
            source = (f"write overhead: median of {n} synthetic captures ({w[0]:.2f}-{w[-1]:.2f} us, "
                      f"{min(wo.pages_out for wo in writes)}+ pages written each); {source}")
    runs = [measure_fault_overhead(device, cpu=cpu, seed=seed + k) for k in range(n)]
    values = sorted(r.overhead_us for r in runs)
    if len(runs) == 1:
        return replace(cpu, fault_cpu_us=values[0],
                       source=f"fault overhead: synthetic capture ({runs[0].major_faults} faults); {source}")
    return replace(cpu, fault_cpu_us=float(np.median(values)), fault_cpu_us_range=(values[0], values[-1]),
                   source=f"fault overhead: median of {len(runs)} synthetic captures "
                          f"({values[0]:.1f}-{values[-1]:.1f} us); {source}")
