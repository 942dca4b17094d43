"""Reclaim as the kernel did it: vmscan and memcg tracepoints of a capture, counted per step.

``swaptrace capture --trace-reclaim`` records, beside the block requests, the
tracepoints that show what memory-cgroup reclaim did (Linux 6.x,
``include/trace/events/vmscan.h`` and ``memcg.h``)::

    python-26597 [001] ..... 16246.844336: mm_vmscan_memcg_reclaim_begin: order=0 gfp_flags=GFP_HIGHUSER_MOVABLE
    python-26597 [001] ..... 16246.844360: mm_vmscan_lru_shrink_inactive: nid=0 nr_scanned=2 nr_reclaimed=0 \
nr_dirty=0 nr_writeback=0 nr_congested=0 nr_immediate=0 nr_activate_anon=0 nr_activate_file=0 nr_ref_keep=2 \
nr_unmap_fail=0 priority=12 flags=RECLAIM_WB_ANON|RECLAIM_WB_ASYNC
    python-26597 [000] ..... 15265.470737: mm_vmscan_lru_shrink_active: nid=0 nr_taken=1 nr_active=0 \
nr_deactivated=1 nr_referenced=0 priority=7 flags=RECLAIM_WB_FILE|RECLAIM_WB_ASYNC
    python-26597 [000] ..... 16246.845712: mm_vmscan_memcg_reclaim_end: nr_reclaimed=62
    kworker/u8:4-19556 [000] ..... 15263.977633: memcg_flush_stats: memcg_id=1 stats_updates=192 force=1 needs_flush=1

A reclaim call is a ``begin``/``end`` pair of one task (``try_to_free_mem_cgroup_pages``,
direct reclaim by the charging task); the ``shrink_*`` events between them are
its passes over the lists, one per priority level and list (``shrink_lruvec``
takes at most 32 pages per pass). Counted per training step (the step markers
of the capture), per call and over the run:

* ``calls``: reclaim calls that ended in the step;
* ``scanned``, ``reclaimed``, ``kept``, ``activated``: inactive-list pages
  isolated, freed, put back referenced (``nr_ref_keep``) and moved to the
  active list (``nr_activate_anon``);
* ``deactivated``: pages moved from the active to the inactive list;
* ``min_priority``: the lowest priority a call reached, mean over the step's
  calls (12 = the first level; most calls end at 7--8);
* ``flushes``: ``memcg_flush_stats`` events anywhere on the system (the
  periodic flush of the root covers every cgroup; reading ``memory.stat``
  flushes that cgroup) -- the moments reclaim's view of the list sizes is
  refreshed (:mod:`swaptrace.emulate`, ``stats_flush_steps``).

These are the quantities the emulator's ``linux`` policy counts too
(``C_SCANNED``, ``C_ACTIVATIONS``, ``C_DEACTIVATIONS``, ``C_RECLAIM_CALLS``),
so ``analysis/calibrate.py --trace-reclaim`` sets them side by side.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: ``system/event`` names of the tracepoints recorded with ``--trace-reclaim``
RECLAIM_EVENTS = (
    "vmscan/mm_vmscan_memcg_reclaim_begin",
    "vmscan/mm_vmscan_memcg_reclaim_end",
    "vmscan/mm_vmscan_lru_shrink_inactive",
    "vmscan/mm_vmscan_lru_shrink_active",
    "memcg/memcg_flush_stats",
)
#: per-step counters, in the order of :attr:`ReclaimTrace.counters`
COUNTERS = ("calls", "scanned", "reclaimed", "kept", "activated", "deactivated", "flushes")
DEF_PRIORITY = 12

_EVENT = re.compile(r"-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[\d+\]\s+(?:[^\s:]{4,6}\s+)?(?P<ts>\d+)\.(?P<frac>\d+):\s+"
                    r"(?P<event>mm_vmscan_memcg_reclaim_begin|mm_vmscan_memcg_reclaim_end|"
                    r"mm_vmscan_lru_shrink_inactive|mm_vmscan_lru_shrink_active|memcg_flush_stats):\s?(?P<body>.*)$")
_KV = re.compile(r"(\w+)=(-?\d+)\b")
_NEEDS = {
    "mm_vmscan_memcg_reclaim_end": ("nr_reclaimed",),
    "mm_vmscan_lru_shrink_inactive": ("nr_scanned", "nr_reclaimed", "nr_activate_anon", "nr_ref_keep", "priority"),
    "mm_vmscan_lru_shrink_active": ("nr_deactivated", "priority"),
}


@dataclass
class ReclaimCall:
    """One reclaim call (``try_to_free_mem_cgroup_pages``, one task's ``begin`` .. ``end``) and its passes.

    ``step`` is the training step the call ended in; times are the trace clock's, in nanoseconds.
    ``scanned`` .. ``deactivated`` sum the call's ``shrink_*`` events (:data:`COUNTERS`);
    ``min_priority`` is the lowest priority it reached (12 = the first level).
    """

    pid: int = 0
    begin_ns: int = 0
    end_ns: int = 0
    step: int = 0
    scanned: int = 0
    reclaimed: int = 0
    kept: int = 0
    activated: int = 0
    deactivated: int = 0
    min_priority: int = DEF_PRIORITY


@dataclass
class ReclaimTrace:
    """Reclaim counters per step (arrays aligned with ``steps``) and over the run.

    Attributes
    ----------
    steps : the training steps, ``first_step`` .. the last step marker
    counters : name -> int64 array per step (:data:`COUNTERS`)
    min_priority : mean lowest priority of the step's calls (NaN without calls)
    priority_calls : calls by the lowest priority they reached, index 0..12
    events : tracepoint lines parsed
    malformed : lines of these events whose fields did not parse
    outside_calls : ``shrink_*`` events of no open call (kswapd, or a call begun before tracing)
    unfinished_calls : calls still open when the trace ended
    """

    steps: np.ndarray
    counters: dict[str, np.ndarray]
    min_priority: np.ndarray
    priority_calls: list[int]
    events: int = 0
    malformed: int = 0
    outside_calls: int = 0
    unfinished_calls: int = 0
    malformed_examples: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, int]:
        return {k: int(v.sum()) for k, v in self.counters.items()}

    def to_meta(self) -> dict[str, Any]:
        """JSON-ready form for the capture's metadata (``kernel.reclaim``)."""
        return {
            "steps": self.steps.tolist(),
            **{k: v.tolist() for k, v in self.counters.items()},
            "min_priority": [None if np.isnan(x) else round(float(x), 2) for x in self.min_priority],
            "totals": self.totals(),
            "priority_calls": self.priority_calls,
            "events": self.events,
            "malformed": self.malformed,
            "outside_calls": self.outside_calls,
            "unfinished_calls": self.unfinished_calls,
        }


def _step_of(markers: list[tuple[int, str, int]], first_step: int):
    """``t_ns -> step``: the step of the last ``step`` marker before ``t_ns`` (``first_step`` before any)."""
    step_marks = sorted((t, n) for t, what, n in markers if what == "step")
    mark_t = np.array([t for t, _ in step_marks], dtype=np.int64)
    mark_n = np.array([n for _, n in step_marks], dtype=np.int64)

    def step_of(t_ns: int) -> int:
        k = int(np.searchsorted(mark_t, t_ns, side="right")) - 1
        return int(mark_n[k]) if k >= 0 else first_step

    return step_of, (int(mark_n.max()) if mark_n.size else None)


def _walk(lines: Iterable[str], out: ReclaimTrace, step_of) -> Iterator[tuple[int, ReclaimCall | None]]:
    """The reclaim tracepoints of ``lines`` as ``(step, None)`` for a statistics flush and ``(step, call)``.

    A call is yielded when its ``end`` is read. Counts parsed events, malformed lines, events of no open
    call and calls left open in ``out``.
    """
    open_calls: dict[int, ReclaimCall] = {}
    for raw in lines:
        if "mm_vmscan_" not in raw and "memcg_flush_stats" not in raw:
            continue
        m = _EVENT.search(raw)
        if m is None:
            continue  # another event whose text merely mentions these names
        out.events += 1
        event, pid = m.group("event"), int(m.group("pid"))
        values = {k: int(v) for k, v in _KV.findall(m.group("body"))}
        if any(k not in values for k in _NEEDS.get(event, ())):
            out.malformed += 1
            if len(out.malformed_examples) < 5:
                out.malformed_examples.append(raw.rstrip("\n")[:200])
            continue
        t_ns = int(m.group("ts")) * 1_000_000_000 + int((m.group("frac") + "000000000")[:9])
        if event == "memcg_flush_stats":
            yield step_of(t_ns), None
        elif event == "mm_vmscan_memcg_reclaim_begin":
            if pid in open_calls:
                out.unfinished_calls += 1
            open_calls[pid] = ReclaimCall(pid=pid, begin_ns=t_ns)
        elif event == "mm_vmscan_memcg_reclaim_end":
            call = open_calls.pop(pid, None)
            if call is None:
                out.outside_calls += 1
                continue
            call.end_ns, call.step = t_ns, step_of(t_ns)
            yield call.step, call
        else:
            call = open_calls.get(pid)
            if call is None:
                out.outside_calls += 1
                continue
            call.min_priority = min(call.min_priority, max(0, min(values["priority"], DEF_PRIORITY)))
            if event == "mm_vmscan_lru_shrink_inactive":
                call.scanned += values["nr_scanned"]
                call.reclaimed += values["nr_reclaimed"]
                call.kept += values["nr_ref_keep"]
                call.activated += values["nr_activate_anon"]
            else:
                call.deactivated += values["nr_deactivated"]
    out.unfinished_calls += len(open_calls)


def parse_reclaim(lines: Iterable[str], markers: list[tuple[int, str, int]], first_step: int = 0,
                  last_step: int | None = None) -> ReclaimTrace:
    """Count the reclaim tracepoints of ftrace text per training step.

    Parameters
    ----------
    lines : iterable of str
        The capture's raw ftrace text (other events are skipped).
    markers : list of (t_ns, what, n)
        The step markers (:attr:`swaptrace.capture.convert.ParsedTrace.markers`);
        an event belongs to the step of the last ``step`` marker before it.
        Events before the first marker count for ``first_step``.
    first_step, last_step : int
        The steps to report (``last_step`` default: the last marker's).
    """
    step_of, last_marked = _step_of(markers, first_step)
    if last_step is None:
        last_step = last_marked if last_marked is not None else first_step
    nsteps = max(0, last_step - first_step + 1)
    acc = {k: np.zeros(nsteps, np.int64) for k in COUNTERS}
    prio_sum = np.zeros(nsteps, np.float64)
    priority_calls = [0] * (DEF_PRIORITY + 1)
    out = ReclaimTrace(np.arange(first_step, first_step + nsteps, dtype=np.int64), acc, np.zeros(0), priority_calls)
    for step, call in _walk(lines, out, step_of):
        if nsteps == 0:
            continue
        si = min(max(step - first_step, 0), nsteps - 1)
        if call is None:
            acc["flushes"][si] += 1
            continue
        acc["calls"][si] += 1
        for k in ("scanned", "reclaimed", "kept", "activated", "deactivated"):
            acc[k][si] += getattr(call, k)
        prio_sum[si] += call.min_priority
        priority_calls[call.min_priority] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        out.min_priority = np.where(acc["calls"] > 0, prio_sum / np.maximum(acc["calls"], 1), np.nan)
    return out


def reclaim_calls(lines: Iterable[str], markers: list[tuple[int, str, int]],
                  first_step: int = 0) -> tuple[list[ReclaimCall], ReclaimTrace]:
    """Every reclaim call of ftrace text, in the order they ended, with the step each ended in.

    What :func:`parse_reclaim` sums per step, one call at a time: how far each call went down the
    priority levels, what it scanned, kept, activated and freed, and when (``research/reclaim_calls.py``
    sets the block requests issued during each call beside it). The returned :class:`ReclaimTrace`
    holds only the line counts (events, malformed, outside and unfinished calls).
    """
    step_of, _ = _step_of(markers, first_step)
    out = ReclaimTrace(np.zeros(0, np.int64), {}, np.zeros(0), [0] * (DEF_PRIORITY + 1))
    return [call for _, call in _walk(lines, out, step_of) if call is not None], out


def reclaim_record(raw_path, markers: list[tuple[int, str, int]], first_step: int, last_step: int,
                   missing_events) -> dict[str, Any]:
    """A capture's ``kernel.reclaim``: :func:`parse_reclaim` of its raw ftrace text at ``raw_path`` (steps
    ``first_step`` .. ``last_step`` by ``markers``), with the tracepoints this kernel lacks."""
    with open(raw_path, errors="replace") as fh:
        record = parse_reclaim(fh, markers, first_step=first_step, last_step=last_step).to_meta()
    record["missing_events"] = list(missing_events)
    return record
