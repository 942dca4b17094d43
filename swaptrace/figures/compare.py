"""Figures comparing two swap I/O streams (emulator vs kernel).

Each function takes a :class:`swaptrace.compare.StreamComparison` and an
optional Axes, draws on it and returns it; :func:`plot_compare_figure` lays
the three panels out on one figure for ``swaptrace compare --plot``.
"""

from __future__ import annotations

import numpy as np

from swaptrace.figures._axes import axes_or_new

_axes = axes_or_new


def _label(profile, fallback: str) -> str:
    return f"{fallback}: {profile.source}"


def plot_pages_per_step(data, ax=None):
    """Pages read and written per training step, A (solid) and B (dashed)."""
    ax = _axes(ax)
    for profile, name, style in ((data.a, "A", "-"), (data.b, "B", "--")):
        steps = profile.first_step + np.arange(len(profile.pages_in_per_step))
        ax.plot(steps, profile.pages_in_per_step, style, color="tab:blue", label=f"{_label(profile, name)} read")
        ax.plot(steps, profile.pages_out_per_step, style, color="tab:orange", label=f"{_label(profile, name)} written")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("training step")
    ax.set_ylabel("pages (4 KiB) per step")
    ax.set_title("Swap traffic per step")
    ax.legend(fontsize="small")
    return ax


def plot_request_sizes(data, ax=None, op: str = "read"):
    """Cumulative distribution of request sizes of one op, A vs B, with the KS distance."""
    ax = _axes(ax)
    for profile, name, style in ((data.a, "A", "-"), (data.b, "B", "--")):
        hist = profile.summary["request_size_hist"][op]
        if not hist:
            continue
        items = sorted((int(k), int(v)) for k, v in hist.items())
        sizes = np.array([k for k, _ in items]) / 1024
        cdf = np.cumsum([v for _, v in items]) / sum(v for _, v in items)
        ax.step(sizes, cdf, style, where="post", label=_label(profile, name))
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"{op} request size (KiB)")
    ax.set_ylabel("fraction of requests ≤ size")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{op} sizes, KS = {data.ks[op]:.3f}")
    if ax.get_legend_handles_labels()[0]:  # a stream with no requests of this op draws no line to label
        ax.legend(fontsize="small")
    return ax


def plot_compare(data, ax=None):
    """The main comparison panel: pages read and written per step (see :func:`plot_pages_per_step`)."""
    return plot_pages_per_step(data, ax)


def plot_compare_figure(data):
    """A three-panel figure: traffic per step, read sizes, write sizes. Returns the Figure."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(11, 7), layout="constrained")
    grid = fig.add_gridspec(2, 2)
    plot_pages_per_step(data, fig.add_subplot(grid[0, :]))
    plot_request_sizes(data, fig.add_subplot(grid[1, 0]), "read")
    plot_request_sizes(data, fig.add_subplot(grid[1, 1]), "write")
    fig.suptitle(data.verdict, fontsize="medium")
    return fig
