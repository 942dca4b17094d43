"""Benchmark of the swap designs: each design's emulation against the ``linux`` single run, and the
zoned SSD model against the FTL per host page.

Run: ``python benchmarks/bench_designs.py [--quick]``. Prints two markdown tables:

1. seconds (wall and CPU) of ``emulate --no-ensemble`` on a generated trace, of the one-pass driver
   writing the ``linux`` stream alone, and of the driver writing it plus one design's stream; the
   design's own part (the last minus the driver alone, over the single run) must stay <= 1, i.e. a
   design's emulation at most twice the ``linux`` single run (the issue's bound);
2. nanoseconds per host page of the zoned device model and of the FTL (timing on, full drive) on the
   same request stream: zone appends of 1 MiB, random 4 KiB reads, zone resets; the zoned model must
   be at least as fast.
Medians of 3 repeats after a JIT warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swaptrace import DesignSet, EmulatorConfig, emulate_trace, generate_trace, load_device, open_trace  # noqa: E402
from swaptrace.designs.run import run_designs  # noqa: E402
from swaptrace.emulate import load_profile  # noqa: E402
from swaptrace.ssd.simulate import Simulator  # noqa: E402
from swaptrace.ssd.zns import ZNSConfig, ZNSDevice  # noqa: E402


def _timed(fn, repeats: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def bench_emulation(steps: int, repeats: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        trace = generate_trace("demo", d / "t.parquet", steps=steps, seed=0)
        meta = open_trace(trace, kind="access").meta
        cfg = EmulatorConfig.resolve(meta, profile=load_profile(None), source=str(trace), memory_fraction=0.1)
        logs = DesignSet(zones=ZNSConfig(zone_bytes=16 << 20)).logs()

        def linux():
            emulate_trace(trace, d / "l.parquet", cfg, ensemble=False, force=True)

        def design(name):
            run_designs(trace, {"linux": d / "a.parquet", name: d / "b.parquet"}, cfg, {name: logs[name]},
                        force=True)

        def driver_linux():
            run_designs(trace, {"linux": d / "a.parquet"}, cfg, {}, force=True)

        linux(), driver_linux()
        for name in logs:
            design(name)  # JIT warm-up
        base = _timed(linux, repeats)
        drv = _timed(driver_linux, repeats)
        lines = [f"{meta['summary']['accesses']:,} accesses (demo, {steps} steps, 10 % budget)", "",
                 "| run | wall s | CPU s | wall ratio | CPU ratio | design's own part (wall, CPU) |",
                 "|---|---|---|---|---|---|",
                 f"| linux single run (emulate) | {base[0]:.2f} | {base[1]:.2f} | 1.00 | 1.00 | |",
                 f"| linux through the designs driver | {drv[0]:.2f} | {drv[1]:.2f} | {drv[0] / base[0]:.2f} | "
                 f"{drv[1] / base[1]:.2f} | |"]
        for name in logs:
            t = _timed(lambda name=name: design(name), repeats)
            own = ((t[0] - drv[0]) / base[0], (t[1] - drv[1]) / base[1])
            lines.append(f"| linux + {name} | {t[0]:.2f} | {t[1]:.2f} | {t[0] / base[0]:.2f} | {t[1] / base[1]:.2f} | "
                         f"{own[0]:.2f}, {own[1]:.2f} |")
    return "\n".join(lines)


def _zoned_stream(zone_units: int, nzones: int, n_appends: int, seed: int = 0):
    """Appends of 256 units (1 MiB) filling zones in turn, a random read of a written unit after each, and
    a reset of the oldest zone whenever every zone is full."""
    rng = np.random.default_rng(seed)
    ops, units, lens = [], [], []
    wp = np.zeros(nzones, np.int64)
    z = 0
    for _ in range(n_appends):
        if wp[z] == zone_units:
            z = (z + 1) % nzones
            if wp[z] == zone_units:
                ops.append(2), units.append(z * zone_units), lens.append(zone_units)
                wp[z] = 0
        ops.append(1), units.append(z * zone_units + wp[z]), lens.append(256)
        wp[z] += 256
        written = np.flatnonzero(wp > 0)
        r = rng.choice(written)
        ops.append(0), units.append(r * zone_units + rng.integers(0, wp[r])), lens.append(1)
    return np.array(ops, np.int8), np.array(units, np.int64), np.array(lens, np.int64)


def bench_zns(n_appends: int, repeats: int) -> str:
    dev = load_device("nvme-tlc", {"pages_per_block": 32}, capacity_bytes=1 << 30)
    zcfg = ZNSConfig(zone_bytes=16 << 20)
    zone_units = zcfg.zone_bytes // dev.map_bytes
    nzones = int(dev.user_bytes // zcfg.zone_bytes)
    op, unit, n = _zoned_stream(zone_units, nzones, n_appends)
    host_pages = int(n[op != 2].sum())  # resets move no data

    def zns():
        ZNSDevice(dev, zcfg, nzones).run(op, unit * dev.map_bytes, n * dev.map_bytes)

    def ftl():
        sim = Simulator(dev, timing=True, iodepth=32)
        sim.precondition("seq")
        sim.run(op, unit, n)

    def ftl_precondition_only():
        Simulator(dev, timing=True, iodepth=32).precondition("seq")

    zns(), ftl()
    tz = _timed(zns, repeats)
    tf = _timed(ftl, repeats)
    tp = _timed(ftl_precondition_only, repeats)
    ftl_run = (max(tf[0] - tp[0], 1e-9), max(tf[1] - tp[1], 1e-9))
    ns = lambda s: 1e9 * s / host_pages  # noqa: E731
    return "\n".join([
        f"{len(op):,} requests, {host_pages:,} host pages (nvme-tlc, 1 GiB, zones of 16 MiB)", "",
        "| model | wall ns/page | CPU ns/page | speed vs FTL (CPU) |", "|---|---|---|---|",
        f"| FTL (timing, full drive; precondition excluded) | {ns(ftl_run[0]):.0f} | {ns(ftl_run[1]):.0f} | 1.00 |",
        f"| zoned | {ns(tz[0]):.0f} | {ns(tz[1]):.0f} | {ftl_run[1] / tz[1]:.1f}x |",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeats = 1 if args.quick else 3
    print("### Design emulation vs the linux single run\n")
    print(bench_emulation(10 if args.quick else 60, repeats))
    print("\n### Zoned device model vs FTL per host page\n")
    print(bench_zns(2000 if args.quick else 20000, repeats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
