"""``swaptrace capture``: the same trace under the real Linux kernel (root only)."""

from __future__ import annotations

import click

from swaptrace.commands.common import (
    byte_size,
    count,
    echo_summary,
    force_option,
    json_option,
    never_with,
    number,
    only_with,
    progress_enabled,
    progressbar,
    writes,
)
from swaptrace.core.units import format_bytes, parse_bytes
from swaptrace.errors import ConfigError

#: above this (or 1 % of the budget) the model had noticeably more room than its budget
ROOM_GAIN_WARN_BYTES = 1 << 20


def _render(result) -> str:
    s = result.summary
    k = result.kernel
    lines = [
        f"wrote {result.path}",
        f"budget        {format_bytes(result.memory_bytes)} + child baseline {format_bytes(result.baseline_bytes)}"
        f" + page tables {format_bytes(k['page_table_bytes'])} = cgroup limit {format_bytes(result.limit_bytes)}",
        f"pages in/out  {s['pages_in']} / {s['pages_out']}   (pswpin/pswpout {s['pswpin']} / {s['pswpout']})",
        f"requests      read {s['requests']['read']}, write {s['requests']['write']},"
        f" discard {s['requests']['discard']}",
        f"major faults  {s['major_faults']}",
        f"replay time   {k['total_us'] / 1e6:.2f} s",
    ]
    lines += _stall_line(k)
    rc = k.get("reclaim")
    if rc:
        t = rc["totals"]
        lines.append(f"reclaim       {t['calls']} calls: scanned {t['scanned']}, reclaimed {t['reclaimed']}, "
                     f"activated {t['activated']}, deactivated {t['deactivated']}; {t['flushes']} stats flushes")
        if rc.get("missing_events"):
            lines.append("note: this kernel lacks " + ", ".join(rc["missing_events"]) + "; their counters are 0")
    if result.slowdown is not None:
        lines.append(f"slowdown      {result.slowdown:.2f}x vs. the same replay without a memory limit"
                     f" ({k['unlimited']['total_us'] / 1e6:.2f} s)")
    gain = k.get("room_gain_bytes")
    if gain is not None and gain > max(ROOM_GAIN_WARN_BYTES, result.memory_bytes // 100):
        lines.append(f"WARNING: the rest of the process gave back {format_bytes(gain)} during the run and the model"
                     " used it: this capture is of a larger budget than asked (run it again)")
    if gain is not None and -gain > max(ROOM_GAIN_WARN_BYTES, result.memory_bytes // 100):
        lines.append(f"WARNING: the rest of the process took {format_bytes(-gain)} more during the run than at its"
                     " baseline: the model had that much less than its budget")
    busy = max(k.get("loadavg_start", 0.0), k.get("loadavg_end", 0.0)) - 1.0  # the replay itself is one
    if busy >= 0.5 * (k.get("cpus") or 1):
        lines.append(f"WARNING: the machine was busy (load average {k.get('loadavg_end')}); other work changes when "
                     "the kernel's writes complete and so the stream: capture on an idle machine")
    if result.lost_events:
        lines.append(f"WARNING: the trace buffer lost {result.lost_events} events; the stream is incomplete"
                     " (raise --buffer-size)")
    if result.malformed_lines:
        lines.append(f"note: {result.malformed_lines} trace lines could not be parsed")
    if result.removed_leftovers:
        lines.append("removed leftovers of an earlier capture: " + "; ".join(result.removed_leftovers))
    return "\n".join(lines)


def _stall_line(k: dict) -> list[str]:
    """The limited run's task delays and load in one line (docs/capture.md "Stalls"), if recorded."""
    total = ((k.get("delays") or {}).get("limited") or {}).get("total")
    load = (k.get("load") or {}).get("limited") or {}
    if not total:
        return []
    share = load.get("other_cpu_share")
    return [f"stalls        cpu wait {total['cpu_us'] / 1e3:.0f} ms, block I/O {total['blkio_us'] / 1e3:.0f} ms, "
            f"swap-in {total['swapin_us'] / 1e3:.0f} ms, reclaim {total['freepages_us'] / 1e3:.0f} ms; load "
            f"{load.get('load_before')} -> {load.get('load_after')}"
            + ("" if share is None else f", other processes {share:.0%} of the CPUs")]


def _mib(value) -> str:
    return "n/a" if value is None else format_bytes(int(value))


def _phase_line(label: str, run: dict | None) -> str:
    if run is None:
        return f"{label:<13} (not run)"
    times = f"{run['wall_s']:.2f} s"
    if run["startup_s"] is not None:
        times += f" (start-up {run['startup_s']:.2f} s, training {run['training_s']:.2f} s, {run['marks']} steps)"
    peak = run["peak"]
    parts = []
    for phase in ("startup", "training") if peak["startup"] or peak["training"] else ("run",):
        p = peak[phase]
        if p:
            parts.append(f"{phase} anon {_mib(p['anon'])}, file {_mib(p['file'])}, swap {_mib(p['swap'])}")
    return f"{label:<13} {times}; peak {_mib(run['peak_bytes'])}: " + "; ".join(parts)


def _render_command(result) -> str:
    from swaptrace.capture.command import command_name

    s, k = result.summary, result.kernel
    lines = [
        f"wrote {result.path}",
        f"command       {command_name(k['command'])}",
        f"limit         {format_bytes(result.limit_bytes)} (the whole process tree)",
        f"pages in/out  {s['pages_in']} / {s['pages_out']}   (pswpin/pswpout {s['pswpin']} / {s['pswpout']})",
        f"requests      read {s['requests']['read']}, write {s['requests']['write']}, discard {s['requests']['discard']}",
        f"major faults  {s['major_faults']}",
        _phase_line("unlimited", k["unlimited"]),
        _phase_line("limited", k["limited"]),
    ]
    if s.get("startup") is not None:
        lines.append(f"start-up I/O  pages in/out {s['startup']['pages_in']} / {s['startup']['pages_out']}; "
                     f"training {s['training']['pages_in']} / {s['training']['pages_out']}")
    if k["slowdown"] is not None:
        what = "training" if k["slowdown_training"] is not None else "wall"
        lines.append(f"slowdown      {k['slowdown']:.2f}x ({what} time, limited / unlimited)")
    ref = (k["unlimited"] or {}).get("referenced")
    if ref:
        lines.append(f"anon memory   {_mib(ref['anon_resident_startup_bytes'])} resident after start-up, "
                     f"{_mib(ref['anon_referenced_training_bytes'])} referenced during training"
                     + (f" ({ref['why_null']})" if ref.get("why_null") else ""))
    lines += _stall_line(k)
    lines += [f"WARNING: {w}" for w in k["warnings"]]
    if result.lost_events:
        lines.append(f"WARNING: the trace buffer lost {result.lost_events} events; the stream is incomplete"
                     " (raise --buffer-size)")
    if result.removed_leftovers:
        lines.append("removed leftovers of an earlier capture: " + "; ".join(result.removed_leftovers))
    return "\n".join(lines)


def _command_json(result) -> dict:
    k = result.kernel
    return {"path": str(result.path), "command": k["command"], "memory_bytes": result.memory_bytes,
            "limit_bytes": result.limit_bytes, "baseline_bytes": result.baseline_bytes,
            "slowdown": result.slowdown, "slowdown_wall": k["slowdown_wall"],
            "slowdown_training": k["slowdown_training"], "lost_events": result.lost_events, **result.summary,
            "runs": {"unlimited": k["unlimited"], "limited": k["limited"]},
            "page_cache": k["page_cache"], "reclaim_agents": k["reclaim_agents"], "warnings": k["warnings"]}


class _CaptureCommand(click.Command):
    """``capture`` with an optional ``-- CMD [ARGS]...``: what follows the first ``--`` is the program to run.

    Click drops the ``--`` itself, so a one-word program after it could not be told from TRACE; the
    words after it are taken off before click parses the options (kept in ``ctx.meta``).
    """

    def parse_args(self, ctx, args):
        ctx.meta["swaptrace.capture.argv"] = None
        if "--" in args:
            cut = args.index("--")
            ctx.meta["swaptrace.capture.argv"] = list(args[cut + 1:])
            args = args[:cut]
        return super().parse_args(ctx, args)


def _cleanup_alone(ctx: click.Context, trace) -> None:
    """``--cleanup`` does one thing: refuse anything else asked beside it rather than ignore it."""
    from click.core import ParameterSource

    asked = [p.opts[-1] for p in ctx.command.params
             if p.name not in ("cleanup", "work_dir", "as_json", "trace")
             and ctx.get_parameter_source(p.name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)]
    if trace is not None:
        asked.insert(0, "TRACE")
    if ctx.meta.get("swaptrace.capture.argv"):
        asked.append("-- CMD")
    if asked:
        raise ConfigError(f"--cleanup only removes what killed captures left behind: it takes no {', '.join(asked)}")


def _which_target(trace, argv) -> None:
    if trace is not None and argv is not None:
        raise ConfigError("give TRACE or -- CMD [ARGS]..., not both")
    if trace is None and argv is None:
        raise ConfigError("give TRACE (an access trace to replay) or -- CMD [ARGS]... (a program to run), or --cleanup")
    if argv is not None and not argv:
        raise ConfigError("nothing after --: give the program to run")


def _record_lines(meta: dict, table: list[dict]) -> str:
    from swaptrace.capture.command import command_name

    times = ", ".join(f"{t / 1e6:.2f}" for t in meta["step_times_us"][:8]) + (" ..." if len(meta["step_times_us"]) > 8 else "")
    exit_at = "not told apart" if meta["exit_start_us"] is None else f"from {meta['exit_start_us'] / 1e6:.2f} s"
    fac = meta["facilities"]
    lines = [f"command       {command_name(meta['command'])}",
             f"steps         {meta['steps']} from {meta['step_source']} (start-up is step 0; boundaries at s: {times}); "
             f"exit phase {exit_at}" + (f" ({meta['step_note']})" if meta.get("step_note") else ""),
             f"run           {meta['duration_us'] / 1e6:.2f} s; smaps read {fac['smaps_readings']} times "
             f"({fac['smaps_seconds']:.3f} s); {meta['faults_not_anonymous']} faults on file memory dropped",
             f"{'step':>6} {'alloc':>9} {'freed':>9} {'touched':>9} {'written':>9} {'referenced':>10}"
             + (f" {'retouched':>9} {'dirty':>9}" if meta.get("pageout") else "") + "  (4 KiB pages)"]
    for row in table:
        ref = "-" if row["referenced_pages"] is None else row["referenced_pages"]
        lines.append(f"{row['step']!s:>6} {row['allocated_pages']:>9} {row['freed_pages']:>9} "
                     f"{row['first_touched_pages']:>9} {row['first_written_pages']:>9} {ref!s:>10}"
                     + (f" {row['retouched_pages']:>9} {row['dirty_pages']:>9}" if meta.get("pageout") else ""))
    warning = (fac.get("pageout") or {}).get("warning")
    if warning:
        lines.append(f"WARNING: {warning}")
    if not meta.get("pageout"):
        # what the default leaves out, measured on the real-training study (docs/capture.md)
        lines.append("note: without --pageout the pages a step uses again are inferred from smaps' Referenced "
                     "counts; --pageout records them (study: 33 of 40 limits within +-15 % against 20)")
    if meta["lost_events"]:
        lines.append(f"WARNING: the trace buffer lost {meta['lost_events']} events (raise --buffer-size)")
    return "\n".join(lines)


def _record(argv, out, *, step_line, steps, pageout, options, as_json: bool) -> None:
    """The ``--record -- CMD`` form: run the program once without a limit and record its memory."""
    import sys

    from swaptrace.capture.recorder import RecordRequest, record_program
    from swaptrace.capture.recording import step_table

    if options.swap_bytes is not None and not pageout:
        raise ConfigError("--swap-size: a recording uses swap only with --pageout")
    err = getattr(sys.stderr, "buffer", None) or sys.stderr
    # with --json, stdout holds only the summary: the program's stdout goes to stderr
    req = RecordRequest(argv=list(argv), out=out, step_line=step_line, steps=steps, force=options.force,
                        buffer_kb=options.buffer_kb, work_base=options.work_base, timeout_s=options.timeout_s,
                        pageout=pageout, swap_bytes=options.swap_bytes,
                        stdout=err if as_json else getattr(sys.stdout, "buffer", None) or sys.stdout, stderr=err)
    result = record_program(req)
    table = step_table(result.path)
    if as_json:
        echo_summary({"path": str(result.path), **result.meta, "per_step": table}, True)
    else:
        click.echo(f"wrote {result.path}")
        click.echo(_record_lines(result.meta, table))


def _capture_command(argv, out, options, *, window_s: float, sample_ms: float, as_json: bool,
                     trace_reclaim: bool) -> None:
    """The ``-- CMD`` form: run the program, print what it did."""
    from swaptrace.capture.command import capture_command

    say = (lambda text: click.echo(text, err=True)) if progress_enabled() else None
    result = capture_command(argv, out, options=options, window_s=window_s, sample_interval_s=sample_ms / 1e3,
                             say=say, trace_reclaim=trace_reclaim)
    if as_json:
        echo_summary(_command_json(result), True)
        for w in result.kernel["warnings"]:  # the JSON has them too; a person running it should see them
            click.echo(f"warning: {w}", err=True)
    else:
        click.echo(_render_command(result))


@click.command("capture", cls=_CaptureCommand)
@click.argument("trace", type=click.Path(dir_okay=False), required=False)
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), help="swapio file to write (source: kernel).")
@click.option("--memory", "memory", type=byte_size(positive=True), help="TRACE: budget for the model's pages, e.g. 64MiB (on top of the child's "
              "baseline). -- CMD: the cgroup's whole limit (the program's whole process tree).")
