"""Figures of ``swaptrace designs``: request sizes, device time and predicted step time per design."""

from __future__ import annotations

from typing import Any

import numpy as np

from swaptrace.figures._axes import axes_or_new


def plot_request_size_cdf(rows: list[dict[str, Any]], op: str = "write", ax=None):
    """CDF of request sizes (KiB, log axis) of each design's ``op`` requests, weighted by requests.

    ``rows`` are :class:`swaptrace.designs.table.DesignComparison` rows (each with ``hist``).
    """
    ax = axes_or_new(ax)
    for r in rows:
        h = {int(k): v for k, v in r["hist"][op].items()}
        if not h:
            continue
        sizes = np.array(sorted(h))
        counts = np.array([h[s] for s in sizes], dtype=float)
        ax.step(sizes / 1024, np.cumsum(counts) / counts.sum(), where="post", label=r["design"])
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"{op} request size (KiB)")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.02)
    if ax.get_legend_handles_labels()[0]:  # no design issued this op: nothing to label
        ax.legend(fontsize="small")
    return ax


def plot_device_time(rows: list[dict[str, Any]], ax=None):
    """Device busy time per training step (ms) in the SSD model, one bar per design, with its WAF.

    When the rows have the time model's predicted step time (``step_time_ms``), it is drawn as a second
    bar beside each design's busy time: the busy time is what the drive does, the step time what the
    training process waits for plus its compute.
    """
    ax = axes_or_new(ax)
    named = [r for r in rows if r.get("busy_ms_per_step") is not None]
    x = np.arange(len(named))
    timed = any(r.get("step_time_ms") is not None for r in named)
    width = 0.4 if timed else 0.8
    left = x - width / 2 if timed else x
    ax.bar(left, [r["busy_ms_per_step"] for r in named], width, color="tab:blue", label="device busy time")
    if timed:
        ax.bar(x + width / 2, [r.get("step_time_ms") or 0.0 for r in named], width, color="tab:orange",
               label="predicted step time")
        ax.legend(fontsize="small")
    for i, r in enumerate(named):
        waf = r.get("device_waf")
        ax.annotate(f"WAF {waf:.2f}" if waf else "", (left[i], r["busy_ms_per_step"]), ha="center", va="bottom",
                    fontsize="small")
    ax.set_xticks(x, [r["design"] for r in named], rotation=20)
    ax.set_ylabel("time per step (ms)" if timed else "device busy time per step (ms)")
    return ax
