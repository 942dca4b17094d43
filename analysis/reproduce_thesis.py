"""Reproduce the thesis's findings with swaptrace and print them side by side (``make reproduce``).

The thesis (README.md, "The thesis reproduced") found, for DLRM training with swap on an SSD:

1. training with swap took 2-5x longer;
2. most swap requests are smaller than 32 KiB;
3. SSD bandwidth falls as the written volume grows (garbage collection);
4. in fio, 128 KiB requests gave 1.75x the bandwidth of the swap pattern;
5. in fio, sequential writes gave 4.37x the write bandwidth of the swap pattern.

This script runs the pipeline on a preset (stages already up to date are
skipped), captures the same trace under the real kernel when it runs as root
with swap, cgroups and tracefs usable, and writes a table with one column per
source -- the emulator and SSD model, the real kernel, fio on this machine's
disk -- to ``DIR/thesis.md`` (and stdout).

The slowdown row comes from the time model (the pipeline's ``time`` stage). Its kernel costs per fault
and per page written are this host's: given with ``--time-costs FILE`` (a host-costs TOML), or, as
root, measured once with the write- and fault-overhead micro-benchmarks (swaptrace.timing.calibrate,
two synthetic captures, ~20 s) against this disk's fio profile (the pipeline then runs fio's profile
jobs too) and kept in ``DIR/host-costs.toml``. Without either they are the in-process lower bounds.

Usage::

    python analysis/reproduce_thesis.py [--preset demo] [-o traces/demo] [--no-fio] [--no-capture]
                                        [--time-costs FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from swaptrace import PipelineOptions, SwaptraceError, open_trace, run_pipeline
from swaptrace.core.traceio import read_metadata
from swaptrace.pipeline import filenames as S

KERNEL = "kernel.swapio.parquet"
HOST_COSTS = "host-costs.toml"


def small_share(meta: dict[str, Any], op: str) -> float | None:
    """Share of ``op`` requests below 32 KiB from a swapio summary's histogram."""
    hist = (meta.get("summary") or {}).get("request_size_hist", {}).get(op, {})
    total = sum(int(v) for v in hist.values())
    if not total:
        return None
    return sum(int(v) for k, v in hist.items() if int(k) < 32 * 1024) / total


def try_capture(folder: Path, fraction: float, log) -> dict[str, Any] | None:
    """Capture the folder's trace under the real kernel (root only); None with a reason logged otherwise."""
    from swaptrace import capture_trace
    from swaptrace.capture.host import check_privileges

    try:
        check_privileges()
    except SwaptraceError as exc:
        log(f"kernel capture skipped: {exc}")
        return None
    out = folder / KERNEL
    if out.exists():
        meta = open_trace(out, "swapio").meta
        log(f"kernel capture: reusing {out}")
        return meta
    log("kernel capture: replaying the trace under a memory cgroup with swap on a loop device ...")
    try:
        capture_trace(folder / S.ACCESS, out, memory_fraction=fraction, compute="mlp", unlimited_run=True)
    except SwaptraceError as exc:
        log(f"kernel capture failed: {exc}")
        return None
    return open_trace(out, "swapio").meta


def host_costs(folder: Path, log):
    """This host's kernel costs for the time model, measured as root against the fio run's disk profile
    (kept in ``folder/host-costs.toml``); None with a reason logged when they cannot be measured."""
    from swaptrace.capture.host import check_privileges
    from swaptrace.timing import model as timing
    from swaptrace.timing.calibrate import measure_host_costs
    from swaptrace.timing.device_profile import build_profile

    path = folder / HOST_COSTS
    if path.exists():
        log(f"host costs: reusing {path}")
        return timing.load_costs(path)
    try:
        check_privileges()
        disk = build_profile(folder / S.FIO_RUN, "this-disk")
    except SwaptraceError as exc:
        log(f"host costs not measured ({exc}): the time model uses in-process lower bounds")
        return None
    log("host costs: write- and fault-overhead micro-benchmarks (two synthetic captures) ...")
    cpu = measure_host_costs(disk)
    timing.save_costs(cpu, path)
    log(f"host costs: {cpu.fault_cpu_us:.1f} us per fault, {cpu.write_cpu_us:.2f} us per page written -> {path}")
    return cpu