@click.option("--memory-fraction", type=number(0, 1, min_open=True),
              help="TRACE: budget as a fraction of the trace's footprint, e.g. 0.5. -- CMD: the limit as F x the "
                   "unlimited run's peak usage (its cgroup's peak counter, page cache included).")
@click.option("--window", "window_s", type=number(0, 1e6, min_open=True), default=1.0, show_default=True,
              help="-- CMD: steps of a program that writes no step marker are windows of this many seconds.")
@click.option("--sample-ms", type=number(1, 10000), default=25.0, show_default=True,
              help="-- CMD: read the cgroup's memory.stat this often (and at every step marker).")
@click.option("--compute", type=click.Choice(["none", "mlp"]), default="none", show_default=True,
              help="TRACE: run the preset's dense MLP forward/backward (numpy) between steps.")
@click.option("--baseline/--no-baseline", "unlimited_run", default=True, show_default=True,
              help="Also replay without a memory limit, for the slowdown ratio.")
@click.option("--lock-baseline/--no-lock-baseline", default=True, show_default=True,
              help="TRACE: keep the child's own memory (interpreter, numba) resident, so the budget is the model's.")
@click.option("--swap-size", type=byte_size(positive=True), help="Swap device size (default: footprint + 256MiB).")
@click.option("--rotational", is_flag=True, help="Present the swap device as a disk (cluster readahead) not an SSD.")
@click.option("--work-dir", type=click.Path(file_okay=False), help="Folder for the swap file (default /var/tmp; not tmpfs).")
@click.option("--buffer-size", type=byte_size(positive=True), default="32MiB", show_default=True, help="tracefs ring buffer per CPU.")
@click.option("--timeout", "timeout_s", type=number(0, 1e7, min_open=True), help="Give up if a replay takes longer (seconds).")
@click.option("--raw-trace", type=click.Path(dir_okay=False), help="Also keep the raw ftrace text in this file.")
@click.option("--trace-reclaim", is_flag=True,
              help="Also record the vmscan/memcg reclaim tracepoints of the limited run; counters per step go to the "
                   "metadata (every call in --raw-trace's text).")
