"""The emulator's reclaim calls in start-up, beside the kernel's: how many pages a writing call writes.

The study's start-up writes are split finer by the emulator than by the kernel (research/results/real-training/
boot-2/README.md). This script runs the slow twin of the emulator (``tests/naive_emulate.py``, the ``linux``
policy with the settings ``emulate`` resolves for the trace) over the first ``--accesses`` rows of a process
trace's step 0 and counts, per reclaim call, the pages it scanned and wrote; with ``--kernel FILE`` (the raw
ftrace text of ``swaptrace capture --trace-reclaim --raw-trace FILE``) the same for the kernel's calls of step 0
(:func:`swaptrace.capture.reclaim.reclaim_calls`, as ``research/reclaim_calls.py`` reads them).

::

    .venv/bin/python research/startup_calls.py TRACE.access.parquet --memory 542420992 --write-cost 1 \\
        --kernel capture.trace.txt
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]


def emulator_calls(trace: Path, memory: int, write_cost: int, swap: int | None, accesses: int) -> list[tuple[int, int]]:
    """``(scanned, written)`` of each reclaim call of the twin over step 0's first ``accesses`` rows."""
    sys.path.insert(0, str(ROOT / "tests"))
    import naive_emulate as ne

    from swaptrace.core.traceio import open_trace
    from swaptrace.emulate.config import EmulatorConfig

    tf = open_trace(trace, kind="access")
    cfg = EmulatorConfig.resolve(tf.meta, memory_bytes=memory, write_cost=write_cost, swap_bytes=swap)
    t = pq.read_table(trace)
    sel = t["step"].to_numpy() == 0
    cols = {c: t[c].to_numpy()[sel][:accesses] if c in t.column_names else None
            for c in ("page", "write", "event", "zero")}
    calls: list[tuple[int, int]] = []
    levels, batch = ne.NaiveLinux.reclaim_levels, ne.NaiveLinux.shrink_batch
    scanned = [0]

    def counted_batch(self, take, emu, written):
        scanned[0] += min(take, len(self.inactive))
        return batch(self, take, emu, written)

    def counted_levels(self, n, emu):
        scanned[0], out = 0, emu.c["pages_out"]
        done = levels(self, n, emu)
        calls.append((scanned[0], emu.c["pages_out"] - out))
        return done

    ne.NaiveLinux.shrink_batch, ne.NaiveLinux.reclaim_levels = counted_batch, counted_levels
    c = dataclasses.asdict(cfg)
    emu = ne.NaiveEmulator(int(tf.meta["footprint_pages"]), cfg.budget_pages, policy=c["policy"],
                           readahead=c["readahead"], scan_priorities=c["scan_priorities"],
                           writeback_completion=c["writeback_completion"], write_cost=c["write_cost"],
                           fill_write_credit=c["fill_write_credit"], write_latency=c["write_latency"],
                           zero_page=c["zero_page"], zeromap=c["zeromap"], stats_flush_steps=c["stats_flush_steps"],
                           nslots=c["nslots"])
    emu.run(cols["page"].astype(np.int64), cols["write"], np.zeros(cols["page"].size, np.int64), cols["event"],
            cols["zero"])
    return calls


def kernel_calls(path: Path) -> list[tuple[int, int]]:
    """``(scanned, written)`` of each of the kernel's reclaim calls in step 0 of a raw trace (the pages of the
    write requests issued during the call, as ``research/reclaim_calls.py`` counts them)."""
    sys.path.insert(0, str(ROOT / "research"))
    from reclaim_calls import call_rows, read_lines
    return [(r["scanned"], r["written"]) for r in call_rows(read_lines(path)) if r["step"] == 0]


def describe(name: str, calls: list[tuple[int, int]]) -> str:
    w = [c for c in calls if c[1] > 0]
    if not w:
        return f"{name}: {len(calls)} calls, none wrote"
    return (f"{name}: {len(calls)} calls, {len(w)} wrote {sum(c[1] for c in w)} pages; a writing call wrote median "
            f"{statistics.median(c[1] for c in w):.0f} (mean {statistics.mean(c[1] for c in w):.0f}) after scanning "
            f"median {statistics.median(c[0] for c in w):.0f}; the first ten wrote {[c[1] for c in w[:10]]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", type=Path, help="a process trace (generate --runtime RECORDING)")
    p.add_argument("--memory", type=int, required=True, help="the limit, bytes (the capture's memory_bytes)")
    p.add_argument("--write-cost", type=int, default=1)
    p.add_argument("--swap-bytes", type=int, default=2415919104, help="the capture's swap device")
    p.add_argument("--accesses", type=int, default=700_000, help="rows of step 0 to run (the twin is slow)")
    p.add_argument("--kernel", type=Path, help="raw ftrace text of a capture with --trace-reclaim")
    args = p.parse_args(argv)
    for path in (args.trace, args.kernel):
        if path is not None and not path.is_file():
            print(f"startup_calls: {path}: no such file", file=sys.stderr)
            return 2
    print(describe("emulator (twin)", emulator_calls(args.trace, args.memory, args.write_cost, args.swap_bytes,
                                                    args.accesses)))
    if args.kernel:
        print(describe("kernel", kernel_calls(args.kernel)))
    print(json.dumps({"trace": str(args.trace), "memory": args.memory, "write_cost": args.write_cost,
                      "accesses": args.accesses}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
