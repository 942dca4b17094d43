"""``swaptrace inspect FILE``: what a swaptrace Parquet file holds."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from swaptrace.commands.common import count, echo_summary, json_option, writes
from swaptrace.core.units import format_bytes

if TYPE_CHECKING:  # names in annotations only: the modules load when the command runs
    import numpy as np

    from swaptrace.core.traceio import TraceFile


def _region_counts(trace: TraceFile) -> np.ndarray:
    import numpy as np


    regions = trace.meta.get("regions", [])
    stored = trace.meta.get("summary", {}).get("region_accesses")
    # a stored summary is used only when it agrees with the rows (a stale or edited one is recounted)
    if (isinstance(stored, list) and len(stored) == len(regions) and all(isinstance(c, int) and c >= 0 for c in stored)
            and sum(stored) == trace.num_rows):
        return np.asarray(stored, dtype=np.int64)
    counts = np.zeros(max(len(regions), 1), dtype=np.int64)
    for batch in trace.iter_batches(["region"]):
        c = np.bincount(batch["region"], minlength=len(counts))
        if len(c) > len(counts):
            counts = np.concatenate([counts, np.zeros(len(c) - len(counts), dtype=np.int64)])
        counts += c
    return counts


def _access_facts(trace: TraceFile, top: int) -> dict[str, Any]:
    import numpy as np


    meta = trace.meta
    summary = meta.get("summary", {})
    stored = summary.get("writes")
    if isinstance(stored, int) and not isinstance(stored, bool) and 0 <= stored <= trace.num_rows:
        writes = stored
    else:  # absent, or stale (more writes than rows would print negative reads): counted
        writes = sum(int(np.count_nonzero(b["write"])) for b in trace.iter_batches(["write"]))
    regions = meta.get("regions", [])
    counts = _region_counts(trace)
    order = np.argsort(-counts, kind="stable")[:top]
    total = max(trace.num_rows, 1)
    top_regions = []
    for i in order:
        if counts[i] == 0:
            break
        name = regions[i].get("name", f"#{i}") if i < len(regions) else f"#{i}"
        kind = regions[i].get("kind", "?") if i < len(regions) else "?"
        top_regions.append({"region": name, "kind": kind, "accesses": int(counts[i]), "share": float(counts[i] / total)})
    footprint = int(meta.get("footprint_bytes", 0))
    from swaptrace.core.traceio import event_counts

    events = event_counts(trace)  # None: no event column (every row an access)
    accesses = trace.num_rows
    if events is not None:  # stores among the access rows only (an event row's write flag means nothing)
        writes = sum(int(np.count_nonzero(b["write"] & (b["event"] == 0)))
                     for b in trace.iter_batches(["write", "event"]))
        accesses -= events["allocs"] + events["frees"]
    return {
        "steps": meta.get("steps"),
        "first_step": meta.get("first_step"),
        "footprint_bytes": footprint,
        "footprint": f"{format_bytes(footprint)} ({meta.get('footprint_pages')} pages of {trace.page_bytes} B)",
        "reads": accesses - writes,
        "writes": writes,
        "write_share": writes / max(accesses, 1),
        "top_regions": top_regions,
        **({} if events is None else events),
    }


def describe(path: str, top: int = 10) -> dict[str, Any]:
    """Kind, rows and metadata of any swaptrace file, plus access-trace facts for ``kind: access``."""
    from swaptrace.core.traceio import open_trace

    trace = open_trace(path)
    facts: dict[str, Any] = {"file": str(trace.path), "kind": trace.kind, "rows": trace.num_rows,
                             "row_groups": trace.num_row_groups}
    if trace.parts:
        facts["parts"] = len(trace.parts)
    if trace.kind == "access":
        facts.update(_access_facts(trace, top))
    elif trace.kind == "recording":
        from swaptrace.capture.process_trace import kernel_memory, steps_used
        from swaptrace.capture.recording import step_table

        facts["steps"] = trace.meta.get("steps")
        facts["per_step"] = step_table(path)
        used = steps_used(int(trace.meta.get("steps") or 0), trace.meta.get("exit_step") is not None)
        facts["kernel_memory"] = kernel_memory(trace.meta.get("readings") or [], used, bool(trace.meta.get("pageout")))
    elif "steps" in trace.meta:
        facts["steps"] = trace.meta["steps"]
    stalls = _stalls(trace.meta.get("kernel") or {})
    if stalls:
        facts["stalls"] = stalls
    facts["metadata"] = trace.meta
    return facts


#: (label, key of kernel.delays.<run>.total) of the task delays a capture's summary shows, in ms
_DELAY_SHOWN = (("cpu wait", "cpu_us"), ("block I/O", "blkio_us"), ("swap-in", "swapin_us"),
                ("reclaim", "freepages_us"), ("thrashing", "thrashing_us"), ("compaction", "compact_us"))


def _stalls(kernel: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A capture's stalls per run, briefly: the tree's delays and the machine's PSI in ms, the load."""
    out: dict[str, dict[str, Any]] = {}
    for run, load in (kernel.get("load") or {}).items():
        row: dict[str, Any] = {"wall_s": load.get("wall_s"), "load_before": load.get("load_before"),
                               "load_after": load.get("load_after"), "other_cpu_share": load.get("other_cpu_share")}
        total = ((kernel.get("delays") or {}).get(run) or {}).get("total")
        if total:
            row.update({label: round(total[key] / 1e3, 1) for label, key in _DELAY_SHOWN})
        psi = ((kernel.get("psi") or {}).get(run) or {}).get("total")
        if psi:
            row.update({f"psi {k[:-3].replace('_', ' ')}": round(v / 1e3, 1) for k, v in psi.items()})
        out[run] = row
    return out


