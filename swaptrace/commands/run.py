"""``swaptrace run``: the whole pipeline into one folder."""

from __future__ import annotations

import time

import click

from swaptrace.commands.common import (
    MAX_RUNTIME_S,
    MAX_SEED,
    byte_size,
    count,
    never_with,
    number,
    progressbar,
    resolve_runtime,
    writes,
)
from swaptrace.core.units import parse_bytes
from swaptrace.errors import ConfigError
from swaptrace.workload.spec import MAX_STEPS


@click.command("run")
@click.option("--preset", default="demo", show_default=True, help="Preset name or a model spec .toml file.")
@click.option("--steps", type=count(1, MAX_STEPS), default=None, help="Training steps (default: the preset's default_steps).")
@click.option("--seed", type=count(0, MAX_SEED), default=0, show_default=True)
@click.option("--memory", type=byte_size(), default=None, help="DRAM budget in bytes, e.g. 256MiB (default: --memory-fraction).")
@click.option("--memory-fraction", type=number(0, 1, min_open=True), default=None, help="DRAM budget as a fraction of the footprint [default: 0.5].")
@click.option("--runtime", default=None, metavar="FILE.recording.parquet|NAME|FILE.toml",
              help="Model the whole training process, start-up included: a recording of the program (swaptrace "
                   "capture --record; its threads share each step in the time stage) or a runtime profile "
                   "(pytorch-cpu, or a runtime-profile TOML).")
@click.option("--policy", default="linux", show_default=True, help="Emulator residency policy: linux, lru, clock.")
@click.option("--readahead", default="vma", show_default=True, help="Swap readahead: vma, cluster, none.")
@click.option("--device", default="nvme-tlc", show_default=True, help="SSD model preset or .toml file.")
@click.option("--ssd-capacity", type=byte_size(), default=None,
              help="User capacity of the modelled SSD [default: the swap device rounded up to a GiB].")
@click.option("--no-fio", is_flag=True, help="Skip the fio stages.")
@click.option("--fio-profile", is_flag=True,
              help="Also run fio's queue-depth profile jobs (~2 min) so the time model predicts on this disk.")
@click.option("--no-thesis", is_flag=True, help="Skip the SSD model's request-size and sequential-write sweep.")
@click.option("--fio-target", default=None, help="File for fio to use [default: /tmp/swaptrace-fio.dat].")
@click.option("--fio-size", type=byte_size(), default="256MiB", show_default=True, help="Bytes of the fio target to use.")
@click.option("--fio-runtime", type=count(1, MAX_RUNTIME_S), default=None,
              help="Seconds per time-based fio job [default: 3; 1 with --first-look].")
@click.option("--first-look", is_flag=True,
              help="A first look in a few minutes (make demo): fio jobs of 1 s, run on the disk while the SSD "
                   "model's stages run on the CPU, the thesis's experiments on the model's small drive only; the "
                   "report names what it left out and the command that runs it.")
@click.option("--designs", is_flag=True,
              help="Also compare the swap designs at this budget (swaptrace designs; into DIR/designs).")
@click.option("--time-costs", default=None, type=click.Path(dir_okay=False),
              help="Host-costs TOML for the time stage (swaptrace time --measure-fault-overhead --save-costs FILE) "
                   "[default: in-process micro-benchmarks, lower bounds].")
@click.option("-o", "--output", "out", default=None, type=click.Path(file_okay=False),
              help="Output folder [default: traces/PRESET].")
@click.option("--force", is_flag=True, help="Rerun every stage even if its inputs and parameters are unchanged.")
@never_with("--fio-profile", "--no-fio", why="it runs fio")
@never_with("--fio-target", "--no-fio")
@never_with("--fio-size", "--no-fio")
@never_with("--fio-runtime", "--no-fio")
@writes(("out", "fio_target"), ("preset", "time_costs", "device", "runtime"))
def command(*, preset, steps, seed, memory, memory_fraction, runtime, policy, readahead, device, ssd_capacity, no_fio, fio_profile,
            no_thesis, fio_target, fio_size, fio_runtime, first_look, designs, time_costs, out, force):
    """Run generate → mrc → emulate → ssd → fio jobs → fio run → report.

    Each stage's output lands in the folder; a rerun skips stages whose
    inputs and parameters are unchanged (recorded in DIR/pipeline.json).

    \b
    Example:
      swaptrace run --preset demo -o traces/demo/
      swaptrace run --preset demo --first-look -o traces/demo/
      swaptrace run --preset tiny --memory 16MiB --no-fio --first-look -o traces/tiny/
      swaptrace run --preset my-model.toml --runtime my.recording.parquet --memory 600MiB -o traces/mine/
    """
    from swaptrace.pipeline.run import PipelineOptions, run_pipeline
    from swaptrace.timing.model import load_costs
    from swaptrace.workload.spec import load_spec

    if designs and runtime is not None:  # not an option left unread: a stage that cannot take the trace
        raise ConfigError("--designs does not go with --runtime: the swap designs do not replay a process trace's "
                          "alloc and free events yet; leave one of them out")
    name = load_spec(preset).name  # fails early, with one line, on an unknown preset
    opts = PipelineOptions(
        preset=preset,
        runtime=runtime,
        runtime_model=resolve_runtime(runtime) if runtime is not None else None,
        steps=steps,
        seed=seed,
        memory_bytes=parse_bytes(memory, "--memory") if memory is not None else None,
        memory_fraction=memory_fraction,
        policy=policy,
        readahead=readahead,
        device=device,
        ssd_capacity_bytes=parse_bytes(ssd_capacity, "--ssd-capacity") if ssd_capacity is not None else None,
        fio=not no_fio,
        fio_target=fio_target,
        fio_size_bytes=parse_bytes(fio_size, "--fio-size"),
        fio_runtime_s=fio_runtime if fio_runtime is not None else (1 if first_look else 3),
        fio_profile=fio_profile,
        thesis=not no_thesis,
        first_look=first_look,
        overlap=first_look,
        designs=designs,
        time_costs=None if time_costs is None else load_costs(time_costs),
    )
    folder = out or f"traces/{name}"
    started = time.monotonic()
    result = run_pipeline(opts, folder, force=force, announce=lambda line: click.echo(line, err=True),
                          progress=lambda length, label: progressbar(length, f"      {label}"))
    wall = time.monotonic() - started
    # The stages' own times add up to more than the wall when fio ran beside the model (--first-look).
    staged = sum(result.seconds.values())
    beside = f" ({staged:.0f} s of stages, fio beside the others)" if staged > wall + 1 else ""
    click.echo(f"{folder}: ran {', '.join(result.ran) or 'nothing'} in {wall:.0f} s{beside}; "
               f"report: {folder.rstrip('/')}/report/report.md")
