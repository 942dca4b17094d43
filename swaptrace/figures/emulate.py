"""Figures of the emulator stage: miss-ratio curve, swap request sizes, swap traffic per step.

Each function takes its data and an optional Axes, draws, and returns the Axes
(never ``plt.show()``), so the report stage can compose them.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from swaptrace.figures._axes import axes_or_new

SMALL_REQUEST_BYTES = 32 * 1024  # the thesis' "most swap requests are < 32 KiB" line


_axes = axes_or_new


def _bytes_unit(max_bytes: float) -> tuple[float, str]:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if max_bytes >= scale:
            return float(scale), unit
    return 1.0, "B"


def plot_mrc(curve, ax=None, budget_bytes: int | None = None, label: str | None = None):
    """Miss ratio against memory size (a :class:`swaptrace.mrc.MissRatioCurve`), the budget marked."""
    ax = _axes(ax)
    sizes = curve.sizes_bytes
    scale, unit = _bytes_unit(float(sizes[-1]) if sizes.size else 1.0)
    name = label or ("exact LRU" if curve.method == "exact" else f"SHARDS (R={curve.sample_rate:.3g})")
    ax.plot(sizes / scale, curve.miss_ratio, label=name)
    if budget_bytes is not None:
        ax.axvline(budget_bytes / scale, color="tab:red", linestyle="--", linewidth=1,
                   label=f"budget {budget_bytes / scale:.3g} {unit} (miss ratio "
                         f"{curve.miss_ratio_at(budget_bytes // curve.page_bytes):.3f})")
    ax.set_xlabel(f"memory ({unit})")
    ax.set_ylabel("miss ratio (LRU)")
    ax.set_ylim(0, 1.02)
    ax.set_title("Miss-ratio curve")
    ax.legend(fontsize="small")
    return ax


def _histograms(data: Any) -> dict[str, dict[int, int]]:
    """``request_size_hist`` by op from a swapio path, a summary dict or a result object."""
    if isinstance(data, (str, os.PathLike)):
        from swaptrace.core.traceio import open_trace

        tf = open_trace(data, kind="swapio")
        hist = tf.meta.get("summary", {}).get("request_size_hist")
        if hist is None:  # count from the rows
            rows = tf.read_all(["op", "length"])
            hist = {}
            for code, name in ((0, "read"), (1, "write")):
                sizes, counts = np.unique(rows["length"][rows["op"] == code], return_counts=True)
                hist[name] = dict(zip(sizes.tolist(), counts.tolist(), strict=True))
        data = {"request_size_hist": hist}
    if hasattr(data, "summary"):
        data = data.summary
    hist = data.get("request_size_hist", data)
    return {op: {int(k): int(v) for k, v in hist.get(op, {}).items()} for op in ("read", "write")}


def plot_request_size_cdf(data, ax=None):
    """Cumulative share of swap requests by size, per op, with the 32 KiB line.

    ``data``: a swapio file path, its ``summary`` dict, or an :class:`~swaptrace.emulate.EmulationResult`.
    """
    ax = _axes(ax)
    for op, color in (("read", "tab:blue"), ("write", "tab:orange")):
        h = _histograms(data)[op]
        if not h:
            continue
        sizes = np.array(sorted(h))
        counts = np.array([h[s] for s in sizes], dtype=np.float64)
        cdf = np.cumsum(counts) / counts.sum()
        below = counts[sizes < SMALL_REQUEST_BYTES].sum() / counts.sum()
        ax.step(np.concatenate([[sizes[0]], sizes]) / 1024, np.concatenate([[0.0], cdf]), where="post", color=color,
                label=f"{op} ({int(counts.sum()):,} requests, {100 * below:.0f}% < 32 KiB)")
    ax.axvline(SMALL_REQUEST_BYTES / 1024, color="grey", linestyle=":", linewidth=1, label="32 KiB")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("request size (KiB)")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.02)
    ax.set_title("Swap request sizes")
    ax.legend(fontsize="small")
    return ax


def traffic_per_step(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Bytes read and written per step of a swapio file (streams through it)."""
    from swaptrace.core.traceio import open_trace

    tf = open_trace(path, kind="swapio")
    first = int(tf.meta.get("first_step", 0))
    steps = int(tf.meta.get("steps", 0))
    read = np.zeros(steps, np.float64)
    written = np.zeros(steps, np.float64)
    for b in tf.iter_batches(columns=["step", "op", "length"]):
        s = b["step"].astype(np.int64) - first
        top = int(s.max()) + 1 if s.size else 0
        if top > read.size:
            read = np.concatenate([read, np.zeros(top - read.size)])
            written = np.concatenate([written, np.zeros(top - written.size)])
        length = b["length"].astype(np.float64)
        read += np.bincount(s, weights=length * (b["op"] == 0), minlength=read.size)
        written += np.bincount(s, weights=length * (b["op"] == 1), minlength=written.size)
    return {"step": first + np.arange(read.size), "bytes_read": read, "bytes_written": written}


def plot_swap_traffic(data, ax=None):
    """Swap bytes read and written per training step (``data``: swapio path or :func:`traffic_per_step` dict)."""
    ax = _axes(ax)
    if isinstance(data, (str, os.PathLike)):
        data = traffic_per_step(data)
    top = max(float(np.max(data["bytes_read"], initial=0)), float(np.max(data["bytes_written"], initial=0)), 1.0)
    scale, unit = _bytes_unit(top)
    ax.plot(data["step"], data["bytes_read"] / scale, label="read", color="tab:blue")
    ax.plot(data["step"], data["bytes_written"] / scale, label="written", color="tab:orange")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("training step")
    ax.set_ylabel(f"swap traffic ({unit} per step)")
    ax.set_title("Swap traffic per step")
    ax.legend(fontsize="small")
    return ax
