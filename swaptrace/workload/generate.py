"""Page-level access traces of DLRM training steps.

Each training step touches memory in this order (one row per page touched):

1. **forward** -- for every table (in spec order), every bag of the batch,
   every lookup of the bag: a read of each page of the looked-up row (a row
   that straddles a page boundary reads both pages);
2. **dense part** -- reads of every MLP weight page, then writes of every
   scratch (activation/gradient) page;
3. **backward and optimizer** -- for every table, each row looked up in the
   step, once, in ascending row order: read then write of its optimizer-state
   pages (each state array in turn: Adam's two moments), then read then write
   of its weight pages; finally writes of every MLP weight page and every
   MLP optimizer-state page.

Lookups come from :mod:`swaptrace.workload.indices` (bounded-Zipf or uniform rows per
table, fixed or random bag sizes, optional reuse of the previous step's
indices and de-duplication within a bag), the same code ``swaptrace train``
feeds to PyTorch.
``dedup="step"`` drops a read (write) of a page already read (written) in
the same step.

Every draw depends only on ``(seed, step)``, so steps ``[0, k)`` and
``[k, n)`` generated separately and concatenated equal steps ``[0, n)``,
whatever the number of threads. Memory depends on the step size and the
model's page count, never on the number of steps.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numba
import numpy as np

from swaptrace.core.bounds import check_allocation
from swaptrace.core.traceio import (
    DEFAULT_ROW_GROUP,
    EVENT_ACCESS,
    EVENT_ALLOC,
    EVENT_FREE,
    TraceWriter,
    open_trace,
)
from swaptrace.errors import ConfigError
from swaptrace.kernels.generate.draw import count_segments, emit_accesses, emit_segments, plan_segments, tally_pages
from swaptrace.workload.choices import ROW_LAYOUTS  # noqa: F401  (re-exported)
from swaptrace.workload.indices import DrawnSteps, IndexPlan, check_draw_options, draw_batches
from swaptrace.workload.layout import Layout, build_layout
from swaptrace.workload.process import (
    RuntimeProfile,
    load_runtime_profile,
    process_layout,
    with_process,
    zero_stores,
)
from swaptrace.workload.spec import ModelSpec, load_spec

DEDUP_CHOICES = (None, "step")
#: lookups drawn per kernel call at most (bounds the index buffers: 3 x 8 bytes each)
DRAW_BUDGET = 1 << 21
#: lookups (or unique rows, or pages) per segment of the parallel emission
SEGMENT_ITEMS = 4096


class _Plan:
    """Everything the kernels need, as plain arrays (built once per run)."""

    def __init__(self, spec: ModelSpec, layout: Layout, seed: int, scatter: bool):
        self.spec, self.layout, self.seed, self.scatter = spec, layout, seed, scatter
        self.index = IndexPlan(spec, seed, scatter)
        self.n_rows = self.index.n_rows
        self.tbl_off = self.index.tbl_off
        self.stride = self.index.stride

        lay = layout
        pb = lay.page_bytes
        max_wp = int(max(lay.table_row_bytes)) // pb + 2
        max_sp = int(max(lay.state_row_bytes, default=0)) // pb + 2
        self.item_max = 2 * max_wp + 2 * lay.state_arrays * max_sp + 1

        def region(i: int) -> tuple[int, int, int]:
            if i < 0:
                return 0, 0, 0
            r = lay.regions[i]
            return r.first_page, r.pages, i

        self.mlp = region(lay.mlp_region)
        self.mlp_state = region(lay.mlp_state_region)
        self.scratch = region(lay.scratch_region)


#: ``--row-layout``: each name's ``scatter`` value. ``scattered`` maps Zipf rank k to a row by a seeded
#: bijection (today's default); ``packed`` keeps rank k at row k - 1, so rows lie in order of expected
#: popularity and the hot rows share pages (the training-side fix of docs/designs.md).

def _check_options(steps: int, seed: int, first_step: int, reuse: float, dedup: str | None) -> None:
    errors = check_draw_options(steps, seed, first_step, reuse)
    if dedup not in DEDUP_CHOICES:
        errors.append(f"dedup: must be 'step' or none, got {dedup!r}")
    if errors:
        raise ConfigError("; ".join(errors))


class _Out:
    """The output buffers of ``_chunks`` and how many rows they hold.

    Without ``spare`` one set of buffers is reused: a chunk's views are good until the next chunk is asked for.
    With ``spare`` (a queue of buffer sets the consumer hands back, see :meth:`_BackgroundWriter.hand_over`)
    each chunk is made in a set of its own, which the consumer keeps until it puts the set back, so no chunk
    is copied; ``None`` in the queue stands for a set not yet allocated.
    """

    def __init__(self, rows: int, spare: queue.Queue | None = None):
        self._spare = spare
        self.allocate(rows)
        self.filled = 0

    def allocate(self, rows: int) -> None:
        self.cap = rows
        self.step = np.empty(rows, dtype=np.uint32)
        self.page = np.empty(rows, dtype=np.uint64)
        self.write = np.empty(rows, dtype=np.bool_)
        self.region = np.empty(rows, dtype=np.uint16)

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.step, self.page, self.write, self.region

    def take(self) -> tuple[np.ndarray, ...]:
        """Views of the filled rows; the buffers are reused from the start afterwards (or, with ``spare``,
        the next free set is taken: this waits while the consumer holds every set)."""
        n, self.filled = self.filled, 0
        views = self.step[:n], self.page[:n], self.write[:n], self.region[:n]
        if self._spare is not None:
            free = self._spare.get()
            if free is None or len(free[0]) < self.cap:
                self.allocate(self.cap)
            else:
                self.step, self.page, self.write, self.region = free
        return views


def _emit_serial(plan: _Plan, out: _Out, d: DrawnSteps, stamp, seen):
    """Emit a drawn batch in order, one core (needed by de-duplication); yields when the buffer is full."""
    lay = plan.layout
    step0, nsteps, idx, uniq, lens, ulens = d.step0, d.nsteps, d.idx, d.uniq, d.lens, d.ulens
    cursor = np.zeros(4, dtype=np.int64)
    while cursor[0] < nsteps:
        out.filled = emit_accesses(cursor, np.int64(step0), np.int64(nsteps), idx, uniq, lens, ulens, plan.tbl_off,
                           np.int64(plan.stride), np.int64(lay.page_shift), lay.table_first_byte,
                           lay.table_row_bytes, lay.table_region, lay.state_first_byte, lay.state_row_bytes,
                           lay.state_array_bytes, lay.state_region, np.int64(lay.state_arrays),
                           *(np.int64(v) for v in plan.mlp), *(np.int64(v) for v in plan.mlp_state),
                           *(np.int64(v) for v in plan.scratch), np.int64(plan.item_max), True, stamp,
                           seen.size > 1, seen, np.int64(out.filled), *out.arrays)
        if cursor[0] < nsteps or out.filled + plan.item_max > out.cap:
            yield out.take()


def _emit_parallel(plan: _Plan, out: _Out, d: DrawnSteps, seen):
    """Emit a drawn batch on all cores: cut into segments in program order, each core writes a run of them."""
    lay = plan.layout
    step0, nsteps, idx, uniq, lens, ulens = d.step0, d.nsteps, d.idx, d.uniq, d.lens, d.ulens
    shift = np.int64(lay.page_shift)
    seg_args = (np.int64(nsteps), np.int64(len(plan.n_rows)), lens, ulens, np.int64(SEGMENT_ITEMS),
                np.int64(plan.mlp[1]), np.int64(plan.mlp_state[1]), np.int64(plan.scratch[1]))
    n_seg = plan_segments(*seg_args, False, np.empty((0, 5), dtype=np.int64))
    segs = np.empty((n_seg, 5), dtype=np.int64)
    plan_segments(*seg_args, True, segs)
    counts = np.empty(n_seg, dtype=np.int64)
    count_segments(segs, idx, uniq, plan.tbl_off, np.int64(plan.stride), shift, lay.table_first_byte,
                    lay.table_row_bytes, lay.state_first_byte, lay.state_row_bytes, lay.state_array_bytes,
                    np.int64(lay.state_arrays), counts)
    offsets = np.zeros(n_seg + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    n_chunks = np.int64(4 * numba.get_num_threads())
    j = 0
    while j < n_seg:
        last = int(np.searchsorted(offsets, offsets[j] + (out.cap - out.filled), side="right")) - 1
        if last <= j:
            if out.filled:
                yield out.take()
            else:  # one segment larger than the buffer (rows of many pages): grow it
                out.allocate(int(counts[j]))
            continue
        emit_segments(segs, np.int64(j), np.int64(last), offsets, np.int64(out.filled), n_chunks, np.int64(step0),
                       idx, uniq, plan.tbl_off, np.int64(plan.stride), shift, lay.table_first_byte,
                       lay.table_row_bytes, lay.table_region, lay.state_first_byte, lay.state_row_bytes,
                       lay.state_array_bytes, lay.state_region, np.int64(lay.state_arrays), np.int64(plan.mlp[0]),
                       np.int64(plan.mlp[2]), np.int64(plan.mlp_state[0]), np.int64(plan.mlp_state[2]),
                       np.int64(plan.scratch[0]), np.int64(plan.scratch[2]), seen.size > 1, seen, *out.arrays)
        out.filled += int(offsets[last] - offsets[j])
        j = last
        if j < n_seg:
            yield out.take()


def _chunks(plan: _Plan, steps: int, first_step: int, reuse: float, dedup: bool, *, chunk_rows: int,
            seen: np.ndarray, progress: Callable[[int], Any] | None,
            spare: queue.Queue | None = None) -> Iterator[tuple[np.ndarray, ...]]:
    """Yield (step, page, write, region) views into reused buffers, in program order.

    Steps are drawn in batches (at most :data:`DRAW_BUDGET` lookups) by
    :func:`swaptrace.workload.indices.draw_batches`, then emitted. ``seen`` (one byte
    per page, or a 1-element dummy to skip the bookkeeping) gets a 1 at every
    page touched. ``spare``: buffer sets handed back by the consumer (:class:`_Out`).
    """
    out = _Out(max(chunk_rows, plan.item_max), spare)
    # last step (+1) each page was read / written in, for de-duplication
    stamp = np.zeros((2, plan.layout.footprint_pages if dedup else 1), dtype=np.uint32)
    for d in draw_batches(plan.index, steps, first_step, reuse, budget=DRAW_BUDGET):
        if dedup:
            yield from _emit_serial(plan, out, d, stamp, seen)
        else:
            yield from _emit_parallel(plan, out, d, seen)
        if progress is not None:
            progress(d.nsteps)
    if out.filled:
        yield out.take()


def _prepare(spec: ModelSpec | str | os.PathLike, *, steps: int, seed: int, first_step: int, page_bytes: int,
             alpha: float | None, optimizer: str | None, reuse: float, dedup: str | None) -> tuple[ModelSpec, Layout]:
    if not isinstance(spec, ModelSpec):
        spec = load_spec(spec)
    spec = spec.with_overrides(alpha=alpha, optimizer=optimizer)
    _check_options(steps, seed, first_step, reuse, dedup)
    layout = build_layout(spec, page_bytes)
    # one touched flag per page (and two step stamps with dedup), allocated before the first step
    check_allocation(layout.footprint_pages * (9 if dedup == "step" else 1),
                     f"a trace of {layout.footprint_pages:,} pages ({spec.name})",
                     "the model is too large to trace here: fewer or smaller tables, or --page-bytes 2MiB")
    return spec, layout


def iter_accesses(spec: ModelSpec | str, *, steps: int, seed: int = 0, first_step: int = 0, page_bytes: int = 4096,
                  alpha: float | None = None, optimizer: str | None = None, scatter: bool = True,
                  reuse: float = 0.0, dedup: str | None = None, chunk_rows: int = DEFAULT_ROW_GROUP,
                  copy: bool = True) -> Iterator[dict[str, np.ndarray]]:
    """Yield the trace in chunks of at most ``chunk_rows`` rows (dicts of numpy arrays).

    Same parameters as :func:`generate_trace`, without the output file. With
    ``copy=False`` the arrays are views into buffers that the next chunk
    overwrites (faster, for consumers that are done with a chunk before asking
    for the next).
    """
    spec, layout = _prepare(spec, steps=steps, seed=seed, first_step=first_step, page_bytes=page_bytes,
                            alpha=alpha, optimizer=optimizer, reuse=reuse, dedup=dedup)
    plan = _Plan(spec, layout, seed, scatter)
    no_tracking = np.zeros(1, dtype=np.uint8)
    for st, pg, wr, rg in _chunks(plan, steps, first_step, reuse, dedup == "step", chunk_rows=chunk_rows, seen=no_tracking,
                                  progress=None):
        if copy:
            st, pg, wr, rg = st.copy(), pg.copy(), wr.copy(), rg.copy()
        yield {"step": st, "page": pg, "write": wr, "region": rg}


def draw_rows(spec: ModelSpec | str, table: int | str, *, steps: int, seed: int = 0, first_step: int = 0,
              alpha: float | None = None, scatter: bool = True, reuse: float = 0.0) -> np.ndarray:
    """Row ids looked up in one table over ``steps`` steps, in lookup order (int64).

    Exactly the rows behind the trace's forward reads of that table (for
    rank-frequency plots of rows next to pages).
    """
    if not isinstance(spec, ModelSpec):
        spec = load_spec(spec)
    spec = spec.with_overrides(alpha=alpha)
    _check_options(steps, seed, first_step, reuse, None)
    names = [t.name for t in spec.tables]
    t = names.index(table) if isinstance(table, str) and table in names else table
    if not isinstance(t, int | np.integer) or not 0 <= t < len(names):
        raise ConfigError(f"table: no table {table!r}; the spec has {', '.join(names)}")
    plan = IndexPlan(spec, seed, scatter)
    out = []
    for d in draw_batches(plan, steps, first_step, reuse):
        for si in range(d.nsteps):
            lo = si * plan.stride + int(plan.tbl_off[t])
            out.append(d.idx[lo:lo + d.lens[si * plan.n_tables + t]].copy())
    return np.concatenate(out)


def generate_arrays(spec: ModelSpec | str, *, steps: int, **options: Any) -> dict[str, np.ndarray]:
    """The whole trace in memory (for tests and small runs); see :func:`generate_trace`."""
    parts = list(iter_accesses(spec, steps=steps, **options))
    names = ("step", "page", "write", "region")
    dtypes = (np.uint32, np.uint64, np.bool_, np.uint16)
    if not parts:
        return {n: np.empty(0, dtype=d) for n, d in zip(names, dtypes, strict=True)}
    return {n: np.concatenate([p[n] for p in parts]) for n in names}


class _BackgroundWriter:
    """Compress and write chunks on a second thread while the kernels make the next ones.

    The numba kernels release the GIL and so does pyarrow's Parquet encoder, so
    the two overlap. Chunks are copied into a few buffer sets (:meth:`write`), or
    made in them by the producer (:meth:`hand_over`), that the writing thread
    hands back once pyarrow has encoded them, so at most ``depth`` chunks wait,
    memory stays bounded, and no chunk pays for fresh pages from the kernel
    (zeroing them cost as much as the copy). An error on the writing thread is
    raised in the caller at the next ``write`` or on exit.
    """

    def __init__(self, writer: TraceWriter, depth: int = 2, tally: Callable[[dict[str, np.ndarray]], Any] | None = None,
                 spare: queue.Queue | None = None):
        self._writer = writer
        self._tally = tally
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        # one set being filled, ``depth`` waiting, one being encoded
        self._free: queue.Queue = queue.Queue()
        for _ in range(depth + 2):
            self._free.put(None)  # allocated on first use, at the first chunk's size
        # buffer sets of a producer that hands its chunks over (:meth:`hand_over`, :class:`_Out`) instead of
        # having them copied: one being filled (the producer's own), ``depth`` waiting, one being encoded
        self._spare = spare
        for _ in range(depth + 1 if spare is not None else 0):
            spare.put(None)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="swaptrace-writer", daemon=True)

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            buffers, n = item
            columns = buffers if n is None else {k: v[:n] for k, v in buffers.items()}
            if self._error is None:
                try:
                    self._writer.write(**columns)
                    if self._tally is not None:
                        self._tally(columns)
                except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
                    self._error = exc
            if n is None:  # a handed-over chunk: its whole buffers go back to the producer
                self._spare.put(tuple(v.base if v.base is not None else v for v in buffers.values()))
            else:
                self._free.put(buffers)

    def hand_over(self, **columns: np.ndarray) -> None:
        """Queue ``columns`` without a copy: views of a buffer set from ``spare``, whose whole arrays (in the
        order given) go back to ``spare`` once written; the producer does not touch them until then."""
        if self._error is not None:
            raise self._error
        self._queue.put((columns, None))

    def write(self, **columns: np.ndarray) -> None:
        """Queue a copy of ``columns`` (arrays of equal length) for writing."""
        if self._error is not None:
            raise self._error
        n = len(next(iter(columns.values())))
        buffers = self._free.get()
        if buffers is None or len(next(iter(buffers.values()))) < n:
            rows = max(n, DEFAULT_ROW_GROUP)  # chunks vary a little below their buffer's size: allocate once
            buffers = {k: np.empty(rows, dtype=v.dtype) for k, v in columns.items()}
        for k, v in columns.items():
            buffers[k][:n] = v
        self._queue.put((buffers, n))

    def __enter__(self) -> _BackgroundWriter:
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._queue.put(None)
        self._thread.join()
        if exc_type is None and self._error is not None:
            raise self._error


@contextlib.contextmanager
def _one_core_for_the_writer() -> Iterator[None]:
    """Run the kernels on one numba thread fewer (at least one) while the writer thread encodes.

    Encoding a chunk costs about as much CPU as making it, so on 2 cores the kernels on one and the encoder
    on the other finish together; a second kernel thread would only take turns with the encoder, and costs
    more CPU per access than one.
    """
    before = numba.get_num_threads()
    numba.set_num_threads(max(1, before - 1))
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _access_meta(spec: ModelSpec, layout: Layout, *, steps: int, seed: int, first_step: int, page_bytes: int,
                 alpha: float | None, scatter: bool, reuse: float, dedup: str | None) -> dict[str, Any]:
    """The access trace's metadata, before the summary (the access-trace contract in :mod:`swaptrace.core.traceio`)."""
    preset = spec.name if spec.source.startswith("preset ") or not spec.source else spec.source
    return {
        "page_bytes": layout.page_bytes,
        "footprint_pages": layout.footprint_pages,
        "footprint_bytes": layout.footprint_bytes,
        "regions": layout.region_dicts(),
        "first_step": first_step,
        "steps": steps,
        "seed": seed,
        "preset": preset,
        "spec": spec.to_dict(),
        "params": {
            "steps": steps, "seed": seed, "first_step": first_step, "page_bytes": page_bytes, "alpha": alpha,
            "optimizer": spec.optimizer, "scatter": scatter, "reuse": reuse, "dedup": dedup,
        },
    }


