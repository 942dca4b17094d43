"""A whole-process trace from one unlimited recording of the real program (``generate --runtime X.recording.parquet``).

Here, in the capture package, because it reads recordings; ``swaptrace.workload.generate`` takes a
:class:`Recording` as its ``runtime`` and calls :meth:`Recording.as_process` (the workload package does not
import the capture package).

A recording (``capture --record``, :mod:`swaptrace.capture.recording`) holds what the program's anonymous
memory did, step by step, with no limit: first touches, frees, allocations and the referenced pages of each
mapping. This module turns it, with the model's own trace from the spec, into an access trace of the whole
process, with ``alloc`` and ``free`` events (docs/process.md "From a recording"):

**Which recorded memory is the model's.** Each model array (:func:`model_arrays`: every table's weights,
every optimizer-state array of a table, every MLP weight and bias) of at least :data:`MMAP_THRESHOLD` bytes
is matched, largest first, to one anonymous allocation of the recording that is never freed before the
exit, of ``need = ceil(bytes / 4096)`` pages up to ``need + 1 + need // 64`` (glibc maps a large ``malloc``
as its size plus a 16-byte header, ``posix_memalign`` adds the alignment, rounded up to pages: at most one
page more; the 1/64 allows an allocator that rounds sizes up); among fits the closest in size, then the
earliest. Its first touches become the same stores (loads) to the model's region at the same page offset
(the start-up writes the spec does not describe, in the order the program made them); its other events
and referenced pages are dropped (the model's accesses come from the spec), from the allocation on
(:func:`_births`): what its addresses held before (a gradient freed and made again at one address each
step, when the last step's is the match) stays the program's memory. Smaller arrays live in heap
mappings, as do larger ones once glibc's mmap threshold has risen (malloc/malloc.c: to the largest freed
mmapped chunk, at most :data:`MMAP_THRESHOLD_MAX`): they stay in the runtime and are listed
``in_heap``. A recording whose largest table, or any array of :data:`MMAP_THRESHOLD_MAX` or more, has no
match is of another model: refused in one line naming the array.

**The rest** is each recorded page ``(pid, 4 KiB address)``: ``runtime`` if it is alive (touched, not
freed) at the end of some step, else ``step-buffers`` (allocated and freed within steps). Each gets one
trace page (in address order, so that swap readahead finds the program's neighbours as the kernel's
``swap_vma_readahead`` does), the same for every reuse of the address.

**Per step** (recording step ``k`` is trace step ``k``; start-up 0; the exit phase is left out, and so is
the last step of a recording that does not tell its exit apart, since that step holds it): the
recorded events in order (first touches as stores or loads, frees as ``free``, allocations as ``alloc``
of the range's pages that have a trace page, an ``mremap`` move as frees of the old pages and stores to the
new); at each reading of the step (one at its end; start-up every 0.5 s until the first boundary), where it was taken
among the events, for each runtime mapping ``referenced - touched`` loads, where ``touched`` is its pages
first-touched since the previous reading and still alive; the loads go to its alive pages not touched since
then, **most recently first-touched first** (``Referenced:`` counts pages, not which:
allocators reuse the memory they handed out last, while start-up's oldest pages hold import-time objects
seldom used again); then the model's accesses of the step. A recording made with ``--pageout`` (:mod:`swaptrace.capture.pageout`)
has no guess to make: each re-touch of one of the program's own pages is an access where it was made, and a
reading stores, per runtime mapping, to ``dirty - stored`` of the pages loaded and not stored to in its window,
most recently loaded first, each store right after its page's load (:class:`_Window`), instead of the
referenced loads. Trace step 0 ends with stores to the model
arrays a program writes at start-up (:func:`swaptrace.workload.process.startup_pages`) that no match wrote.
The model's ``scratch`` region (the spec's stand-in for activations) gets no accesses: the recording holds the
program's own activations, in its runtime and step buffers. **Unrecorded memory**: at each start-up reading
the process's anonymous RSS less the pages recorded alive then (copy-on-write pages of the shared libraries'
data, which the recorder does not follow, the main stack, pages the kernel touched for the program) becomes
stores to as many more pages of an ``unrecorded`` region, where the reading was taken, never touched again.
Steps beyond the recording's training steps repeat its **last half** (``ceil(R / 2)`` of ``R`` training
steps) cyclically: the first steps allocate what the program keeps (optimizer state, allocator pools),
the last ones are the steady state. A repeated step's alloc rows over pages that hold memory (allocated and
kept by the step's first pass) are dropped: an alloc there would free them, which the program never did.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.capture.recording import ALLOC, FREE, MOVE, PAGE_BYTES, RETOUCH, TOUCH, page_events
from swaptrace.core import bounds
from swaptrace.core.traceio import EVENT_ACCESS, EVENT_ALLOC, EVENT_FREE, open_trace
from swaptrace.errors import ConfigError
from swaptrace.workload.process import startup_pages
from swaptrace.workload.spec import ModelSpec

#: glibc's default mmap threshold (malloc/malloc.c DEFAULT_MMAP_THRESHOLD_MIN): smaller arrays are in the heap
MMAP_THRESHOLD = 128 * 1024
#: the most glibc's dynamic threshold rises to on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX, 4 MiB * sizeof(long))
MMAP_THRESHOLD_MAX = 32 << 20
#: bits of a page key below the pid: ``pid << KEY_SHIFT | page`` (a 4 KiB page of a 48-bit address; pids
#: below 2^27, above Linux's PID_MAX_LIMIT of 2^22)
KEY_SHIFT = 36


@dataclass(frozen=True)
class ModelArray:
    """One array of the model: its name, region index, byte offset in the region and size (bytes)."""

    name: str
    region: int
    offset: int
    nbytes: int


def model_arrays(spec: ModelSpec, regions: list[dict[str, Any]]) -> list[ModelArray]:
    """The arrays a PyTorch DLRM allocates (tables, table state arrays, MLP weights and biases, their state)."""
    index = {r["name"]: i for i, r in enumerate(regions)}
    out = []
    for t in spec.tables:
        out.append(ModelArray(f"emb:{t.name}", index[f"emb:{t.name}"], 0, t.weight_bytes))
        state = t.rows * spec.state_row_bytes(t)
        for j in range(spec.state_arrays if state else 0):
            out.append(ModelArray(f"state:{t.name}" + (f"[{j}]" if spec.state_arrays > 1 else ""),
                                  index[f"state:{t.name}"], j * state, state))
    params, off = [], 0
    for name, widths in (("bottom", list(spec.bottom_mlp)), ("top", [spec.interaction_width, *spec.top_mlp])):
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=False)):
            params += [(f"{name}.{i}.weight", off, 4 * a * b), (f"{name}.{i}.bias", off + 4 * a * b, 4 * b)]
            off += 4 * (a * b + b)
    out += [ModelArray(f"mlp:{n}", index["mlp"], o, b) for n, o, b in params]
    if "mlp-state" in index:
        per = spec.mlp_state_bytes // max(spec.mlp_bytes, 1)
        out += [ModelArray(f"mlp-state:{n}" + (f"[{j}]" if per > 1 else ""), index["mlp-state"], j * off + o, b)
                for j in range(per) for n, o, b in params]
    return out


def fits(nbytes: int, pages: int) -> bool:
    """Whether a recorded allocation of ``pages`` 4 KiB pages can hold an array of ``nbytes`` (module docstring)."""
    need = -(-nbytes // PAGE_BYTES)
    return need <= pages <= need + 1 + need // 64


def _key(pid: int, page: int) -> int:
    return (int(pid) << KEY_SHIFT) | int(page)


def split_packed(arrays: list[ModelArray], allocs: list[tuple[int, int, int]]
                 ) -> tuple[list[tuple[int, int, int]], dict[str, int]]:
    """``allocs`` with a block holding every table back to back split into one allocation per table, and the
    index of each array's piece (an array so split is matched to its piece whatever its size).

    FBGEMM's CPU embedding (TorchRec's fused ``EmbeddingBagCollection``) keeps all tables in one flat float32
    tensor (``weights_host``, table t at ``weights_offsets[t]``) and an optimizer's state likewise
    (``momentum1_host``): one allocation of the tables' summed size rather than one each. When no
    allocation fits the largest table alone but one fits the sum of a kind's arrays (the tables, or one state
    array of each), that block stands for them in the spec's order: table t gets the block's pages from the
    one holding its first byte to the one holding its last (neighbours share a page). PyTorch's own tables
    (one allocation each) are left as they are.
    """
    out, packed = list(allocs), {}
    for prefix in ("emb:", "state:"):
        kind = [a for a in arrays if a.name.startswith(prefix)]
        if not kind or any(fits(max(a.nbytes for a in kind), n) for _, _, n in out):
            continue
        total = sum(a.nbytes for a in kind)
        block = next((i for i, (_, _, n) in enumerate(out) if fits(total, n)), None)
        if block is None:
            continue
        pid, lo, _ = out.pop(block)
        packed = {k: i if i < block else i + len(kind) - 1 for k, i in packed.items()}
        offset = 0
        for a in kind:
            first, last = offset // PAGE_BYTES, (offset + a.nbytes - 1) // PAGE_BYTES
            out.insert(block, (pid, lo + first, last - first + 1))
            packed[a.name] = block
            block += 1
            offset += a.nbytes
    return out, packed


def match_arrays(arrays: list[ModelArray], allocs: list[tuple[int, int, int]],
                 largest_table: str, packed: dict[str, int] | None = None
                 ) -> tuple[dict[int, tuple[ModelArray, int, int]], list[str]]:
    """Match model arrays to never-freed allocations ``(pid, first page, pages)`` in allocation order.

    Returns ``{allocation index: (array, pid, first page)}`` and the names of arrays left in the heap;
    refuses (:class:`ConfigError`) a recording missing the largest table or an array of
    :data:`MMAP_THRESHOLD_MAX` or more.
    """
    taken: dict[int, tuple[ModelArray, int, int]] = {}
    in_heap = []
    packed = packed or {}
    for a in sorted(arrays, key=lambda a: (-a.nbytes, a.name)):
        if a.name in packed:  # its piece of a block of tables (split_packed)
            taken[packed[a.name]] = (a, allocs[packed[a.name]][0], allocs[packed[a.name]][1])
            continue
        if a.nbytes < MMAP_THRESHOLD:
            in_heap.append(a.name)
            continue
        need = -(-a.nbytes // PAGE_BYTES)
        best = min((i for i, (_, _, n) in enumerate(allocs) if i not in taken and fits(a.nbytes, n)),
                   key=lambda i: (allocs[i][2] - need, i), default=None)
        if best is None:
            if a.name == largest_table or a.nbytes >= MMAP_THRESHOLD_MAX:
                raise ConfigError(f"--runtime: the recording has no mapping of {need} pages for {a.name} "
                                  f"({a.nbytes} B): it is not a recording of this model")
            in_heap.append(a.name)
            continue
        taken[best] = (a, allocs[best][0], allocs[best][1])
    return taken, sorted(in_heap)


@dataclass
class _Ops:
    """One recording step's operations on page keys, in order, and its referenced loads."""

    ops: list[tuple[int, int, bool]]  # (code TOUCH/FREE, key, write) or (ALLOC, first key, pages)
    loads: list[int]


