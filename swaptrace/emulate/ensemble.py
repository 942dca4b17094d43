"""Ensembles: one run per device speed and per room offset, and the run that stands for them.

A kernel's runs of the same trace at the same budget differ: the device writes
faster or slower against the scan, and the room the process really had moves by
a fraction of a percent (page tables, the child's own pages). A kernel profile
may name an :class:`~swaptrace.emulate.kernel_profile.Ensemble` of such runs; the
stream written is the member's nearest the members' mean pages in and out
(:func:`nearest_member`), since no single stream has the mean.

The members only count: one decode of the trace feeds them all, chunk by chunk,
and they run side by side on threads (the numba kernel releases the GIL).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from swaptrace.core.traceio import TraceFile
from swaptrace.emulate.config import EmulatorConfig
from swaptrace.emulate.engine import Counters, Emulator, kernel_batches
from swaptrace.emulate.kernel_profile import Ensemble


def member_budget_pages(budget_pages: int, offset: float, footprint_pages: int) -> int:
    """A member's budget: ``budget_pages`` times ``1 + offset``, rounded down, within 1 .. footprint."""
    # the epsilon keeps an exact product whole: 200 * 1.005 is 200.99999999999997 in binary
    return min(footprint_pages, max(1, math.floor(budget_pages * (1 + offset) + 1e-9)))


def ensemble_configs(cfg: EmulatorConfig, footprint_pages: int, ensemble: Ensemble) -> list[EmulatorConfig]:
    """The members of ``cfg``'s ensemble: each room offset with each write cost, offsets outermost."""
    return [replace(cfg, budget_pages=member_budget_pages(cfg.budget_pages, d, footprint_pages), write_cost=c)
            for d in ensemble.room_offsets for c in ensemble.write_costs]


def nearest_member(counts: Sequence[tuple[int, int]]) -> int:
    """Index of the ``(pages_in, pages_out)`` nearest their mean: least relative distance in pages in plus
    pages out, the first of equals."""
    mean_in = sum(c[0] for c in counts) / len(counts)
    mean_out = sum(c[1] for c in counts) / len(counts)
    return min(range(len(counts)), key=lambda i: abs(counts[i][0] - mean_in) / max(mean_in, 1)
               + abs(counts[i][1] - mean_out) / max(mean_out, 1))


@dataclass
class MemberRuns:
    """What :func:`run_members` found: each member's counters, and the run they shared until they diverged.

    ``prefix`` has taken the first ``prefix_accesses`` accesses of the trace under
    the widest member's config; ``prefix.fork(member)`` goes on as that member.
    """

    counters: list[Counters]
    prefix: Emulator
    prefix_accesses: int


def run_members(tf: TraceFile, configs: Sequence[EmulatorConfig], *, nsteps: int, first_step: int,
                chunk_rows: int, workers: int | None = None,
                progress: Callable[[int], None] | None = None) -> MemberRuns:
    """Run every config (differing only in budget and write cost) over the trace for its counters.

    Until the smallest budget could need reclaim the members are one run (they
    differ only in what reclaim does), so that prefix is emulated once and
    forked; from there one decode feeds every member, on ``workers`` threads
    (default: the CPUs this process may use). ``progress`` gets each chunk's
    accesses once all members are past it.
    """
    footprint = int(tf.meta["footprint_pages"])
    widest = max(configs, key=lambda c: c.budget_pages)
    smallest = min(c.budget_pages for c in configs)
    # step counts are never read by a counting run (they only time rows)
    prefix = Emulator(widest, footprint, None, nsteps=nsteps, first_step=first_step, regions=tf.meta.get("regions"))
    members: list[Emulator] = []
    taken = 0
    workers = workers or max(1, len(os.sched_getaffinity(0)))
    with ThreadPoolExecutor(min(workers, len(configs))) as pool:
        for columns in kernel_batches(tf, chunk_rows):  # converted once for all members
            start = 0
            if not members:
                start = prefix.count_prefix(*columns, budget_pages=smallest)
                taken += start
                if start < columns[0].size:
                    members = [prefix.fork(c, counting=True) for c in configs]
            if members and start < columns[0].size:
                rest = [col[start:] for col in columns]
                for future in [pool.submit(m.count, *rest) for m in members]:
                    future.result()  # a member's ConfigError (swap full ...) is the run's
            if progress is not None:
                progress(columns[0].size)
    if not members:  # the whole trace fit every budget
        members = [prefix.fork(c, counting=True) for c in configs]
    return MemberRuns([m.counters() for m in members], prefix, taken)


def describe_members(configs: Sequence[EmulatorConfig], found: Sequence[Counters], chosen: int,
                     ensemble: Ensemble) -> dict[str, Any]:
    """The ensemble as recorded in a stream's ``params.ensemble``."""
    return {
        "write_costs": list(ensemble.write_costs),
        "room_offsets": list(ensemble.room_offsets),
        "members": [{"write_cost": m.write_cost, "memory_bytes": m.memory_bytes,
                     "pages_in": c.pages_in, "pages_out": c.pages_out} for m, c in zip(configs, found, strict=True)],
        "chosen": chosen,
        "mean_pages_in": sum(c.pages_in for c in found) / len(found),
        "mean_pages_out": sum(c.pages_out for c in found) / len(found),
    }
