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

Lookups: per table and sample a bag size (fixed or drawn from the spec's
distribution), then bounded-Zipf ranks (:mod:`swaptrace.zipf`) mapped to rows
by a seed-derived bijection (``scatter=False`` keeps rank k at row k-1).
With ``reuse = f``, each position of a step's index list takes, with
probability f, the previous step's freshly drawn index at the same position
(as FBGEMM's ``--reuse`` copies indices of the previous batch).
``dedup="step"`` drops a read (write) of a page already read (written) in
the same step.

Randomness comes from SplitMix64 streams keyed by ``(seed, step, table,
lane)`` (:mod:`swaptrace._kernels.zipf`): lane 0 draws a step's bag sizes,
and each block of 4096 lookups draws its ranks (and reuse decisions) on its
own lane, so blocks run in parallel. Hence steps ``[0, k)`` and ``[k, n)``
generated separately and concatenated equal steps ``[0, n)``, whatever the
number of threads. Memory depends on the step size and the model's page
count, never on the number of steps.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numba
import numpy as np

from swaptrace._kernels.generate import _count_segments, _draw, _emit, _emit_segments, _segments
from swaptrace.bounds import check_allocation
from swaptrace.errors import ConfigError
from swaptrace.layout import Layout, build_layout
from swaptrace.spec import ModelSpec, load_spec
from swaptrace.traceio import DEFAULT_ROW_GROUP, TraceWriter, open_trace
from swaptrace.zipf import scramble_params, zipf_constants

DEDUP_CHOICES = (None, "step")
#: lookups drawn per kernel call at most (bounds the index buffers: 3 x 8 bytes each)
DRAW_BUDGET = 1 << 21
MAX_STEP = (1 << 32) - 1
#: lookups (or unique rows, or pages) per segment of the parallel emission
SEGMENT_ITEMS = 4096


class _Plan:
    """Everything the kernels need, as plain arrays (built once per run)."""

    def __init__(self, spec: ModelSpec, layout: Layout, seed: int, scatter: bool):
        tables = spec.tables
        self.spec, self.layout, self.seed, self.scatter = spec, layout, seed, scatter
        self.batch = spec.batch_size
        self.n_rows = np.array([t.rows for t in tables], dtype=np.int64)
        consts = [zipf_constants(t.rows, t.alpha) for t in tables]
        self.zs = np.array([t.alpha for t in tables], dtype=np.float64)
        self.zh_x1 = np.array([c[0] for c in consts], dtype=np.float64)
        self.zh_n = np.array([c[1] for c in consts], dtype=np.float64)
        self.zbig_s = np.array([c[2] for c in consts], dtype=np.float64)
        ab = [scramble_params(seed, i, t.rows) for i, t in enumerate(tables)]
        self.sa = np.array([a for a, _ in ab], dtype=np.int64)
        self.sb = np.array([b for _, b in ab], dtype=np.int64)
        vals: list[int] = []
        cdf: list[float] = []
        off = [0]
        for t in tables:
            vals.extend(t.lookups.values)
            cdf.extend(np.cumsum(t.lookups.probs).tolist())
            off.append(len(vals))
        self.bag_vals = np.array(vals, dtype=np.int64)
        self.bag_cdf = np.array(cdf, dtype=np.float64)
        self.bag_off = np.array(off, dtype=np.int64)
        max_lookups = [self.batch * t.lookups.max for t in tables]
        self.tbl_off = np.concatenate([[0], np.cumsum(max_lookups)]).astype(np.int64)
        self.stride = int(self.tbl_off[-1])

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
ROW_LAYOUTS = {"scattered": True, "packed": False}

def _check_options(steps: int, seed: int, first_step: int, reuse: float, dedup: str | None) -> None:
    errors = []
    if not isinstance(steps, int | np.integer) or steps < 1:
        errors.append(f"steps: must be a positive integer, got {steps!r}")
    if not isinstance(first_step, int | np.integer) or first_step < 0:
        errors.append(f"first-step: must be an integer >= 0, got {first_step!r}")
    elif isinstance(steps, int | np.integer) and first_step + steps - 1 > MAX_STEP:
        errors.append(f"steps: the last step must be below 2**32, got {first_step + steps - 1}")
    if not isinstance(seed, int | np.integer) or not 0 <= seed < (1 << 64):
        errors.append(f"seed: must be an integer in [0, 2**64), got {seed!r}")
    if not 0.0 <= reuse <= 1.0:
        errors.append(f"reuse: must be a fraction in [0, 1], got {reuse!r}")
    if dedup not in DEDUP_CHOICES:
        errors.append(f"dedup: must be 'step' or none, got {dedup!r}")
    if errors:
        raise ConfigError("; ".join(errors))


class _Out:
    """The reused output buffers of ``_chunks`` and how many rows they hold."""

    def __init__(self, rows: int):
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
        """Views of the filled rows; the buffers are reused from the start afterwards."""
        n, self.filled = self.filled, 0
        return self.step[:n], self.page[:n], self.write[:n], self.region[:n]


def _emit_serial(plan: _Plan, out: _Out, step0: int, nsteps: int, idx, uniq, lens, ulens, stamp, seen):
    """Emit a drawn batch in order, one core (needed by de-duplication); yields when the buffer is full."""
    lay = plan.layout
    cursor = np.zeros(4, dtype=np.int64)
    while cursor[0] < nsteps:
        out.filled = _emit(cursor, np.int64(step0), np.int64(nsteps), idx, uniq, lens, ulens, plan.tbl_off,
                           np.int64(plan.stride), np.int64(lay.page_shift), lay.table_first_byte,
                           lay.table_row_bytes, lay.table_region, lay.state_first_byte, lay.state_row_bytes,
                           lay.state_array_bytes, lay.state_region, np.int64(lay.state_arrays),
                           *(np.int64(v) for v in plan.mlp), *(np.int64(v) for v in plan.mlp_state),
                           *(np.int64(v) for v in plan.scratch), np.int64(plan.item_max), True, stamp,
                           seen.size > 1, seen, np.int64(out.filled), *out.arrays)
        if cursor[0] < nsteps or out.filled + plan.item_max > out.cap:
            yield out.take()


def _emit_parallel(plan: _Plan, out: _Out, step0: int, nsteps: int, idx, uniq, lens, ulens, seen):
    """Emit a drawn batch on all cores: cut into segments in program order, each core writes a run of them."""
    lay = plan.layout
    shift = np.int64(lay.page_shift)
    seg_args = (np.int64(nsteps), np.int64(len(plan.n_rows)), lens, ulens, np.int64(SEGMENT_ITEMS),
                np.int64(plan.mlp[1]), np.int64(plan.mlp_state[1]), np.int64(plan.scratch[1]))
    n_seg = _segments(*seg_args, False, np.empty((0, 5), dtype=np.int64))
    segs = np.empty((n_seg, 5), dtype=np.int64)
    _segments(*seg_args, True, segs)
    counts = np.empty(n_seg, dtype=np.int64)
    _count_segments(segs, idx, uniq, plan.tbl_off, np.int64(plan.stride), shift, lay.table_first_byte,
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
        _emit_segments(segs, np.int64(j), np.int64(last), offsets, np.int64(out.filled), n_chunks, np.int64(step0),
                       idx, uniq, plan.tbl_off, np.int64(plan.stride), shift, lay.table_first_byte,
                       lay.table_row_bytes, lay.table_region, lay.state_first_byte, lay.state_row_bytes,
                       lay.state_array_bytes, lay.state_region, np.int64(lay.state_arrays), np.int64(plan.mlp[0]),
                       np.int64(plan.mlp[2]), np.int64(plan.mlp_state[0]), np.int64(plan.mlp_state[2]),
                       np.int64(plan.scratch[0]), np.int64(plan.scratch[2]), seen.size > 1, seen, *out.arrays)
        out.filled += int(offsets[last] - offsets[j])
        j = last
        if j < n_seg:
            yield out.take()


def _chunks(plan: _Plan, steps: int, first_step: int, reuse: float, dedup: bool, chunk_rows: int,
            seen: np.ndarray, progress: Callable[[int], Any] | None) -> Iterator[tuple[np.ndarray, ...]]:
    """Yield (step, page, write, region) views into reused buffers, in program order.

    Steps are drawn in batches (at most :data:`DRAW_BUDGET` lookups), then
    emitted. ``seen`` (one byte per page, or a 1-element dummy to skip the
    bookkeeping) gets a 1 at every page touched.
    """
    n_tables = len(plan.n_rows)
    k_max = max(1, min(steps, DRAW_BUDGET // max(plan.stride, 1)))
    fresh = np.empty(k_max * plan.stride, dtype=np.int64)
    idx = np.empty_like(fresh) if reuse > 0 else fresh
    uniq = np.empty_like(fresh)
    lens = np.zeros(k_max * n_tables, dtype=np.int64)
    ulens = np.zeros_like(lens)
    prev_fresh = np.empty(plan.stride if reuse > 0 else 0, dtype=np.int64)
    prev_lens = np.zeros(n_tables, dtype=np.int64)
    have_prev = False

    def draw(step0: int, nsteps: int, rf: float, fr, ix, un, ln, uln) -> None:
        _draw(np.uint64(plan.seed), np.int64(step0), np.int64(nsteps), np.int64(plan.batch), plan.n_rows, plan.zs,
              plan.zh_x1, plan.zh_n, plan.zbig_s, plan.sa, plan.sb, plan.scatter, plan.bag_vals, plan.bag_cdf,
              plan.bag_off, plan.tbl_off, np.int64(plan.stride), float(rf), prev_fresh, prev_lens, have_prev, fr,
              ix, un, ln, uln)

    if reuse > 0 and first_step > 0:
        # the step before the range: only its fresh draws are needed
        draw(first_step - 1, 1, 0.0, prev_fresh, prev_fresh, np.empty_like(prev_fresh), prev_lens,
             np.zeros(n_tables, dtype=np.int64))
        have_prev = True

    out = _Out(max(chunk_rows, plan.item_max))
    # last step (+1) each page was read / written in, for de-duplication
    stamp = np.zeros((2, plan.layout.footprint_pages if dedup else 1), dtype=np.uint32)
    done = 0
    while done < steps:
        nsteps = min(k_max, steps - done)
        step0 = first_step + done
        draw(step0, nsteps, reuse, fresh, idx, uniq, lens, ulens)
        if dedup:
            yield from _emit_serial(plan, out, step0, nsteps, idx, uniq, lens, ulens, stamp, seen)
        else:
            yield from _emit_parallel(plan, out, step0, nsteps, idx, uniq, lens, ulens, seen)
        if reuse > 0:
            last = nsteps - 1
            prev_fresh[:] = fresh[last * plan.stride:(last + 1) * plan.stride]
            prev_lens[:] = lens[last * n_tables:(last + 1) * n_tables]
            have_prev = True
        done += nsteps
        if progress is not None:
            progress(nsteps)
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
    for st, pg, wr, rg in _chunks(plan, steps, first_step, reuse, dedup == "step", chunk_rows, no_tracking, None):
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
    plan = _Plan(spec, build_layout(spec), seed, scatter)
    n_tables = len(names)
    out = []
    prev = np.empty(plan.stride if reuse > 0 else 0, dtype=np.int64)
    prev_lens = np.zeros(n_tables, dtype=np.int64)
    have_prev = False
    if reuse > 0 and first_step > 0:
        scratch = np.empty_like(prev)
        _draw(np.uint64(seed), np.int64(first_step - 1), np.int64(1), np.int64(plan.batch), plan.n_rows, plan.zs,
              plan.zh_x1, plan.zh_n, plan.zbig_s, plan.sa, plan.sb, scatter, plan.bag_vals, plan.bag_cdf,
              plan.bag_off, plan.tbl_off, np.int64(plan.stride), 0.0, prev, prev_lens, False, prev, prev, scratch,
              prev_lens, np.zeros(n_tables, dtype=np.int64))
        have_prev = True
    fresh = np.empty(plan.stride, dtype=np.int64)
    idx = np.empty_like(fresh) if reuse > 0 else fresh
    uniq = np.empty_like(fresh)
    lens = np.zeros(n_tables, dtype=np.int64)
    ulens = np.zeros(n_tables, dtype=np.int64)
    for step in range(first_step, first_step + steps):
        _draw(np.uint64(seed), np.int64(step), np.int64(1), np.int64(plan.batch), plan.n_rows, plan.zs, plan.zh_x1,
              plan.zh_n, plan.zbig_s, plan.sa, plan.sb, scatter, plan.bag_vals, plan.bag_cdf, plan.bag_off,
              plan.tbl_off, np.int64(plan.stride), float(reuse), prev, prev_lens, have_prev, fresh, idx, uniq, lens,
              ulens)
        lo = int(plan.tbl_off[t])
        out.append(idx[lo:lo + lens[t]].copy())
        if reuse > 0:
            prev[:] = fresh
            prev_lens[:] = lens
            have_prev = True
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
    the two overlap; at most ``depth`` chunks wait, which bounds memory. An
    error on the writing thread is raised in the caller at the next ``write``
    or on exit.
    """

    def __init__(self, writer: TraceWriter, depth: int = 2):
        self._writer = writer
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="swaptrace-writer", daemon=True)

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._writer.write(**item)
                except BaseException as exc:  # re-raised on the caller's thread
                    self._error = exc

    def write(self, **columns: np.ndarray) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(columns)

    def __enter__(self) -> _BackgroundWriter:
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._queue.put(None)
        self._thread.join()
        if exc_type is None and self._error is not None:
            raise self._error


def _access_meta(spec: ModelSpec, layout: Layout, *, steps: int, seed: int, first_step: int, page_bytes: int,
                 alpha: float | None, scatter: bool, reuse: float, dedup: str | None) -> dict[str, Any]:
    """The access trace's metadata, before the summary (the access-trace contract in :mod:`swaptrace.traceio`)."""
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
                   progress: Callable[[int], Any] | None = None) -> Path:
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

    Returns
    -------
    pathlib.Path
        The written file; its metadata follows the access-trace contract.
    """
    path, _seen = _write_trace(spec, out, steps=steps, seed=seed, first_step=first_step, page_bytes=page_bytes,
                               alpha=alpha, optimizer=optimizer, scatter=scatter, reuse=reuse, dedup=dedup,
                               force=force, progress=progress)
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
                   alpha: float | None = None, optimizer: str | None = None, scatter: bool = True,  # noqa: ARG001
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
                 progress: Callable[[int], Any] | None = None) -> tuple[Path, np.ndarray]:
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
    region_counts = np.zeros(len(layout.regions), dtype=np.int64)
    writes = 0
    with TraceWriter(out, "access", meta, force=force) as writer:
        with _BackgroundWriter(writer) as background:
            for st, pg, wr, rg in _chunks(plan, steps, first_step, reuse, dedup == "step", DEFAULT_ROW_GROUP, seen,
                                          progress):
                background.write(step=st.copy(), page=pg.copy(), write=wr.copy(), region=rg.copy())
                writes += int(np.count_nonzero(wr))
                region_counts += np.bincount(rg, minlength=len(region_counts))
        writer.metadata["summary"] = {
            "accesses": writer.rows,
            "reads": writer.rows - writes,
            "writes": writes,
            "unique_pages": int(np.count_nonzero(seen)),
            "region_accesses": region_counts.tolist(),
        }
    return writer.path, seen[:layout.footprint_pages]
