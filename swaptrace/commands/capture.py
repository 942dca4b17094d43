"""``swaptrace capture``: the same trace under the real Linux kernel (root only)."""

from __future__ import annotations

import click

from swaptrace.commands._common import echo_summary, force_option, json_option, number, progressbar, writes
from swaptrace.errors import ConfigError
from swaptrace.traceio import open_trace
from swaptrace.units import format_bytes, parse_bytes

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


@click.command("capture")
@click.argument("trace", type=click.Path(dir_okay=False), required=False)
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), help="swapio file to write (source: kernel).")
@click.option("--memory", "memory", help="Budget for the model's pages, e.g. 64MiB (on top of the child's baseline).")
@click.option("--memory-fraction", type=number(0, 1, min_open=True), help="Budget as a fraction of the trace's footprint, e.g. 0.5.")
@click.option("--compute", type=click.Choice(["none", "mlp"]), default="none", show_default=True,
              help="Run the preset's dense MLP forward/backward (numpy) between steps.")
@click.option("--baseline/--no-baseline", "unlimited_run", default=True, show_default=True,
              help="Also replay without a memory limit, for the slowdown ratio.")
@click.option("--lock-baseline/--no-lock-baseline", default=True, show_default=True,
              help="Keep the child's own memory (interpreter, numba) resident, so the budget is the model's.")
@click.option("--swap-size", help="Swap device size (default: footprint + 256MiB).")
@click.option("--rotational", is_flag=True, help="Present the swap device as a disk (cluster readahead) not an SSD.")
@click.option("--work-dir", type=click.Path(file_okay=False), help="Folder for the swap file (default /var/tmp; not tmpfs).")
@click.option("--buffer-size", default="32MiB", show_default=True, help="tracefs ring buffer per CPU.")
@click.option("--timeout", "timeout_s", type=number(0, 1e7, min_open=True), help="Give up if a replay takes longer (seconds).")
@click.option("--raw-trace", type=click.Path(dir_okay=False), help="Also keep the raw ftrace text in this file.")
@click.option("--trace-reclaim", is_flag=True,
              help="Also record the vmscan/memcg reclaim tracepoints; counters per step go to the metadata.")
@click.option("--cleanup", is_flag=True, help="Only remove what killed captures left behind, then exit.")
@force_option
@json_option
@writes(("out", "raw_trace"), ("trace",))
def command(trace, out, memory, memory_fraction, compute, unlimited_run, lock_baseline, swap_size, rotational, work_dir, buffer_size,
            timeout_s, raw_trace, trace_reclaim, cleanup, force, as_json):
    """Replay TRACE under the real kernel and record its swap I/O (root only).

    Makes a swap file on a loop device, runs a child that replays every access
    as a real load or store on anonymous memory inside a memory cgroup limited
    to its own baseline plus the budget, records each block request on the
    swap device with the block_rq_issue tracepoint, and undoes all of it.
    Also replays once without a limit to report the slowdown.

    \b
    Example:
      sudo swaptrace capture traces/tiny.access.parquet --memory 64MiB \\
          -o traces/tiny.kernel.swapio.parquet
      swaptrace capture --cleanup        # after a capture was killed with -9
    """
    from swaptrace.capture import capture, check_privileges, cleanup_leftovers

    if cleanup:
        check_privileges()
        removed = cleanup_leftovers(work_dir)
        echo_summary({"removed": removed}, as_json, lambda s: "\n".join(s["removed"]) or "nothing to remove")
        return
    if trace is None or out is None:
        raise ConfigError("give TRACE and -o OUTPUT (or --cleanup)")
    memory_bytes = parse_bytes(memory, "--memory", positive=True) if memory is not None else None
    swap_bytes = parse_bytes(swap_size, "--swap-size", positive=True) if swap_size is not None else None
    buffer_kb = parse_bytes(buffer_size, "--buffer-size", positive=True) // 1024
    if buffer_kb < 1:
        raise ConfigError(f"--buffer-size: at least 1 KiB per CPU, got {buffer_size!r}")
    steps = int(open_trace(trace, kind="access").meta.get("steps", 0))
    with progressbar(steps, "replaying") as bar:
        result = capture(
            trace, out, memory_bytes=memory_bytes, memory_fraction=memory_fraction, compute=compute,
            unlimited_run=unlimited_run, swap_bytes=swap_bytes,
            rotational=rotational, work_base=work_dir, buffer_kb=buffer_kb,
            timeout_s=timeout_s, lock_baseline=lock_baseline, raw_trace_out=raw_trace, trace_reclaim=trace_reclaim, force=force,
            progress=bar.update,
        )
    if as_json:
        echo_summary({"path": str(result.path), "memory_bytes": result.memory_bytes,
                      "baseline_bytes": result.baseline_bytes, "limit_bytes": result.limit_bytes,
                      "slowdown": result.slowdown, "lost_events": result.lost_events, **result.summary}, True)
    else:
        click.echo(_render(result))
