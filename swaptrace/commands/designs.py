"""``swaptrace designs``: Linux swap vs the fixes (log-structured swap, zoned swap, packed rows) on one trace."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import click

from swaptrace.commands.common import MAX_COUNT, MAX_RUNTIME_S, byte_size, count, number, only_with, progressbar, writes
from swaptrace.core.units import parse_bytes
from swaptrace.designs.choices import SWAPIN_NAMES, VICTIM_NAMES
from swaptrace.errors import ConfigError

if TYPE_CHECKING:  # names in annotations only: the modules load when the command runs
    from swaptrace.designs.table import DesignSet


@click.command("designs")
@click.argument("trace", type=click.Path())
@click.option("-o", "--output", "out", required=True, type=click.Path(file_okay=False), help="Folder to write.")
@click.option("--memory", type=byte_size(), default=None, help="DRAM budget, e.g. 2GiB (or use --memory-fraction).")
@click.option("--memory-fraction", type=number(0, 1, min_open=True), default=None, help="DRAM budget as a fraction of the footprint.")
@click.option("--device", default="nvme-tlc", show_default=True,
              help="SSD preset the streams are replayed on (sized as `swaptrace run` does); 'none' skips the model.")
@click.option("--packed", "packed_trace", default=None, type=click.Path(),
              help="The same model generated with --row-layout packed (adds the packed and packed+log designs).")
@click.option("--segment-size", type=byte_size(), default="1MiB", show_default=True, help="Log segment (one sequential write each).")
@click.option("--victim", type=click.Choice(VICTIM_NAMES), default="greedy", show_default=True,
              help="Segment cleaning victim policy.")
@click.option("--spare", type=number(0, 10), default=0.25, show_default=True,
              help="Log capacity above the footprint, as a fraction of it.")
@click.option("--discard/--no-discard", default=True, show_default=True, help="Discard (TRIM) emptied segments.")
@click.option("--swapin", type=click.Choice(SWAPIN_NAMES), default="page", show_default=True,
              help="The log design's swap-in (log-prefetch always reads the segment).")
@click.option("--prefetch-window", default="32KiB", show_default=True,
              help="log-prefetch: the aligned part of the segment read around a faulting page, or 'segment'.")
@click.option("--zone-size", type=byte_size(), default="16MiB", show_default=True, help="Zoned design: zone size.")
@click.option("--zone-capacity", type=byte_size(positive=True), default=None, help="Zoned design: writable bytes per zone [default: the zone size].")
@click.option("--max-open-zones", type=count(1, 1 << 16), default=14, show_default=True)
@click.option("--fio-target", default=None, type=click.Path(dir_okay=False),
              help="Also replay each design's first steps with fio on this file (e.g. /tmp/swaptrace-fio.dat; "
                   "never a block device).")
@click.option("--fio-size", type=byte_size(positive=True), default="1GiB", show_default=True, help="--fio-target: bytes of the fio target to use.")
@click.option("--fio-runtime", type=count(1, MAX_RUNTIME_S), default=3, show_default=True,
              help="--fio-target: fio runtime cap in seconds (a replay may take 10x).")
@click.option("--fio-requests", type=count(1, MAX_COUNT), default=100_000, show_default=True,
              help="--fio-target: most requests a design's replay may have (sets the common number of steps).")
@click.option("--fio-repeats", type=count(1, 1000), default=1, show_default=True,
              help="--fio-target: rounds of replays (designs take turns; the median runtime counts).")
@click.option("--step-compute-us", type=number(0, 1e9), default=0.0, show_default=True, metavar="US",
              help="Compute time of a training step without paging, for the predicted step time and slowdown "
                   "(0: paging time only).")
@click.option("--verify", is_flag=True, help="Check the shadow map and the log's invariants after every chunk.")
@click.option("--force", is_flag=True, help="Overwrite existing outputs.")
@only_with("--fio-size", "--fio-target")
@only_with("--fio-runtime", "--fio-target")
@only_with("--fio-requests", "--fio-target")
@only_with("--fio-repeats", "--fio-target")
@writes(("out", "fio_target"), ("trace", "packed_trace", "device"))
def command(*, trace, out, memory, memory_fraction, device, packed_trace, segment_size, victim, spare, discard, swapin,
            prefetch_window, zone_size, zone_capacity, max_open_zones, fio_target, fio_size, fio_runtime,
            fio_requests, fio_repeats, verify, force,
            step_compute_us=0.0):
    """Compare swap designs on TRACE at one DRAM budget: Linux's stream and the fixes.

    Writes each design's swap I/O stream (<design>.swapio.parquet), the table
    (designs.md, designs.parquet, designs.json) and figures (designs-*.png)
    into the output folder. Every design takes the Linux run's residency
    decisions; they differ in where evicted pages go and how they come back.

    \b
    Example:
      swaptrace generate --preset demo -o traces/demo.access.parquet
      swaptrace generate --preset demo --row-layout packed -o traces/demo-packed.access.parquet
      swaptrace designs traces/demo.access.parquet --memory-fraction 0.1 \\
          --packed traces/demo-packed.access.parquet -o traces/demo/designs-10
    """
    from swaptrace.core.outputs import json_marker
    from swaptrace.core.traceio import check_output_folder, open_trace
    from swaptrace.designs.log import LogConfig
    from swaptrace.designs.ondisk import check_file_target, replay_on_disk
    from swaptrace.designs.table import DesignSet, add_disk, compare_designs, markdown
    from swaptrace.pipeline.designs import save_designs
    from swaptrace.ssd.swapdrive import swap_drive
    from swaptrace.ssd.zns import ZNSConfig
    from swaptrace.timing.designs import with_step_times

    if not str(out).strip():
        raise ConfigError("-o: empty; give the folder to write")
    outdir = check_output_folder(out, force, json_marker("designs.json", ("rows", "devices")),
                                 "a designs folder (designs.json)")
    if fio_target is not None:
        if not str(fio_target).strip():
            raise ConfigError("--fio-target: empty; give a file (e.g. /tmp/swaptrace-fio.dat)")
        check_file_target(fio_target)
        if not Path(fio_target).resolve().parent.is_dir():
            raise ConfigError(f"--fio-target {fio_target}: its folder does not exist")
    if device is not None and not device.strip():
        raise ConfigError("--device: empty; give an SSD preset (swaptrace ssd devices), a .toml file or 'none'")
    log = LogConfig(segment_bytes=parse_bytes(segment_size, "--segment-size"), victim=victim, spare_factor=spare,
                    discard=discard, swapin=swapin)
    window = None if prefetch_window == "segment" else parse_bytes(prefetch_window, "--prefetch-window")
    zcap = parse_bytes(zone_capacity, "--zone-capacity", positive=True) if zone_capacity is not None else None
    zones = ZNSConfig(zone_bytes=parse_bytes(zone_size, "--zone-size"), zone_capacity_bytes=zcap,
                      max_open_zones=max_open_zones)
    budget = {"memory_bytes": parse_bytes(memory, "--memory") if memory is not None else None,
              "memory_fraction": memory_fraction}
    fio_bytes = parse_bytes(fio_size, "--fio-size", positive=True)
    ssd = None if device == "none" else swap_drive(device)  # a bad preset name fails before the long work
    tf = open_trace(trace, kind="access")
    designs = DesignSet(log=log, zones=zones, prefetch_window_bytes=window)
    _check_up_front(tf, packed_trace, designs, ssd, budget)
    passes = 2 if packed_trace else 1
    existed = outdir.exists()
    made = not existed or not any(outdir.iterdir())  # new or empty: everything in it will be ours
    try:
        with progressbar(tf.num_rows * passes, "designs") as bar:
            cmp = compare_designs(trace, outdir, ssd=ssd, designs=designs, packed_trace=packed_trace, verify=verify,
                                  force=True, progress=bar.update, say=lambda m: click.echo(m, err=True), **budget)
        cmp = with_step_times(cmp, step_compute_us)
        if fio_target is not None:
            streams = {name: run.path for name, run in cmp.runs.items() if name != "zoned@ftl"}
            add_disk(cmp, replay_on_disk(streams, outdir, target=fio_target, size_bytes=fio_bytes,
                                         runtime_s=fio_runtime, max_rows=fio_requests, repeats=fio_repeats,
                                         say=lambda m: click.echo(m, err=True)))
        save_designs(cmp, outdir)
    except BaseException:
        if made:  # a failure found late (damaged data pages, Ctrl-C) leaves no half-written folder of ours
            shutil.rmtree(outdir, ignore_errors=True)
            if existed:
                outdir.mkdir(exist_ok=True)  # the user's empty folder stays
        raise
    click.echo(markdown(cmp), nl=False)
    click.echo(f"wrote {outdir}/designs.md, designs.parquet, designs.json, designs-*.png")


def _check_up_front(tf, packed_trace, designs: DesignSet, ssd, budget: dict) -> None:
    """Refuse what compare_designs would refuse only after its first stream is written (one line each)."""
    from swaptrace.core.traceio import check_agree, open_trace
    from swaptrace.emulate import EmulatorConfig, load_profile

    page_bytes = int(tf.meta["page_bytes"])
    z = designs.zones  # the zoned design's segments are its zones: named by their own options
    for value, option in ((z.zone_bytes, "--zone-size"), (z.capacity_bytes, "--zone-capacity")):
        if value < page_bytes or value % page_bytes:
            raise ConfigError(f"{option} must be a positive multiple of the page size ({page_bytes} B), got {value} B")
    for cfg in designs.logs().values():
        cfg.check(page_bytes)
        cfg.check_size(int(tf.meta["footprint_pages"]), page_bytes)
    if ssd is not None:
        designs.zones.check(ssd)
    EmulatorConfig.resolve(tf.meta, profile=load_profile(None), source=str(tf.path), **budget)
    if packed_trace is not None:
        packed = open_trace(packed_trace, kind="access")
        if int(packed.meta["page_bytes"]) != page_bytes:
            raise ConfigError(f"--packed {packed_trace}: pages of {packed.meta['page_bytes']} B, the trace's are "
                              f"{page_bytes} B")
        # the same model, seed and steps, laid out packed: another model's trace compares nothing
        check_agree(tf, packed, ("spec", "seed", "steps", "first_step"), "TRACE", "--packed",
                    "give the same model generated with --row-layout packed")
