"""Benchmark of the trace generator: numba kernels vs a vectorised numpy twin, and peak RSS.

Run: ``python benchmarks/bench_generate.py [--quick]``. Prints a markdown table:

* page accesses per second of ``swaptrace.workload.generate`` (numba, ``prange`` over
  (step, table) units for the draws) and of :func:`numpy_generate`, a
  straightforward vectorised numpy implementation of the same generator
  (same distributions and page order, numpy's own RNG), for
  ``criteo-kaggle`` and ``mlperf-dcnv2``, in the same run, medians of 3;
* ``swaptrace generate --preset criteo-kaggle`` writing 10^8 accesses to
  Parquet, end to end, in a child process (median of 3): accesses per second
  beside the numpy twin's (measured above, in memory), wall, file size and
  peak RSS, and the peak RSS at 10^7 accesses (memory must not grow with length);
* the Parquet encodings of the access writer (:data:`swaptrace.core.traceio.ENCODINGS`)
  against the alternatives, on 10^7 criteo-kaggle accesses: CPU per access of
  the writing thread and bytes per access (docs/benchmarks.md keeps the table).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from swaptrace import load_spec
from swaptrace.workload.generate import iter_accesses
from swaptrace.workload.layout import build_layout
from swaptrace.workload.zipf import scramble_params, zipf_constants

# --- the numpy twin ---------------------------------------------------------------


def _h_int(x, s):
    lx = np.log(x)
    y = (1.0 - s) * lx
    small = np.abs(y) <= 1e-8
    safe = np.where(small, 1.0, y)
    return np.where(small, 1.0 + y * 0.5 * (1.0 + y / 3.0 * (1.0 + 0.25 * y)), np.expm1(safe) / safe) * lx


def _h_int_inv(x, s):
    t = np.maximum(x * (1.0 - s), -1.0)
    small = np.abs(t) <= 1e-8
    safe = np.where(small, 1.0, t)
    return np.exp(np.where(small, 1.0 - t * (0.5 - t * (1.0 / 3.0 - 0.25 * t)), np.log1p(safe) / safe) * x)


def numpy_zipf(rng: np.random.Generator, n: int, s: float, size: int) -> np.ndarray:
    """Rejection-inversion (Hörmann & Derflinger 1996), vectorised: redraw the rejected until none is left."""
    h_x1, h_n, big_s = zipf_constants(n, s)
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        u = h_n + rng.random(todo.size) * (h_x1 - h_n)
        x = _h_int_inv(u, s)
        k = np.clip((x + 0.5).astype(np.int64), 1, n)
        ok = (k - x <= big_s) | (u >= _h_int(k + 0.5, s) - np.exp(-s * np.log(k)))
        out[todo[ok]] = k[ok]
        todo = todo[~ok]
    return out


def _expand(first_byte: np.ndarray, nbytes: int, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """Pages of each byte range, concatenated; and how many per range."""
    p0 = first_byte >> shift
    counts = ((first_byte + nbytes - 1) >> shift) - p0 + 1
    if np.all(counts == 1):
        return p0, counts
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(p0, counts) + (np.arange(counts.sum()) - starts), counts


def numpy_generate(spec, steps: int, seed: int = 0, page_bytes: int = 4096):
    """Yield one step at a time as (step, page, write, region) arrays (no reuse, no dedup)."""
    lay = build_layout(spec, page_bytes)
    shift = lay.page_shift
    regions = lay.regions
    ab = [scramble_params(seed, i, t.rows) for i, t in enumerate(spec.tables)]

    def whole(region: int, write: bool):
        r = regions[region]
        pg = np.arange(r.first_page, r.first_page + r.pages, dtype=np.int64)
        return pg, np.full(pg.size, write), np.full(pg.size, region)

    for step in range(steps):
        rng = np.random.default_rng([seed, step])
        pages, writes, regs = [], [], []
        rows_of = []
        for i, t in enumerate(spec.tables):
            if t.lookups.fixed:
                total = spec.batch_size * t.lookups.values[0]
            else:
                total = int(rng.choice(t.lookups.values, size=spec.batch_size, p=t.lookups.probs).sum())
            a, b = ab[i]
            rows = (a * (numpy_zipf(rng, t.rows, t.alpha, total) - 1) + b) % t.rows
            rows_of.append(rows)
            pg, _ = _expand(lay.table_first_byte[i] + rows * t.row_bytes, t.row_bytes, shift)
            pages.append(pg)
            writes.append(np.zeros(pg.size, bool))
            regs.append(np.full(pg.size, lay.table_region[i]))
        for region, write in ((lay.mlp_region, False), (lay.scratch_region, True)):
            pg, wr, rg = whole(region, write)
            pages.append(pg)
            writes.append(wr)
            regs.append(rg)
        for i, t in enumerate(spec.tables):
            uniq = np.unique(rows_of[i])
            parts = []  # (pages, counts, write, region) in per-row order
            for c in range(lay.state_arrays):
                srb = int(lay.state_row_bytes[i])
                pg, cnt = _expand(lay.state_first_byte[i] + c * lay.state_array_bytes[i] + uniq * srb, srb, shift)
                parts += [(pg, cnt, False, lay.state_region[i]), (pg, cnt, True, lay.state_region[i])]
            pg, cnt = _expand(lay.table_first_byte[i] + uniq * t.row_bytes, t.row_bytes, shift)
            parts += [(pg, cnt, False, lay.table_region[i]), (pg, cnt, True, lay.table_region[i])]
            row_key = np.concatenate([np.repeat(np.arange(uniq.size), cnt) for _, cnt, _, _ in parts])
            seq = np.concatenate([np.full(p.size, j) for j, (p, _, _, _) in enumerate(parts)])
            order = np.lexsort((seq, row_key))
            pages.append(np.concatenate([p for p, _, _, _ in parts])[order])
            writes.append(np.concatenate([np.full(p.size, w) for p, _, w, _ in parts])[order])
            regs.append(np.concatenate([np.full(p.size, r) for p, _, _, r in parts])[order])
        for region in (lay.mlp_region, lay.mlp_state_region):
            if region >= 0:
                pg, wr, rg = whole(region, True)
                pages.append(pg)
                writes.append(wr)
                regs.append(rg)
        page = np.concatenate(pages).astype(np.uint64)
        yield (np.full(page.size, step, np.uint32), page, np.concatenate(writes), np.concatenate(regs).astype(np.uint16))


# --- measurements --------------------------------------------------------------------


def _rate(fn) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = fn()
    return n / (time.perf_counter() - t0), n


def throughput(preset: str, steps: int, repeats: int) -> dict:
    spec = load_spec(preset)
    sum(len(c["page"]) for c in iter_accesses(spec, steps=1))  # compile outside the timing
    numba_rates, numpy_rates = [], []
    for _ in range(repeats):  # interleaved, so both see the same machine load
        r, n = _rate(lambda: sum(len(c["page"]) for c in iter_accesses(spec, steps=steps, copy=False)))
        numba_rates.append(r)
        r2, _ = _rate(lambda: sum(len(c[1]) for c in numpy_generate(spec, steps)))
        numpy_rates.append(r2)
    a, b = statistics.median(numba_rates), statistics.median(numpy_rates)
    return {"preset": preset, "steps": steps, "accesses": n, "numba": a, "numpy": b, "ratio": a / b}


def _child_rss(cmd: list[str]) -> tuple[int, float]:
    """Peak RSS (bytes) and wall seconds of a child command."""
    code = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        f"subprocess.run({cmd!r}, check=True, stdout=subprocess.DEVNULL); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]) * 1024, float(out[1])


def peak_rss(accesses: int, repeats: int) -> dict:
    spec = load_spec("criteo-kaggle")
    per_step = sum(len(c["page"]) for c in iter_accesses(spec, steps=5)) / 5
    steps = max(1, round(accesses / per_step))
    exe = str(Path(sys.executable).with_name("swaptrace"))
    rss, secs = [], []
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        for i in range(repeats):
            out = Path(tmp) / f"k{i}.access.parquet"
            r, s = _child_rss([exe, "generate", "--preset", "criteo-kaggle", "--steps", str(steps), "-o", str(out)])
            rss.append(r)
            secs.append(s)
            size = out.stat().st_size
            out.unlink()
    return {"steps": steps, "accesses": int(per_step * steps), "rss": statistics.median(rss),
            "seconds": statistics.median(secs), "file_bytes": size}


#: (name, pyarrow.parquet.ParquetWriter options) of the access writer's choices; the first is what files had
#: up to 0.7.2 (zstd at its default level, dictionaries and statistics everywhere)
ENCODING_CHOICES = (
    ("zstd (level 3), dictionary, statistics: files up to 0.7.2", dict(compression="zstd")),
    ("zstd 1, dictionary", dict(compression="zstd", compression_level=1)),
    ("zstd 1, no dictionary", dict(compression="zstd", compression_level=1, use_dictionary=False)),
    ("zstd 1, no dictionary, page BYTE_STREAM_SPLIT", dict(compression="zstd", compression_level=1, use_dictionary=False,
                                                         column_encoding={"page": "BYTE_STREAM_SPLIT"})),
    ("zstd 1, no dictionary, step+page DELTA_BINARY_PACKED",
     dict(compression="zstd", compression_level=1, use_dictionary=False,
          column_encoding={"step": "DELTA_BINARY_PACKED", "page": "DELTA_BINARY_PACKED"})),
    ("zstd 1, no dictionary, page DELTA, statistics on step only",
     dict(compression="zstd", compression_level=1, use_dictionary=False, write_statistics=["step"],
          column_encoding={"page": "DELTA_BINARY_PACKED"})),
    ("snappy, no dictionary, page DELTA, statistics on step only",
     dict(compression="snappy", use_dictionary=False, write_statistics=["step"],
          column_encoding={"page": "DELTA_BINARY_PACKED"})),
    ("LZ4, no dictionary, page DELTA, statistics on all", dict(compression="lz4", use_dictionary=False,
                                                             column_encoding={"page": "DELTA_BINARY_PACKED"})),
    ("LZ4, no dictionary, page DELTA, statistics on step only",
     dict(compression="lz4", use_dictionary=False, write_statistics=["step"],
          column_encoding={"page": "DELTA_BINARY_PACKED"})),
    ("none, no dictionary, page DELTA, statistics on step only",
     dict(compression="none", use_dictionary=False, write_statistics=["step"],
          column_encoding={"page": "DELTA_BINARY_PACKED"})),
)


def encodings(steps: int, repeats: int) -> list[dict]:
    """CPU seconds of pyarrow's writer (this thread) and bytes per access for each choice, and for
    :data:`swaptrace.core.traceio.ENCODINGS` (the writer's choice, with its batch size), on the same tables.

    Row groups of 2^20 rows as the writer makes them; best of ``repeats`` (CPU time of one thread does not
    depend much on the machine's load, its minimum the least).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from swaptrace.core import traceio

    schema = traceio.ACCESS_SCHEMA
    tables = [pa.Table.from_arrays([pa.array(c[n]) for n in schema.names], schema=schema)
              for c in iter_accesses("criteo-kaggle", steps=steps)]
    n = sum(t.num_rows for t in tables)
    chosen = traceio.ENCODINGS["access"].writer_options(schema)
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        path = Path(tmp) / "e.parquet"
        for name, options in (*ENCODING_CHOICES, ("the writer's choice (traceio.ENCODINGS)", chosen)):
            best = float("inf")
            for _ in range(repeats):
                t0 = time.thread_time()
                with pq.ParquetWriter(path, schema, **options) as w:
                    for t in tables:
                        w.write_table(t, row_group_size=traceio.DEFAULT_ROW_GROUP)
                best = min(best, time.thread_time() - t0)
            rows.append({"name": name, "ns": best / n * 1e9, "bytes": path.stat().st_size / n})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs (about 10x faster)")
    args = ap.parse_args()
    repeats = 3
    kaggle_steps, dcn_steps, rss_accesses = (200, 1, 10_000_000) if args.quick else (1500, 2, 100_000_000)
    import numba

    print(f"# bench_generate ({'quick' if args.quick else 'full'}): {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, numba threads {numba.get_num_threads()}, medians of {repeats}\n")
    print("| preset | steps | page accesses | numba (M accesses/s) | numpy (M accesses/s) | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    results = []
    for preset, steps in (("criteo-kaggle", kaggle_steps), ("mlperf-dcnv2", dcn_steps)):
        r = throughput(preset, steps, repeats)
        results.append(r)
        print(f"| {r['preset']} | {r['steps']} | {r['accesses']:,} | {r['numba'] / 1e6:.1f} | {r['numpy'] / 1e6:.2f} "
              f"| {r['ratio']:.1f}x |", flush=True)
    numpy_rate = results[0]["numpy"]  # criteo-kaggle's: the peer beside the end-to-end figure
    big, small = peak_rss(rss_accesses, repeats), peak_rss(rss_accesses // 10, repeats)
    print("\n| run | steps | page accesses | wall (s) | M accesses/s end to end | numpy twin in memory (M/s) | ratio "
          "| Parquet size (bytes/access) | peak RSS | peak RSS at 1/10 the length |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| `swaptrace generate --preset criteo-kaggle` to Parquet | {big['steps']} | {big['accesses']:,} | "
          f"{big['seconds']:.1f} | {big['accesses'] / big['seconds'] / 1e6:.1f} | {numpy_rate / 1e6:.2f} | "
          f"{big['accesses'] / big['seconds'] / numpy_rate:.0f}x | {big['file_bytes'] / 2**20:.0f} MiB "
          f"({big['file_bytes'] / big['accesses']:.3f}) | {big['rss'] / 2**20:.0f} MiB | {small['rss'] / 2**20:.0f} MiB |")
    rows = encodings(150 if args.quick else 1200, repeats)
    before = rows[0]
    print("\n| access writer encoding (criteo-kaggle, 2^20-row groups) | writer CPU (ns/access) | bytes/access "
          "| size vs before |")
    print("|---|---:|---:|---:|")
    for e in rows:
        print(f"| {e['name']} | {e['ns']:.1f} | {e['bytes']:.3f} | {e['bytes'] / before['bytes']:.2f}x |")
    print(f"\nload average (1/5/15 min): {' / '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
