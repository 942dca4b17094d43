"""Benchmark of the SSD model: FTL throughput with GC active, and simulated WAF vs Desnoyers' models.

Run: ``python benchmarks/bench_ssd.py [--quick]``. Prints two markdown tables:

1. host map-unit (4 KiB page) writes simulated per second on a full drive
   under uniform random writes (GC active on every block), pure FTL and with
   timing, against the slow Python reference FTL (``tests/naive_ssd.py``);
   medians of 3 repeats after a JIT warm-up; peak RSS of a subprocess doing
   the pure-FTL run;
2. WAF of the simulator against the analytic models (greedy Eq. 12, FIFO Eq. 4,
   random 1/S_f) at OP 7 % and 28 % and two block sizes;
3. the real ``nvme-tlc`` drive (512 GiB raw): seconds to reach the sampled
   steady state of its background (``swaptrace.ssd.steady``; allocation of
   the mapping tables included) and host 4 KiB random-write requests per
   second with timing on (QD 32) into a 64 GiB swap partition, GC active
   (``--no-real`` skips it; it needs ~3 GiB of RAM).
"""

from __future__ import annotations

import argparse
import math
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from swaptrace import SSDConfig  # noqa: E402
from swaptrace.core import traceio  # noqa: E402
from swaptrace.ssd import analytic as A  # noqa: E402
from swaptrace.ssd.config import spare_from_op  # noqa: E402
from swaptrace.ssd.simulate import Simulator, ftl_waf  # noqa: E402


def device(user_units: int, op: float, pages_per_block: int, policy: str, dies: int = 1) -> SSDConfig:
    spare = spare_from_op(op)
    blocks = math.ceil(user_units / (1.0 - spare) / pages_per_block / dies)
    return SSDConfig(name="bench", channels=1, dies_per_channel=dies, planes=1, blocks_per_plane=blocks,
                     pages_per_block=pages_per_block, page_bytes=4096, spare_factor=spare, gc_policy=policy,
                     gc_free_fraction=0.0, write_buffer_bytes=8 << 20)


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t0: tuple[float, float]) -> tuple[float, float]:
    """(wall, CPU) seconds since ``t0``: the machine is shared, CPU time shows the kernel's own speed."""
    return time.perf_counter() - t0[0], time.process_time() - t0[1]


def time_pure(cfg: SSDConfig, writes: int, seed: int = 0) -> tuple[tuple[float, float], float]:
    """(wall, CPU) seconds for ``writes`` random unit writes on a full, warmed drive (pure FTL), and the WAF."""
    sim = Simulator(cfg, timing=False, iodepth=1)
    sim.precondition("seq")
    rng = np.random.default_rng(seed)
    sim.write_units(rng.integers(0, cfg.user_units, cfg.user_units))  # reach GC steady state
    lpns = rng.integers(0, cfg.user_units, writes)
    before = sim.counters()
    t = _clock()
    sim.write_units(lpns)
    dt = _since(t)
    return dt, (sim.counters() - before).waf


def time_timed(cfg: SSDConfig, writes: int, seed: int = 0) -> tuple[float, float]:
    """(wall, CPU) seconds for ``writes`` random 4 KiB write requests with die/channel timing at QD 32."""
    sim = Simulator(cfg, timing=True, iodepth=32)
    sim.precondition("seq")
    rng = np.random.default_rng(seed)
    n = cfg.user_units
    ones = np.ones(n, dtype=np.int64)
    ops = np.full(n, traceio.OP_WRITE, dtype=np.int8)
    sim.run(ops, rng.integers(0, n, n), ones, record=False)
    lpn = rng.integers(0, n, writes)
    t = _clock()
    sim.run(np.full(writes, traceio.OP_WRITE, np.int8), lpn, np.ones(writes, dtype=np.int64))
    return _since(t)


def time_naive(cfg: SSDConfig, writes: int, seed: int = 0) -> tuple[float, float]:
    import naive_ssd

    ref = naive_ssd.NaiveFTL(cfg)
    for lpn in range(cfg.user_units):
        ref.write(lpn)
    rng = np.random.default_rng(seed)
    lpns = rng.integers(0, cfg.user_units, writes).tolist()
    t = _clock()
    for lpn in lpns:
        ref.write(lpn)
    return _since(t)


