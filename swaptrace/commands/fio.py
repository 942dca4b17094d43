"""``swaptrace fio``: fio jobs from a swap I/O stream, a safe runner, import and comparison."""

from __future__ import annotations

import click

from swaptrace.commands.common import (
    MAX_IODEPTH,
    MAX_RUNTIME_S,
    byte_size,
    count,
    echo_summary,
    folder_files,
    force_option,
    json_option,
    number,
    only_with,
    writes,
)
from swaptrace.core.units import format_bytes, parse_bytes
from swaptrace.errors import ConfigError
from swaptrace.fio.choices import IOENGINES


def _names(text: str, what: str) -> tuple[str, ...]:
    """A comma-separated list with at least one name (``--jobs ""`` must not mean every job)."""
    names = tuple(s.strip() for s in text.split(","))
    if not all(names):
        raise ConfigError(f"{what}: give comma-separated names with none empty, got {text!r}")
    return names


@click.group("fio")
def command() -> None:
    """Validate the model on a real disk with fio.

    \b
    Example:
      swaptrace fio jobs traces/demo/swapio.parquet -o fio_jobs/demo
      swaptrace fio run fio_jobs/demo --target /tmp/swaptrace-fio.dat --size 1GiB
      swaptrace fio compare fio_jobs/demo/runs/latest --model model.json
    """


