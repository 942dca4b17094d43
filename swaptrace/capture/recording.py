"""A recording of a program's memory (``capture --record``) reduced to per-step page events.

A ``recording`` file (docs/formats.md) holds the program's memory system calls, its page faults in
anonymous memory and the referenced pages of each anonymous mapping per step. :func:`page_events`
replays its rows through :class:`AnonTracker`, a model of each process's anonymous private memory
(the same model the recorder uses to drop faults on file-backed memory), and gives per step, in
order, the events another stage turns into access-trace rows:

* **touch** (code 0): the first fault on a 4 KiB page since it was mapped or last freed: the page
  gets memory then (``write`` from bit 1 of the fault's error code; a read of an untouched page maps
  the shared zero page, and its first write faults again but is no first touch);
* **alloc** (code 1): an anonymous private mapping (``mmap`` with ``MAP_PRIVATE|MAP_ANONYMOUS``, a
  ``brk`` that raises the break, the part an ``mremap`` adds) -- a range of pages that hold no memory
  until touched;
* **free** (code 2): a touched page whose memory the program gave back: ``munmap``, ``madvise`` with
  ``MADV_DONTNEED``/``MADV_FREE``/``MADV_REMOVE``/``MADV_DONTNEED_LOCKED``, a ``brk`` that lowers the
  break, the part an ``mremap`` cuts off, an ``mmap(MAP_FIXED)`` over it, and every touched page of a
  process at its exit (mm/mmap.c ``exit_mmap``);
* **move** (code 3): ``mremap`` moved a range; its touched pages keep their memory at the new place;
* **retouch** (code 4, only for a recording made with ``--pageout``, whose pages were paged out at every
  reading, :mod:`swaptrace.capture.pageout`): a later fault on a touched page -- the page used again after
  a reading (``write`` as for a touch).

The codes 0, 1, 2 are those of the access trace's ``event`` (access, alloc, free).

Semantics (mm/mmap.c, mm/madvise.c, mm/mremap.c): mappings are page-granular (lengths round up to
4 KiB); the heap is ``[PAGE_ALIGN(start_brk), PAGE_ALIGN(brk))`` with ``start_brk`` the first break
the process reported after ``exec``; a ``fork`` copies the parent's mappings and touched pages (they
are shared copy-on-write: a later write by either is no new first touch here); ``exec`` empties the
address space (nothing is reported: the old image belongs to the program that called ``exec``).
Memory the kernel maps itself at ``exec`` (the main thread's stack, the program's ``.bss``) is never
seen mapped, so faults there are dropped; threads' stacks are ``mmap`` s and kept.

Pages are 4 KiB. Transparent huge pages would map 2 MiB at one fault: the recorder disables THP for
the recorded program (``PR_SET_THP_DISABLE``, inherited by its children and kept across ``exec``) and
records the machine's setting (``thp`` in the metadata); with ``thp_disabled`` false one fault may
stand for 512 pages and first touches undercount.

Step detection without marks or lines (:func:`detect_steps`) is in this module too; see its docstring.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from swaptrace.capture.record_parse import EV

PAGE_BYTES = 4096
PAGE_SHIFT = 12
#: page event codes (0, 1, 2 as the access trace's ``event``)
TOUCH, ALLOC, FREE, MOVE, RETOUCH = 0, 1, 2, 3, 4
PAGE_EVENTS = ("touch", "alloc", "free", "move", "retouch")
#: mmap flags (include/uapi/linux/mman.h, asm-generic/mman-common.h)
MAP_TYPE, MAP_PRIVATE, MAP_ANONYMOUS = 0x0F, 0x02, 0x20
#: madvise advice that drops a page's memory (include/uapi/asm-generic/mman-common.h)
MADV_DONTNEED, MADV_FREE, MADV_REMOVE, MADV_DONTNEED_LOCKED = 4, 8, 9, 24
FREEING_ADVICE = frozenset((MADV_DONTNEED, MADV_FREE, MADV_REMOVE, MADV_DONTNEED_LOCKED))


def _pages(length: int) -> int:
    return (int(length) + PAGE_BYTES - 1) >> PAGE_SHIFT


def is_private_anon(flags: int) -> bool:
    """An mmap's flags (low 32 bits of a row's ``flags``) ask for anonymous private memory."""
    return bool(flags & MAP_ANONYMOUS) and (flags & MAP_TYPE) == MAP_PRIVATE


class Intervals:
    """Disjoint, merged half-open ranges of page numbers ``[lo, hi)``."""

    def __init__(self, starts: list[int] | None = None, ends: list[int] | None = None):
        self.starts, self.ends = list(starts or []), list(ends or [])

    def copy(self) -> Intervals:
        return Intervals(self.starts, self.ends)

    def total(self) -> int:
        """Pages in all ranges."""
        return sum(self.ends) - sum(self.starts)

    def contains(self, page: int) -> bool:
        i = bisect.bisect_right(self.starts, page) - 1
        return i >= 0 and page < self.ends[i]

    def overlap(self, lo: int, hi: int) -> int:
        """Pages of ``[lo, hi)`` inside the ranges."""
        n, i = 0, max(bisect.bisect_right(self.starts, lo) - 1, 0)
        while i < len(self.starts) and self.starts[i] < hi:
            n += max(0, min(hi, self.ends[i]) - max(lo, self.starts[i]))
            i += 1
        return n

    def remove(self, lo: int, hi: int) -> None:
        if hi <= lo:
            return
        keep_s, keep_e = [], []
        for s, e in zip(self.starts, self.ends, strict=True):
            if e <= lo or s >= hi:
                keep_s.append(s)
                keep_e.append(e)
                continue
            if s < lo:
                keep_s.append(s)
                keep_e.append(lo)
            if e > hi:
                keep_s.append(hi)
                keep_e.append(e)
        self.starts, self.ends = keep_s, keep_e

    def add(self, lo: int, hi: int) -> None:
        if hi <= lo:
            return
        self.remove(lo, hi)
        i = bisect.bisect_left(self.starts, lo)
        self.starts.insert(i, lo)
        self.ends.insert(i, hi)
        # merge with touching neighbours
        if i + 1 < len(self.starts) and self.starts[i + 1] == self.ends[i]:
            self.ends[i] = self.ends.pop(i + 1)
            self.starts.pop(i + 1)
        if i > 0 and self.ends[i - 1] == self.starts[i]:
            self.ends[i - 1] = self.ends.pop(i)
            self.starts.pop(i)


@dataclass
class _Space:
    anon: Intervals = field(default_factory=Intervals)
    touched: set[int] = field(default_factory=set)
    brk_start: int | None = None
    brk: int | None = None

    def copy(self) -> _Space:
        return _Space(self.anon.copy(), set(self.touched), self.brk_start, self.brk)


def _touched_in(touched: set[int], lo: int, hi: int) -> list[int]:
    if hi - lo <= len(touched):
        return [p for p in range(lo, hi) if p in touched]
    return sorted(p for p in touched if lo <= p < hi)


class AnonTracker:
    """Each process's anonymous private mappings and touched pages; events in, page events out.

    :meth:`apply` takes one event as the recorder parses it (``(t, code, pid, address, length, write,
    flags, old_address, old_length)``, :class:`~swaptrace.capture.record_parse.ParsedRecording`) and
    returns its page events ``(kind, pid, page, pages, write, to_page)``; ``mapped_delta`` is the change
    of anonymous mapped pages the event made (for :func:`detect_steps`); :meth:`is_anon` says whether a
    fault's address lies in anonymous memory. With ``retouch``, a fault on a touched page is a re-touch
    (a ``--pageout`` recording's) rather than nothing.
    """

    def __init__(self, *, retouch: bool = False):
        self.spaces: dict[int, _Space] = {}
        self.mapped_delta = 0
        self.retouch = retouch

    def space(self, pid: int) -> _Space:
        sp = self.spaces.get(pid)
        if sp is None:
            sp = self.spaces[pid] = _Space()
        return sp

    def is_anon(self, pid: int, address: int) -> bool:
        sp = self.spaces.get(pid)
        return sp is not None and sp.anon.contains(int(address) >> PAGE_SHIFT)

    def _free(self, pid: int, sp: _Space, lo: int, hi: int, *, unmap: bool) -> list[tuple]:
        gone = _touched_in(sp.touched, lo, hi)
        sp.touched.difference_update(gone)
        if unmap:
            sp.anon.remove(lo, hi)
        return [(FREE, pid, p, 1, False, 0) for p in gone]

    def apply(self, ev: tuple) -> list[tuple]:
        """The page events of one event (see the class docstring)."""
        _, code, pid, address, length, write, flags, old_address, _ = ev
        self.mapped_delta = 0
        if code == EV["fault"]:
            sp = self.spaces.get(pid)
            page = int(address) >> PAGE_SHIFT
            if sp is None or not sp.anon.contains(page):
                return []
            if page in sp.touched:
                return [(RETOUCH, pid, page, 1, bool(write), 0)] if self.retouch else []
            sp.touched.add(page)
            return [(TOUCH, pid, page, 1, bool(write), 0)]
        if code in (EV["fork"], EV["exec"], EV["exit"]):
            return self._lifecycle(code, pid, old_address)
        sp = self.space(pid)
        before = sp.anon.total()
        lo = int(address) >> PAGE_SHIFT
        out: list[tuple] = []
        if code == EV["mmap"]:
            hi = lo + _pages(length)
            out = self._free(pid, sp, lo, hi, unmap=True)  # MAP_FIXED over memory replaces it
            if is_private_anon(int(flags) & 0xFFFFFFFF):
                sp.anon.add(lo, hi)
                out.append((ALLOC, pid, lo, hi - lo, False, 0))
        elif code == EV["munmap"]:
            out = self._free(pid, sp, lo, lo + _pages(length), unmap=True)
        elif code == EV["madvise"] and int(flags) in FREEING_ADVICE:
            out = self._free(pid, sp, lo, lo + _pages(length), unmap=False)
        elif code == EV["brk"]:
            out = self._brk(pid, sp, int(address))
        elif code == EV["mremap"]:
            out = self._mremap(pid, sp, ev)
        self.mapped_delta = sp.anon.total() - before
        return out

    def _lifecycle(self, code: int, pid: int, parent: int) -> list[tuple]:
        if code == EV["fork"]:
            src = self.spaces.get(int(parent))
            self.spaces[pid] = src.copy() if src is not None else _Space()
        elif code == EV["exec"]:
            self.spaces[pid] = _Space()
        else:  # exit: the whole address space goes (mm/mmap.c exit_mmap)
            sp = self.spaces.pop(pid, None)
            return [] if sp is None else [(FREE, pid, p, 1, False, 0) for p in sorted(sp.touched)]
        return []

    def _brk(self, pid: int, sp: _Space, new: int) -> list[tuple]:
        if sp.brk is None:  # the first break reported after exec: the heap's start (mm->start_brk)
            sp.brk_start = sp.brk = new
            return []
        if new < sp.brk_start:  # the kernel never returns a break below the heap's start (mm/mmap.c brk)
            return []
        old_hi, new_hi = _pages(sp.brk), _pages(new)
        heap_lo = _pages(sp.brk_start)
        sp.brk = new
        if new_hi > old_hi:
            lo = max(old_hi, heap_lo)
            sp.anon.add(lo, new_hi)
            return [(ALLOC, pid, lo, new_hi - lo, False, 0)]
        if new_hi < old_hi:
            return self._free(pid, sp, max(new_hi, heap_lo), old_hi, unmap=True)
        return []

    def _mremap(self, pid: int, sp: _Space, ev: tuple) -> list[tuple]:
        _, _, _, address, length, _, _, old_address, old_length = ev
        old_lo, old_n = int(old_address) >> PAGE_SHIFT, _pages(old_length)
        new_lo, new_n = int(address) >> PAGE_SHIFT, _pages(length)
        if old_n == 0:  # a duplicate of a shared mapping: not anonymous private memory
            return []
        if not sp.anon.contains(old_lo):
            return self._free(pid, sp, new_lo, new_lo + new_n, unmap=True) if new_lo != old_lo else []
        keep = min(old_n, new_n)
        moved = _touched_in(sp.touched, old_lo, old_lo + keep)
        out = self._free(pid, sp, old_lo + keep, old_lo + old_n, unmap=True)  # the part cut off
        sp.touched.difference_update(moved)
        sp.anon.remove(old_lo, old_lo + keep)
        if new_lo != old_lo:
            out += self._free(pid, sp, new_lo, new_lo + new_n, unmap=True)  # MREMAP_FIXED over memory
            out.append((MOVE, pid, old_lo, keep, False, new_lo))
        sp.anon.add(new_lo, new_lo + new_n)
        sp.touched.update(new_lo + (p - old_lo) for p in moved)
        if new_n > old_n:
            out.append((ALLOC, pid, new_lo + old_n, new_n - old_n, False, 0))
        return out


# ---------------------------------------------------------------------------------------------------- steps

@dataclass(frozen=True)
class Steps:
    """Where a recording's steps start and where the program's exit begins (ns on the trace clock).

    Step 0 is everything before ``boundaries[0]``, step ``k + 1`` starts at ``boundaries[k]``; the exit
    phase starts at ``exit_ns`` (None: the program's exit is not told apart). ``how`` says where they
    came from: ``marks``, ``lines``, ``pattern``, ``growth`` or ``none``.
    """

    boundaries: tuple[int, ...]
    exit_ns: int | None
    how: str
    period: int | None = None
    note: str | None = None


def _runs(match: np.ndarray) -> list[tuple[int, int]]:
    """``(start, length)`` of every run of True in ``match``."""
    padded = np.concatenate([[False], match, [False]]).astype(np.int8)
    d = np.diff(padded)
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    return [(int(a), int(b - a)) for a, b in zip(starts, ends, strict=True)]


def find_period(codes: np.ndarray, deltas: np.ndarray, min_repeats: int = 3) -> tuple[int, int, int] | None:
    """The longest stretch of an allocation sequence that repeats with a fixed, balanced period.

    Parameters
    ----------
    codes, deltas : ndarray
        One token per memory system call that mapped, unmapped or freed anonymous memory: its event code
        and the anonymous pages it mapped (negative: unmapped; 0 for a freeing ``madvise``).
    min_repeats : int
        Fewest whole repetitions that count as a pattern.

    Returns
    -------
    (start, period, repeats) or None
        Tokens ``start + k * period`` (``k < repeats``) begin the repetitions. A period must balance
        (its tokens map as many pages as they unmap: a step frees what it allocates), which keeps
        start-up's one-way growth (many equal allocations) from counting as steps. Among balanced
        periods the one covering the most tokens wins, then the shortest. The repetition starts where
        the period's running allocation is lowest (before its allocations).
    """
    n = len(codes)
    best = None
    for p in range(1, n // min_repeats + 1):
        match = (codes[:-p] == codes[p:]) & (deltas[:-p] == deltas[p:])
        for a, run in _runs(match):
            repeats = (run + p) // p
            if repeats < min_repeats or int(deltas[a:a + p].sum()) != 0 or not deltas[a:a + p].any():
                continue
            if best is None or repeats * p > best[0]:
                best = (repeats * p, a, p, run)
    if best is None:
        return None
    _, a, p, run = best
    running = np.concatenate([[0], np.cumsum(deltas[a:a + p])[:-1]])
    r = int(np.argmin(running))
    repeats = (run + p - r) // p
    return (a + r, p, repeats) if repeats >= min_repeats - 1 else None


def detect_steps(events: list[tuple], tracker_factory=AnonTracker) -> Steps:
    """Steps of a program that neither marks them nor prints a step line, from its allocations.

    Explainable in two rules. (1) **Pattern**: each memory system call that maps or unmaps anonymous
    memory (or frees it with ``madvise``) is a token ``(call, pages)``; the longest stretch of tokens
    that repeats with a fixed period whose calls balance (as many pages mapped as unmapped) at least
    three times is the steady state: each repetition is a step, start-up ends where the first one
    begins, and the exit begins where the last whole one ends (:func:`find_period`). (2) **Growth**,
    when there is no such pattern: start-up ends when the anonymous mapped memory first reaches its
    peak; the rest is one step.

    Unreliable when steps allocate nothing with ``mmap``/``brk`` (allocators that keep and reuse their
    memory: steps are then invisible to system calls), when a step's allocations vary in size, or when
    several patterns interleave (threads); then mark the steps or use ``--step-line``.
    """
    tracker = tracker_factory()
    times, codes, deltas, level, levels = [], [], [], 0, []
    for ev in events:
        tracker.apply(ev)
        delta = tracker.mapped_delta
        freeing = ev[1] == EV["madvise"] and int(ev[6]) in FREEING_ADVICE
        if ev[1] in (EV["mmap"], EV["munmap"], EV["brk"], EV["mremap"], EV["madvise"]) and (delta or freeing):
            times.append(ev[0])
            codes.append(ev[1])
            deltas.append(delta)
        level += delta
        levels.append((ev[0], level))
    found = find_period(np.asarray(codes, np.int64), np.asarray(deltas, np.int64)) if codes else None
    if found is not None:
        start, p, repeats = found
        bounds = tuple(times[start + k * p] for k in range(repeats))
        end = start + repeats * p
        return Steps(bounds, times[end] if end < len(times) else None, "pattern", period=p)
    if levels and max(v for _, v in levels) > 0:
        peak = max(v for _, v in levels)
        t_peak = next(t for t, v in levels if v == peak)
        return Steps((t_peak,), None, "growth", note="no repeating allocation pattern: start-up ends at the "
                     "first peak of anonymous mapped memory, the rest is one step")
    return Steps((), None, "none", note="no anonymous memory was mapped")


def assign_steps(t_ns: np.ndarray, steps: Steps) -> tuple[np.ndarray, int]:
    """Step of each time (step ``k + 1`` from ``boundaries[k]``) and the exit phase's step number.

    The exit phase is stored as step ``len(boundaries) + 1``, one after the last step.
    """
    bounds = np.asarray(steps.boundaries, dtype=np.int64)
    step = np.searchsorted(bounds, np.asarray(t_ns, dtype=np.int64), side="right").astype(np.uint32)
    exit_step = len(bounds) + 1
    if steps.exit_ns is not None:
        step[np.asarray(t_ns, dtype=np.int64) >= steps.exit_ns] = exit_step
    return step, exit_step


# ---------------------------------------------------------------------------------------------------- reduction

@dataclass(frozen=True)
class StepPages:
    """One step's page events in order (4 KiB pages) and its mappings' referenced pages.

    ``kind`` (uint8, :data:`PAGE_EVENTS` codes), ``page`` (first page number = address / 4096),
    ``pages`` (1 for a touch or free; the range for an alloc or move), ``write`` (touches), ``pid``,
    ``to_page`` (a move's new first page), ``t_us``. ``referenced``: one row per anonymous mapping and
    reading (one reading at the step's end; start-up every 0.5 s until the first boundary), arrays ``pid``, ``page``
    (first page), ``pages`` (mapping size), ``referenced_pages`` (its pages referenced since the previous
    reading, from smaps ``Referenced:``), ``dirty_pages`` (a ``--pageout`` recording's: its pages written since
    the previous reading, smaps ``Private_Dirty:``; else 0), ``t_us`` (the reading's time: its rows share it) and
    ``at`` (how many of the step's page events came before the reading); empty when no reading was taken in the
    step.
    """

    step: int
    kind: np.ndarray
    page: np.ndarray
    pages: np.ndarray
    write: np.ndarray
    pid: np.ndarray
    to_page: np.ndarray
    t_us: np.ndarray
    referenced: dict[str, np.ndarray]

    @property
    def first_touches(self) -> tuple[np.ndarray, np.ndarray]:
        """``(page, write)`` of the step's first touches, in order."""
        m = self.kind == TOUCH
        return self.page[m], self.write[m]

    @property
    def frees(self) -> np.ndarray:
        """Pages freed in the step (touched before), in order."""
        return self.page[self.kind == FREE]

    @property
    def allocations(self) -> tuple[np.ndarray, np.ndarray]:
        """``(first page, pages)`` of the step's anonymous mappings, in order."""
        m = self.kind == ALLOC
        return self.page[m], self.pages[m]


@dataclass(frozen=True)
class RecordingPages:
    """:func:`page_events`' result: ``steps[k]`` is step ``k`` (0: start-up); ``exit`` the exit phase."""

    steps: tuple[StepPages, ...]
    exit: StepPages | None
    page_bytes: int
    thp: str | None
    thp_disabled: bool
    meta: dict[str, Any]


def _step_pages(step: int, rows: list[tuple], ref: dict[str, list]) -> StepPages:
    cols = list(zip(*rows, strict=True)) if rows else [[]] * 7
    return StepPages(
        step=step, kind=np.asarray(cols[0], np.uint8), pid=np.asarray(cols[1], np.int32),
        page=np.asarray(cols[2], np.uint64), pages=np.asarray(cols[3], np.uint64),
        write=np.asarray(cols[4], bool), to_page=np.asarray(cols[5], np.uint64), t_us=np.asarray(cols[6], np.float64),
        referenced={"pid": np.asarray(ref["pid"], np.int32), "page": np.asarray(ref["page"], np.uint64),
                    "pages": np.asarray(ref["pages"], np.uint64),
                    "referenced_pages": np.asarray(ref["referenced_pages"], np.uint64),
                    "dirty_pages": np.asarray(ref["dirty_pages"], np.uint64),
                    "t_us": np.asarray(ref["t_us"], np.float64), "at": np.asarray(ref["at"], np.int64)})


#: a step's referenced readings: per row, a mapping's ``pid``, first ``page``, ``pages`` and ``referenced_pages``,
#: the reading's time ``t_us`` and ``at``, how many of the step's page events came before it
_REF_KEYS = ("pid", "page", "pages", "referenced_pages", "dirty_pages", "t_us", "at")


def reduce_rows(cols: dict[str, np.ndarray], n_steps: int, exit_step: int | None, *,
                retouch: bool = False) -> tuple[list, list]:
    """Page events and referenced readings per step from a recording's columns (``event`` as codes); with
    ``retouch`` (a ``--pageout`` recording) faults on touched pages are re-touches."""
    tracker = AnonTracker(retouch=retouch)
    if "dirty" not in cols:
        cols = {**cols, "dirty": np.zeros(len(cols["event"]), np.uint64)}
    per_step: dict[int, list[tuple]] = {}
    refs: dict[int, dict[str, list]] = {}
    ref_code = EV["referenced"]
    cols = {k: np.asarray(v).tolist() for k, v in cols.items()}  # Python ints: numpy scalars are slow one by one
    for i in range(len(cols["event"])):
        code, step = int(cols["event"][i]), int(cols["step"][i])
        if code == ref_code:
            r = refs.setdefault(step, {k: [] for k in _REF_KEYS})
            r["pid"].append(int(cols["pid"][i]))
            r["page"].append(int(cols["address"][i]) >> PAGE_SHIFT)
            r["pages"].append(_pages(int(cols["length"][i])))
            r["referenced_pages"].append(int(cols["referenced"][i]) >> PAGE_SHIFT)
            r["dirty_pages"].append(int(cols["dirty"][i]) >> PAGE_SHIFT)
            r["t_us"].append(float(cols["t_us"][i]))
            r["at"].append(len(per_step.get(step, ())))
            continue
        ev = (0, code, int(cols["pid"][i]), int(cols["address"][i]), int(cols["length"][i]), bool(cols["write"][i]),
              int(cols["flags"][i]), int(cols["old_address"][i]), int(cols["old_length"][i]))
        t = float(cols["t_us"][i])
        per_step.setdefault(step, []).extend(pe + (t,) for pe in tracker.apply(ev))
    empty = {k: [] for k in _REF_KEYS}
    steps = [_step_pages(s, per_step.get(s, []), refs.get(s, empty)) for s in range(n_steps)]
    ex = None if exit_step is None else _step_pages(exit_step, per_step.get(exit_step, []), refs.get(exit_step, empty))
    return steps, ex


def page_events(path: str | os.PathLike) -> RecordingPages:
    """A recording's per-step page events: first touches, frees, allocations, referenced pages per mapping.

    Parameters
    ----------
    path : path
        A ``recording`` file (``swaptrace capture --record``).

    Returns
    -------
    RecordingPages
        ``steps[k]`` (:class:`StepPages`) for each step ``k`` (0 is start-up), ``exit`` the program's exit
        phase (None when it was not told apart); pages are 4 KiB (``page_bytes``). See the module
        docstring for what each event means.
    """
    from swaptrace.core.traceio import KINDS, RECORD_EVENTS, open_trace

    trace = open_trace(path, kind="recording")
    meta = trace.meta
    cols = trace.read_all([*KINDS["recording"].names, "dirty"] if trace.has_column("dirty") else None)
    cols["event"] = _codes(cols["event"], RECORD_EVENTS)
    n_steps = int(meta.get("steps", int(cols["step"].max()) + 1 if len(cols["step"]) else 1))
    exit_step = meta.get("exit_step")
    steps, ex = reduce_rows(cols, n_steps, exit_step, retouch=bool(meta.get("pageout")))
    return RecordingPages(steps=tuple(steps), exit=ex, page_bytes=PAGE_BYTES, thp=meta.get("thp"),
                          thp_disabled=bool(meta.get("thp_disabled")), meta=meta)


def _codes(values: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    if values.dtype.kind in "iu":
        return values.astype(np.int64)
    index = {n: i for i, n in enumerate(names)}
    return np.asarray([index[str(v)] for v in values], dtype=np.int64)


def step_table(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Per step (and the exit phase): pages allocated, freed, first-touched (written), referenced (``inspect``)."""
    rec = page_events(path)
    out = []
    for sp in (*rec.steps, *([rec.exit] if rec.exit is not None else [])):
        alloc = int(sp.pages[sp.kind == ALLOC].sum())
        touched = int(np.count_nonzero(sp.kind == TOUCH))
        out.append({"step": "exit" if sp is rec.exit else sp.step, "allocated_pages": alloc,
                    "freed_pages": int(np.count_nonzero(sp.kind == FREE)), "first_touched_pages": touched,
                    "first_written_pages": int(np.count_nonzero((sp.kind == TOUCH) & sp.write)),
                    "retouched_pages": int(np.count_nonzero(sp.kind == RETOUCH)),
                    "dirty_pages": int(sp.referenced["dirty_pages"].sum()),
                    "referenced_pages": int(sp.referenced["referenced_pages"].sum())
                    if len(sp.referenced["pid"]) else None})
    return out
