"""``swaptrace time``: predicted step time and training slowdown of a swap stream on a device."""

from __future__ import annotations

import os

import click

from swaptrace.commands.common import (
    bounded,
    count,
    echo_summary,
    force_option,
    json_option,
    never_with,
    only_with,
    stream_trace_input,
    writes,
)
from swaptrace.errors import ConfigError

#: the largest CPU or compute time per step, fault or page taken (us): an hour, far above any real one
MAX_US = 3.6e9


def _render(summary: dict) -> str:
    b = summary["breakdown_us"]
    total = summary["total_us"] or 1.0
    lines = [
        f"device        {summary['device']}",
        f"compute       {summary['compute']}",
        f"steps         {summary['steps']}",
        f"threads       {summary['threads']} ({summary['threads_source']})",
        f"step time     {summary['mean_step_us'] / 1e3:.3f} ms (mean), {total / 1e6:.3f} s in all",
        "slowdown      " + (f"{summary['slowdown']:.2f}x" if summary["slowdown"] else "n/a (no compute time)")
        + _spread_text(summary),
        f"faults waited {summary['faults_waited']}",
        "breakdown",
    ]
    for key, label in (("compute", "compute"), ("fault_wait", "fault wait"), ("queueing", "queueing"),
                       ("fault_cpu", "fault CPU"), ("reclaim_cpu", "reclaim CPU")):
        lines.append(f"  {label:<12}{b[key] / 1e6:>10.3f} s  {100 * b[key] / total:5.1f} %")
    c = summary["cpu_costs"]
    lines.append(f"cpu costs     fault {c['fault_cpu_us']:.2f} us, reclaim {c['reclaim_cpu_us']:.2f} us/page, "
                 f"write {c['write_cpu_us']:.2f} us/page ({c['source']})")
    if summary.get("note"):
        lines.append(f"note          {summary['note']}")
    if summary.get("output"):
        lines.insert(0, f"wrote {summary['output']}")
    return "\n".join(lines)


def busy_reads_note(dev, threads: int, cpus: int | None) -> str | None:
    """A note when a program's threads occupy every CPU but a measured profile's reads were taken with none busy.

    Such a program's swap-in reads also wait for a CPU to finish them on (docs/timing.md, "Busy CPUs"), so
    the prediction's I/O wait is low. ``None`` when the profile measured its reads busy, the device is an SSD
    model rather than a measured profile, or a CPU is left free.
    """
    if dev.source != "fio" or not cpus or threads < cpus or int(dev.notes.get("read_busy_cpus", 0) or 0) > 0:
        return None
    return (f"the program's {threads} threads occupy this machine's {cpus} CPUs, but the profile's reads were "
            "measured with none busy: its swap-in reads also wait for a CPU, so the I/O wait here is low "
            f"(fio run --busy-cpus {cpus}, then fio profile --reads-from; docs/timing.md, \"Busy CPUs\")")


def _spread_text(summary: dict) -> str:
    """`` (lo-hi x over the measured fault cost lo-hi us, write cost lo-hi us)`` when the costs carry their
    spread, else nothing."""
    s, c = summary.get("slowdown_range"), summary["cpu_costs"]
    parts = [f"{what} cost's measured {r[0]:.1f}-{r[1]:.1f} us" for what, r in
             (("fault", c.get("fault_cpu_us_range")), ("write", c.get("write_cpu_us_range"))) if r]
    if not s or not parts:
        return ""
    return f" ({s[0]:.2f}-{s[1]:.2f}x over the {' and the '.join(parts)})"


def _costs(costs_file, fault_cpu_us, reclaim_cpu_us, write_cpu_us):
    """The CPU costs: a host-costs file or the in-process micro-benchmarks, each overridden by its option."""
    from dataclasses import replace

    from swaptrace.timing import model as timing

    given = {k: v for k, v in (("fault_cpu_us", fault_cpu_us), ("reclaim_cpu_us", reclaim_cpu_us),
                               ("write_cpu_us", write_cpu_us)) if v is not None}
    if costs_file is not None:
        base = timing.load_costs(costs_file)
    elif len(given) == 3:
        return timing.CpuCosts(**given, source="given")
    else:
        base = replace(timing.measure_cpu_costs(), write_cpu_us=0.0)
    if not given:
        return base
    # a given fault or write cost replaces the measured one, and with it the measurements' spread
    spreads = {k + "_range": None if k in given else getattr(base, k + "_range") for k in ("fault_cpu_us", "write_cpu_us")}
    return replace(base, **given, source=base.source + " (some given)", **spreads)


@click.command("time")
@click.argument("stream", type=click.Path(dir_okay=False))
@click.option("--device", required=True,
              help="SSD model preset (swaptrace ssd devices), SSD model TOML, or measured profile TOML (fio profile).")
@click.option("--compute", type=click.Choice(["mlp", "none"]), default="mlp", show_default=True,
              help="mlp: measure the steps with no memory limit (needs the access trace); none: paging time only.")
@click.option("--step-compute-us", type=bounded("step_compute_us"), default=None, help="Given compute time of every step (us).")
@click.option("--compute-baseline", type=click.Path(dir_okay=False), default=None,
              help="Take the compute time from the unlimited run of this capture.")
