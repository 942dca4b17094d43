"""Figures of the generator stage: rank-frequency of rows and pages (log-log)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from swaptrace.core.traceio import open_trace


def rank_frequency(ids: np.ndarray) -> np.ndarray:
    """Access counts of the distinct ids, highest first (the y values of a rank-frequency plot)."""
    ids = np.asarray(ids)
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    _, counts = np.unique(ids, return_counts=True)
    return np.sort(counts)[::-1]


def trace_page_counts(path: str | os.PathLike, kinds: tuple[str, ...] = ("table",), writes: bool = False) -> np.ndarray:
    """Accesses per page of an access trace, over regions of the given kinds (reads only by default; alloc and
    free events are not accesses).

    Streams the file; memory is one counter per page of the footprint.
    """
    trace = open_trace(path, "access")
    regions = trace.meta.get("regions", [])
    keep = np.array([r["kind"] in kinds for r in regions] + [False], dtype=bool)
    counts = np.zeros(int(trace.meta["footprint_pages"]), dtype=np.int64)
    events = trace.has_column("event")  # alloc and free rows are not accesses
    for batch in trace.iter_batches(["page", "write", "region", *(["event"] if events else [])]):
        mask = keep[np.minimum(batch["region"], len(regions))]
        if events:
            mask &= batch["event"] == 0
        if not writes:
            mask &= ~batch["write"]
        counts += np.bincount(batch["page"][mask].astype(np.int64), minlength=len(counts))
    return counts[counts > 0]


def plot_rank_frequency(data, ax=None, *, max_points: int = 4000):
    """Log-log rank-frequency plot: accesses of the k-th most accessed row or page against k.

    Parameters
    ----------
    data : path, or mapping of label -> array
        An access trace (plots reads of its embedding-table pages), or
        ``{"rows": row_ids, "pages": page_ids, ...}`` -- arrays of accessed ids
        (one entry per access) or, with a label ending in ``" (counts)"``,
        per-item counts. Row ids come e.g. from
        :func:`swaptrace.workload.generate.draw_rows`.
    ax : matplotlib Axes, optional
        Where to draw; a new figure's axes by default.
    max_points : int
        Ranks are thinned logarithmically to at most about this many points.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4))
    if isinstance(data, str | os.PathLike):
        series = {"table pages (reads)": ("counts", trace_page_counts(data))}
    elif isinstance(data, Mapping):
        series = {}
        for label, values in data.items():
            if str(label).endswith(" (counts)"):
                series[str(label)[: -len(" (counts)")]] = ("counts", np.asarray(values))
            else:
                series[str(label)] = ("ids", np.asarray(values))
    else:
        raise TypeError("plot_rank_frequency: data must be a trace path or a mapping of label -> ids")
    for label, (what, values) in series.items():
        freq = np.sort(values)[::-1] if what == "counts" else rank_frequency(values)
        freq = freq[freq > 0]
        if freq.size == 0:
            continue
        ranks = np.unique(np.geomspace(1, freq.size, num=min(max_points, freq.size)).astype(np.int64))
        ax.loglog(ranks, freq[ranks - 1], marker=".", markersize=2, linewidth=1, label=f"{label} ({freq.size:,} distinct)")
    ax.set_xlabel("rank (most accessed first)")
    ax.set_ylabel("accesses")
    ax.set_title("Rank-frequency")
    ax.grid(True, which="both", alpha=0.3)
    if series:
        ax.legend(fontsize="small")
    return ax
