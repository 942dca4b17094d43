"""The kernel's reclaim one call at a time, from the raw trace of a capture: seconds, no root to read.

``swaptrace capture --trace-reclaim`` keeps per-step sums of the reclaim tracepoints (``kernel.reclaim``);
``--raw-trace FILE`` also keeps the ftrace text they came from. This script lists every memory-cgroup
reclaim call of that text (:func:`swaptrace.capture.reclaim.reclaim_calls`) with what the step sums hide:
when it ran, how long it took, the gap since the call before it (the process's own time, and any wait
outside reclaim), the lowest priority it reached, what it scanned, kept (first look), activated and freed,
and the pages written by block requests issued while it ran. These are what the emulator's ``linux``
policy must reproduce call by call (research/notes/calibration.md, "The kernel's reclaim call by call").

::

    sudo .venv/bin/swaptrace capture TRACE --memory 131.7MiB --no-baseline --trace-reclaim \\
        --raw-trace /var/tmp/x.txt -o /var/tmp/x.kernel.swapio.parquet
    .venv/bin/python research/reclaim_calls.py /var/tmp/x.txt --steps 7 8     # every call of two steps
    .venv/bin/python research/reclaim_calls.py /var/tmp/x.txt --min-scanned 2000   # the long calls

Four such traces are kept, ``xz``-compressed, in ``research/results/reclaim-calls/`` (``demo`` 20 steps at
17.5 % and 20 % of its footprint and at ×0.98 of each; captured 2026-12-01), beside this script's tables of
their calls of at least 1 000 scanned pages (``--min-scanned 1000``).

Bad input (a missing or empty file, a trace with no reclaim call) is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def read_lines(path: Path) -> list[str]:
    """The text of a raw trace, ``xz``-compressed if its name ends in ``.xz`` (as the kept ones are)."""
    import lzma

    try:
        if path.suffix == ".xz":
            with lzma.open(path, "rt", errors="replace") as fh:
                return fh.read().splitlines()
        return path.read_text(errors="replace").splitlines()
    except (OSError, lzma.LZMAError) as e:
        raise ValueError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None


def call_rows(lines: Sequence[str]) -> list[dict]:
    """One dict per reclaim call: the call's counters, its timing (µs) and the pages written during it.

    Times are relative to the capture's ``start`` marker (the first event if there is none). A write
    request counts for a call when it was issued between the call's ``begin`` and ``end``, both included.
    """
    from swaptrace.capture.convert import parse_lines
    from swaptrace.capture.reclaim import reclaim_calls
    from swaptrace.core.traceio import OP_WRITE

    parsed = parse_lines(lines)
    calls, _ = reclaim_calls(lines, parsed.markers)
    starts = [t for t, what, _ in parsed.markers if what == "start"]
    t0 = starts[0] if starts else (calls[0].begin_ns if calls else 0)
    writes = parsed.op == OP_WRITE
    wt = parsed.t_ns[writes]
    order = np.argsort(wt, kind="stable")
    wt, wpages = wt[order], (parsed.length[writes] // 4096)[order]
    cum = np.concatenate([[0], np.cumsum(wpages)])
    rows, last_end = [], None
    for i, c in enumerate(calls):
        lo, hi = np.searchsorted(wt, c.begin_ns, side="left"), np.searchsorted(wt, c.end_ns, side="right")
        rows.append({"call": i, "step": c.step, "start_ms": (c.begin_ns - t0) / 1e6,
                     "gap_us": None if last_end is None else (c.begin_ns - last_end) / 1e3,
                     "duration_us": (c.end_ns - c.begin_ns) / 1e3, "min_priority": c.min_priority,
                     "scanned": c.scanned, "kept": c.kept, "activated": c.activated, "freed": c.reclaimed,
                     "deactivated": c.deactivated, "written": int(cum[hi] - cum[lo])})
        last_end = c.end_ns
    return rows


def markdown(rows: Sequence[dict], steps: Sequence[int] | None = None, min_scanned: int = 0) -> str:
    """The calls of ``steps`` (all if None) that scanned at least ``min_scanned`` pages, and per-step totals."""
    shown = [r for r in rows if (steps is None or r["step"] in steps) and r["scanned"] >= min_scanned]
    lines = ["| call | step | start (ms) | gap (µs) | duration (µs) | lowest priority | scanned | kept | activated "
             "| freed | deactivated | written during the call |", "|" + "---|" * 12]
    for r in shown:
        gap = "–" if r["gap_us"] is None else f"{r['gap_us']:.0f}"
        lines.append(f"| {r['call']} | {r['step']} | {r['start_ms']:.1f} | {gap} | {r['duration_us']:.0f} "
                     f"| {r['min_priority']} | {r['scanned']} | {r['kept']} | {r['activated']} | {r['freed']} "
                     f"| {r['deactivated']} | {r['written']} |")
    by_step: dict[int, list[dict]] = {}
    for r in rows:
        if steps is None or r["step"] in steps:
            by_step.setdefault(r["step"], []).append(r)
    lines += ["", "| step | calls | scanned | kept | activated | freed | written during calls | longest call (µs) "
              "| calls reaching priority 0 |", "|" + "---|" * 9]
    for s, rs in sorted(by_step.items()):
        lines.append(f"| {s} | {len(rs)} | {sum(r['scanned'] for r in rs)} | {sum(r['kept'] for r in rs)} "
                     f"| {sum(r['activated'] for r in rs)} | {sum(r['freed'] for r in rs)} "
                     f"| {sum(r['written'] for r in rs)} | {max(r['duration_us'] for r in rs):.0f} "
                     f"| {sum(r['min_priority'] == 0 for r in rs)} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw_trace", type=Path, help="ftrace text kept by `swaptrace capture --raw-trace`")
    ap.add_argument("--steps", type=int, nargs="+", help="only these training steps (default: all)")
    ap.add_argument("--min-scanned", type=int, default=0, help="list only calls that scanned this many pages")
    args = ap.parse_args(argv)
    try:
        if args.min_scanned < 0:
            raise ValueError(f"--min-scanned must be at least 0, got {args.min_scanned}")
        lines = read_lines(args.raw_trace)
        rows = call_rows(lines)
        if not rows:
            raise ValueError(f"{args.raw_trace} has no memory-cgroup reclaim call (was it captured with "
                             "--trace-reclaim --raw-trace?)")
        print(markdown(rows, args.steps, args.min_scanned), end="")
    except ValueError as e:
        print(f"reclaim_calls.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
