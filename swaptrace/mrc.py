"""Miss-ratio curves: the LRU miss ratio of an access trace at every memory size.

* :func:`exact_mrc` -- one pass with stack distances in a Fenwick tree
  (Mattson et al., IBM Systems Journal 1970; docs/mrc.md). Memory
  O(footprint pages); a trace of any length streams through in chunks. The
  curve at ``c`` pages equals the miss count of an exact LRU cache of ``c``
  pages (``swaptrace emulate --policy lru --readahead none``: its ``faults``).
  A trace's alloc and free events (docs/formats.md) take the page out of the
  stack: its next access is a first access (a miss at every size). With frees
  of resident pages the curve is a lower bound on that LRU cache's misses
  (the stack credits a cache of ``c`` pages with the page that moved up into
  place ``c``, which the cache left on swap); without, it is exact.
* :func:`shards_mrc` -- SHARDS sampling (Waldspurger et al., FAST 2015):
  fixed rate ``sample_rate`` with the SHARDS_adj correction, or, with
  ``sample_pages``, the fixed-size variant that lowers the rate as it goes.

CSV written by :func:`write_csv` (``swaptrace mrc``):

============ ======= ====================================================
memory_bytes int     cache size in bytes (``pages * page_bytes``)
pages        int     cache size in pages
miss_ratio   float   misses / accesses at that size
misses       float   misses (an integer for exact curves, an estimate for SHARDS)
============ ======= ====================================================
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.core.traceio import DEFAULT_ROW_GROUP, AtomicPath, open_trace
from swaptrace.emulate import prefetch
from swaptrace.errors import ConfigError
from swaptrace.kernels.mrc.shards import MODULUS, _shards_fixed_rate_chunk, _shards_fixed_size_chunk
from swaptrace.kernels.mrc.stack import _stack_chunk


@dataclass(frozen=True)
class MissRatioCurve:
    """LRU misses at every cache size ``0..footprint_pages`` (pages).

    ``misses[c]`` and ``miss_ratio[c]`` are for a cache of ``sizes_pages[c] == c`` pages.
    """

    sizes_pages: np.ndarray
    misses: np.ndarray
    accesses: int
    page_bytes: int
    method: str = "exact"
    sample_rate: float = 1.0
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def miss_ratio(self) -> np.ndarray:
        if self.accesses == 0:
            return np.zeros(self.misses.shape, np.float64)
        return self.misses / self.accesses

    @property
    def sizes_bytes(self) -> np.ndarray:
        return self.sizes_pages * self.page_bytes

    def miss_ratio_at(self, pages: int | np.ndarray) -> float | np.ndarray:
        """Miss ratio of a cache of ``pages`` pages (clamped to the curve's range)."""
        idx = np.clip(np.asarray(pages, dtype=np.int64), 0, self.sizes_pages.size - 1)
        out = self.miss_ratio[idx]
        return float(out) if np.ndim(out) == 0 else out

    def misses_at(self, pages: int) -> float:
        return float(self.misses[min(max(int(pages), 0), self.misses.size - 1)])


def _curve_from_hist(hist: np.ndarray) -> np.ndarray:
    """misses[c] = first accesses + reuses at distance > c, for c = 0..len(hist)-1."""
    cold = hist[0]
    reuse = hist[1:].astype(np.float64)
    # beyond[c] = sum_{d > c} reuse[d], d = 1..F
    beyond = np.concatenate([np.cumsum(reuse[::-1])[::-1], [0.0]])
    return cold + beyond


def _open(trace):
    tf = open_trace(trace, kind="access")
    footprint = int(tf.meta.get("footprint_pages", 0))
    if footprint <= 0:
        raise ConfigError(f"{tf.path}: metadata has no positive footprint_pages")
    return tf, footprint


def _tree_state(footprint: int, capacity: int | None = None):
    cap = int(capacity or 2 * footprint + 64)
    # int32: half the cache footprint of int64 (counts and times stay below 2**31 for any footprint we handle)
    last = np.full(footprint, -1, np.int32)
    page_at = np.full(cap, -1, np.int32)
    tree = np.zeros(cap + 1, np.int32)
    reg = np.zeros(8, np.int64)
    return last, page_at, tree, reg


def _pages(tf, batch_rows, footprint, progress=None):
    """Chunks of the page column as int64, checked against the footprint; an alloc or free event's row
    is ``-(page + 1)`` (both free what the address holds, :mod:`swaptrace.kernels.mrc.stack`)."""
    events = tf.has_column("event")
    for batch in prefetch(tf.iter_batches(columns=["page", "event"] if events else ["page"], batch_rows=batch_rows)):
        pages = np.ascontiguousarray(batch["page"], dtype=np.int64)
        _check_pages(pages, footprint, tf.path)
        if events:
            released = batch["event"] != 0
            pages[released] = -pages[released] - 1
        yield pages
        if progress is not None:
            progress(pages.size)


def exact_mrc(trace: str | os.PathLike, *, progress: Callable[[int], None] | None = None,
              batch_rows: int = DEFAULT_ROW_GROUP) -> MissRatioCurve:
    """Exact LRU miss-ratio curve of an access trace, all sizes in one pass.

    Parameters
    ----------
    trace : path-like
        A ``kind: access`` file.
    progress : callable, optional
        Called with the number of accesses done since the last call.

    Returns
    -------
    MissRatioCurve
        ``misses[c]`` is exactly the miss count of an LRU cache of ``c`` pages.
    """
    tf, footprint = _open(trace)
    curve = mrc_from_chunks(_pages(tf, batch_rows, footprint, progress), footprint, tf.page_bytes)
    return replace(curve, params={"trace": str(tf.path)})


def mrc_from_chunks(chunks, footprint_pages: int, page_bytes: int = 4096) -> MissRatioCurve:
    """Exact LRU curve of page-number chunks (numpy int64 arrays, each page below ``footprint_pages``; an entry
    ``-(p + 1)`` frees page ``p``: it leaves the stack and is not an access)."""
    last, page_at, tree, reg = _tree_state(footprint_pages)
    hist = np.zeros(footprint_pages + 1, np.int64)
    n = 0
    for pages in chunks:
        n += pages.size - _stack_chunk(pages, last, page_at, tree, reg, hist)
    return MissRatioCurve(
        sizes_pages=np.arange(footprint_pages + 1, dtype=np.int64),
        misses=_curve_from_hist(hist),
        accesses=n,
        page_bytes=page_bytes,
        method="exact",
    )


def _check_pages(pages: np.ndarray, footprint: int, path) -> None:
    if pages.size and (pages.min() < 0 or pages.max() >= footprint):
        raise ConfigError(f"{path}: page {int(pages.max())} outside the footprint of {footprint} pages")


def shards_mrc(
    trace: str | os.PathLike,
    sample_rate: float = 0.01,
    sample_pages: int | None = None,
    *,
    adjust: bool = True,
    progress: Callable[[int], None] | None = None,
    batch_rows: int = DEFAULT_ROW_GROUP,
) -> MissRatioCurve:
    """Approximate LRU miss-ratio curve by SHARDS sampling.

    Parameters
    ----------
    trace : path-like
        A ``kind: access`` file.
    sample_rate : float
        Fixed sampling rate R in (0, 1] (ignored with ``sample_pages``).
    sample_pages : int, optional
        Fixed-size variant: track at most this many sampled pages, starting
        at R = 1 and lowering R as needed.
    adjust : bool
        Apply SHARDS_adj: add (expected - actual) sampled accesses to the
        first distance bucket (FAST'15 section 4.2).

    Returns
    -------
    MissRatioCurve
        Estimated misses scaled to the full trace (``method="shards"``).
    """
    if sample_pages is None and not (0.0 < sample_rate <= 1.0):
        raise ConfigError(f"--sample-rate must be in (0, 1], got {sample_rate}")
    if sample_pages is not None and sample_pages < 1:
        raise ConfigError(f"--sample-pages must be at least 1, got {sample_pages}")
    tf, footprint = _open(trace)
    curve = shards_from_chunks(_pages(tf, batch_rows, footprint, progress), footprint, tf.page_bytes,
                               sample_rate=sample_rate, sample_pages=sample_pages, adjust=adjust)
    return replace(curve, params=dict(curve.params, trace=str(tf.path)))


def shards_from_chunks(chunks, footprint_pages: int, page_bytes: int = 4096, *, sample_rate: float = 0.01,
                       sample_pages: int | None = None, adjust: bool = True) -> MissRatioCurve:
    """SHARDS curve of page-number chunks (see :func:`shards_mrc`)."""
    footprint = footprint_pages
    hist = np.zeros(footprint + 1, np.float64)
    n = 0
    if sample_pages is None:
        threshold = max(1, int(round(sample_rate * MODULUS)))
        rate = threshold / MODULUS
        last, page_at, tree, reg = _tree_state(footprint)  # sampled pages <= footprint: compaction always frees room
        for pages in chunks:
            n += pages.size - _shards_fixed_rate_chunk(pages, threshold, last, page_at, tree, reg, hist, rate)
        sampled = float(reg[2])
        final_rate = rate
    else:
        s_max = int(min(sample_pages, footprint))
        last, page_at, tree, reg = _tree_state(footprint, 2 * s_max + 64)
        reg[3] = MODULUS
        heap_h = np.zeros(s_max + 1, np.int64)
        heap_p = np.zeros(s_max + 1, np.int64)
        fstate = np.zeros(1, np.float64)
        for pages in chunks:
            n += pages.size - _shards_fixed_size_chunk(pages, s_max, last, page_at, tree, reg, hist, heap_h, heap_p,
                                                       fstate)
        sampled = float(fstate[0])
        final_rate = reg[3] / MODULUS
    expected = n * final_rate
    if adjust and footprint >= 1:
        hist[1] += expected - sampled
    misses = np.clip(_curve_from_hist(hist) / final_rate, 0.0, float(n))
    return MissRatioCurve(
        sizes_pages=np.arange(footprint + 1, dtype=np.int64),
        misses=misses,
        accesses=n,
        page_bytes=page_bytes,
        method="shards",
        sample_rate=final_rate,
        params={"sample_rate": sample_rate, "sample_pages": sample_pages, "adjust": adjust},
    )


def curve_points(curve: MissRatioCurve, points: int = 1000) -> np.ndarray:
    """Sizes (pages) to report: every size when ``points`` is 0 or the curve is short, else evenly spaced."""
    top = curve.sizes_pages.size - 1
    if points <= 0 or top + 1 <= points:
        return curve.sizes_pages
    return np.unique(np.linspace(0, top, points).round().astype(np.int64))


def write_csv(curve: MissRatioCurve, out: str | os.PathLike, *, points: int = 1000, force: bool = False) -> Path:
    """Write ``memory_bytes,pages,miss_ratio,misses`` rows (atomically)."""
    sizes = curve_points(curve, points)
    with AtomicPath(out, force) as ap:
        with open(ap.tmp, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["memory_bytes", "pages", "miss_ratio", "misses"])
            mr = curve.miss_ratio
            exact = curve.method == "exact"
            for c in sizes.tolist():
                misses = int(curve.misses[c]) if exact else round(float(curve.misses[c]), 3)
                w.writerow([c * curve.page_bytes, c, f"{mr[c]:.6f}", misses])
    return ap.path


def mean_absolute_error(a: MissRatioCurve, b: MissRatioCurve, points: int = 100) -> float:
    """Mean |miss ratio difference| over ``points`` evenly spaced sizes (the SHARDS paper's MAE)."""
    top = min(a.sizes_pages.size, b.sizes_pages.size) - 1
    sizes = np.unique(np.linspace(1, top, points).round().astype(np.int64))
    return float(np.mean(np.abs(a.miss_ratio[sizes] - b.miss_ratio[sizes])))
