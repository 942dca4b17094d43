"""``swaptrace emulate``: access trace + DRAM budget -> Linux-like swap I/O stream."""

from __future__ import annotations

from typing import Any

import click

from swaptrace.commands.common import (
    byte_size,
    count,
    echo_summary,
    force_option,
    json_option,
    number,
    progressbar,
    writes,
)
from swaptrace.core.units import format_bytes, parse_bytes
from swaptrace.emulate import (
    DEFAULT_FILL_WRITE_CREDIT,
    DEFAULT_PROFILE,
    DEFAULT_STATS_FLUSH_STEPS,
    DEFAULT_STEP_US,
    DEFAULT_WRITE_COST,
    DEFAULT_WRITE_LATENCY,
    DEFAULT_WRITEBACK_COMPLETION,
    DEFAULT_WRITEBACK_LAG,
    INITIAL_STATES,
    POLICIES,
    READAHEAD_MODES,
    WRITEBACK_COMPLETIONS,
    profile_names,
)
from swaptrace.errors import ConfigError
from swaptrace.workload.spec import MAX_STEPS


def _moved(value: int, base: int) -> str:
    """``value`` and its change from the run's own ``base``."""
    return f"{value:,} ({(value / base - 1) * 100:+.0f} %)" if base else f"{value:,}"


def _render(s: dict[str, Any]) -> str:
    hist = s["request_size_hist"]
    lines = [
        f"accesses        {s['accesses']:>14,}",
        f"faults          {s['faults']:>14,}  (zero-fill {s['zero_fill']:,}, zero page {s['zero_page']:,}, "
        f"major {s['major_faults']:,}, readahead hits {s['readahead_hit']:,}, swap-cache hits {s['swapcache_hit']:,})",
        f"pages in / out  {s['pages_in']:>14,} / {s['pages_out']:,}  (readahead issued {s['readahead_issued']:,})",
        f"bytes read      {format_bytes(s['bytes_read']):>14}   written {format_bytes(s['bytes_written'])}",
        f"requests        {s['requests']['read']:>14,} reads, {s['requests']['write']:,} writes",
    ]
    if "frees" in s:  # the trace had alloc and free events
        lines.append(f"allocs / frees  {s['allocs']:>14,} / {s['frees']:,}  (freed in memory {s['freed_resident']:,}, "
                     f"on swap {s['freed_swapped']:,})")
    if "zero_out" in s:  # pages of zeros went to swap without I/O
        lines.append(f"zero pages      {s['zero_out']:>14,} out / {s['zero_in']:,} in, no I/O (swap zero map)")
    if "ensemble" in s:
        e = s["ensemble"]
        lines.append(f"ensemble        {e['runs']:>14} runs: pages in {e['pages_in'][0]:,}..{e['pages_in'][1]:,}, "
                     f"mean {e['mean_pages_in']:,.0f} / {e['mean_pages_out']:,.0f} out; written: write cost "
                     f"{e['written']['write_cost']}, budget {format_bytes(e['written']['memory_bytes'])}")
    if "sensitivity" in s:
        e, pct = s["sensitivity"], 100 * s["sensitivity"]["fraction"]
        for i, sign in enumerate("-+"):
            lines.append(f"{f'memory {sign}{pct:g} %':<16}{format_bytes(e['memory_bytes'][i]):>14}: pages in "
                         f"{_moved(e['pages_in'][i], s['pages_in'])}, out {_moved(e['pages_out'][i], s['pages_out'])}")
    for op in ("read", "write"):
        total = sum(hist[op].values())
        if total:
            small = sum(n for size, n in hist[op].items() if int(size) < 32768)
            lines.append(f"{op + 's < 32 KiB':<16}{100.0 * small / total:>13.1f}%")
    return "\n".join(lines)