def generate_trace(spec: ModelSpec | str, out: str | os.PathLike, *, steps: int | None = None, seed: int = 0,
                   first_step: int = 0, page_bytes: int = 4096, alpha: float | None = None,
                   optimizer: str | None = None, scatter: bool = True, reuse: float = 0.0,
                   dedup: str | None = None, force: bool = False,
                   progress: Callable[[int], Any] | None = None,
                   runtime: RuntimeProfile | str | Any = None) -> Path:
    """Generate an access trace of training steps and write it to Parquet.

    Parameters
    ----------
    spec : ModelSpec or str
        A spec, a preset name or a TOML path.
    out : path-like
        Output file (``*.access.parquet`` by convention); written atomically.
    steps : int, optional
        Training steps to generate (default: the spec's ``default_steps``).
    seed : int
        Seed in ``[0, 2**64)``; with the step number it determines every draw.
    first_step : int
        Number of the first step, so ranges of one run can be made apart.
    page_bytes : int
        4096 or 2 MiB (2097152).
    alpha : float, optional
        Zipf exponent (> 0) for every table, overriding the spec.
    optimizer : str, optional
        Override the spec's optimizer (sgd, rowwise-adagrad, adagrad, adam).
    scatter : bool
        Map hot ranks to scattered rows (default) or keep rank k at row k-1.
    reuse : float
        Fraction in [0, 1] of indices repeated from the previous step.
    dedup : {None, "step"}
        Drop repeated reads (writes) of a page within a step.
    force : bool
        Overwrite an existing output.
    progress : callable, optional
        Called with the number of steps finished, as they finish.
    runtime : RuntimeProfile, str or Recording, optional
        Trace the whole training process, not only the model (:mod:`swaptrace.workload.process`): the runtime's
        memory, the start-up as step 0 (every array written) and training step k as step k + 1.
        A shipped profile's name (``pytorch-cpu``) or a TOML file; or a recording of the program,
        ``swaptrace.capture.process_trace.Recording(path)`` (its memory, step by step, with alloc and free
        events: docs/process.md "From a recording").

    Returns
    -------
    pathlib.Path
        The written file; its metadata follows the access-trace contract.
    """
    path, _seen = _write_trace(spec, out, steps=steps, seed=seed, first_step=first_step, page_bytes=page_bytes,
                               alpha=alpha, optimizer=optimizer, scatter=scatter, reuse=reuse, dedup=dedup,
                               force=force, progress=progress, runtime=runtime)
    return path


