"""Throughput of the capture/compare pieces that do not need root.

* ftrace text -> swapio columns (``parse_lines`` + ``to_stream``) in lines/s,
  against a bare ``str.split`` parser that does no validation (the floor);
* ``stream_summary`` on a swapio file, rows/s;
* the child's replay kernel (numba) on resident memory, accesses/s, against
  the same loop in plain Python (``tests/naive_capture.naive_replay``).

Run: ``python benchmarks/bench_capture.py [--quick]`` (medians of 3 repeats).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _measure import median_time  # noqa: E402
from naive_capture import naive_replay  # noqa: E402

from swaptrace.capture.convert import parse_lines, to_stream  # noqa: E402
from swaptrace.compare import stream_summary  # noqa: E402
from swaptrace.core.traceio import TraceWriter  # noqa: E402
from swaptrace.kernels.capture.replay import replay_codes  # noqa: E402


def _median(fn, repeats=3):
    return median_time(fn, repeats)[0]




def _lines(n, rng):
    sectors = rng.integers(0, 1 << 21, n)
    sizes = rng.choice([8, 16, 24, 64, 1024], n, p=[0.7, 0.15, 0.08, 0.05, 0.02])
    ops = rng.choice(["R", "W"], n)
    out = []
    for i in range(n):
        if i % 500 == 0:
            out.append(f"  python-901 [000] ...1.  {100 + i * 1e-5:.6f}: tracing_mark_write: swaptrace step {i // 500}")
        out.append(f"  python-901 [001] .....  {100 + i * 1e-5:.6f}: block_rq_issue: 7,0 {ops[i]} "
                   f"{sizes[i] * 512} () {sectors[i]} + {sizes[i]} be,0,4 [python]")
    return out


def _split_parser(lines):
    rows = []
    for line in lines:
        if "block_rq_issue:" in line:
            f = line.split("block_rq_issue:")[1].split()
            rows.append((f[1], int(f[2]), int(f[4])))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n_lines = 50_000 if args.quick else 300_000
    n_rows = 200_000 if args.quick else 2_000_000
    n_acc = 20_000 if args.quick else 200_000
    lines = _lines(n_lines, rng)
    rows = []

    t_ours = _median(lambda: to_stream(parse_lines(lines, device=(7, 0))))
    t_split = _median(lambda: _split_parser(lines))
    rows.append(("ftrace lines -> swapio columns", f"{len(lines):,} lines", len(lines) / t_ours, "lines/s",
                 "bare str.split parser", t_ours / t_split))

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "b.swapio.parquet"
        with TraceWriter(path, "swapio", {"source": "bench", "page_bytes": 4096, "steps": 100}) as w:
            w.write(t_us=np.arange(n_rows, dtype=np.float64), step=(np.arange(n_rows) * 100 // n_rows).astype(np.uint32),
                    op=rng.integers(0, 2, n_rows).astype(np.int8), offset=rng.integers(0, 1 << 30, n_rows).astype(np.uint64),
                    length=(rng.integers(1, 9, n_rows) * 4096).astype(np.uint32), cause=np.zeros(n_rows, np.int8))
        t_sum = _median(lambda: stream_summary(path))
        rows.append(("stream_summary", f"{n_rows:,} rows", n_rows / t_sum, "rows/s", "-", None))

    pages = 4096
    codes = ((rng.integers(0, pages, n_acc) << 1) | rng.integers(0, 2, n_acc)).astype(np.int64)
    mem = np.zeros(pages * 4096, dtype=np.uint8)
    replay_codes(mem, codes[:10], 4096, 4096)  # compile outside the timing
    t_kernel = _median(lambda: replay_codes(mem, codes, 4096, 4096))
    small = codes[: n_acc // 10]
    ref = bytearray(pages * 4096)
    t_naive = _median(lambda: naive_replay(ref, small, 4096, 4096)) * 10
    rows.append(("replay kernel (resident memory)", f"{n_acc:,} accesses", n_acc / t_kernel, "accesses/s",
                 "plain Python loop", t_kernel / t_naive))

    print("| what | input | throughput | unit | peer | time / peer time |")
    print("|---|---|---|---|---|---|")
    for what, size, rate, unit, peer, ratio in rows:
        r = f"{ratio:.2f}" if ratio is not None else "-"
        print(f"| {what} | {size} | {rate:,.0f} | {unit} | {peer} | {r} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
