"""Billion-access MRC: SHARDS streamed over a partitioned trace of >= 10^9 accesses in bounded memory.

Run: ``python benchmarks/bench_scale.py [--accesses 1e9] [--preset rm1] [--workers 2] [--prefix 1e8]``
(about 15-25 minutes on 2 cores and 2.5 GB of disk for the 10^9 default; ``--quick``: 2x10^7 accesses,
a 5x10^6 prefix, under a minute).

1. generates the trace as a dataset with :func:`generate_dataset` (Dask,
   ``--workers`` processes) under ``$TMPDIR``, after checking free disk space;
2. in a child process, :func:`shards_mrc` (fixed rate ``--rate``) streams over
   the whole dataset: wall time and the child's peak RSS (target <= 2 GiB);
3. in another child, the exact LRU curve (:func:`mrc_from_chunks`, Mattson
   stack distances with a Fenwick tree) and SHARDS over the first
   ``--prefix`` accesses: MAE between the two (miss ratio, 100 sizes evenly
   spaced to the footprint; :func:`swaptrace.mrc.mean_absolute_error`);
4. deletes the dataset.

With ``--accesses`` below 10^9 the report extrapolates time linearly to 10^9
(SHARDS and generation are linear in the accesses; memory depends on the
footprint only) and labels it so.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BYTES_PER_ACCESS = 2.5  # zstd Parquet of an access trace, with margin (about 2 B measured for rm1)


def _child(mode: str, path: str, rate: float, prefix: int) -> None:
    """Run one measurement in this (child) process; print its result as JSON."""
    import numpy as np

    from swaptrace import open_trace, shards_mrc
    from swaptrace.mrc import mean_absolute_error, mrc_from_chunks, shards_from_chunks

    t = time.perf_counter()
    if mode == "shards":
        curve = shards_mrc(path, sample_rate=rate)
        out = {"accesses": curve.accesses, "seconds": time.perf_counter() - t}
    else:
        tf = open_trace(path, "access")
        footprint = int(tf.meta["footprint_pages"])

        def head():
            left = prefix
            for b in tf.iter_batches(["page"]):
                pages = np.ascontiguousarray(b["page"][:left], dtype=np.int64)
                left -= pages.size
                yield pages
                if left <= 0:
                    return

        exact = mrc_from_chunks(head(), footprint, tf.page_bytes)
        t_exact = time.perf_counter() - t
        approx = shards_from_chunks(head(), footprint, tf.page_bytes, sample_rate=rate)
        out = {"accesses": exact.accesses, "exact_seconds": t_exact,
               "shards_seconds": time.perf_counter() - t - t_exact,
               "mae": mean_absolute_error(approx, exact)}
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))


def _run_child(mode: str, path: Path, rate: float, prefix: int) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--path", str(path), "--rate", str(rate),
           "--prefix", str(prefix)]
    t = time.perf_counter()
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_seconds"] = time.perf_counter() - t
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accesses", type=float, default=1e9)
    ap.add_argument("--preset", default="rm1")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--prefix", type=float, default=1e8)
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--quick", action="store_true", help="2e7 accesses, 5e6 prefix (a smoke run)")
    ap.add_argument("--child", choices=("shards", "prefix"), default=None)
    ap.add_argument("--path", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the dataset (default: delete it)")
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.path, args.rate, int(args.prefix))
        return
    if args.quick:
        args.accesses, args.prefix = min(args.accesses, 2e7), min(args.prefix, 5e6)

    from swaptrace.parallel.generate import generate_dataset
    from swaptrace.workload.generate import generate_arrays

    per_step = generate_arrays(args.preset, steps=1)["page"].size
    steps = math.ceil(args.accesses / per_step)
    need = steps * per_step * BYTES_PER_ACCESS
    tmp_root = Path(tempfile.gettempdir())
    free = shutil.disk_usage(tmp_root).free
    if free < 2 * need:
        sys.exit(f"{tmp_root}: {free / 2**30:.1f} GiB free; need about {2 * need / 2**30:.1f} GiB")
    root = Path(tempfile.mkdtemp(prefix="swaptrace-scale-", dir=tmp_root))
    out = root / f"{args.preset}.access.parquet"
    print(f"{args.preset}: {per_step:,} accesses per step -> {steps:,} steps; {free / 2**30:.0f} GiB free in {tmp_root}",
          flush=True)
    try:
        load0 = os.getloadavg()[0]
        t = time.perf_counter()
        generate_dataset(args.preset, out, steps=steps, workers=args.workers)
        gen_s = time.perf_counter() - t
        size = sum(f.stat().st_size for f in out.iterdir())
        print(f"generated in {gen_s:.0f} s (load avg {load0:.1f} at start), {size / 2**30:.2f} GiB on disk", flush=True)
        load1 = os.getloadavg()[0]
        shards = _run_child("shards", out, args.rate, 0)
        load2 = os.getloadavg()[0]
        prefix = _run_child("prefix", out, args.rate, int(args.prefix))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    n = shards["accesses"]
    scale = 1e9 / n
    rows = [
        "| measure | value | load avg (1 min) before |",
        "|---|---|---|",
        f"| accesses (dataset, {args.preset}) | {n:,} | |",
        f"| generation, Dask {args.workers} workers | {gen_s:.0f} s ({n / gen_s / 1e6:.1f} M accesses/s) | {load0:.1f} |",
        f"| SHARDS R={args.rate} over the dataset | {shards['seconds']:.0f} s ({n / shards['seconds'] / 1e6:.1f} M/s) | {load1:.1f} |",
        f"| SHARDS peak RSS (child process) | {shards['peak_rss_bytes'] / 2**20:.0f} MiB | |",
        f"| exact MRC, first {prefix['accesses']:,} accesses | {prefix['exact_seconds']:.0f} s | {load2:.1f} |",
        f"| SHARDS on that prefix | {prefix['shards_seconds']:.0f} s | |",
        f"| MAE SHARDS vs exact on the prefix | {prefix['mae']:.5f} | |",
        f"| peak RSS, exact + SHARDS on the prefix | {prefix['peak_rss_bytes'] / 2**20:.0f} MiB | |",
    ]
    if n < 1e9:
        rows.append(f"| **extrapolated** to 10^9 accesses (linear x{scale:.2f}): generation / SHARDS | "
                    f"{gen_s * scale:.0f} s / {shards['seconds'] * scale:.0f} s (memory unchanged) | |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
