"""The kernel's swap-out requests call by call, level by level, from a capture's raw ftrace text.

``swaptrace capture TRACE --trace-reclaim --raw-trace FILE`` keeps every ``block_rq_issue`` line beside the
memcg reclaim tracepoints. This script groups the write requests by the reclaim call they were issued in
(``mm_vmscan_memcg_reclaim_begin`` .. ``_end`` of the task; a request issued after a call's end by kblockd,
from a plug flushed at a sleep, counts for the call before it) and answers two questions of
research/notes/swapout-merge.md:

* ``--calls N``: the first N calls that wrote, each with its requests (pages) and the pages each priority
  level scanned -- a level's writes form one request (one block plug per level, ``shrink_lruvec``,
  mm/vmscan.c), cut at 128 pages (the loop device's 128 segments);
* the device's latency in the emulator's clock units: in each call that wrote at least ``--min-written``
  pages before it freed one, the pages it isolated between its first write and its first batch that freed a
  page (``nr_reclaimed > 0``: a write completed and was rotated to the tail). The selection biases it upward
  with ``--min-written``; it brackets ``write_latency``, it does not fit it.

::

    .venv/bin/python research/write_bursts.py capture.trace.txt --calls 20
    .venv/bin/python research/write_bursts.py runs/*.trace.txt --min-written 64
"""

from __future__ import annotations

import argparse
import lzma
import re
import statistics
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

_LINE = re.compile(r"\s(?P<t>\d+\.\d+):\s+(?P<ev>\w+):\s?(?P<body>.*)$")
_KV = re.compile(r"(\w+)=(-?\d+)")
PAGE_BYTES = 4096


@dataclass
class Call:
    """One reclaim call: its write requests (pages), its levels' scans, and the latency statistic."""

    step: int = 0
    writes: list[int] = field(default_factory=list)
    scanned_by_level: dict[int, int] = field(default_factory=dict)
    first_write_ns: int | None = None
    written_before_free: int = 0
    isolated_before_free: int = 0
    freed_after_write: bool = False
    latency_ns: int | None = None


def _lines(path: Path) -> Iterator[str]:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", errors="replace") as fh:
        yield from fh


def parse(lines: Iterable[str]) -> list[Call]:
    """The reclaim calls of one raw trace, in order (writes outside any call before the first are dropped)."""
    calls: list[Call] = []
    cur: Call | None = None
    step = 0
    for line in lines:
        m = _LINE.search(line)
        if not m:
            continue
        t_ns = int(round(float(m["t"]) * 1e9))
        ev, body = m["ev"], m["body"]
        if ev == "tracing_mark_write" and "step" in body:
            step = int(body.split()[-1])
        elif ev == "mm_vmscan_memcg_reclaim_begin":
            cur = Call(step=step)
            calls.append(cur)
        elif ev == "mm_vmscan_memcg_reclaim_end":
            cur = None
        elif ev == "block_rq_issue":
            f = body.split()
            if len(f) < 3 or not f[1].startswith("W"):
                continue
            owner = cur or (calls[-1] if calls else None)
            if owner is None:
                continue
            pages = int(f[2]) // PAGE_BYTES
            owner.writes.append(pages)
            if cur is not None and not cur.freed_after_write:
                if cur.first_write_ns is None:
                    cur.first_write_ns = t_ns
                cur.written_before_free += pages
        elif ev == "mm_vmscan_lru_shrink_inactive" and cur is not None:
            kv = dict(_KV.findall(body))
            scanned, prio = int(kv.get("nr_scanned", 0)), int(kv.get("priority", 0))
            cur.scanned_by_level[prio] = cur.scanned_by_level.get(prio, 0) + scanned
            if cur.first_write_ns is None or cur.freed_after_write:
                continue
            if int(kv.get("nr_reclaimed", 0)) > 0:
                cur.freed_after_write = True
                cur.latency_ns = t_ns - cur.first_write_ns
            else:
                cur.isolated_before_free += scanned
    return calls


def latencies(calls: Sequence[Call], min_written: int) -> list[Call]:
    """The calls that wrote at least ``min_written`` pages before freeing one, and then freed one."""
    return [c for c in calls if c.freed_after_write and c.written_before_free >= min_written]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", type=Path, help="raw ftrace text of captures (.txt or .xz)")
    ap.add_argument("--calls", type=int, default=0, help="print the first N calls that wrote, level by level")
    ap.add_argument("--min-written", type=int, default=64, help="pages a call writes before its first free")
    args = ap.parse_args(argv)
    pooled: list[int] = []
    for path in args.traces:
        if not path.is_file():
            print(f"write_bursts.py: {path}: no such file", file=sys.stderr)
            return 2
        calls = parse(_lines(path))
        wrote = [c for c in calls if c.writes]
        for c in wrote[: args.calls]:
            levels = " ".join(f"{p}:{n}" for p, n in sorted(c.scanned_by_level.items(), reverse=True))
            print(f"step {c.step:4d}  {sum(c.writes):5d} pages in {c.writes}  scanned by level {levels}")
        lat = latencies(calls, args.min_written)
        iso = [c.isolated_before_free for c in lat]
        pooled += iso
        if iso:
            ms = statistics.median(c.latency_ns for c in lat) / 1e6
            print(f"{path.name}: {len(calls)} calls, {len(wrote)} wrote; {len(lat)} wrote >= {args.min_written} "
                  f"before freeing: isolated meanwhile median {statistics.median(iso):.0f} pages, {ms:.1f} ms")
        else:
            print(f"{path.name}: {len(calls)} calls, {len(wrote)} wrote; none wrote >= {args.min_written} before freeing")
    if len(args.traces) > 1 and pooled:
        print(f"pooled: {len(pooled)} calls, median {statistics.median(pooled):.0f} pages isolated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