@click.option("--trace", type=click.Path(), default=None,
              help="--compute mlp: the access trace (default: the one named in the stream's metadata).")
@click.option("--threads", type=bounded("threads"), default=None,
              help="Threads sharing each step's faults (default: the stream's, measured by capture --record; else 1).")
@click.option("--fault-cpu-us", type=bounded("fault_cpu_us"), default=None, help="Kernel CPU per fault (default: micro-benchmark).")
@click.option("--reclaim-cpu-us", type=bounded("reclaim_cpu_us"), default=None, help="Reclaim CPU per page freed (default: micro-benchmark).")
@click.option("--write-cpu-us", type=bounded("write_cpu_us"), default=None,
              help="Kernel time per page written (default: 0, or measured with --measure-fault-overhead).")
@click.option("--measure-fault-overhead", is_flag=True,
              help="Root: measure the time per page written and per fault beyond the device's latency with two "
                   "synthetic captures (swaptrace.timing.calibrate) and use them as --write-cpu-us and --fault-cpu-us.")
@click.option("--fault-overhead-runs", type=count(1, 20), default=3, show_default=True,
              help="--measure-fault-overhead: captures of each cost to take (the write cost's, unless "
                   "--write-cpu-us is given, and the fault cost's); their medians are the costs, and the "
                   "prediction is also made at their lowest and highest (the host's spread).")
@click.option("--costs", "costs_file", type=click.Path(dir_okay=False), default=None,
              help="Host-costs TOML (--save-costs) for the fault, reclaim and write costs; the three options override it.")
@click.option("--save-costs", type=click.Path(dir_okay=False), default=None,
              help="Write the costs used (e.g. just measured) as a host-costs TOML for --costs and run --time-costs.")
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), default=None, help="Per-step Parquet table.")
@force_option
@json_option
@only_with("--trace", "--compute mlp", why="the access trace is read to measure the steps' compute")
@only_with("--fault-overhead-runs", "--measure-fault-overhead", why="it counts the fault overhead's captures")
@never_with("--trace", "--step-compute-us", "--compute-baseline", why="the compute time is given; no trace is read")
@writes(("out", "save_costs"), ("stream", "trace", "compute_baseline", "device", "costs_file"), stream_trace_input)
def command(*, stream, device, compute, step_compute_us, compute_baseline, trace, threads, fault_cpu_us,
            reclaim_cpu_us, write_cpu_us, measure_fault_overhead, fault_overhead_runs, costs_file, save_costs, out,
            force, as_json) -> None:
    """Predict the step time and training slowdown of STREAM on a device.

    Prints the mean step time, the slowdown against the same steps with no memory limit, and the
    breakdown into compute, fault wait (device latency of the reads a fault waits for), queueing
    (behind writes still in the device), fault CPU and reclaim CPU; writes one row per step with -o.
    A program that runs a step on several threads stalls less than their summed waits: --threads, or
    the count a recording measured (generate --runtime RECORDING), shares each step among them.

    \b
    Example:
      swaptrace time traces/demo/swapio.parquet --device nvme-tlc -o traces/demo/timing.parquet
      swaptrace time traces/demo/swapio.parquet --device disk.toml --step-compute-us 20000
    """
    from swaptrace.core.outputs import check_output_path
    from swaptrace.timing.device import load_device_timing

    if step_compute_us is not None and compute_baseline is not None:
        raise ConfigError("give --step-compute-us or --compute-baseline, not both")
    if out is not None:
        if not str(out).strip():
            raise ConfigError("-o: empty; give a file name for the per-step table")
        check_output_path(out, force)
    if save_costs is not None:
        check_output_path(save_costs, force)
    dev = load_device_timing(device)
    from swaptrace.timing import model as timing  # numpy, pyarrow and the kernel, once the options are read

    if measure_fault_overhead and (fault_cpu_us is not None or costs_file is not None):
        raise ConfigError("--measure-fault-overhead measures the costs: leave out --fault-cpu-us and --costs")
    cpu = _costs(costs_file, fault_cpu_us, reclaim_cpu_us, write_cpu_us)
    if measure_fault_overhead:
        from swaptrace.timing.calibrate import measure_host_costs

        cpu = measure_host_costs(dev, cpu, measure_write=write_cpu_us is None, fault_runs=fault_overhead_runs)
    result = timing.predict(stream, dev, compute=compute, step_compute_us=step_compute_us,
                            compute_baseline=compute_baseline, trace=trace, cpu=cpu, threads=threads)
    summary = result.summary()
    note = busy_reads_note(dev, summary["threads"], os.cpu_count())
    if note:
        summary["note"] = note
    if save_costs is not None:  # after the prediction: bad input leaves no file
        summary["costs_file"] = str(timing.save_costs(cpu, save_costs, force=force))
    if out is not None:
        timing.write_steps(result, out, {"stream": str(stream), "device_table": dev.to_toml()}, force=force)
        summary["output"] = str(out)
    echo_summary(summary, as_json, _render)
