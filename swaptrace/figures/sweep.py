"""Figures of a sweep: pages swapped in (and step time, once modelled) against the DRAM budget.

Functions take the results as columns (a dict of sequences, or anything with
``to_pydict()`` such as :func:`swaptrace.parallel.sweep.read_results`' table),
draw, and return the Axes; the CLI and the report draw them, never the tasks.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from swaptrace.core.traceio import AtomicPath
from swaptrace.figures._axes import axes_or_new


def _columns(results: Any) -> dict[str, list]:
    return results.to_pydict() if hasattr(results, "to_pydict") else {k: list(v) for k, v in results.items()}


def sweep_lines(results: Any, y: str = "pages_in") -> dict[str, tuple[list[float], list[float]]]:
    """``label -> (budget MiB, y)`` sorted by budget: one line per trace, policy, device and design."""
    cols = _columns(results)
    n = len(cols.get("key", ()))
    lines: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for i in range(n):
        if cols[y][i] is None:
            continue
        source = cols["preset"][i] or cols["trace"][i].rsplit("/", 1)[-1]
        parts = [source, cols["policy"][i], cols["device"][i]] + ([cols["design"][i]] if cols["design"][i] else [])
        lines[" / ".join(parts)].append((cols["memory_bytes"][i] / (1 << 20), float(cols[y][i])))
    return {k: ([x for x, _ in sorted(v)], [y_ for _, y_ in sorted(v)]) for k, v in sorted(lines.items())}


def plot_sweep(results: Any, ax=None, y: str = "pages_in"):
    """``y`` (default pages swapped in) against the DRAM budget, one line per trace/policy/device/design."""
    ax = axes_or_new(ax)
    for label, (xs, ys) in sweep_lines(results, y).items():
        ax.plot(xs, ys, marker="o", label=label)
    ax.set_xlabel("DRAM budget (MiB)")
    ax.set_ylabel({"pages_in": "pages swapped in", "step_time_us": "step time (µs)"}.get(y, y))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
    return ax


def draw_sweep_figure(results: Any, path) -> None:
    """Pages in against budget, and step time beside it when any point has one; saved to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = _columns(results)
    timed = any(v is not None for v in cols.get("step_time_us", []))
    fig, axes = plt.subplots(1, 2 if timed else 1, figsize=(12 if timed else 7, 4), squeeze=False)
    plot_sweep(cols, ax=axes[0][0])
    if timed:
        plot_sweep(cols, ax=axes[0][1], y="step_time_us")
    fig.tight_layout()
    suffix = str(path).rsplit(".", 1)[-1] if "." in str(path) else "png"
    try:
        with AtomicPath(path, force=True) as ap:
            fig.savefig(ap.tmp, format=suffix, dpi=120)
    finally:
        plt.close(fig)