@click.command("emulate")
@click.argument("trace", type=click.Path())
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False), help="Swap I/O stream to write (.swapio.parquet).")
@click.option("--memory", "memory", type=byte_size(), default=None, help="DRAM budget, e.g. 2GiB (or use --memory-fraction).")
@click.option("--memory-fraction", type=number(0, 1, min_open=True), default=None, help="DRAM budget as a fraction of the trace's footprint.")
@click.option("--policy", type=click.Choice(list(POLICIES)), default="linux", show_default=True, help="Residency policy.")
@click.option("--readahead", type=click.Choice(list(READAHEAD_MODES)), default="vma", show_default=True, help="Swap readahead.")
@click.option("--page-cluster", type=count(0, 10), default=3, show_default=True, help="vm.page-cluster: readahead of at most 2^N pages.")
@click.option("--cluster-slots", type=count(1, 1 << 20), default=256, show_default=True, help="Slots per swap allocator cluster.")
@click.option("--swap-bytes", type=byte_size(), default=None, help="Swap device size [default: the footprint plus the header page].")
@click.option("--max-request", "max_request", type=byte_size(), default=None, show_default="512KiB, or one page if larger",
              help="Largest merged block request.")
@click.option("--step-us", type=number(0, 1e12, min_open=True), default=None, help=f"Duration of one step in the time model [default: {DEFAULT_STEP_US:g}].")
@click.option("--initial-state", type=click.Choice(INITIAL_STATES), default="untouched", show_default=True,
              help="'swapped': table pages start on swap (model loaded, then pushed out).")
@click.option("--reclaim-batch", type=count(1, 1 << 20), default=None, help="Pages per reclaim call [default: 32 for linux, 1 for lru/clock].")
@click.option("--writeback-lag", type=count(0, 1 << 30), default=None,
              help=f"linux: pages reclaim isolates while a write is in flight; 0 = synchronous device; implies "
                   f"--writeback-completes lag [default for lag: {DEFAULT_WRITEBACK_LAG}].")
@click.option("--zero-page/--no-zero-page", default=None,
              help="linux: a load of a never-written page maps the shared zero page (no frame) [default: on].")
@click.option("--zeromap/--no-zeromap", default=None,
              help="linux: pages of zeros swap out and in without I/O (Linux >= 6.12) [default: on].")
@click.option("--stats-flush-steps", type=count(0, MAX_STEPS), default=None,
              help="linux: reclaim reads memcg statistics flushed every N steps, as the kernel does (2 s, "
                   "and at each memory.stat read, as swaptrace capture does every step); 0 = exact "
                   f"[default: {DEFAULT_STATS_FLUSH_STEPS}].")
@click.option("--scan-priorities/--no-scan-priorities", default=None,
              help="linux: reclaim walks the kernel's priority levels (scan shares size >> priority), or "
                   "32-page rounds until done (writes then complete by the lag) [default: levels].")
@click.option("--writeback-completes", "writeback_completion", type=click.Choice(list(WRITEBACK_COMPLETIONS)),
              default=None,
              help="linux: when a write started by reclaim completes (any write also completes at a major fault). "
                   "call: as the reclaim call that wrote it returns. "
                   "level: as the priority level that wrote it ends. "
                   "next-level: as the level after that one ends. "
                   "lag: once reclaim has isolated --writeback-lag more pages. "
                   "device: as a first-in first-out device of --write-cost gets to it. "
                   "all but lag need --scan-priorities "
                   f"[default: {DEFAULT_WRITEBACK_COMPLETION}].")
@click.option("--write-cost", type=count(1, 1 << 20), default=None,
              help="linux, --writeback-completes device: pages reclaim scans in the time the device writes one "
                   f"page [default: {DEFAULT_WRITE_COST}].")
@click.option("--fill-write-credit", type=count(0, 1 << 20), default=None,
              help="linux, --writeback-completes device: eighths of a clock unit the device gets per page the "
                   f"process zero-fills before the first swap-in [default: {DEFAULT_FILL_WRITE_CREDIT}].")
@click.option("--write-latency", type=count(0, 1 << 30), default=None,
              help="linux, --writeback-completes device: pages reclaim scans between the device's service of a "
                   "write and its completion (the loop driver's and the disk's latency) "
                   f"[default: {DEFAULT_WRITE_LATENCY}].")
@click.option("--profile", default=DEFAULT_PROFILE, show_default=True,
              help=f"Kernel profile: the linux policy's kernel-matching defaults and ensemble "
                   f"({', '.join(profile_names())}, or a .toml file).")
