"""``swaptrace generate``: write the page-access trace of DLRM training steps."""

from __future__ import annotations

import time
from pathlib import Path

import click

from swaptrace.commands.common import (
    MAX_SEED,
    MAX_WORKERS,
    byte_size,
    count,
    echo_summary,
    force_option,
    json_option,
    never_with,
    number,
    only_with,
    progressbar,
    resolve_runtime,
    scheduler_address,
    writes,
)
from swaptrace.core.units import format_bytes
from swaptrace.errors import ConfigError
from swaptrace.workload.choices import ROW_LAYOUTS
from swaptrace.workload.spec import MAX_ALPHA, MAX_STEPS, load_spec


@click.command("generate")
@click.option("--preset", default=None, metavar="NAME", help="Model preset (see `swaptrace presets`); default demo.")
@click.option("--spec", "spec_file", default=None, metavar="FILE.toml", help="Your own model spec instead of a preset.")
@click.option("--steps", type=count(1, MAX_STEPS), default=None, help="Training steps (default: the spec's default_steps).")
@click.option("--seed", type=count(0, MAX_SEED), default=0, show_default=True, help="Seed; with the step number it fixes every draw.")
@click.option("--first-step", type=count(0, MAX_STEPS - 1), default=0, show_default=True, help="Number of the first step (to make ranges apart).")
@click.option("-o", "--output", default=None, metavar="FILE", help="Output Parquet file [default: traces/<preset>.access.parquet].")
@click.option("--alpha", type=number(0, MAX_ALPHA, min_open=True), default=None, help="Zipf exponent (> 0) for every table, overriding the spec.")
@click.option("--optimizer", default=None, metavar="NAME", help="Override the optimizer: sgd, rowwise-adagrad, adagrad, adam.")
@click.option("--page-bytes", type=byte_size(), default="4096", show_default=True, help="Page size: 4096 or 2MiB.")
@click.option("--scatter/--no-scatter", default=None, show_default="scatter", help="Scatter hot ranks over row ids.")
@click.option("--row-layout", type=click.Choice(list(ROW_LAYOUTS)), default=None, show_default="scattered",
              help="Where each table's rows lie: 'scattered' (hot ranks over row ids by a seeded bijection) or "
                   "'packed' (rows in order of expected popularity, so hot rows share pages; docs/designs.md).")
@click.option("--reuse", type=number(0, 1), default=0.0, show_default=True, help="Fraction of indices repeated from the previous step.")
@click.option("--dedup", default="none", show_default=True, metavar="none|step", help="Drop repeated page touches within a step.")
@click.option("--workers", type=count(1, MAX_WORKERS), default=None, metavar="N",
              help="Generate on a local Dask cluster of N processes; writes a dataset folder (needs the dask extra).")
@click.option("--scheduler", type=scheduler_address(), default=None, metavar="tcp://HOST:PORT",
              help="Generate on a running Dask scheduler (default with --workers: $DASK_SCHEDULER_ADDRESS if set).")
@click.option("--runtime", default=None, metavar="FILE.recording.parquet|NAME|FILE.toml",
              help="Trace the whole training process, the start-up as step 0: from a recording of the program "
                   "(`swaptrace capture --record`; recommended) or a runtime profile (pytorch-cpu, or a file "
                   "from `swaptrace runtime-profile`).")
@click.option("--parts", type=count(1, 1 << 20), default=None, help="--workers, --scheduler: step ranges (part files) of a dataset [default: 4 per worker].")
@force_option
@json_option
@only_with("--parts", "--workers", "--scheduler", why="a dataset is written only on Dask")
@never_with("--runtime", "--workers", "--scheduler", why="a process trace is written as one file")
@writes(("output",), ("spec_file", "preset", "runtime"))
def command(*, preset, spec_file, steps, seed, first_step, output, alpha, optimizer, page_bytes, scatter, row_layout,
            reuse, dedup, workers, scheduler, parts, runtime, force, as_json) -> None:
    """Generate a page-level access trace of DLRM training steps (Parquet).

    \b
    Examples:
      swaptrace generate --preset demo --steps 200 --seed 0 -o traces/demo.access.parquet
      swaptrace generate --spec my-model.toml --alpha 1.15 --page-bytes 2MiB -o traces/mine.access.parquet
      swaptrace generate --preset demo --row-layout packed -o traces/demo-packed.access.parquet
      swaptrace generate --preset rm2 --steps 2000 --workers 2 -o traces/rm2.access.parquet   # a dataset folder
      swaptrace generate --preset tiny --runtime tiny.recording.parquet -o traces/tiny-process.access.parquet
      swaptrace generate --preset tiny --runtime pytorch-cpu -o traces/tiny-process.access.parquet

    With --workers or --scheduler the output is a folder of part files, one
    per step range, with the same rows as the single file; every command that
    reads a trace reads it as it reads a file.
    """
    if preset is not None and spec_file is not None:
        raise ConfigError("give either --preset or --spec, not both")
    spec = load_spec(spec_file if spec_file is not None else (preset or "demo"))
    if row_layout is not None and scatter is not None and ROW_LAYOUTS[row_layout] != scatter:
        raise ConfigError(f"--row-layout {row_layout} contradicts --{'' if scatter else 'no-'}scatter; give one")
    scatter = ROW_LAYOUTS[row_layout] if row_layout is not None else (True if scatter is None else scatter)
    if dedup not in ("none", "step"):
        raise ConfigError(f"dedup: must be 'none' or 'step', got {dedup!r}")
    out = output if output is not None else Path("traces") / f"{spec.name}.access.parquet"
    n_steps = spec.default_steps if steps is None else steps
    started = time.perf_counter()
    options = dict(steps=n_steps, seed=seed, first_step=first_step, page_bytes=page_bytes,
                   alpha=alpha, optimizer=optimizer, scatter=scatter, reuse=reuse,
                   dedup=None if dedup == "none" else dedup, force=force)
    if runtime is not None:  # a recording or a profile, checked before generating
        options["runtime"] = resolve_runtime(runtime)
    # the heavy modules load only now that every option has been read
    from swaptrace.core.traceio import open_trace
    from swaptrace.workload.generate import generate_trace

    with progressbar(max(n_steps, 0), "generating steps") as bar:
        if workers is not None or scheduler is not None:
            from swaptrace.parallel.generate import generate_dataset

            path = generate_dataset(spec, out, workers=workers, scheduler=scheduler, parts=parts,
                                    progress=bar.update, **options)
        else:
            path = generate_trace(spec, out, progress=bar.update, **options)
    seconds = time.perf_counter() - started
    meta = open_trace(path, "access").meta
    summary = meta["summary"]
    echo_summary(
        {
            "output": str(path),
            "preset": meta["preset"],
            "steps": meta["steps"],
            "accesses": summary["accesses"],
            "reads": summary["reads"],
            "writes": summary["writes"],
            "unique_pages": summary["unique_pages"],
            "footprint": f"{format_bytes(meta['footprint_bytes'])} ({meta['footprint_pages']} pages of {meta['page_bytes']} B)",
            "seconds": round(seconds, 3),
            "accesses_per_s": round(summary["accesses"] / seconds) if seconds > 0 else None,
        },
        as_json,
    )
