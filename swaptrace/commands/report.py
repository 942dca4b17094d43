"""``swaptrace report``: figures and report.md for a pipeline folder."""

from __future__ import annotations

import click

from swaptrace.commands.common import report_inputs, writes


@click.command("report")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("-o", "--output", "out", default=None, type=click.Path(file_okay=False),
              help="Report folder [default: FOLDER/report]; rewritten whole.")
@writes(("out",), (), report_inputs)
def command(folder, out):
    """Draw the figures of FOLDER and write report.md beside them.

    \b
    Example:
      swaptrace report traces/demo -o traces/demo/report
    """
    from swaptrace.pipeline.report import build_report

    rep = build_report(folder, out, force=True)
    for name, why in rep.skipped.items():
        click.echo(f"skipped {name}: {why}", err=True)
    click.echo(f"wrote {rep.path} with {len(rep.figures)} figures")
