"""``swaptrace export``: an access trace in a peer cache simulator's format."""

from __future__ import annotations

import os

import click

from swaptrace.commands.common import byte_size, echo_summary, force_option, json_option, only_with, progressbar, writes
from swaptrace.workload.choices import FORMATS


@click.command("export")
@click.argument("trace", type=click.Path())
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False), help="File to write.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="libcachesim", show_default=True,
              help="libcachesim: oracleGeneral 24-byte records; csv: time,obj_id,obj_size,op,next_access_vtime; "
                   "mqsim: a swap I/O stream as MQSim's ASCII trace (ns, device, sector, sectors, 0=write/1=read).")
@click.option("--swap-offset", type=byte_size(), default="0", show_default=True,
              help="mqsim: where the swap partition starts on the simulated drive (e.g. 100GiB).")
@force_option
@json_option
@only_with("--swap-offset", "--format mqsim")
@writes(("out",), ("trace",))
def command(trace, out, fmt, swap_offset, force, as_json):
    """Export TRACE for libCacheSim (oracleGeneral binary) or as CSV, next-access times included; or a swap
    I/O stream for MQSim (--format mqsim).

    \b
    Example:
      swaptrace export traces/demo/swapio.parquet --format mqsim -o traces/demo/swapio.mqsim.trace
      swaptrace export traces/demo.access.parquet --format libcachesim -o traces/demo.oracleGeneral.bin
      cachesim traces/demo.oracleGeneral.bin oracleGeneral lru,s3fifo 0.1,0.5
    """
    from swaptrace.core.traceio import open_trace
    from swaptrace.workload.export import export_mqsim, export_trace

    if fmt == "mqsim":
        from swaptrace.core.units import parse_bytes

        tf = open_trace(trace, kind="swapio")
        with progressbar(tf.num_rows, "export") as bar:
            path, counts = export_mqsim(trace, out, swap_offset_bytes=parse_bytes(swap_offset, "--swap-offset"),
                                        force=force, progress=bar.update)
        echo_summary({"format": fmt, **counts, "bytes": os.path.getsize(path), "output": str(path)}, as_json)
        return
    tf = open_trace(trace, kind="access")
    with progressbar(tf.num_rows * (2 if fmt == "csv" else 1), "export") as bar:
        path = export_trace(trace, out, fmt=fmt, force=force, progress=bar.update)
    echo_summary({"format": fmt, "records": tf.num_rows, "bytes": os.path.getsize(path), "output": str(path)}, as_json)