def generate_part(spec: ModelSpec | str, out: str | os.PathLike, *, steps: int, first_step: int,
                  **options: Any) -> tuple[Path, dict[str, Any], np.ndarray]:
    """One step range of a partitioned trace: :func:`generate_trace` into ``out``, plus what a merge needs.

    Returns
    -------
    path : pathlib.Path
        The part file (its metadata describes its own step range).
    summary : dict
        Its summary (accesses, reads, writes, unique_pages, region_accesses).
    seen : numpy.ndarray
        ``np.packbits`` of the pages it touched (footprint / 8 bytes), so the
        whole trace's ``unique_pages`` is the popcount of the parts' union.
    """
    path, seen = _write_trace(spec, out, steps=steps, first_step=first_step, **options)
    return path, read_summary(path), np.packbits(seen.astype(bool))


def trace_metadata(spec: ModelSpec | str, *, steps: int, seed: int = 0, first_step: int = 0, page_bytes: int = 4096,
                   alpha: float | None = None, optimizer: str | None = None, scatter: bool = True,
                   reuse: float = 0.0, dedup: str | None = None) -> dict[str, Any]:
    """The metadata :func:`generate_trace` would write for these options, before the summary (checks them too)."""
    if not isinstance(spec, ModelSpec):
        spec = load_spec(spec)
    spec, layout = _prepare(spec, steps=steps, seed=seed, first_step=first_step, page_bytes=page_bytes,
                            alpha=alpha, optimizer=optimizer, reuse=reuse, dedup=dedup)
    return _access_meta(spec, layout, steps=steps, seed=seed, first_step=first_step, page_bytes=page_bytes,
                        alpha=alpha, scatter=scatter, reuse=reuse, dedup=dedup)