@command.command("jobs")
@click.argument("stream", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out", required=True, type=click.Path(file_okay=False), help="Job folder to write.")
@click.option("--size", "size", type=byte_size(), default=None, help="Target size the replay is mapped onto (default: stream extent, <= 1GiB).")
@click.option("--max-requests", default=100_000, show_default=True, type=count(1, 1 << 31), help="Cap on requests in the replay log.")
@click.option("--ioengine", default="psync", show_default=True, type=click.Choice(IOENGINES), help="fio ioengine of every job.")
@click.option("--iodepth", default=1, show_default=True, type=count(1, MAX_IODEPTH), help="fio iodepth of every job.")
@click.option("--buffered", is_flag=True, help="Use the page cache (direct=0) instead of O_DIRECT.")
@click.option("--sweep", default="4k,8k,16k,32k,64k,128k,256k,512k,1m", show_default=True,
              help="Fixed request sizes of the sweep, comma-separated.")
@force_option
@json_option
@writes(("out",), ("stream",))
def jobs_cmd(*, stream, out, size, max_requests, ioengine, iodepth, buffered, sweep, force, as_json) -> None:
    """Write a folder of fio jobs (replay, synthetic, experiments) for STREAM.

    The folder holds one .fio file per job, the replay iolog, manifest.json
    and README.md describing each job and the SWAPTRACE_* variables it reads
    (with the values to give them to run it by hand).

    \b
    Example:
      swaptrace fio jobs traces/demo/swapio.parquet -o fio_jobs/demo
    """
    from swaptrace.fio import jobs

    folder = jobs.build_jobs(
        stream,
        out,
        size_bytes=parse_bytes(size, "--size") if size is not None else None,
        max_requests=max_requests,
        ioengine=ioengine,
        iodepth=iodepth,
        direct=not buffered,
        sweep_sizes=_names(sweep, "--sweep"),
        force=force,
    )
    m = folder.manifest
    echo_summary(
        {
            "folder": str(folder.path),
            "jobs": len(m["jobs"]) + 1,
            "replay_requests": m["replay"]["requests"],
            "replay_truncated": m["replay"]["truncated"],
            "min_target": format_bytes(m["min_target_bytes"]),
            "remap": "wrap" if m["remap"]["wrap"] else "none",
        },
        as_json,
    )


@command.command("run")
@click.argument("jobs_dir", type=click.Path(file_okay=False))
@click.option("--target", required=True, type=click.Path(), help="File (created and filled) or block device.")
@click.option("--size", type=byte_size(), default="1GiB", show_default=True, help="Bytes of the target to use.")
@click.option("--runtime", default=3, show_default=True, type=count(1, MAX_RUNTIME_S),
              help="Seconds per time-based job (times each job's factor; replays at most 10x).")
@click.option("--jobs", "only", default=None, help="Comma-separated job names to run (default: all).")
@click.option("-o", "--output", "out", default=None, type=click.Path(file_okay=False),
              help="Results folder (default: JOBS_DIR/runs/<UTC time>).")
@click.option("--no-precondition", is_flag=True, help="Skip the sequential fill before the experiments.")
@click.option("--allow-device", is_flag=True, help="Allow a block device target (checked: unmounted, no swap, no signature).")
@click.option("--force", is_flag=True,
              help="Overwrite a file not made by swaptrace or an existing --output; with --allow-device, ignore signatures.")
@click.option("--dry-run", is_flag=True, help="Check and print the fio commands; run and write nothing.")
@click.option("--fio", "fio_path", default=None, help="fio executable (default: fio on PATH).")
@click.option("--steady", is_flag=True,
              help="SNIA-style preconditioning: fill, then random 4 KiB write rounds until fio detects steady state.")
@click.option("--round", "round_s", default=60, show_default=True, type=count(1, MAX_RUNTIME_S),
              help="--steady: seconds per round (fio's window is 5 rounds).")
@click.option("--steady-cap", default=14400, show_default=True, type=count(1, 7 * 86400),
              help="--steady: time cap of the rounds, seconds (at least one round).")
@click.option("--ss-ramp", default=0, show_default=True, type=count(0, 86400), help="--steady: fio's ss_ramp, seconds.")
@click.option("--fill-cap", default=14400, show_default=True, type=count(1, 7 * 86400),
              help="--steady: time cap of each sequential fill, seconds.")
@click.option("--purge", is_flag=True,
              help="With --steady: discard the whole device (needs --allow-device) or punch the file first.")
@click.option("--capacity-fraction", type=number(0, 1, min_open=True), default=None,
              help="Use this fraction of the target (a device's size, or the file's) instead of --size.")
@click.option("--busy-cpus", default=0, show_default=True, type=count(0, 4096),
              help="Keep N CPUs busy (fio's cpuio engine) beside every measurement: the device as a program "
                   "that occupies them sees it (docs/timing.md, \"Busy CPUs\").")
@only_with("--round", "--steady")
@only_with("--steady-cap", "--steady")
@only_with("--ss-ramp", "--steady")
@only_with("--fill-cap", "--steady", why="without it the fill is not capped")
@only_with("--purge", "--steady", why="the purge is the first step of SNIA preconditioning")
@writes(("out", "target"), ("fio_path",), folder_files("jobs_dir", "JOBS_DIR", recursive=False))
def run_cmd(*, jobs_dir, target, size, runtime, only, out, no_precondition, allow_device, force, dry_run, fio_path,
            steady, round_s, steady_cap, ss_ramp, fill_cap, purge, capacity_fraction, busy_cpus) -> None:
    """Run a job folder on TARGET and write parsed results.

    \b
    Example:
      swaptrace fio run fio_jobs/demo --target /tmp/swaptrace-fio.dat --size 1GiB
      swaptrace fio run fio_jobs/demo --target /dev/nvme1n1 --allow-device --size 64GiB --runtime 60
      swaptrace fio run fio_jobs/demo --target /tmp/swaptrace-fio.dat --busy-cpus 2 -o fio_jobs/demo/runs/busy
      swaptrace fio run fio_jobs/lab --target /dev/nvme1n1 --allow-device --steady --purge \\
          --capacity-fraction 0.25 --steady-cap 7200 -o fio_jobs/lab/runs/nvme1
    """
    from swaptrace.fio import runner
    from swaptrace.fio.steady import SteadyOptions

    if not str(target).strip():
        raise ConfigError("--target: empty; give a file (e.g. /tmp/swaptrace-fio.dat) or a block device")
    ss = SteadyOptions(round_s=round_s, cap_s=steady_cap, ramp_s=ss_ramp, fill_cap_s=fill_cap,
                       purge=purge) if steady else None
    size_bytes = parse_bytes(size, "--size")
    if capacity_fraction is not None:
        size_bytes = runner.fraction_of_target(target, capacity_fraction)
    outcome = runner.run_jobs(
        jobs_dir,
        target,
        size_bytes=size_bytes,
        runtime_s=runtime,
        out_dir=out,
        only=list(_names(only, "--jobs")) if only is not None else None,
        allow_device=allow_device,
        force=force,
        dry_run=dry_run,
        precondition=not no_precondition,
        fio=fio_path,
        echo=lambda line: click.echo(line, err=not dry_run),
        steady=ss,
        busy_cpus=busy_cpus,
    )
    if dry_run:
        return
    from swaptrace.figures.fio import save_run_figures

    save_run_figures(outcome.out_dir)
    click.echo((outcome.out_dir / "results.txt").read_text(), nl=False)
    click.echo(f"results: {outcome.results_path}")


@command.command("results")
@click.argument("results", type=click.Path())
@json_option
@writes((), ("results",))
def results_cmd(results, as_json) -> None:
    """Print the table of a run (a run folder or its results.parquet).

    \b
    Example:
      swaptrace fio results fio_jobs/demo/runs/20260101T000000Z
    """
    from swaptrace.fio import results as res

    rows, meta = res.read_results(results)
    if as_json:
        clean = [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in rows]
        echo_summary({"rows": clean, "ratios": meta.get("ratios"), "run": meta.get("run")}, True)
    else:
        click.echo(res.format_table(rows, meta.get("ratios"), ((meta.get("run") or {}).get("preconditioning") or {})
                                    .get("steady")))


@command.command("import")
@click.argument("iolog", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False), help="swapio Parquet to write.")
@click.option("--file", "file_name", default=None, help="Keep requests to this file name (logs naming several files).")
@click.option("--page-bytes", default=4096, show_default=True, type=count(512, 1 << 30), help="Page size recorded in the metadata.")
@click.option("--device-size", type=byte_size(positive=True), default=None, help="Size of the recorded device (default: end of the furthest request).")
@force_option
@json_option
@writes(("out",), ("iolog",), neither={"file_name": "a file name the iolog's lines are matched against, never opened"})
def import_cmd(*, iolog, out, file_name, page_bytes, device_size, force, as_json) -> None:
    """Convert a fio v2/v3 iolog (e.g. from write_iolog) into a swap I/O stream.

    \b
    Example:
      swaptrace fio import job.iolog -o traces/lab.swapio.parquet
    """
    from swaptrace.core import traceio
    from swaptrace.fio import iolog as iol

    path = iol.import_iolog(
        iolog, out, file=file_name, page_bytes=page_bytes,
        device_bytes=parse_bytes(device_size, "--device-size", positive=True) if device_size is not None else None,
        force=force,
    )
    meta = traceio.open_trace(path, "swapio").meta
    s = meta["summary"]
    echo_summary(
        {"output": str(path), "requests": sum(s["requests"].values()), "bytes_read": s["bytes_read"],
         "bytes_written": s["bytes_written"], "duration_us": meta["duration_us"], "iolog_version": meta["iolog"]["version"]},
        as_json,
    )