def peak_rss_mib(user_units: int) -> float:
    subprocess.run([sys.executable, __file__, "--rss-child", str(user_units)], check=True)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def _medians(runs) -> tuple[float, float]:
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def throughput_table(quick: bool) -> list[str]:
    units = 1 << (18 if quick else 20)
    writes = 1 << (20 if quick else 22)
    rows = ["| mode | device | host writes | median wall s | median CPU s | host pages/s (CPU) | flash pages/s (CPU) "
            "| WAF | vs naive |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    naive_cfg = device(1 << 14, 0.28, 64, "greedy")
    naive_writes = 1 << 15
    naive_wall, naive_cpu = _medians([time_naive(naive_cfg, naive_writes, s) for s in range(3)])
    naive_rate = naive_writes / naive_cpu
    for policy, op in (("greedy", 0.28), ("greedy", 0.07), ("fifo", 0.07)):
        cfg = device(units, op, 64, policy)
        time_pure(cfg, 1000)  # JIT warm-up (or cache load)
        runs = [time_pure(cfg, writes, seed) for seed in range(3)]
        wall, cpu = _medians([r[0] for r in runs])
        rate = writes / cpu
        rows.append(f"| pure FTL, {policy} | {units} units, OP {op:.0%}, 64 units/block | {writes:,} | {wall:.2f} | "
                    f"{cpu:.2f} | {rate / 1e6:.2f} M | {rate * runs[0][1] / 1e6:.1f} M | {runs[0][1]:.2f} | "
                    f"{rate / naive_rate:,.0f}x |")
    cfg = device(units, 0.28, 64, "greedy", dies=8)
    time_timed(cfg, 1000)
    wall, cpu = _medians([time_timed(cfg, writes // 4, seed) for seed in range(3)])
    rate = writes // 4 / cpu
    rows.append(f"| timed, QD 32, greedy | {units} units, 8 dies, OP 28% | {writes // 4:,} | {wall:.2f} | {cpu:.2f} | "
                f"{rate / 1e6:.2f} M | | | {rate / naive_rate:,.0f}x |")
    rows.append(f"| naive Python reference, greedy | {naive_cfg.user_units} units, OP 28% | {naive_writes:,} | "
                f"{naive_wall:.2f} | {naive_cpu:.2f} | {naive_rate / 1e3:.1f} k | | | 1x |")
    rows.append("")
    rows.append(f"peak RSS of a pure-FTL run on {units} units: {peak_rss_mib(units):.0f} MiB")
    return rows


def waf_table(quick: bool) -> list[str]:
    units = 1 << (18 if quick else 20)
    rows = ["| policy | OP | units/block | model | simulated | error |", "|---|---:|---:|---:|---:|---:|"]
    for policy in ("greedy", "fifo", "random"):
        for op in (0.07, 0.28):
            for np_ in (64, 256):
                if policy == "random" and np_ == 256:
                    continue
                cfg = device(units, op, np_, policy)
                u = cfg.user_units
                rng = np.random.default_rng(1)
                chunks = (rng.integers(0, u, 1 << 21) for _ in range(math.ceil(8 * u / (1 << 21))))
                waf, _ = ftl_waf(cfg, chunks, warmup_units=4 * u)
                spare = (cfg.physical_units - cfg.user_units) / cfg.physical_units
                model = A.predict_waf(policy, spare, np_)
                rows.append(f"| {policy} | {op:.0%} | {np_} | {model:.3f} | {waf:.3f} | {100 * (waf / model - 1):+.2f}% |")
    return rows


def real_drive_table() -> list[str]:
    from swaptrace import load_device
    from swaptrace.ssd.steady import Background, layout

    cfg = load_device("nvme-tlc")
    swap_units = (64 << 30) // cfg.map_bytes
    rows = ["| drive | background | steady state ready (wall s) | requests | wall s | CPU s | requests/s (wall) "
            "| requests/s (CPU) | WAF |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for bg in (Background(0.8, 0.5, "pool"), Background(1.0, 1.0, "pool")):
        t = _clock()
        sim = Simulator(cfg, timing=True, iodepth=32)
        sim.start_steady(layout(cfg, 0, swap_units, bg), seed=1)
        ready = _since(t)[0]
        rng = np.random.default_rng(2)
        n = 1 << 22
        ops = np.full(n, traceio.OP_WRITE, dtype=np.int8)
        ones = np.ones(n, dtype=np.int64)
        sim.run(ops, rng.integers(0, swap_units, n), ones, record=False)  # leave the first erased blocks behind
        before = sim.counters()
        t = _clock()
        sim.run(ops, rng.integers(0, swap_units, n), ones)
        wall, cpu = _since(t)
        waf = (sim.counters() - before).waf
        rows.append(f"| nvme-tlc 512 GiB, 64 GiB swap partition | fill {bg.fill:.0%}, overwritten "
                    f"{bg.overwritten:.0%} | {ready:.1f} | {n:,} | {wall:.2f} | {cpu:.2f} | {n / wall / 1e6:.2f} M "
                    f"| {n / cpu / 1e6:.2f} M | {waf:.2f} |")
        del sim
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2^18-unit devices and fewer writes")
    parser.add_argument("--rss-child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--no-real", action="store_true", help="skip the 512 GiB real-drive table")
    args = parser.parse_args()
    if args.rss_child:  # the subprocess whose peak RSS is reported
        time_pure(device(args.rss_child, 0.28, 64, "greedy"), args.rss_child)
        return
    print("## SSD model: FTL throughput (uniform random 4 KiB writes, full drive, GC active)\n")
    print("\n".join(throughput_table(args.quick)))
    print("\n## SSD model: simulated WAF vs Desnoyers (SYSTOR 2012), 8 drive writes after a sequential fill\n")
    print("\n".join(waf_table(args.quick)))
    if not args.no_real:
        print("\n## SSD model: the real nvme-tlc in steady state, timing on (QD 32, 4 KiB random writes)\n")
        print("\n".join(real_drive_table()))


if __name__ == "__main__":
    main()
