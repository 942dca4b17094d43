"""Benchmark of the Dask layer: 2 worker processes against one process, for a sweep and for generation.

Run: ``python benchmarks/bench_dask.py [--quick] [--repeats 3]``. Prints a
markdown table of medians of ``--repeats`` runs, each with the 1-minute load
average read just before it (the machine is shared: a load above the core
count means other work took CPU time from the run):

* **sweep**: 16 points (8 budgets x linux, lru) of a demo trace, each
  emulated and replayed on the SSD model; serial = :func:`run_point` one
  after the other in this process, Dask = :func:`run_sweep` on a running
  2-worker local cluster (cluster start-up reported apart);
* **generation**: an rm1 trace (100 steps, 45 M accesses; ``--quick`` 20); serial = :func:`generate_trace` in this
  process (numba on all cores, as ``swaptrace generate`` runs, and on one
  thread), Dask = :func:`generate_dataset` with 2 workers of one thread each.

Target (issue 25): Dask >= 1.7x the serial time for both.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numba

from swaptrace import generate_trace
from swaptrace.parallel.generate import generate_dataset
from swaptrace.parallel.sweep import run_point, run_sweep
from swaptrace.parallel.sweep_spec import SweepSpec


def _load() -> float:
    return os.getloadavg()[0]


def _timed(fn, repeats: int) -> tuple[float, list[float], list[float]]:
    times, loads = [], []
    for _ in range(repeats):
        loads.append(_load())
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times, loads


def _row(name: str, med: float, times: list[float], loads: list[float], base: float | None = None) -> str:
    speed = f"{base / med:.2f}x" if base else "1.00x"
    return (f"| {name} | {med:.1f} | {', '.join(f'{t:.1f}' for t in times)} | "
            f"{', '.join(f'{x:.1f}' for x in loads)} | {speed} |")


GEN_PRESET = "rm1"
_counter = iter(range(1000))


def _warm() -> None:
    """Compile the generator's kernels in a worker (numba caches them per process)."""
    with tempfile.TemporaryDirectory() as d:
        generate_trace(GEN_PRESET, Path(d) / "w.access.parquet", steps=1)


def _sweep_rows(points, spec, trace, root: Path, addr: str, args) -> list[str]:
    def serial_sweep():
        out = root / f"serial-{next(_counter)}"
        out.mkdir()
        for p in points:
            run_point(p, str(trace), str(out))

    s_med, s_t, s_l = _timed(serial_sweep, args.repeats)
    d_med, d_t, d_l = _timed(lambda: run_sweep(spec, root / f"dask-{next(_counter)}", scheduler=addr), args.repeats)
    return [_row("sweep, 16 points, serial (1 process)", s_med, s_t, s_l),
            _row(f"sweep, 16 points, Dask {args.workers} workers", d_med, d_t, d_l, s_med)]


def _generation_rows(root: Path, addr: str, steps: int, args) -> list[str]:
    name = f"generate {GEN_PRESET} {steps} steps"
    g_med, g_t, g_l = _timed(lambda: generate_trace(GEN_PRESET, root / "g.access.parquet", steps=steps, force=True),
                             args.repeats)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    g1_med, g1_t, g1_l = _timed(lambda: generate_trace(GEN_PRESET, root / "g1.access.parquet", steps=steps,
                                                       force=True), args.repeats)
    numba.set_num_threads(threads)
    gd_med, gd_t, gd_l = _timed(lambda: generate_dataset(GEN_PRESET, root / "gd.access.parquet", steps=steps,
                                                         scheduler=addr, force=True), args.repeats)
    return [_row(f"{name}, serial (numba {threads} threads)", g_med, g_t, g_l),
            _row(f"{name}, serial (numba 1 thread)", g1_med, g1_t, g1_l),
            _row(f"{name}, Dask {args.workers} workers (vs numba threads)", gd_med, gd_t, gd_l, g_med),
            f"| (same Dask run vs serial on 1 thread) | | | | {g1_med / gd_med:.2f}x |"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller trace and sweep")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", choices=("sweep", "generation"), default=None, help="run one of the two")
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    sweep_steps, gen_steps = (30, 20) if args.quick else (100, 100)
    root = Path(tempfile.mkdtemp(prefix="swaptrace-bench-dask-"))
    try:
        trace = generate_trace("demo", root / "demo.access.parquet", steps=sweep_steps, seed=0)
        spec = SweepSpec(traces=(str(trace),), memory_fractions=tuple(0.1 + 0.05 * i for i in range(8)),
                         policies=("linux", "lru"))
        points = spec.points()
        assert len(points) == 16
        run_point(points[0], str(trace), str(root / "warm"))  # numba compiles here, not in the timings
        generate_trace(GEN_PRESET, root / "warm.access.parquet", steps=2)
        t = time.perf_counter()
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                          silence_logs=40) as cluster, Client(cluster) as client:
            startup = time.perf_counter() - t
            client.run(_warm)
            addr = cluster.scheduler_address
            rows = ["| run | median s | runs s | load avg (1 min) at each run | speed-up |", "|---|---|---|---|---|"]
            if args.only in (None, "sweep"):
                rows += _sweep_rows(points, spec, trace, root, addr, args)
            if args.only in (None, "generation"):
                rows += _generation_rows(root, addr, gen_steps, args)
        print(f"cores: {os.cpu_count()}, local cluster start-up {startup:.1f} s (not in the times below)\n")
        print("\n".join(rows))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
