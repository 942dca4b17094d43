"""``swaptrace compare``: two swap I/O streams side by side."""

from __future__ import annotations

import json

import click

from swaptrace.commands.common import figure_format, force_option, json_option, number, writes


@click.command("compare")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.option("--tolerance", type=number(0), default=0.15, show_default=True,
              help="Largest accepted |relative error| on pages read and written.")
@click.option("--ks-tolerance", type=number(0, 1), default=0.2, show_default=True,
              help="Largest accepted KS distance of request sizes.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Write a figure (PNG, SVG, PDF).")
@force_option
@json_option
@writes(("plot_path",), ("a", "b"))
def command(*, a, b, tolerance, ks_tolerance, plot_path, force, as_json):
    """Compare swap I/O stream B with reference A (e.g. emulator vs kernel).

    Prints pages read and written, request counts and mean sizes with the
    relative error (B-A)/A, the request-size histograms with their KS
    distance, and a verdict line; exits 0 whatever the verdict.

    \b
    Example:
      swaptrace compare traces/tiny.kernel.swapio.parquet traces/tiny.swapio.parquet --plot cmp.png
    """
    from swaptrace.compare import compare_streams, render_comparison
    from swaptrace.core.traceio import check_output_path

    if plot_path:
        figure_format(plot_path)
        check_output_path(plot_path, force)  # before the comparison's work
    from swaptrace.core.traceio import check_agree, open_trace

    # request sizes and pages are compared in bytes and pages: streams of different page sizes compare nothing
    check_agree(open_trace(a, "swapio"), open_trace(b, "swapio"), ("page_bytes",), "A", "B",
                "compare streams of the same page size")
    result = compare_streams(a, b, tolerance=tolerance, ks_tolerance=ks_tolerance)
    if plot_path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from swaptrace.core.traceio import AtomicPath
        from swaptrace.figures.compare import plot_compare_figure

        fig = plot_compare_figure(result)
        with AtomicPath(plot_path, force=force) as out:
            fig.savefig(out.tmp, format=figure_format(plot_path), dpi=120)
        plt.close(fig)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, sort_keys=True, default=str))
    else:
        click.echo(render_comparison(result))