@click.option("--ensemble/--no-ensemble", default=None,
              help="linux, --writeback-completes device, no --write-cost: run the profile's ensemble (one counting "
                   "run per device speed and room offset, side by side) and write the stream of the run nearest "
                   "their mean pages in and out [default: on where it applies].")
@click.option("--sensitivity", type=number(0, 100, min_open=True, max_open=True), default=None, metavar="PCT",
              help="Also count the run at PCT % less and more memory and report its pages in and out there: how "
                   "steep the miss-ratio curve is at this budget (one more pass over the trace).")
@force_option
@json_option
@writes(("out",), ("trace", "profile"))
def command(*, trace, out, memory, memory_fraction, policy, readahead, page_cluster, cluster_slots, swap_bytes,
            max_request, step_us, initial_state, reclaim_batch, writeback_lag, zero_page, zeromap, stats_flush_steps,
            scan_priorities, writeback_completion, write_cost, fill_write_credit, write_latency, profile, ensemble,
            sensitivity, force, as_json):
    """Emulate Linux swapping of TRACE under a DRAM budget; write the swap I/O stream.

    Each access of the trace goes through a page cache of the given size; the
    block requests the kernel's swap path would issue (faults, readahead,
    reclaim writes, merged when contiguous) are written in issue order.

    \b
    Example:
      swaptrace emulate traces/demo.access.parquet --memory-fraction 0.5 \\
          --policy linux -o traces/demo.swapio.parquet
    """
    from swaptrace.core.traceio import open_trace
    from swaptrace.emulate import EmulatorConfig, emulate, load_profile

    if not profile.strip():
        raise ConfigError(f"--profile: empty; give one of {', '.join(profile_names())} or a .toml file")
    tf = open_trace(trace, kind="access")
    prof = load_profile(profile)
    config = EmulatorConfig.resolve(
        tf.meta, profile=prof, source=str(tf.path), policy=policy, readahead=readahead, page_cluster=page_cluster,
        memory_bytes=parse_bytes(memory, "--memory") if memory is not None else None, memory_fraction=memory_fraction,
        cluster_slots=cluster_slots, swap_bytes=parse_bytes(swap_bytes, "--swap-bytes") if swap_bytes is not None else None,
        max_request_bytes=parse_bytes(max_request, "--max-request") if max_request is not None else None,
        step_us=step_us, initial_state=initial_state,
        reclaim_batch=reclaim_batch, writeback_lag=writeback_lag, zero_page=zero_page, zeromap=zeromap,
        stats_flush_steps=stats_flush_steps, scan_priorities=scan_priorities,
        writeback_completion=writeback_completion, write_cost=write_cost, fill_write_credit=fill_write_credit,
        write_latency=write_latency)
    if ensemble is None and write_cost is not None:
        ensemble = False  # a device speed given: one run at it (a process trace's runtime's: emulate decides)
    elif ensemble and write_cost is not None:
        raise ConfigError("--ensemble varies the write cost: leave out --write-cost (or give --no-ensemble)")
    with progressbar(tf.num_rows, "emulating") as bar:
        result = emulate(trace, out, config, profile=prof, ensemble=ensemble, force=force, progress=bar.update,
                         sensitivity=sensitivity / 100 if sensitivity is not None else None)
    summary = dict(result.summary, output=str(result.path))
    if "sensitivity" in result.params:
        summary["sensitivity"] = result.params["sensitivity"]
    ens = result.params.get("ensemble")
    if ens:
        chosen = ens["members"][ens["chosen"]]
        summary["ensemble"] = {"runs": len(ens["members"]),
                               "pages_in": [min(m["pages_in"] for m in ens["members"]),
                                            max(m["pages_in"] for m in ens["members"])],
                               "mean_pages_in": ens["mean_pages_in"], "mean_pages_out": ens["mean_pages_out"],
                               "written": {"write_cost": chosen["write_cost"], "memory_bytes": chosen["memory_bytes"]}}
    echo_summary(summary, as_json, render=lambda s: _render(s) + f"\nwrote           {s['output']}")