def _normalise(rec, n_steps: int, starts: list[list[int]] | None = None) -> list[list[tuple]]:
    """Per step, the page events as (code, key, write) touches/re-touches/frees and (ALLOC, key, pages); moves
    expanded.

    ``starts`` (if given) gets, per step, the number of ops before each page event and, last, the step's total
    (so a reading taken after ``at`` page events comes after ``starts[k][at]`` ops).
    """
    alive: set[int] = set()
    out = []
    for k in range(n_steps):
        sp = rec.steps[k]
        ops: list[tuple] = []
        before: list[int] = []
        for kind, pid, page, pages, write, to in zip(sp.kind.tolist(), sp.pid.tolist(), sp.page.tolist(),
                                                     sp.pages.tolist(), sp.write.tolist(), sp.to_page.tolist(),
                                                     strict=True):
            before.append(len(ops))
            if kind == TOUCH:
                ops.append((TOUCH, _key(pid, page), bool(write)))
                alive.add(_key(pid, page))
            elif kind == FREE:
                ops.append((FREE, _key(pid, page), False))
                alive.discard(_key(pid, page))
            elif kind == ALLOC:
                ops.append((ALLOC, _key(pid, page), int(pages)))
            elif kind == RETOUCH:
                ops.append((RETOUCH, _key(pid, page), bool(write)))
            elif kind == MOVE:  # the moved pages: freed at the old place, stored to at the new
                moved = [p for p in range(page, page + pages) if _key(pid, p) in alive]
                for p in moved:
                    ops.append((FREE, _key(pid, p), False))
                    alive.discard(_key(pid, p))
                for p in moved:
                    ops.append((TOUCH, _key(pid, to + p - page), True))
                    alive.add(_key(pid, to + p - page))
        out.append(ops)
        if starts is not None:
            starts.append(before + [len(ops)])
    return out