@click.option("--record", is_flag=True, help="-- CMD: record the program's memory once, without a limit (mappings, "
              "frees, first touches, referenced pages per step, the kernel memory charged to its cgroup) into a "
              "recording file; no swap, no limit.")
@click.option("--step-line", help="--record: a regular expression; a line of the program's output that matches ends "
              "a step (used when the program writes no step marks).")
@click.option("--steps", "record_steps", type=count(1, 1 << 31),
              help="--record: stop the program (SIGTERM) once this many steps after start-up are recorded.")
@click.option("--pageout", is_flag=True,
              help="--record: page the program out at every reading (a swap area of its own, --swap-size, default "
                   "the machine's RAM), so the pages each window uses fault back in and are recorded exactly.")
@click.option("--wait-quiet", "wait_quiet", type=number(0, 1e4), metavar="LOAD",
              help="Before each run wait (at most --quiet-timeout) until the 1-min load average is <= LOAD, e.g. 0.5.")
@click.option("--quiet-timeout", "quiet_timeout_s", type=number(0, 1e7), default=600.0, show_default=True,
              help="--wait-quiet: the longest wait, in seconds; the run then starts anyway (recorded).")
@click.option("--cleanup", is_flag=True, help="Only remove what killed captures left behind, then exit.")
@force_option
@json_option
@never_with("--memory", "--record", why="a recording runs without a limit")
@never_with("--memory-fraction", "--record", why="a recording runs without a limit")
@never_with("--rotational", "--record", why="a recording uses no swap")
@never_with("--window", "--record", why="a recording finds its steps from marks, --step-line or its allocations")
@never_with("--sample-ms", "--record", why="a recording reads memory at each step")
@never_with("--raw-trace", "--record", why="a recording's file holds its events")
@never_with("--no-baseline", "--record", why="a recording is one unlimited run")
@never_with("--wait-quiet", "--record", why="a recording measures no stalls")
@only_with("--quiet-timeout", "--wait-quiet", why="the longest quiet wait")
@only_with("--compute", "TRACE", why="a replay's option; a program (-- CMD) computes what it computes")
@never_with("--trace-reclaim", "--record", why="a recording runs without a limit: nothing is reclaimed")
@only_with("--lock-baseline", "TRACE", why="a replay's option, not a program's (-- CMD)")
@only_with("--window", "-- CMD", why="a program's steps without markers; a TRACE has its steps")
@only_with("--sample-ms", "-- CMD", why="a program's memory readings")
@only_with("--step-line", "--record", why="a recording's steps")
@only_with("--steps", "--record", why="a recording's steps")
@only_with("--record", "-- CMD", why="it records a program")
@only_with("--pageout", "--record", why="how a recording reads which pages each window uses")
@writes(("out", "raw_trace"), ("trace",), neither={
    "work_dir": "a scratch folder: capture makes its own uniquely named folder in it and removes it"})