def _stall_lines(stalls: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["stalls (ms; the process tree's task delays, the machine's PSI; load: 1-min average):"]
    for run, row in stalls.items():
        delays = ", ".join(f"{label} {row[label]}" for label, _ in _DELAY_SHOWN if label in row) or "no task delays"
        psi = ", ".join(f"{k[4:]} {v}" for k, v in row.items() if k.startswith("psi "))
        share = row["other_cpu_share"]
        lines.append(f"  {run:<8} wall {row['wall_s']} s: {delays}")
        lines.append(f"  {'':<8} psi {psi or 'n/a'}; load {row['load_before']} -> {row['load_after']}, other "
                     f"processes {'n/a' if share is None else f'{share:.0%}'} of the CPUs")
    return lines


def _render(facts: dict[str, Any]) -> str:
    lines = []
    for key in ("file", "kind", "rows", "row_groups", "parts", "steps", "first_step", "footprint", "reads", "writes",
                "allocs", "frees", "freed_pages"):
        if key in facts and facts[key] is not None:
            lines.append(f"{key:<11} {facts[key]}")
    if "write_share" in facts:
        lines.append(f"{'read/write':<11} {1 - facts['write_share']:.1%} / {facts['write_share']:.1%}")
    if facts.get("top_regions"):
        lines.append("top regions by accesses:")
        for r in facts["top_regions"]:
            lines.append(f"  {r['region']:<24} {r['kind']:<12} {r['accesses']:>14}  {r['share']:6.1%}")
    if facts.get("per_step"):
        lines.append("per step (4 KiB pages; first touches written in brackets; referenced: smaps at the step's end):")
        lines.append(f"  {'step':>6} {'allocated':>10} {'freed':>10} {'touched':>16} {'referenced':>10}")
        for r in facts["per_step"]:
            ref = "-" if r["referenced_pages"] is None else r["referenced_pages"]
            touched = f"{r['first_touched_pages']} ({r['first_written_pages']})"
            lines.append(f"  {r['step']!s:>6} {r['allocated_pages']:>10} {r['freed_pages']:>10} {touched:>16} {ref!s:>10}")
    km = facts.get("kernel_memory")
    if km is not None:
        said = km["kernel_note"] if km["kernel_bytes"] is None else f"{km['kernel_bytes'] / 2**20:.2f} MiB ({km['kernel_note']})"
        lines.append(f"kernel memory charged to the program's cgroup while training: {said}")
    if facts.get("stalls"):
        lines += _stall_lines(facts["stalls"])
    lines.append("metadata:")
    for key, value in facts["metadata"].items():
        lines.append(f"  {key}: {json.dumps(value, default=str)}")
    return "\n".join(lines)


@click.command("inspect")
@click.argument("file", type=click.Path())
@click.option("--top", type=count(0, 1 << 20), default=10, show_default=True, help="Regions to list by accesses.")
@json_option
@writes((), ("file",))
def command(file: str, top: int, as_json: bool) -> None:
    """Show what a swaptrace Parquet file holds: kind, rows, steps, footprint,
    read/write split, alloc and free events and busiest regions (access traces), and its metadata.

    A recording (capture --record) shows pages allocated, freed,
    first-touched and referenced per step, and the kernel memory (page
    tables, slab) charged to the program's cgroup while it trained.

    \b
    Example:
      swaptrace inspect traces/demo.access.parquet
    """
    facts = describe(file, top)
    echo_summary(facts, as_json, render=_render)