def read_summary(path: str | os.PathLike) -> dict[str, Any]:
    """The ``summary`` of a written access trace (file or dataset)."""
    return dict(open_trace(path, "access").meta["summary"])


def _write_trace(spec: ModelSpec | str, out: str | os.PathLike, *, steps: int | None, seed: int = 0,
                 first_step: int = 0, page_bytes: int = 4096, alpha: float | None = None,
                 optimizer: str | None = None, scatter: bool = True, reuse: float = 0.0,
                 dedup: str | None = None, force: bool = False,
                 progress: Callable[[int], Any] | None = None,
                 runtime: RuntimeProfile | str | Any = None) -> tuple[Path, np.ndarray]:
    """:func:`generate_trace`'s body; also returns the per-page touched flags (uint8, one per page)."""
    if not isinstance(spec, ModelSpec):
        spec = load_spec(spec)
    if steps is None:
        steps = spec.default_steps
    spec, layout = _prepare(spec, steps=steps, seed=seed, first_step=first_step, page_bytes=page_bytes,
                            alpha=alpha, optimizer=optimizer, reuse=reuse, dedup=dedup)
    plan = _Plan(spec, layout, seed, scatter)
    meta = _access_meta(spec, layout, steps=steps, seed=seed, first_step=first_step, page_bytes=page_bytes,
                        alpha=alpha, scatter=scatter, reuse=reuse, dedup=dedup)
    seen = np.zeros(max(layout.footprint_pages, 2), dtype=np.uint8)
    tallied = {"writes": 0}

    def tally(columns: dict[str, np.ndarray]) -> None:  # on the writing thread, for the model's own chunks
        tallied["writes"] += int(tally_pages(columns["write"], columns["region"], region_counts))

    # the model alone: chunks are handed to the writer in buffer sets it hands back, neither copied nor
    # tallied on this thread (the kernels' thread is the pipeline's slower stage)
    direct = runtime is None
    spare: queue.Queue | None = queue.Queue() if direct else None
    # a process source of its own (swaptrace.capture.process_trace.Recording): it lays out the process itself,
    # and may leave some of the model's accesses out (its scratch): the pages seen are those written
    recorded = runtime is not None and hasattr(runtime, "as_process")
    chunks = _chunks(plan, steps, first_step, reuse, dedup == "step", chunk_rows=DEFAULT_ROW_GROUP,
                     seen=np.zeros(1, dtype=np.uint8) if recorded else seen, progress=progress, spare=spare)
    if recorded:
        chunks, extra_pages = runtime.as_process(meta, spec, chunks, first_step)
    elif runtime is not None:
        chunks, extra_pages = _as_process(meta, spec, chunks, runtime, first_step)
    region_counts = np.zeros(len(meta["regions"]), dtype=np.int64)  # the process's regions, when it has some
    writes = events = 0
    counts = {"allocs": 0, "frees": 0}
    freed: set[int] = set()
    # a process trace marks its stores of zeros (an optimizer's zeroed state at start-up): Linux >= 6.12 swaps
    # those pages without I/O
    optional = ("event", "zero") if recorded else ("zero",) if runtime is not None else ()
    with TraceWriter(out, "access", meta, force=force, optional=optional) as writer, \
            _one_core_for_the_writer():
        with _BackgroundWriter(writer, depth=4, tally=tally if direct else None, spare=spare) as background:
            for st, pg, wr, rg, *ev in chunks:
                if direct:
                    background.hand_over(step=st, page=pg, write=wr, region=rg)
                    continue
                zero = zero_stores(st, wr, rg, meta["regions"], spec.optimizer)
                if ev:  # alloc and free rows are no accesses: tallied apart
                    acc = ev[0] == EVENT_ACCESS
                    background.write(step=st, page=pg, write=wr, region=rg, event=ev[0], zero=zero & acc)
                    events += int(acc.size - np.count_nonzero(acc))
                    counts["allocs"] += int(np.count_nonzero(ev[0] == EVENT_ALLOC))
                    counts["frees"] += int(np.count_nonzero(ev[0] == EVENT_FREE))
                    freed.update(pg[ev[0] == EVENT_FREE].tolist())
                    seen[pg[acc & (pg < layout.footprint_pages)].astype(np.int64)] = 1  # start-up's stores too
                    wr, rg = wr[acc], rg[acc]
                else:
                    background.write(step=st, page=pg, write=wr, region=rg, zero=zero)
                writes += int(tally_pages(wr, rg, region_counts))
        writes += tallied["writes"]
        writer.metadata["summary"] = {
            "accesses": writer.rows - events,
            "reads": writer.rows - events - writes,
            "writes": writes,
            "unique_pages": int(np.count_nonzero(seen)) + (extra_pages if runtime is not None else 0),
            "region_accesses": region_counts.tolist(),
            **({**counts, "freed_pages": len(freed)} if recorded else {}),
        }
    return writer.path, seen[:layout.footprint_pages]


def _as_process(meta: dict[str, Any], spec: ModelSpec, chunks, runtime: RuntimeProfile | str, first_step: int):
    """Make ``meta`` and ``chunks`` the whole process's (:mod:`swaptrace.workload.process`): start-up as step 0.

    Returns the process's chunks and the runtime's page count (every runtime page is written at start-up).
    """
    if first_step != 0:
        raise ConfigError("--runtime: a process trace starts with its start-up; give it from step 0 (no --first-step)")
    prof = runtime if isinstance(runtime, RuntimeProfile) else load_runtime_profile(runtime)
    page_bytes = int(meta["page_bytes"])
    regions, footprint = process_layout(meta["regions"], int(meta["footprint_pages"]), page_bytes, prof)
    extra = footprint - int(meta["footprint_pages"])
    meta.update(regions=regions, footprint_pages=footprint, footprint_bytes=footprint * page_bytes,
                steps=int(meta["steps"]) + 1, step_offset=1, startup_step=0,
                process={**prof.to_dict(), "model_footprint_pages": footprint - extra})
    meta["params"]["runtime"] = prof.name
    return with_process(chunks, regions, prof, spec.optimizer, page_bytes, DEFAULT_ROW_GROUP), extra
