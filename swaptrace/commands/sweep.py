"""``swaptrace sweep``: traces or presets x budgets x policies x devices, each point a Dask task."""

from __future__ import annotations

import click

from swaptrace.commands.common import (
    MAX_SEED,
    MAX_WORKERS,
    count,
    echo_summary,
    json_option,
    number,
    progressbar,
    scheduler_address,
    sweep_file_inputs,
    writes,
)
from swaptrace.errors import ConfigError
from swaptrace.workload.spec import MAX_STEPS


@click.command("sweep")
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False), metavar="[SWEEP.toml]")
@click.option("-o", "--output", "out", required=True, metavar="FOLDER",
              help="Results dataset folder (one Parquet file per point); a rerun skips finished points.")
@click.option("--trace", "traces", multiple=True, type=click.Path(), metavar="PATH",
              help="An access trace (file or dataset); repeatable.")
@click.option("--preset", "presets", multiple=True, metavar="NAME", help="A preset, generated once per sweep; repeatable.")
@click.option("--steps", type=count(1, MAX_STEPS), default=None, help="Steps of the presets' traces [default: the preset's].")
@click.option("--seed", type=count(0, MAX_SEED), default=None, help="Seed of the presets' traces [default 0].")
@click.option("--memory", multiple=True, metavar="SIZE", help="A DRAM budget, e.g. 64MiB; repeatable.")
@click.option("--memory-fraction", "memory_fractions", multiple=True, type=number(0, 1, min_open=True),
              help="A DRAM budget as a fraction of the footprint; repeatable.")
@click.option("--policy", "policies", multiple=True, metavar="NAME", help="linux, lru or clock; repeatable [linux].")
@click.option("--device", "devices", multiple=True, metavar="NAME", help="SSD model device; repeatable [nvme-tlc].")
@click.option("--step-compute-us", type=number(0, 1e9), default=None, metavar="US",
              help="Compute time of a training step without paging, for the predicted step time [0: paging time only].")
@click.option("--workers", type=count(1, MAX_WORKERS), default=None, metavar="N", help="Local cluster processes [one per CPU].")
@click.option("--scheduler", type=scheduler_address(), default=None, metavar="tcp://HOST:PORT",
              help="A running Dask scheduler [$DASK_SCHEDULER_ADDRESS; else a local cluster].")
@click.option("--plot", default=None, type=click.Path(dir_okay=False), metavar="FILE.png",
              help="Draw pages in against budget, one line per trace/policy/device.")
@json_option
@writes(("out", "plot"), ("spec_file", "traces", "presets", "devices"), sweep_file_inputs)
def command(*, spec_file, out, traces, presets, steps, seed, memory, memory_fractions, policies, devices,
            step_compute_us, workers, scheduler, plot, as_json) -> None:
    """Run a parameter sweep on Dask distributed and write one Parquet dataset of results.

    Every point (trace x budget x policy x device) emulates the trace and
    replays its swap stream on the SSD model as `swaptrace run` does; its
    row (pages in/out, requests, bytes, WAF, bandwidth, predicted step time
    with --step-compute-us of compute per step) is written as its own file,
    so an interrupted sweep resumes where it stopped. Options add to (and, for
    steps and seed, override) a sweep TOML file. Needs the dask extra.

    \b
    Examples:
      swaptrace sweep --preset tiny --steps 20 --memory-fraction 0.25 --memory-fraction 0.5 \\
          --policy linux --policy lru -o traces/sweep --plot traces/sweep.png
      swaptrace sweep sweeps/rm.toml -o /shared/sweep --scheduler tcp://head:8786
    """
    from swaptrace.parallel.cluster import require_dask
    from swaptrace.parallel.sweep_spec import load_sweep_spec, spec_from_values

    values = {"traces": traces, "presets": presets, "steps": steps, "seed": seed, "memory": memory,
              "memory_fractions": memory_fractions, "policies": policies, "devices": devices,
              "step_compute_us": step_compute_us}
    if workers is not None and scheduler is not None:
        raise ConfigError("give --workers (a local cluster) or --scheduler (a running one), not both")
    if not str(out).strip():
        raise ConfigError("-o: empty; give the results folder")
    try:
        spec = load_sweep_spec(spec_file, **values) if spec_file else spec_from_values(**values)
        _check_values(spec)
        spec.check()  # presets, devices and budgets, before Dask loads (run_sweep checks a library caller's too)
    except IsADirectoryError:
        raise ConfigError(f"{spec_file}: is a folder, not a sweep TOML file") from None
    except (ValueError, TypeError) as exc:  # a value of the wrong type in the file, e.g. memory_fractions = ["half"]
        raise ConfigError(f"{spec_file or 'sweep'}: {exc}") from None
    except ConfigError as exc:  # a value in the file: the message names the file
        if spec_file and str(spec_file) not in str(exc):
            raise ConfigError(f"{spec_file}: {exc}") from None
        raise
    if plot is not None and not str(plot).endswith((".png", ".svg", ".pdf")):
        raise ConfigError(f"{plot}: --plot takes a .png, .svg or .pdf name")
    require_dask()
    from swaptrace.parallel.sweep import read_results, run_sweep  # Dask and pyarrow, once the sweep is read

    bars: list = []

    def start(n: int) -> None:
        bars.append(progressbar(n, "sweep points").__enter__())

    try:
        result = run_sweep(spec, out, workers=workers, scheduler=scheduler, on_start=start,
                           progress=lambda n: bars[0].update(n) if bars else None)
    finally:
        for bar in bars:
            bar.__exit__(None, None, None)
    if plot is not None:
        from swaptrace.figures.sweep import draw_sweep_figure

        draw_sweep_figure(read_results(out), plot)
    summary = {"output": str(result.path), "points": result.points, "ran": result.ran, "skipped": result.skipped,
               "failed": len(result.failed), "seconds": round(result.seconds, 3)}
    if plot is not None:
        summary["figure"] = str(plot)
    echo_summary(summary, as_json)
    for key, message in result.failed:
        click.echo(f"point {key} failed: {message}", err=True)
    if result.failed:
        raise SystemExit(1)


def _check_values(spec) -> None:
    """What the options' types check, for values that came from a sweep file; plus empty names (one line each)."""
    if spec.steps is not None and not 1 <= spec.steps <= MAX_STEPS:
        raise ConfigError(f"sweep: steps must be in [1, {MAX_STEPS}], got {spec.steps}")
    if not 0 <= spec.seed <= MAX_SEED:
        raise ConfigError(f"sweep: seed must be in [0, {MAX_SEED}], got {spec.seed}")
    for f in spec.memory_fractions:
        if not 0.0 < f <= 1.0:  # also refuses nan
            raise ConfigError(f"sweep: memory fraction must be in (0, 1], got {f}")
    for name, values in (("device", spec.devices), ("policy", spec.policies), ("preset", spec.presets),
                         ("trace", spec.traces)):
        if any(not v.strip() for v in values):
            raise ConfigError(f"sweep: an empty {name} name")
