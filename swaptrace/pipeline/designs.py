"""The files of a designs comparison (``swaptrace designs``, the pipeline's ``designs`` stage): its table as
markdown, Parquet and JSON, and its three figures."""

from __future__ import annotations

import json
from pathlib import Path

from swaptrace.core.traceio import AtomicPath
from swaptrace.designs.table import markdown
from swaptrace.figures.designs import plot_device_time, plot_request_size_cdf


def save_designs(cmp, out: Path) -> None:
    """Write ``designs.md``, ``designs.parquet``, ``designs.json`` and the three figures of a comparison."""
    import pyarrow.parquet as pq
    from matplotlib.figure import Figure

    with AtomicPath(out / "designs.md", force=True) as a:
        a.tmp.write_text(markdown(cmp))
    with AtomicPath(out / "designs.parquet", force=True) as a:
        pq.write_table(cmp.table(), a.tmp)
    with AtomicPath(out / "designs.json", force=True) as a:  # rows with their request-size histograms
        a.tmp.write_text(json.dumps({"rows": cmp.rows, "devices": cmp.devices, "steps": cmp.steps,
                                    "step_compute_us": cmp.step_compute_us}, indent=2,
                                    default=str))
    for name, plot in (("write-sizes", lambda ax: plot_request_size_cdf(cmp.rows, "write", ax)),
                       ("read-sizes", lambda ax: plot_request_size_cdf(cmp.rows, "read", ax)),
                       ("device-time", lambda ax: plot_device_time(cmp.rows, ax))):
        fig = Figure(figsize=(7, 3.5))
        plot(fig.subplots())
        fig.tight_layout()
        with AtomicPath(out / f"designs-{name}.png", force=True) as a:
            fig.savefig(a.tmp, format="png", dpi=110)
