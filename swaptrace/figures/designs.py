"""Figures of ``swaptrace designs``: request sizes and device time per design."""

from __future__ import annotations

from typing import Any

import numpy as np

from swaptrace.figures._axes import axes_or_new


def plot_request_size_cdf(rows: list[dict[str, Any]], op: str = "write", ax=None):
    """CDF of request sizes (KiB, log axis) of each design's ``op`` requests, weighted by requests.

    ``rows`` are :class:`swaptrace.designs.compare.Comparison` rows (each with ``hist``).
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
    ax.legend(fontsize="small")
    return ax


def plot_device_time(rows: list[dict[str, Any]], ax=None):
    """Device busy time per training step (ms) in the SSD model, one bar per design, with its WAF."""
    ax = axes_or_new(ax)
    named = [r for r in rows if r.get("busy_ms_per_step") is not None]
    x = np.arange(len(named))
    ax.bar(x, [r["busy_ms_per_step"] for r in named], color="tab:blue")
    for i, r in enumerate(named):
        waf = r.get("device_waf")
        ax.annotate(f"WAF {waf:.2f}" if waf else "", (i, r["busy_ms_per_step"]), ha="center", va="bottom",
                    fontsize="small")
    ax.set_xticks(x, [r["design"] for r in named], rotation=20)
    ax.set_ylabel("device busy time per step (ms)")
    return ax
