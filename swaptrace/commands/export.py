"""``swaptrace export``: an access trace in a peer cache simulator's format."""

from __future__ import annotations

import os

import click

from swaptrace.commands._common import echo_summary, force_option, json_option, progressbar
from swaptrace.export import FORMATS, export_trace
from swaptrace.traceio import open_trace


@click.command("export")
@click.argument("trace", type=click.Path())
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False), help="File to write.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="libcachesim", show_default=True,
              help="libcachesim: oracleGeneral 24-byte records; csv: time,obj_id,obj_size,op,next_access_vtime.")
@force_option
@json_option
def command(trace, out, fmt, force, as_json):
    """Export TRACE for libCacheSim (oracleGeneral binary) or as CSV, next-access times included.

    \b
    Example:
      swaptrace export traces/demo.access.parquet --format libcachesim -o traces/demo.oracleGeneral.bin
      cachesim traces/demo.oracleGeneral.bin oracleGeneral lru,s3fifo 0.1,0.5
    """
    tf = open_trace(trace, kind="access")
    with progressbar(tf.num_rows * (2 if fmt == "csv" else 1), "export") as bar:
        path = export_trace(trace, out, fmt=fmt, force=force, progress=bar.update)
    echo_summary({"format": fmt, "records": tf.num_rows, "bytes": os.path.getsize(path), "output": str(path)}, as_json)