@command.command("compare")
@click.argument("results", type=click.Path())
@click.option("--model", "model_path", default=None, type=click.Path(dir_okay=False),
              help="SSD model JSON (swaptrace ssd thesis --json).")
@json_option
@writes((), ("results", "model_path"))
def compare_cmd(results, model_path, as_json) -> None:
    """Measured vs modelled ratios (request-size gain, sequential-write gain).

    \b
    Example:
      swaptrace ssd thesis --json > model.json
      swaptrace fio compare fio_jobs/demo/runs/20260101T000000Z --model model.json
    """
    from swaptrace.fio import compare
    from swaptrace.fio import results as res

    rows, meta = res.read_results(results)
    model = compare.load_model(model_path) if model_path else None
    table = compare.compare_with_model(rows, meta, model)
    if as_json:
        echo_summary({"ratios": table, "run": {k: meta.get("run", {}).get(k) for k in ("target", "size_bytes", "fio")}}, True)
        return
    click.echo(compare.format_comparison(table, (meta.get("run") or {}).get("target")))


@command.command("profile")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False), help="Device profile TOML to write.")
@click.option("--name", default=None, help="Name of the device in the profile (default: the run folder's).")
@click.option("--reads-from", "reads_from", default=None, type=click.Path(file_okay=False),
              help="Take the read latencies from this run of the same jobs (e.g. one with --busy-cpus: "
                   "docs/timing.md, \"Busy CPUs\").")
@force_option
@writes(("out",), ("run_dir", "reads_from"), neither={"name": "a name written into the profile"})
def profile_cmd(run_dir, out, name, reads_from, force) -> None:
    """Device profile (mean latency by request size and queue depth) of a `fio run` folder, for `swaptrace time`.

    \b
    Example:
      swaptrace fio run fio_jobs/demo --target /tmp/swaptrace-fio.dat -o fio_jobs/demo/runs/disk
      swaptrace fio profile fio_jobs/demo/runs/disk -o disk.toml
      swaptrace time traces/demo/swapio.parquet --device disk.toml
      swaptrace fio profile fio_jobs/demo/runs/disk --reads-from fio_jobs/demo/runs/busy -o disk-busy-reads.toml
    """
    from swaptrace.timing import device_profile as profile

    prof = profile.write_profile(run_dir, out, name=name, force=force, reads_from=reads_from)
    click.echo(f"wrote {out}\n" + profile.describe(prof))
