"""Figures of fio runs: bandwidth vs request size, bandwidth vs bytes written.

These are the two plots fio-plot users ask for (docs/fio.md, Figures): the
request-size sweep as a curve per direction, with the stream's own size mix
drawn as a horizontal line; and bandwidth against the volume written to the
target since the run began (from the ``write_bw_log`` logs), where an SSD's
garbage collection shows as a decline.

``data`` is a run folder, a ``results.parquet`` / ``bwlog.parquet`` path, or
already-loaded rows (list of dicts, or a dict of columns).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from swaptrace.figures._axes import axes_or_new

_COLORS = {"read": "tab:blue", "write": "tab:orange"}


def _axes(ax):
    return axes_or_new(ax, (7, 4))


def save_run_figures(run_dir, out_dir=None) -> list[Path]:
    """Write ``bandwidth_vs_request_size.png`` and ``bandwidth_vs_written.png`` for a run folder.

    Uses :class:`matplotlib.figure.Figure` directly (no pyplot state, any backend).
    """
    from matplotlib.figure import Figure

    from swaptrace.core.traceio import AtomicPath

    out = Path(out_dir or run_dir)
    paths = []
    for name, plot in (("bandwidth_vs_request_size.png", plot_bandwidth_vs_request_size),
                       ("bandwidth_vs_written.png", plot_bandwidth_vs_written)):
        fig = Figure(figsize=(7, 4))
        plot(run_dir, ax=fig.subplots())
        fig.tight_layout()
        with AtomicPath(out / name) as ap:
            fig.savefig(ap.tmp, format="png", dpi=100)
        paths.append(out / name)
    return paths


def _rows(data, name: str, kind: str) -> list[dict]:
    if isinstance(data, str | Path):
        from swaptrace.core import traceio
        from swaptrace.fio import results  # noqa: F401  (registers the kinds)

        p = Path(data)
        if p.is_dir():
            p = p / name
        return traceio.open_trace(p, kind).read_table().to_pylist()  # its values checked
    if isinstance(data, dict):
        keys = list(data)
        return [dict(zip(keys, vals, strict=True)) for vals in zip(*(data[k] for k in keys), strict=True)]
    return list(data)


def plot_bandwidth_vs_request_size(data, ax=None):
    """Bandwidth (MB/s) of the sweep's fixed sizes per direction; dashed line: the stream's size mix."""
    ax = _axes(ax)
    rows = [r for r in _rows(data, "results.parquet", "fio-results") if r["group"] == "sweep"]
    for direction, color in _COLORS.items():
        fixed = sorted((r["request_bytes"], r["bw_bytes"]) for r in rows
                       if r["direction"] == direction and r["request_bytes"] > 0)
        if fixed:
            sizes = np.array([s for s, _ in fixed]) / 1024
            ax.plot(sizes, np.array([b for _, b in fixed]) / 1e6, "o-", color=color, label=f"{direction}, fixed size")
        mix = [r["bw_bytes"] for r in rows if r["direction"] == direction and r["request_bytes"] == 0]
        if mix:
            ax.axhline(mix[0] / 1e6, color=color, ls="--", label=f"{direction}, stream's size mix")
    ax.set_xscale("log", base=2)
    sizes_kib = sorted({r["request_bytes"] // 1024 for r in rows if r["request_bytes"] >= 1024})
    if sizes_kib:
        ax.set_xticks(sizes_kib, [str(s) for s in sizes_kib])
        ax.minorticks_off()
    ax.set_xlabel("request size (KiB)")
    ax.set_ylabel("bandwidth (MB/s)")
    ax.set_title("Bandwidth vs request size")
    if rows:
        ax.legend(fontsize="small")
    return ax


def plot_bandwidth_vs_written(data, ax=None, direction: str = "write"):
    """Bandwidth (MB/s) of each job against GB written to the target since the run began."""
    ax = _axes(ax)
    rows = [r for r in _rows(data, "bwlog.parquet", "fio-bwlog") if r["direction"] == direction]
    order: list[str] = []
    for r in rows:
        if r["instance"] not in order:
            order.append(r["instance"])
    cmap = __import__("matplotlib").colormaps["tab20"]
    for i, inst in enumerate(order):
        sel = [r for r in rows if r["instance"] == inst]
        x = np.array([r["run_written_bytes"] for r in sel]) / 1e9
        y = np.array([r["bw_bytes"] for r in sel]) / 1e6
        label = inst if not inst.startswith("precondition") else None
        ax.plot(x, y, "-", lw=1.2, color="0.6" if label is None else cmap(i % 20), label=label)
    ax.set_xlabel("GB written to the target since the run began")
    ax.set_ylabel(f"{direction} bandwidth (MB/s)")
    ax.set_title("Bandwidth vs volume written (grey: preconditioning)")
    if order:
        ax.legend(fontsize="x-small", ncol=2)
    return ax
