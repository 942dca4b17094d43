"""``swaptrace mrc``: LRU miss-ratio curve of an access trace, every memory size."""

from __future__ import annotations

import click

from swaptrace.commands.common import (
    byte_size,
    count,
    echo_summary,
    figure_format,
    force_option,
    json_option,
    number,
    only_with,
    progressbar,
    writes,
)
from swaptrace.core.units import format_bytes, parse_bytes
from swaptrace.errors import ConfigError


@click.command("mrc")
@click.argument("trace", type=click.Path())
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False), help="CSV to write (.mrc.csv).")
@click.option("--sample-rate", type=number(0, 1, min_open=True), default=None, help="SHARDS fixed-rate sampling, e.g. 0.01 (default: exact).")
@click.option("--sample-pages", type=count(1), default=None, help="SHARDS fixed-size sampling: track at most N pages.")
@click.option("--points", type=count(0, 1 << 24), default=1000, show_default=True, help="CSV rows (evenly spaced sizes); 0 = every size.")
@click.option("--plot", "plot", type=click.Path(dir_okay=False), default=None, help="Also draw the curve to this PNG/SVG/PDF.")
@click.option("--budget", type=byte_size(positive=True), default=None, help="--plot: memory budget to mark on the plot, e.g. 2GiB.")
@force_option
@json_option
@only_with("--budget", "--plot", why="the budget is marked on the plot")
@writes(("out", "plot"), ("trace",))
def command(*, trace, out, sample_rate, sample_pages, points, plot, budget, force, as_json):
    """LRU miss-ratio curve of TRACE for every memory size, in one pass.

    Exact by default (stack distances in a Fenwick tree); --sample-rate or
    --sample-pages use SHARDS sampling for traces too long to do exactly.
    CSV columns: memory_bytes, pages, miss_ratio, misses.

    \b
    Example:
      swaptrace mrc traces/demo.access.parquet -o traces/demo.mrc.csv --plot traces/demo.mrc.png
    """
    from swaptrace.core.traceio import AtomicPath, check_output_path, open_trace
    from swaptrace.mrc import exact_mrc, shards_mrc, write_csv

    if sample_rate is not None and sample_pages is not None:
        raise ConfigError("give at most one of --sample-rate and --sample-pages")
    if points < 0:
        raise ConfigError(f"--points must not be negative, got {points}")
    budget_bytes = parse_bytes(budget, "--budget", positive=True) if budget is not None else None
    if plot is not None:
        figure_format(plot)
    tf = open_trace(trace, kind="access")
    check_output_path(out, force)
    if plot is not None:
        check_output_path(plot, force)
    with progressbar(tf.num_rows, "mrc") as bar:
        if sample_rate is None and sample_pages is None:
            curve = exact_mrc(trace, progress=bar.update)
        else:
            curve = shards_mrc(trace, sample_rate or 0.01, sample_pages, progress=bar.update)
    written = write_csv(curve, out, points=points, force=force)
    if plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from swaptrace.figures.emulate import plot_mrc

        fig, ax = plt.subplots(figsize=(7, 4))
        plot_mrc(curve, ax=ax, budget_bytes=budget_bytes)
        fig.tight_layout()
        with AtomicPath(plot, force) as ap:
            fig.savefig(ap.tmp, format=figure_format(plot), dpi=120)
        plt.close(fig)
    half = curve.sizes_pages.size // 2
    summary = {
        "accesses": curve.accesses,
        "footprint_pages": int(curve.sizes_pages[-1]),
        "method": curve.method,
        "sample_rate": curve.sample_rate,
        "cold_misses": float(curve.misses[-1]),
        "miss_ratio_at_half_footprint": float(curve.miss_ratio[half]),
        "half_footprint": format_bytes(half * curve.page_bytes),
        "output": str(written),
    }
    if plot is not None:
        summary["plot"] = str(plot)
    echo_summary(summary, as_json)