def fmt_x(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def build_table(folder: Path, kernel_meta: dict[str, Any] | None) -> str:
    """The markdown table and a short discussion."""
    swap = open_trace(folder / S.SWAPIO, "swapio").meta
    model = json.loads((folder / S.THESIS).read_text()) if (folder / S.THESIS).exists() else {}
    fio: dict[str, Any] = {}
    if (folder / S.FIO_RUN / "results.parquet").exists():
        from swaptrace import read_results

        fio = read_results(folder / S.FIO_RUN)[1].get("ratios", {})
    ssd_line = "n/a"
    if (folder / S.SSD).exists():
        from swaptrace.ssd.run import read_timeline

        timeline, _ = read_timeline(folder / S.SSD)
        bw = timeline["bandwidth_mb_s"]
        if len(bw) >= 4:
            k = max(1, len(bw) // 8)
            ssd_line = f"{bw[:k].mean() / 1:.0f} → {bw[-k:].mean():.0f} MB/s on this stream"
    k_small_r = small_share(kernel_meta, "read") if kernel_meta else None
    k_small_w = small_share(kernel_meta, "write") if kernel_meta else None
    k_slow = ((kernel_meta or {}).get("summary") or {}).get("slowdown") if kernel_meta else None
    if k_slow is None and kernel_meta:
        k_slow = (kernel_meta.get("kernel") or {}).get("slowdown")
    decline_model = model.get("bandwidth_decline")
    # the time model (swaptrace.timing.model, the pipeline's time stage): on the SSD model, and on this disk's fio profile
    t_model = read_metadata(folder / S.TIMING)["summary"]["slowdown"] if (folder / S.TIMING).exists() else None
    t_disk = read_metadata(folder / S.TIMING_DISK)["summary"]["slowdown"] if (folder / S.TIMING_DISK).exists() else None
    rows = [
        ("training slowdown with swap", "2–5×",
         "n/a (no time stage)" if t_model is None else f"{fmt_x(t_model)} (time model, SSD model)",
         fmt_x(k_slow), "n/a" if t_disk is None else f"{fmt_x(t_disk)} (time model, this disk's fio profile)"),
        ("swap requests < 32 KiB (reads / writes)", "most",
         f"{fmt_pct(small_share(swap, 'read'))} / {fmt_pct(small_share(swap, 'write'))}",
         f"{fmt_pct(k_small_r)} / {fmt_pct(k_small_w)}" if kernel_meta else "n/a", "n/a"),
        ("bandwidth after vs before heavy writing", "falls",
         f"{fmt_x(decline_model)} (synthetic swap mix, 6 drive writes); {ssd_line}", "n/a",
         fmt_x(fio.get("bandwidth_decline"))),
        ("128 KiB vs swap-size request bandwidth", "1.75×", fmt_x(model.get("request_size_gain")), "n/a",
         fmt_x(fio.get("request_size_gain"))),
        ("sequential vs swap-pattern write bandwidth", "4.37×", fmt_x(model.get("sequential_write_gain")), "n/a",
         f"{fmt_x(fio.get('sequential_write_gain'))} (same sizes), "
         f"{fmt_x(fio.get('sequential_write_gain_128k'))} (128 KiB)"),
    ]
    lines = [
        f"# The thesis's findings reproduced with swaptrace ({folder})",
        "",
        "| finding | thesis | emulator + SSD model | real kernel (capture) | fio on this machine |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    lines += [
        "",
        "The emulator and model columns come from `swaptrace run` (emulator at the chosen budget; SSD model "
        "`swaptrace ssd thesis` on a scaled-down 970-class drive). The kernel column needs root with swap, "
        "memory cgroups and tracefs; fio ran on a file on this machine's disk, which is not necessarily an "
        "SSD: large requests help there too, but with no flash translation layer sequential writes of "
        "the same size gain little and GC-driven decline is absent or small.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="demo")
    parser.add_argument("-o", "--output", default=None, help="pipeline folder [traces/PRESET]")
    parser.add_argument("--memory-fraction", type=float, default=0.5)
    parser.add_argument("--no-fio", action="store_true")
    parser.add_argument("--no-capture", action="store_true")
    parser.add_argument("--time-costs", default=None, help="host-costs TOML for the time model (swaptrace time --save-costs)")
    args = parser.parse_args()
    folder = Path(args.output or f"traces/{args.preset}")

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        from swaptrace import progressbar
        from swaptrace.timing import model as timing

        costs = None if args.time_costs is None else timing.load_costs(args.time_costs)
        opts = PipelineOptions(preset=args.preset, memory_fraction=args.memory_fraction, fio=not args.no_fio,
                               fio_profile=not args.no_fio and not args.no_capture, time_costs=costs)
        bar = lambda length, label: progressbar(length, f"      {label}")  # noqa: E731
        run_pipeline(opts, folder, announce=log, progress=bar)
        if costs is None and opts.fio_profile:  # measured here; the time stage runs again with them
            costs = host_costs(folder, log)
            if costs is not None:
                run_pipeline(replace(opts, time_costs=costs), folder, announce=log, progress=bar)
        kernel = None if args.no_capture else try_capture(folder, args.memory_fraction, log)
        if kernel is not None:  # redraw the report with the emulator-vs-kernel figure
            from swaptrace import build_report

            build_report(folder)
        text = build_table(folder, kernel)
    except SwaptraceError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    (folder / "thesis.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
