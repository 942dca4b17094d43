"""Figures of the SSD model: bandwidth and WAF against GB written, bandwidth against request size.

Each function takes its data and an optional Axes, draws, and returns the Axes
(never ``plt.show()``).

``data`` for the timeline plots may be an ``ssd-timeline`` Parquet path, an
:class:`~swaptrace.ssd.run.SSDResult`, a dict of timeline columns, or the
``ssd thesis`` JSON (its ``bandwidth_vs_written`` part). ``data`` for the
request-size plot is the ``request_size_sweep`` of the thesis JSON (or of
:func:`swaptrace.ssd.run.request_size_sweep`), or that whole JSON.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from swaptrace.figures._axes import axes_or_new

GB = 1e9


_axes = axes_or_new


def _timeline(data: Any) -> dict[str, np.ndarray]:
    if isinstance(data, (str, os.PathLike)):
        from swaptrace.ssd.run import read_timeline

        cols, _meta = read_timeline(data)
        return cols
    if hasattr(data, "timeline"):
        return data.timeline
    if isinstance(data, dict) and "bandwidth_vs_written" in data:
        return {k: np.asarray(v) for k, v in data["bandwidth_vs_written"].items()}
    return {k: np.asarray(v) for k, v in data.items()}


def _against_written(data: Any, ax, column: str, label: str | None, *, ylabel: str, title: str, color=None):
    """One timeline column against host GB written, both figures' common frame."""
    ax = _axes(ax)
    t = _timeline(data)
    x = np.asarray(t["host_written_bytes"], dtype=float) / GB
    ax.plot(x, t[column], marker=".", label=label or "model", **({"color": color} if color else {}))
    if column == "waf":
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("host data written (GB)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    if label:
        ax.legend(fontsize="small")
    return ax


def plot_bandwidth_vs_written(data: Any, ax=None, label: str | None = None):
    """Host bandwidth (MB/s) of each window against host GB written: GC makes it fall."""
    return _against_written(data, ax, "bandwidth_mb_s", label, ylabel="bandwidth (MB/s)",
                            title="SSD model: bandwidth vs data written")


def plot_waf_vs_written(data: Any, ax=None, label: str | None = None):
    """Write amplification of each window against host GB written."""
    return _against_written(data, ax, "waf", label, ylabel="write amplification (flash / host bytes)",
                            title="SSD model: WAF vs data written", color="tab:orange")


def plot_bandwidth_vs_request_size(data: Any, ax=None):
    """Read bandwidth (MB/s) against request size, one line per queue depth (log2 x axis)."""
    ax = _axes(ax)
    sweep = data.get("request_size_sweep", data) if isinstance(data, dict) else data
    sizes = np.asarray(sweep["sizes_bytes"], dtype=float)
    for qd, bw in sweep["bandwidth_mb_s"].items():
        ax.plot(sizes / 1024, bw, marker="o", label=f"QD {qd}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes / 1024)
    ax.set_xticklabels([f"{int(s / 1024)}" for s in sizes])
    ax.axvline(32, color="tab:red", linestyle="--", linewidth=1, label="32 KiB (most swap requests are smaller)")
    ax.set_xlabel("request size (KiB)")
    ax.set_ylabel(f"{sweep.get('pattern', 'random read')} bandwidth (MB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title("SSD model: bandwidth vs request size")
    ax.legend(fontsize="small")
    return ax