def command(*, trace, out, memory, memory_fraction, window_s, sample_ms, compute, unlimited_run, lock_baseline, swap_size,
            rotational, work_dir, buffer_size, timeout_s, raw_trace, trace_reclaim, record, step_line, record_steps,
            pageout, wait_quiet, quiet_timeout_s, cleanup, force, as_json):
    """Record swap I/O under the real kernel: replay TRACE, or run -- CMD (root only).

    Makes a swap file on a loop device, runs a child inside a memory cgroup, records each block
    request on the swap device with the block_rq_issue tracepoint, and undoes all of it. First
    runs the same child once without a limit, for the slowdown.

    TRACE: the child replays every access as a real load or store on
    anonymous memory, in a cgroup limited to its own (locked) baseline plus
    the budget.

    -- CMD [ARGS]...: runs any program with your working directory and
    environment plus SWAPTRACE_MARKER; the limit (--memory, or
    --memory-fraction x the unlimited run's peak usage) holds its whole
    process tree. A program that writes "swaptrace step N" lines to
    $SWAPTRACE_MARKER (swaptrace.mark_step() in Python) gets its start-up
    stored as step 0 and step N as N+1; one that does not gets --window
    time windows. A failing program ends the capture with its exit status.

    --record -- CMD [ARGS]...: runs the program once without any limit and
    records its memory (mappings, frees, first touches of anonymous pages,
    pages referenced per step) into a recording file (no swap, no limit).
    Steps come from its marks, else from output lines matching --step-line,
    else from its repeating allocations (docs/capture.md).

    \b
    Examples:
      sudo swaptrace capture traces/tiny.access.parquet --memory 64MiB \\
          -o traces/tiny.kernel.swapio.parquet
      sudo swaptrace capture --memory 256MiB -o train.kernel.swapio.parquet \\
          -- python train.py --epochs 1
      sudo swaptrace capture --record --step-line 'Finished training it' \\
          -o dlrm.recording.parquet -- python dlrm_s_pytorch.py
      swaptrace capture --cleanup        # after a capture was killed with -9
    """
    if cleanup:
        from swaptrace.capture import check_privileges, cleanup_leftovers

        _cleanup_alone(click.get_current_context(), trace)
        check_privileges()
        removed = cleanup_leftovers(work_dir)
        echo_summary({"removed": removed}, as_json, lambda s: "\n".join(s["removed"]) or "nothing to remove")
        return
    ctx = click.get_current_context()
    argv = ctx.meta.get("swaptrace.capture.argv")
    _which_target(trace, argv)
    if out is None:
        raise ConfigError(f"give -o OUTPUT, the {'recording' if record else 'swapio'} file to write")
    swap_bytes = parse_bytes(swap_size, "--swap-size", positive=True) if swap_size is not None else None
    buffer_kb = parse_bytes(buffer_size, "--buffer-size", positive=True) // 1024
    if buffer_kb < 1:
        raise ConfigError(f"--buffer-size: at least 1 KiB per CPU, got {buffer_size!r}")
    memory_bytes = parse_bytes(memory, "--memory", positive=True) if memory is not None else None
    # the capture machinery loads only once every option has been read
    from swaptrace.capture import CaptureOptions, capture
    from swaptrace.core.traceio import open_trace

    options = CaptureOptions(memory_bytes=memory_bytes, memory_fraction=memory_fraction, unlimited_run=unlimited_run,
                             swap_bytes=swap_bytes, rotational=rotational, work_base=work_dir, buffer_kb=buffer_kb,
                             timeout_s=timeout_s, raw_trace_out=raw_trace, force=force, wait_quiet=wait_quiet,
                             quiet_timeout_s=quiet_timeout_s)
    if record:
        _record(argv, out, step_line=step_line, steps=record_steps, pageout=pageout, options=options, as_json=as_json)
        return
    if argv is not None:
        _capture_command(argv, out, options, window_s=window_s, sample_ms=sample_ms, as_json=as_json,
                         trace_reclaim=trace_reclaim)
        return
    steps = int(open_trace(trace, kind="access").meta.get("steps", 0))
    with progressbar(steps, "replaying") as bar:
        result = capture(trace, out, options, compute=compute, lock_baseline=lock_baseline,
                         trace_reclaim=trace_reclaim, progress=bar.update)
    if as_json:
        echo_summary({"path": str(result.path), "memory_bytes": result.memory_bytes,
                      "baseline_bytes": result.baseline_bytes, "limit_bytes": result.limit_bytes,
                      "slowdown": result.slowdown, "lost_events": result.lost_events, **result.summary}, True)
    else:
        click.echo(_render(result))