@dataclass
class RecordedRuntime:
    """A recording reduced for one model: the trace rows of each recorded step and what the metadata says."""

    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # per recording step: page, write, event, region
    runtime_pages: int
    buffer_pages: int
    info: dict[str, Any]
    #: runtime pages accessed in some training step (the profile field ``active_bytes`` / 4096)
    active_pages: int = 0
    #: start-up's anonymous memory the recording saw held (``anon_rss``) but not touched (:func:`_unrecorded`)
    unrecorded_pages: int = 0

    @property
    def training_steps(self) -> int:
        return len(self.rows) - 1

    def recording_step(self, step: int) -> int:
        """The recording step trace step ``step`` (>= 0) repeats (module docstring: the last half cycles)."""
        r = self.training_steps
        if step <= r:
            return step
        cycle = -(-r // 2)
        return r - cycle + 1 + (step - r - 1) % cycle


def _allocs_never_freed(norm: list[list[tuple]]) -> list[tuple[int, int, int]]:
    """``(pid, first page, pages)`` of every allocation none of whose pages is freed later (before the exit)."""
    allocs: list[tuple[int, int, int, int]] = []  # pid, lo, n, position
    pos = 0
    freed_after: dict[int, int] = {}  # key -> last position freed
    for ops in norm:
        for code, key, arg in ops:
            pos += 1
            if code == ALLOC:
                allocs.append((key >> KEY_SHIFT, key & ((1 << KEY_SHIFT) - 1), int(arg), pos))
            elif code == FREE:
                freed_after[key] = pos
    frees = np.array(sorted(freed_after), dtype=np.int64)
    last = np.array([freed_after[k] for k in frees.tolist()], dtype=np.int64)
    out = []
    for pid, lo, n, p in allocs:
        a, b = np.searchsorted(frees, [_key(pid, lo), _key(pid, lo + n)])
        if b <= a or int(last[a:b].max()) < p:
            out.append((pid, lo, n))
    return out


def _births(norm: list[list[tuple]], ranges: list[tuple[int, int, int]]) -> list[int]:
    """Position (ops before it, over all steps) of the allocation that made each matched range ``(pid, first
    page, pages)``: the last ``ALLOC`` covering its first page. The same addresses before it held other memory
    (a buffer freed and allocated again at one address, as a gradient is each step)."""
    firsts = sorted((_key(pid, lo), j) for j, (pid, lo, _) in enumerate(ranges))
    starts = np.array([f for f, _ in firsts], dtype=np.int64)
    born = [0] * len(ranges)
    pos = 0
    for ops in norm:
        for code, key, arg in ops:
            if code == ALLOC:
                a, b = np.searchsorted(starts, [key, key + int(arg)])
                for f in range(int(a), int(b)):
                    born[firsts[f][1]] = pos
            pos += 1
    return born


def _model_page(matched: dict[int, tuple[int, int, int]], key: int, pos: int) -> tuple[int, int] | None:
    """The model's ``(page, region)`` for ``key`` at op position ``pos``: only once its matched allocation was
    made (:func:`_births`); before, the key is the program's own memory."""
    m = matched.get(key)
    return None if m is None or pos < m[2] else (m[0], m[1])


def _classify(norm: list[list[tuple]], matched: dict[int, tuple[int, int, int]]
              ) -> tuple[dict[int, int], set[int]]:
    """Each non-model key's first-touch order, and the keys alive at the end of some step (the runtime)."""
    order: dict[int, int] = {}
    alive: set[int] = set()
    runtime: set[int] = set()
    pos = -1
    for ops in norm:
        for code, key, _ in ops:
            pos += 1
            if code == TOUCH and _model_page(matched, key, pos) is None:
                order.setdefault(key, len(order))
                alive.add(key)
            elif code == FREE:
                alive.discard(key)
        runtime |= alive
    return order, runtime


def reduce_recording(path: str | os.PathLike, spec: ModelSpec, regions: list[dict[str, Any]],
                     footprint_pages: int) -> tuple[RecordedRuntime, list[dict[str, Any]]]:
    """Read a recording and lay its memory beside the model's (module docstring).

    Parameters
    ----------
    path : path
        A ``recording`` file.
    spec, regions, footprint_pages
        The model, its regions (the access trace's ``regions``) and its footprint in 4 KiB pages.

    Returns
    -------
    RecordedRuntime, list of dict
        The rows of each recorded step and the process's regions (the model's, then ``runtime`` and
        ``step-buffers``).
    """
    rec = page_events(path)
    n_steps = steps_used(len(rec.steps), rec.exit is not None)
    if n_steps < 2:
        raise ConfigError(f"--runtime {path}: the recording has no training step (only its start-up"
                          f"{'' if rec.exit is not None else ' and a last step holding the exit'}): record a "
                          "program that marks its steps, or give --step-line")
    starts: list[list[int]] = []
    norm = _normalise(rec, n_steps, starts)
    arrays = model_arrays(spec, regions)
    largest = max(spec.tables, key=lambda t: t.weight_bytes).name
    allocs, packed = split_packed(arrays, _allocs_never_freed(norm))
    taken, in_heap = match_arrays(arrays, allocs, f"emb:{largest}", packed)
    # key of a matched page -> the model's page at the same offset (pages past the array's end: dropped, -1),
    # its region, and the position from which the key is the model's (_births)
    matched: dict[int, tuple[int, int, int]] = {}
    born = _births(norm, [allocs[index] for index in taken])
    for (index, (a, pid, lo)), since in zip(taken.items(), born, strict=True):
        r = regions[a.region]
        first, need = r["first_page"] + a.offset // PAGE_BYTES, -(-a.nbytes // PAGE_BYTES)
        for i in range(allocs[index][2]):
            page = first + i
            matched[_key(pid, lo + i)] = (page if i < need and page < r["first_page"] + r["pages"] else -1,
                                          a.region, since)
    order, runtime = _classify(norm, matched)
    # numbered in address order (process, then virtual page): swap readahead reads the pages around a fault's
    # address (swap_vma_readahead, mm/swap_state.c), so the program's neighbours must be the trace's
    run_keys = sorted(k for k in order if k in runtime)
    buf_keys = sorted(k for k in order if k not in runtime)
    out_regions = list(regions)
    page_of: dict[int, tuple[int, int]] = {}
    next_page = footprint_pages
    for name, keys in (("runtime", run_keys), ("step-buffers", buf_keys)):
        if keys:
            out_regions.append({"name": name, "kind": name, "first_page": next_page, "pages": len(keys)})
            page_of.update((k, (next_page + i, len(out_regions) - 1)) for i, k in enumerate(keys))
            next_page += len(keys)
    unrecorded = _unrecorded(rec, norm, starts)
    if unrecorded:  # stored to where start-up's readings found them
        out_regions.append({"name": "unrecorded", "kind": "unrecorded", "first_page": next_page,
                            "pages": unrecorded[-1][1]})
    rows = _step_rows(rec, norm, starts, matched, page_of, (unrecorded, next_page, len(out_regions) - 1))
    info = {"path": str(path), "sha256": _sha256(path), "command": rec.meta.get("command"),
            "steps": n_steps, "training_steps": n_steps - 1, "step_source": rec.meta.get("step_source"),
            "cycle": f"trace steps above {n_steps - 1} repeat recording steps "
                     f"{n_steps - 1 - (-(-(n_steps - 1) // 2)) + 1}..{n_steps - 1}",
            "exit": "the exit phase is left out of the trace" if rec.exit is not None else
                    f"the exit was not told apart: the recording's last step ({n_steps}), which holds it, is left out",
            "matched": {a.name: {"pid": pid, "address": lo * PAGE_BYTES, "pages": allocs[i][2], "bytes": a.nbytes}
                        for i, (a, pid, lo) in sorted(taken.items())},
            "in_heap": in_heap, "runtime_pages": len(run_keys), "step_buffer_pages": len(buf_keys),
            "unrecorded_pages": unrecorded[-1][1] if unrecorded else 0,
            "thp_disabled": rec.thp_disabled, "cpu": rec.meta.get("cpu"),
            "file_bytes": "0: page cache is reclaimed first under a limit (the study's captures held 0-2 MiB)",
            **kernel_memory(rec.meta.get("readings") or [], n_steps, bool(rec.meta.get("pageout")))}
    run_first = footprint_pages
    active = set()
    for p, _, e, _ in rows[1:]:
        active.update(p[(e == EVENT_ACCESS) & (p >= run_first) & (p < run_first + len(run_keys))].tolist())
    return RecordedRuntime(rows, len(run_keys), len(buf_keys), info, len(active),
                           unrecorded[-1][1] if unrecorded else 0), out_regions


def steps_used(recorded: int, exit_told: bool) -> int:
    """Steps a trace takes from a recording of ``recorded`` steps (start-up included): all of them, but the last
    when the exit was not told apart from it (it holds the exit: ``exit_mmap`` frees every page)."""
    return recorded - (1 if not exit_told and recorded > 1 else 0)


def kernel_memory(readings: list[dict[str, Any]], n_steps: int, pageout: bool = False) -> dict[str, Any]:
    """Kernel memory charged to the recorded program's group while it trained (bytes), and how it was read.

    At each reading of a training step (1 .. ``n_steps`` - 1, :func:`steps_used`: not start-up, not the exit),
    the group's usage less its anonymous memory and page cache (``group_bytes`` - ``group_anon_bytes`` -
    ``group_file_bytes``: page tables, slab); the median of those readings, at least 0. A ``--pageout``
    recording's group holds swap cache that neither term counts, so there the kernel's own count is read
    (``group_kernel_bytes``: v1 kmem usage, v2 ``kernel``). A limit charges it as well and it is never
    swapped, so it comes out of a trace's budget (:func:`swaptrace.workload.process.anon_budget_bytes`).
    ``kernel_bytes`` is None for a recording whose readings lack the group (no memory controller, or
    recordings made before the field): the budget is then the whole limit.
    """
    training = [r for r in readings if 1 <= int(r.get("step", -1)) < n_steps]
    if pageout:
        values = [int(r["group_kernel_bytes"]) for r in training if r.get("group_kernel_bytes") is not None]
        how = "the group's kernel memory (kmem)"
    else:
        values = [int(r["group_bytes"]) - int(r["group_anon_bytes"]) - int(r["group_file_bytes"]) for r in training
                  if all(r.get(k) is not None for k in ("group_bytes", "group_anon_bytes", "group_file_bytes"))]
        how = "the group's usage - anonymous - page cache"
    if not values:
        return {"kernel_bytes": None, "kernel_note": "not measured: the recording's readings lack its cgroup"}
    kernel = max(0, int(np.median(values)))
    return {"kernel_bytes": kernel,
            "kernel_note": f"median of {len(values)} training readings of {how} ({min(values)}..{max(values)} B)"}


def _unrecorded(rec, norm, starts) -> list[tuple[int, int]]:
    """Start-up's anonymous memory that no recorded first touch accounts for, as ``(ops before, pages)``.

    At each reading the gap is the process's anonymous RSS less the pages recorded alive then. What persists
    into training (the median gap of the training steps' readings) is memory the recorder cannot see:
    copy-on-write pages of private file mappings (the ``.data`` of every shared library, written by the
    dynamic linker's relocations: ``RssAnon`` counts them, and the recorder follows anonymous mappings only),
    the main stack and ``.bss`` (mapped by ``exec``), pages the kernel first touches for the program
    (``read`` into a new buffer). A start-up reading's gap beyond it is the recorder's lag (faults still in
    its buffer when the RSS was read: gaps of 12-26 k pages for one reading, 8 k before and after), so each
    start-up reading counts ``min(gap, persistent)``, and the region grows to the most counted so far. The
    limited run holds these pages too; the trace stores to them where they appeared, and never again
    (nothing says which are used later). No training reading: the start-up gaps as they are.
    """
    rss = {round(float(r["t_us"])): int(r["anon_rss_bytes"]) // PAGE_BYTES
           for r in rec.meta.get("readings") or [] if r.get("anon_rss_bytes") is not None}
    if not rss or not norm:
        return []
    alive: set[int] = set()
    gaps: list[tuple[int, int, int]] = []  # step, ops before, gap
    for k, ops in enumerate(norm):
        # ops before each reading -> its time
        at = {i: round(float(rows["t_us"][0])) for i, rows in _readings(rec.steps[k].referenced, starts[k])}
        for i in range(len(ops) + 1):
            if i in at and at[i] in rss:
                gaps.append((k, i, rss[at[i]] - len(alive)))
            if i == len(ops):
                break
            code, key, _ = ops[i]
            if code == TOUCH:
                alive.add(key)
            elif code == FREE:
                alive.discard(key)
    training = [g for k, _, g in gaps if k > 0]
    cap = int(np.median(training)) if training else None
    out: list[tuple[int, int]] = []
    for k, i, gap in gaps:
        need = gap if cap is None else min(gap, cap)
        if k == 0 and need > (out[-1][1] if out else 0):
            out.append((i, need))
    return out


def _sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _readings(ref: dict[str, np.ndarray], starts: list[int]) -> list[tuple[int, dict[str, np.ndarray]]]:
    """A step's referenced readings in order: ``(ops before it, its rows)``; a reading's rows share ``t_us``."""
    if not len(ref["pid"]):
        return []
    t = ref["t_us"]
    cuts = [0, *(np.flatnonzero(t[1:] != t[:-1]) + 1).tolist(), len(t)]
    return [(starts[int(ref["at"][a])], {c: v[a:b] for c, v in ref.items()})
            for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def _step_rows(rec, norm, starts, matched, page_of, unrecorded) -> list[tuple[np.ndarray, ...]]:
    """Per recording step, the trace rows ``(page, write, event, region)`` (module docstring).

    ``unrecorded``: ``(list of (ops before, pages), first page, region)`` of :func:`_unrecorded`: start-up
    stores to the region's pages up to each count where the reading found it.
    """
    keys_sorted = np.array(sorted(page_of), dtype=np.int64)
    grow, unrec_first, unrec_region = unrecorded
    grow = list(grow)
    made = 0

    def unrecorded_rows(upto: int) -> list[tuple[int, bool, int, int]]:
        """Stores to the unrecorded pages start-up's readings before op ``upto`` found."""
        nonlocal made
        out_rows: list[tuple[int, bool, int, int]] = []
        while grow and grow[0][0] <= upto:
            out_rows += [(unrec_first + p, True, EVENT_ACCESS, unrec_region) for p in range(made, grow[0][1])]
            made = grow.pop(0)[1]
        return out_rows

    alive: dict[int, int] = {}  # key -> first-touch sequence number (runtime and buffer keys)
    seq = 0
    out = []
    base = 0  # ops of the steps before this one
    window = _Window() if rec.meta.get("pageout") else None
    for k, ops in enumerate(norm):
        rows: list[tuple[int, bool, int, int]] = []  # page, write, event, region
        touched: set[int] = set()  # first touched since the step's previous reading
        readings = _readings(rec.steps[k].referenced, starts[k])
        for i, (code, key, arg) in enumerate(ops):
            if k == 0:  # memory a start-up reading found unrecorded, before that reading's loads
                rows += unrecorded_rows(i)
            while readings and readings[0][0] <= i:  # a reading taken before this op: its window's loads here
                rows = _with_reading(rows, k, _reading_rows(readings.pop(0)[1], window, alive=alive, touched=touched,
                                                            matched=matched, pos=base + i, page_of=page_of))
                touched = set()
            if code == RETOUCH:  # a --pageout recording's: the page used again (a model page's uses: the spec's)
                if _model_page(matched, key, base + i) is None and key in page_of:
                    rows.append((page_of[key][0], arg, EVENT_ACCESS, page_of[key][1]))
                    window.used(key, arg, (k, len(rows) - 1))
                continue
            if code == TOUCH:
                model = _model_page(matched, key, base + i)
                if model is not None:
                    p, g = model
                    if p >= 0:
                        rows.append((p, arg, EVENT_ACCESS, g))
                    continue
                rows.append((*page_of[key][:1], arg, EVENT_ACCESS, page_of[key][1]))
                seq += 1
                alive[key] = seq
                touched.add(key)
                if window is not None:
                    window.used(key, arg, (k, len(rows) - 1))
            elif code == FREE:
                alive.pop(key, None)
                touched.discard(key)
                if window is not None:
                    window.freed(key)
                if key in page_of:
                    rows.append((page_of[key][0], False, EVENT_FREE, page_of[key][1]))
            else:  # ALLOC: the range's pages that have a trace page (not a model array's, made here)
                a, b = np.searchsorted(keys_sorted, [key, key + int(arg)])
                rows += [(page_of[kk][0], False, EVENT_ALLOC, page_of[kk][1]) for kk in keys_sorted[a:b].tolist()
                         if _model_page(matched, kk, base + i) is None]
        if k == 0:  # found by a reading after the step's last op
            rows += unrecorded_rows(len(ops))
        for _, reading in readings:  # those taken after the step's last op (a step's end)
            rows = _with_reading(rows, k, _reading_rows(reading, window, alive=alive, touched=touched,
                                                        matched=matched, pos=base + len(ops), page_of=page_of))
            touched = set()
        base += len(ops)
        cols = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
        out.append((np.asarray(cols[0], np.uint64), np.asarray(cols[1], bool), np.asarray(cols[2], np.uint8),
                    np.asarray(cols[3], np.uint16)))
    return out


def _reading_rows(reading, window, *, alive, touched, matched, pos, page_of) -> list[tuple]:
    """A reading's rows: a ``--pageout`` recording's stores that did not fault, each with the place of the load
    it follows (``window``), else the referenced loads (placed at the reading)."""
    if window is not None:
        return window.dirty_rows(reading, matched, pos, page_of)
    return [(None, row) for row in _loads_rows(reading, alive, touched, matched, pos, page_of)]


def _with_reading(rows: list[tuple], k: int, placed: list[tuple]) -> list[tuple]:
    """Step ``k``'s ``rows`` with a reading's rows ``(at, row)``: each right after row ``at[1]`` when ``at`` is
    a place in this step, the others (``at`` None, or a load of an earlier step) at the end, where the reading
    was taken. In place, and only the rows from the first place on are moved (a window's loads are the step's
    last rows): the rows after each place keep their order."""
    here = sorted(((at[1], n, row) for n, (at, row) in enumerate(placed) if at is not None and at[0] == k))
    if here:
        first = here[0][0] + 1
        tail = rows[first:]
        del rows[first:]
        start = first
        for idx, _, row in here:
            rows += tail[start - first:idx + 1 - first]
            rows.append(row)
            start = idx + 1
        rows += tail[start - first:]
    rows += [row for at, row in placed if at is None or at[0] != k]
    return rows


class _Window:
    """A ``--pageout`` recording's pages used since the last reading: stored to, and loaded but not stored to
    (with the place of the load's row, ``(step, index in the step's rows)``), for :meth:`dirty_rows`."""

    def __init__(self):
        self.stored: set[int] = set()
        self.loaded: dict[int, tuple[int, int]] = {}

    def used(self, key: int, write: bool, at: tuple[int, int]) -> None:
        if write:
            self.stored.add(key)
            self.loaded.pop(key, None)
        elif key not in self.stored:
            self.loaded[key] = at

    def freed(self, key: int) -> None:
        self.stored.discard(key)
        self.loaded.pop(key, None)

    def dirty_rows(self, ref: dict[str, np.ndarray], matched: dict, pos: int, page_of) -> list[tuple]:
        """Stores the window made without a fault: per runtime mapping, ``dirty - stored`` of its pages loaded in
        the window and not stored to, most recently loaded first, each as ``(place of its load, row)``; then
        the window starts over.

        A page read back after a page-out is mapped writable, so a later store to it does not fault: smaps
        ``Private_Dirty:`` counts it with the faulting stores, and only pages loaded in the window can be it.
        The store goes right after the load it follows (:func:`_with_reading`), not where the reading was
        taken: the reading only counts the window's stores, and a program that writes what it has just read
        (an interpreter's reference counts) writes it while it is still mapped. At the reading instead, a
        limited run could evict the page clean in between, and the store would then fault it back and free
        its slot, where the kernel rewrites it in place.
        A model array's mapping (:func:`_model_page`) is skipped: the model's stores come from the spec.
        """
        out: list[tuple] = []
        if len(ref["pid"]) and self.loaded:
            stored = np.array(sorted(self.stored), dtype=np.int64)
            loaded = np.array(sorted(self.loaded), dtype=np.int64)
            for pid, lo, n, dirty in zip(ref["pid"].tolist(), ref["page"].tolist(), ref["pages"].tolist(),
                                         ref["dirty_pages"].tolist(), strict=True):
                if _model_page(matched, _key(pid, lo), pos) is not None:
                    continue
                a, b = np.searchsorted(stored, [_key(pid, lo), _key(pid, lo + n)])
                c, d = np.searchsorted(loaded, [_key(pid, lo), _key(pid, lo + n)])
                want = min(int(dirty) - int(b - a), int(d - c))
                if want > 0:
                    pick = sorted(loaded[c:d].tolist(), key=lambda kk: self.loaded[kk], reverse=True)[:want]
                    out += [(self.loaded[kk], (page_of[kk][0], True, EVENT_ACCESS, page_of[kk][1])) for kk in pick]
        self.stored, self.loaded = set(), {}
        return out


def _loads_rows(reading, alive, touched, matched, pos, page_of) -> list[tuple[int, bool, int, int]]:
    return [(page_of[kk][0], False, EVENT_ACCESS, page_of[kk][1])
            for kk in _referenced_loads(reading, alive, touched, matched, pos)]


def _referenced_loads(ref: dict[str, np.ndarray], alive: dict[int, int], touched: set[int],
                      matched: dict, pos: int) -> list[int]:
    """Keys loaded for the step's referenced pages: per runtime mapping, ``referenced - touched`` of its alive
    pages not touched in the step, most recently first-touched first (a reading taken after ``pos`` ops; a
    model array's mapping, :func:`_model_page`, is skipped)."""
    if not len(ref["pid"]) or not alive:
        return []
    keys = np.fromiter(alive.keys(), dtype=np.int64, count=len(alive))
    seqs = np.fromiter(alive.values(), dtype=np.int64, count=len(alive))
    o = np.argsort(keys)
    keys, seqs = keys[o], seqs[o]
    out: list[int] = []
    for pid, lo, n, refd in zip(ref["pid"].tolist(), ref["page"].tolist(), ref["pages"].tolist(),
                                ref["referenced_pages"].tolist(), strict=True):
        if _model_page(matched, _key(pid, lo), pos) is not None:
            continue
        a, b = np.searchsorted(keys, [_key(pid, lo), _key(pid, lo + n)])
        in_map = keys[a:b].tolist()
        fresh = [i for i, kk in enumerate(in_map) if kk in touched]
        want = int(refd) - len(fresh)
        if want <= 0:
            continue
        cand = np.array([i for i, kk in enumerate(in_map) if kk not in touched], dtype=np.int64)
        if not cand.size:
            continue
        pick = cand[np.argsort(-seqs[a:b][cand], kind="stable")][:want]
        out.extend(keys[a:b][pick].tolist())
    return out


def check_recording(path: str | os.PathLike) -> None:
    """Open a recording as a reader does (kind, columns, metadata), one line on any fault."""
    open_trace(path, kind="recording")


def with_recording(chunks: Iterator[tuple[np.ndarray, ...]], recorded: RecordedRuntime, extra_startup: np.ndarray,
                   regions: list[dict[str, Any]], steps: int) -> Iterator[tuple[np.ndarray, ...]]:
    """The process's rows ``(step, page, write, region, event)``: recording rows then the model's, per step.

    ``chunks`` is the model's trace ``(step, page, write, region)`` from step 0 (model step ``s`` is trace
    step ``s + 1``); ``extra_startup`` the model pages stored to at the end of step 0; ``steps`` the model's
    training steps (every one gets the recording's rows, even one the model's trace leaves empty).
    """
    firsts = np.array([r["first_page"] for r in regions], dtype=np.uint64)
    # the recording holds the program's activations (its runtime and step buffers): the spec's stand-in for
    # them, ``scratch``, would count them twice
    scratch = np.array([r["kind"] == "scratch" for r in regions], dtype=bool)
    base = min((r["first_page"] for r in regions if r["kind"] in ("runtime", "step-buffers")), default=0)
    alive = bytearray(recorded.runtime_pages + recorded.buffer_pages + recorded.unrecorded_pages)

    def recorded_part(step: int) -> tuple[np.ndarray, ...]:
        p, w, e, g = recorded.rows[recorded.recording_step(step)]
        keep = _live_allocs_dropped(p, e, alive, base, repeat=step > recorded.training_steps)
        return (np.full(int(keep.sum()), step, np.uint32), p[keep], w[keep], g[keep], e[keep])

    def startup() -> tuple[np.ndarray, ...]:
        n = extra_startup.size
        rg = (np.searchsorted(firsts, extra_startup, side="right") - 1).astype(np.uint16)
        return (np.zeros(n, np.uint32), extra_startup.astype(np.uint64), np.ones(n, bool), rg, np.zeros(n, np.uint8))

    yield recorded_part(0)
    yield startup()
    done = 0  # trace steps whose recorded rows are out
    for st, pg, wr, rg in chunks:
        if st.size == 0:
            continue
        trace_step = st.astype(np.uint32) + np.uint32(1)
        for s in np.unique(trace_step).tolist():
            while done < s:
                done += 1
                yield recorded_part(done)
            m = (trace_step == s) & ~scratch[rg.astype(np.int64)]
            yield (trace_step[m], pg[m].astype(np.uint64), wr[m].astype(bool), rg[m].astype(np.uint16),
                   np.zeros(int(m.sum()), np.uint8))
    while done < steps:
        done += 1
        yield recorded_part(done)


def _live_allocs_dropped(page: np.ndarray, event: np.ndarray, alive: bytearray, base: int, *, repeat: bool) -> np.ndarray:
    """Rows to keep of a recorded step, updating ``alive`` (one byte per runtime page from ``base``).

    A repeated step (beyond the recording) may allocate pages the first pass of it allocated and kept: they
    hold memory now, and an alloc over them would free them (docs/formats.md), which the program never did.
    Such alloc rows are dropped; the step's stores to those pages stay (stores to resident pages).
    """
    keep = np.ones(page.size, dtype=bool)
    for i in np.flatnonzero(page >= base).tolist():
        j, ev = int(page[i]) - base, int(event[i])
        if ev == EVENT_ALLOC:
            if alive[j] and repeat:
                keep[i] = False
            alive[j] = 0
        elif ev == EVENT_FREE:
            alive[j] = 0
        else:
            alive[j] = 1
    return keep


def model_startup(regions: list[dict[str, Any]], optimizer: str, recorded: RecordedRuntime) -> np.ndarray:
    """Model pages stored to at start-up that no matched mapping's first touch wrote (arrays in the heap)."""
    pages = startup_pages([r for r in regions if r["kind"] not in ("runtime", "step-buffers")], optimizer)
    p, _, e, _ = recorded.rows[0]
    written = p[e == EVENT_ACCESS]
    return pages[~np.isin(pages, written)]


@dataclass(frozen=True)
class Recording:
    """A recording as ``generate_trace``'s ``runtime``: ``generate_trace(spec, out, runtime=Recording(path))``."""

    path: str

    def as_process(self, meta: dict[str, Any], spec: ModelSpec, chunks, first_step: int):
        """Make ``meta`` and ``chunks`` the whole process's (module docstring).

        Returns the process's chunks ``(step, page, write, region, event)`` and the recording's page count.
        """
        if first_step != 0:
            raise ConfigError("--runtime: a process trace starts with its start-up; give it from step 0 "
                              "(no --first-step)")
        if int(meta["page_bytes"]) != PAGE_BYTES:
            raise ConfigError("--runtime: a recording is of 4 KiB pages; give --page-bytes 4096")
        model_pages = int(meta["footprint_pages"])
        rt, regions = reduce_recording(self.path, spec, meta["regions"], model_pages)
        extra = rt.runtime_pages + rt.buffer_pages + rt.unrecorded_pages
        footprint = model_pages + extra
        steps = int(meta["steps"])
        meta.update(regions=regions, footprint_pages=footprint, footprint_bytes=footprint * PAGE_BYTES,
                    steps=steps + 1, step_offset=1, startup_step=0,
                    process={"name": f"recording {Path(self.path).name}", "measured_on": _command_text(rt.info["command"]),
                             "runtime_bytes": rt.runtime_pages * PAGE_BYTES,
                             "active_bytes": rt.active_pages * PAGE_BYTES,
                             "step_bytes": rt.buffer_pages * PAGE_BYTES, "file_bytes": 0,
                             "kernel_bytes": rt.info.get("kernel_bytes") or 0,
                             "write_cost": 0, "source": str(self.path), "model_footprint_pages": model_pages,
                             **_threads(rt.info.get("cpu"), self.path),
                             "recording": {**rt.info, "cycle": rt.info["cycle"] if steps > rt.training_steps
                                           else None}})
        meta["params"]["runtime"] = str(self.path)
        extra_startup = model_startup(regions, spec.optimizer, rt)
        return with_recording(chunks, rt, extra_startup, regions, steps), extra


def _threads(cpu: Any, path: Any) -> dict[str, Any]:
    """The threads the recorded program kept busy in its steps (``cpu`` of the recording), for the time
    model; nothing when the recording did not measure them (recordings before this field)."""
    if not isinstance(cpu, dict) or not bounds.within("threads", cpu.get("threads")):
        return {}
    return {"threads": int(cpu["threads"]),
            "threads_source": f"recording {Path(str(path)).name}: {cpu.get('effective_threads')} effective "
                              "threads busy in its training steps"}


def _command_text(command: Any) -> str:
    """The recorded command as one line (a list of arguments joined by spaces)."""
    return " ".join(map(str, command)) if isinstance(command, list) else str(command or "")
