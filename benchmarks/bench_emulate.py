"""Benchmark the emulator and miss-ratio curves against libCacheSim (the peer).

On a ``demo``-preset trace of >= 10M accesses (``--quick``: ~1M) at half its
footprint, side by side in one run:

1. our ``lru`` emulation, writing the swap I/O stream, vs libCacheSim's LRU
   over the same trace exported to its oracleGeneral format (same miss count
   asserted); also our ``linux`` policy for reference;
2. our exact MRC (every size, one pass) vs libCacheSim at one size;
3. SHARDS at rate 0.01: mean absolute error against the exact curve and speed.

Medians of ``--repeats`` (default 3) runs (the LRU comparison: at least 5 pairs, ours then the peer, and its
worst pair, after one untimed pair), after a warm-up that loads the numba kernels from the on-disk cache; the
whole command in a fresh process and its peak RSS measured in a child process. Prints a markdown table.

Usage::

    python benchmarks/bench_emulate.py [--quick] [--repeats 3] [--trace FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from _measure import child_peak_rss_mib, child_run, median_time  # noqa: E402  (benchmarks/, the script's folder)

ACCESSES_PER_DEMO_STEP = 63_700  # measured: the demo preset touches ~63.7k pages per step




def demo_trace(steps: int, folder: Path) -> Path:
    from swaptrace import generate_trace

    path = folder / f"demo-{steps}.access.parquet"
    if not path.exists():
        print(f"generating {path} ({steps} steps of the demo preset) ...", file=sys.stderr)
        generate_trace("demo", path, steps=steps, seed=0)
    return path




def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="~1M accesses instead of >= 10M")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trace", type=Path, default=None, help="use this access trace instead of generating one")
    ap.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()) / "swaptrace-bench")
    args = ap.parse_args(argv)

    import libcachesim as lcs
    import numpy as np

    from swaptrace import emulate_trace, exact_mrc, open_trace, shards_mrc
    from swaptrace.mrc import mean_absolute_error, mrc_from_chunks, shards_from_chunks
    from swaptrace.workload.export import export_trace

    args.folder.mkdir(parents=True, exist_ok=True)
    steps = 16 if args.quick else -(-10_000_000 // ACCESSES_PER_DEMO_STEP) + 1
    trace = args.trace or demo_trace(steps, args.folder)
    tf = open_trace(trace, kind="access")
    n = tf.num_rows
    footprint = int(tf.meta["footprint_pages"])
    page_bytes = tf.page_bytes
    half = footprint // 2
    og = args.folder / (Path(trace).name.replace(".access.parquet", "") + ".oracleGeneral.bin")
    if not og.exists() or og.stat().st_mtime < Path(trace).stat().st_mtime:
        export_trace(trace, og, force=True)
    out = args.folder / "bench.swapio.parquet"

    # warm-up: load every kernel from numba's cache (compiling it the first time)
    small = args.folder / "warm.access.parquet"
    if not small.exists():
        from swaptrace import generate_trace

        generate_trace("tiny", small, steps=1, seed=0)
    for policy in ("lru", "linux"):
        emulate_trace(small, out, memory_fraction=0.5, policy=policy, force=True)
    exact_mrc(small)
    shards_mrc(small, 0.01)

    def ours_lru():
        return emulate_trace(trace, out, memory_bytes=half * page_bytes, policy="lru", readahead="none", force=True)

    def ours_linux():
        return emulate_trace(trace, out, memory_bytes=half * page_bytes, policy="linux", ensemble=None, force=True)

    def ours_linux_single():
        return emulate_trace(trace, out, memory_bytes=half * page_bytes, policy="linux", ensemble=False, force=True)

    tight = footprint * 15 // 100  # the ensemble's shared prefix is short at a tight budget

    def tight_linux():
        return emulate_trace(trace, out, memory_bytes=tight * page_bytes, policy="linux", ensemble=None, force=True)

    def tight_single():
        return emulate_trace(trace, out, memory_bytes=tight * page_bytes, policy="linux", ensemble=False, force=True)

    def peer_lru():
        reader = lcs.TraceReader(str(og), lcs.TraceType.ORACLE_GENERAL_TRACE)
        cache = lcs.LRU(cache_size=half * page_bytes)
        miss_ratio, _ = cache.process_trace(reader)
        return int(round(miss_ratio * n))

    # side by side: ours then the peer, pair by pair, so both see the same machine; the target holds for the
    # worst pair (the "slowest of 5 runs"), not only the median. One untimed pair first: a process's
    # first run over the 10^7-access trace grows its allocators' pools (Arrow's, the kernel state's; ours
    # 0.26-0.29 s against 0.12-0.15 s after, the peer's 0.53 s against 0.37-0.43 s); a user's whole command,
    # first run included, is the `swaptrace emulate` row below.
    ours_lru()
    peer_lru()
    pairs = []
    for _ in range(max(5, args.repeats)):
        t_o, res = median_time(ours_lru, 1)
        t_p, peer_misses = median_time(peer_lru, 1)
        if res.faults != peer_misses:
            raise SystemExit(f"miss counts differ: ours {res.faults}, libcachesim {peer_misses}")
        pairs.append((t_o, t_p))
    ratios = sorted(p / o for o, p in pairs)
    t_ours = sorted(o for o, _ in pairs)[len(pairs) // 2]
    t_peer = sorted(p for _, p in pairs)[len(pairs) // 2]
    t_linux, res_linux = median_time(ours_linux, args.repeats)
    t_single, res_single = median_time(ours_linux_single, args.repeats)
    t_tight, _ = median_time(tight_linux, args.repeats)
    t_tight_single, _ = median_time(tight_single, args.repeats)
    t_exact, exact = median_time(lambda: exact_mrc(trace), args.repeats)
    if exact.misses_at(half) != peer_misses:
        raise SystemExit(f"exact MRC at {half} pages: {exact.misses_at(half)} != libcachesim {peer_misses}")
    t_shards, shards = median_time(lambda: shards_mrc(trace, 0.01), args.repeats)
    mae = mean_absolute_error(exact, shards)
    # the same two curves from a page array already in memory: the kernels alone, without Parquet decoding
    pages = np.ascontiguousarray(tf.read_all(["page"])["page"], dtype=np.int64)
    t_exact_k, _ = median_time(lambda: mrc_from_chunks([pages], footprint, page_bytes), args.repeats)
    t_shards_k, _ = median_time(lambda: shards_from_chunks([pages], footprint, page_bytes, sample_rate=0.01),
                                args.repeats)

    rss = child_peak_rss_mib([str(Path(sys.executable).parent / "swaptrace"), "emulate", str(trace), "--memory",
                              str(half * page_bytes), "--policy", "lru", "-o", str(out), "--force"])
    # what a user waits for: the whole command in a fresh process, the default against --no-ensemble, in turn
    exe = str(Path(sys.executable).parent / "swaptrace")
    cli = [exe, "emulate", str(trace), "--memory", str(half * page_bytes), "-o", str(out), "--force"]
    runs = [(child_run(cli), child_run([*cli, "--no-ensemble"])) for _ in range(args.repeats)]
    cli_ens = sorted(r[0] for r in runs)[len(runs) // 2]
    cli_one = sorted(r[1] for r in runs)[len(runs) // 2]
    out.unlink(missing_ok=True)

    mps = lambda t: n / t / 1e6  # noqa: E731 - accesses per second, millions
    print(f"\n### bench_emulate: `demo` preset, {n:,} accesses, footprint {footprint:,} pages, "
          f"memory {half:,} pages (half); median of {args.repeats}; {os.cpu_count()} CPUs\n")
    print("| measurement | ours | libcachesim | ratio (ours/peer speed) | target |")
    print("|---|---|---|---|---|")
    print(f"| LRU, writing the swap stream (misses {res.faults:,} both), {len(pairs)} pairs side by side after an untimed one | "
          f"median {t_ours:.3f} s ({mps(t_ours):.2f} M/s), slowest {max(o for o, _ in pairs):.3f} s | "
          f"median {t_peer:.3f} s ({mps(t_peer):.2f} M/s) | worst pair {ratios[0]:.2f}x, median "
          f"{ratios[len(ratios) // 2]:.2f}x, best {ratios[-1]:.2f}x; slowest of ours vs slowest of the peer "
          f"{max(p for _, p in pairs) / max(o for o, _ in pairs):.2f}x | >= 3x (worst pair) |")
    print(f"| exact MRC, all {footprint + 1:,} sizes vs one size | {t_exact:.2f} s | {t_peer:.2f} s | "
          f"{t_peer / t_exact:.2f}x | >= 1x |")
    print(f"| SHARDS R=0.01 vs exact MRC | {t_shards:.3f} s, MAE {mae:.4f} | - | {t_exact / t_shards:.1f}x faster "
          f"than exact | MAE <= 0.01, >= 20x |")
    print(f"| same, kernels only (pages in memory) | exact {t_exact_k:.2f} s, SHARDS {t_shards_k:.3f} s | - | "
          f"{t_exact_k / t_shards_k:.1f}x faster than exact | >= 20x |")
    print(f"| `linux` policy (vma readahead), writing the stream | {t_linux:.2f} s ({mps(t_linux):.2f} M/s), "
          f"{res_linux.faults:,} faults, {res_linux.summary['requests']['write']:,} write requests; the default "
          f"ensemble of {len(res_linux.params['ensemble']['members'])} runs | - | - | - |")
    print(f"| `linux`, one run (`--no-ensemble`) | {t_single:.2f} s ({mps(t_single):.2f} M/s), "
          f"{res_single.faults:,} faults | - | - | - |")
    print(f"| `linux` default (ensemble) / one run, half the footprint | {t_linux:.2f} s / {t_single:.2f} s | - | "
          f"{t_linux / t_single:.2f}x one run | <= 3x |")
    print(f"| `linux` default (ensemble) / one run, 15 % of the footprint | {t_tight:.2f} s / {t_tight_single:.2f} s "
          f"| - | {t_tight / t_tight_single:.2f}x one run | <= 3x |")
    print(f"| `swaptrace emulate` (a fresh process), the default / `--no-ensemble`, half the footprint | "
          f"{cli_ens[0]:.2f} s / {cli_one[0]:.2f} s; peak RSS {cli_ens[1]:.0f} / {cli_one[1]:.0f} MiB | - | "
          f"{cli_ens[0] / cli_one[0]:.2f}x one run | - |")
    print(f"\nload average (1/5/15 min): {' / '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"| peak RSS, `swaptrace emulate --policy lru` (child process) | {rss:.0f} MiB | - | - | bounded by footprint |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
