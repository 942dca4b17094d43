"""Does one run whose device speed and room vary over time land where the ensemble's mean does?

The default ensemble (``swaptrace/profiles/linux-6.x-cgroup1.toml``) runs 15 members -- write costs 3 4 5 6 8
times room offsets -0.5 %, 0, +0.5 % -- because a kernel run's device speed and room are not fixed numbers.
But in the kernel they are not fixed *within* a run either: a device's write latency changes from request to
request and the room the cgroup leaves the process moves as page tables and per-CPU charge caches come and go.
This script scores one run that cycles through the same 15 (write cost, room) settings over time, one setting
per ``--period`` accesses (0: one per training step), against the same kernel references as
``research/variants.py`` (pages in and out within +-15 % of the kernel's median run).

::

    .venv/bin/python research/vary_in_time.py --period 0                 # sessions 1 and 2 (chosen on)
    .venv/bin/python research/vary_in_time.py --period 4096 \\
        --results research/results/session-3-holdout/calibration.json     # held out
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]
import variants  # noqa: E402  (research/variants.py)


def pieces(step: object, period: int) -> list[tuple[int, int]]:
    """``(lo, hi)`` index ranges of the trace: one per step (``period`` 0) or per ``period`` accesses."""
    import numpy as np

    n = len(step)
    if n == 0:
        return []
    if period > 0:
        return [(lo, min(n, lo + period)) for lo in range(0, n, period)]
    cut = np.flatnonzero(np.diff(np.asarray(step))) + 1
    bounds = [0, *cut.tolist(), n]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def schedule(costs: Sequence[int], budgets: Sequence[int], order: str) -> list[tuple[int, int]]:
    """The (write cost, budget pages) settings in the order a run cycles through them."""
    if order == "costs-inner":
        return [(c, b) for b in budgets for c in costs]
    # interleaved: the cost and the room both change from one piece to the next; with coprime counts (5 and 3)
    # i -> (i mod 5, i mod 3) visits every pair once in 15 pieces (Chinese remainder theorem)
    n = len(costs) * len(budgets)
    pairs = [(costs[i % len(costs)], budgets[i % len(budgets)]) for i in range(n)]
    if len(set(pairs)) < n:  # counts with a common factor: fall back to a diagonal walk row by row
        pairs = [(costs[(i + i // len(costs)) % len(costs)], budgets[i // len(costs)]) for i in range(n)]
    return pairs


def varying(work: Path, period: int, order: str, costs: Sequence[int] = (), offsets: Sequence[float] = ()):
    from swaptrace import emulate as pagecache

    ens = pagecache.load_profile().ensemble
    ens_costs, ens_offsets = list(costs) or list(ens.write_costs), list(offsets) or list(ens.room_offsets)
    traces: dict = {}

    def run(ref: variants.Reference, memory: int) -> tuple[int, int]:
        key = (ref.preset, ref.steps)
        if key not in traces:
            traces[key] = variants.calibrate.read_access(variants.calibrate.trace_for(ref.preset, ref.steps, work))
        access = traces[key]
        meta, cols, step, _, _ = access
        footprint = int(meta["footprint_pages"])
        budgets = [pagecache.member_budget_pages(memory // 4096, d, footprint) for d in ens_offsets]
        settings = schedule(ens_costs, budgets, order)
        # built at the widest budget, so its buffers hold every setting's rows
        emu = variants.calibrate.default_emulator(access, max(budgets) * 4096, ref.swap_bytes, {})
        for i, (lo, hi) in enumerate(pieces(step, period)):
            cost, budget = settings[i % len(settings)]
            emu.retune(budget_pages=budget, write_cost=cost)
            for _ in emu.feed(cols["page"][lo:hi], cols["write"][lo:hi], step[lo:hi]):
                pass
        c = emu.counters()
        return c.pages_in, c.pages_out

    return run


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--period", type=int, default=0, help="accesses per setting; 0: one setting per step")
    ap.add_argument("--order", choices=("interleaved", "costs-inner"), default="interleaved")
    ap.add_argument("--costs", type=int, nargs="+", default=[], help="write costs (default: the profile's)")
    ap.add_argument("--offsets", type=float, nargs="+", default=[], help="room offsets (default: the profile's)")
    ap.add_argument("--results", type=Path, nargs="+", metavar="JSON")
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/swaptrace-calibration"))
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    sets = {str(p): (p,) for p in args.results} if args.results else variants.SESSIONS
    refs = []
    for session, files in sets.items():
        for f in files:
            refs += variants.references(session, json.loads(Path(f).read_text()))
    rows = variants.score(refs, varying(args.work, args.period, args.order, args.costs, args.offsets))
    label = f"one run varying over the ensemble's settings every {args.period or 'step'} accesses ({args.order})"
    print(variants.markdown(rows, label, args.verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
