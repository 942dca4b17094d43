"""The pipeline's per-stage run functions (the stage list is :func:`swaptrace.pipeline.run.plan`).

Each ``run_*`` function takes the output folder, the
:class:`~swaptrace.pipeline.run.PipelineOptions`, a ``say`` callable for one-line
progress and a ``bar(length, label)`` factory for a progress bar (a context
manager whose value has ``update(n)``; the CLI passes click's), calls the
stage's library function, and returns a small JSON-able summary recorded in
``pipeline.json``. This module never imports :mod:`swaptrace.pipeline.run` nor
the CLI: both are above it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from swaptrace.pipeline import filenames as F

#: above this many accesses the pipeline's MRC uses SHARDS (rate 0.01) instead of the exact pass
EXACT_MRC_MAX_ACCESSES = 200_000_000
#: with ``--ssd-capacity``, the thesis's real-drive check runs on that drive with a swap partition of
#: 1/THESIS_SWAP_SHARE of it (at most the full drive's 16 GiB), so the rest can hold its background
THESIS_SWAP_SHARE = 8


def run_generate(d: Path, opts, say, bar) -> dict[str, Any]:
    from swaptrace.core.traceio import open_trace
    from swaptrace.workload.generate import generate_trace
    from swaptrace.workload.spec import load_spec

    spec = load_spec(opts.preset)
    steps = opts.steps or spec.default_steps
    with bar(steps, "steps") as b:
        path = generate_trace(spec, d / F.ACCESS, steps=steps, seed=opts.seed, force=True, progress=b.update,
                              runtime=opts.runtime_model)
    meta = open_trace(path).meta
    return {"steps": steps, "accesses": meta["rows"], "footprint_bytes": meta["footprint_bytes"]}


def run_mrc(d: Path, opts, say, bar) -> dict[str, Any]:
    from swaptrace.core.traceio import open_trace
    from swaptrace.mrc import exact_mrc, shards_mrc, write_csv
    from swaptrace.pipeline.report import save_mrc_figure

    tf = open_trace(d / F.ACCESS, "access")
    with bar(tf.num_rows, "accesses") as b:
        if tf.num_rows <= EXACT_MRC_MAX_ACCESSES:
            curve = exact_mrc(d / F.ACCESS, progress=b.update)
        else:
            curve = shards_mrc(d / F.ACCESS, 0.01, progress=b.update)
    write_csv(curve, d / F.MRC_CSV, force=True)
    budget = _budget_bytes(tf.meta, opts)
    save_mrc_figure(curve, d / F.MRC_PNG, budget_bytes=budget)
    pages = budget // curve.page_bytes
    return {"method": curve.method, "lru_miss_ratio_at_budget": float(curve.miss_ratio[min(pages, len(curve.misses) - 1)])}


def _budget_bytes(access_meta: dict[str, Any], opts) -> int:
    """The budget the emulate stage will use, in bytes (the emulator's own rule)."""
    from swaptrace.emulate import EmulatorConfig

    page_bytes = int(access_meta["page_bytes"])
    return page_bytes * EmulatorConfig.budget_pages_for(int(access_meta["footprint_pages"]), page_bytes,
                                                        memory_bytes=opts.memory_bytes,
                                                        memory_fraction=opts.memory_fraction)


def run_emulate(d: Path, opts, say, bar) -> dict[str, Any]:
    from swaptrace.core.traceio import open_trace
    from swaptrace.emulate import emulate

    tf = open_trace(d / F.ACCESS, "access")
    with bar(tf.num_rows, "accesses") as b:
        res = emulate(d / F.ACCESS, d / F.SWAPIO, policy=opts.policy, readahead=opts.readahead, force=True,
                      progress=b.update, memory_bytes=opts.memory_bytes, memory_fraction=opts.memory_fraction,
                      ensemble=None)  # the command's default: the profile's ensemble where it applies
    return {k: res.summary.get(k) for k in ("faults", "pages_in", "pages_out", "bytes_read", "bytes_written")}


def run_ssd(d: Path, opts, say, bar) -> dict[str, Any]:
    from swaptrace.core.traceio import open_trace
    from swaptrace.ssd.swapdrive import replay_on_swap_drive, swap_drive

    tf = open_trace(d / F.SWAPIO, "swapio")
    cfg = swap_drive(opts.device, capacity_bytes=opts.ssd_capacity_bytes)
    with bar(tf.num_rows, "requests") as b:
        res = replay_on_swap_drive(d / F.SWAPIO, cfg, out=d / F.SSD, force=True, progress=b.update)
    keep = ("waf", "steady_waf", "op", "start", "throughput_mb_s", "write_mb_s", "read_mb_s", "simulated_time_us",
            "host_write_bytes")
    return {k: res.summary[k] for k in keep if k in res.summary}


def run_thesis(d: Path, opts, say, bar) -> dict[str, Any]:
    import json

    from swaptrace.core.traceio import AtomicPath
    from swaptrace.ssd.swapdrive import swap_drive
    from swaptrace.ssd.thesis import REAL_SWAP_BYTES, run_thesis

    real, swap = None, None
    if opts.ssd_capacity_bytes is not None:  # the drive asked for, not the full nvme-tlc
        real = swap_drive(opts.device, capacity_bytes=opts.ssd_capacity_bytes)
        swap = min(REAL_SWAP_BYTES, real.user_bytes // THESIS_SWAP_SHARE)
    result = run_thesis(real_drive=not opts.first_look, real_config=real, real_swap_bytes=swap,
                        log=lambda line: say(f"      {line}"))
    with AtomicPath(d / F.THESIS) as ap:
        ap.tmp.write_text(json.dumps(result, indent=2, default=float))
    out = {k: result[k] for k in ("request_size_gain", "sequential_write_gain", "bandwidth_decline")}
    real = result.get("real_drive") or {}
    out.update({f"real_drive_{k}": real[k] for k in ("request_size_gain", "sequential_write_gain") if k in real})
    return out


def run_fio_jobs(d: Path, opts, say, bar) -> dict[str, Any]:
    from swaptrace.fio.jobs import build_jobs

    folder = build_jobs(d / F.SWAPIO, d / F.FIO_JOBS, size_bytes=opts.fio_size_bytes, force=True)
    return {"jobs": len(getattr(folder, "jobs", []) or [])}


def run_fio(d: Path, opts, say, bar) -> dict[str, Any]:
    from swaptrace.figures.fio import save_run_figures
    from swaptrace.fio.runner import run_jobs

    target = opts.fio_target or "/tmp/swaptrace-fio.dat"
    only = None
    if not opts.fio_profile:  # the queue-depth profile jobs only when asked (they take ~2 minutes)
        from swaptrace.fio.jobs import load_manifest

        manifest = load_manifest(d / F.FIO_JOBS)
        # nor the steady-state rounds (fio run --steady: hours on a lab drive; the demo stays short)
        only = [j["name"] for j in manifest["jobs"] if j.get("group") not in ("profile", "steady")]
    outcome = run_jobs(d / F.FIO_JOBS, target, size_bytes=opts.fio_size_bytes, runtime_s=opts.fio_runtime_s,
                       out_dir=d / F.FIO_RUN, only=only, force=True, echo=lambda line: say(f"      {line}"))
    save_run_figures(outcome.out_dir)
    return {"ratios": getattr(outcome, "ratios", None)}


def run_model_vs_fio(d: Path, opts, say, bar) -> dict[str, Any]:
    """The device fitted to the fio run, and the swap stream on it beside fio's replay of it (issue 31)."""
    from swaptrace.core.traceio import AtomicPath
    from swaptrace.errors import SwaptraceError
    from swaptrace.ssd.fit.check import compare

    try:
        out = compare(d / F.FIO_RUN, d / F.SWAPIO, d / F.FITTED_DEVICE, quick=True, say=lambda line: say(f"      {line}"))
    except SwaptraceError as exc:  # e.g. a run without the jobs the fit reads: the report says why
        (d / F.FITTED_DEVICE).unlink(missing_ok=True)
        out = {"error": str(exc)}
        say(f"      no fitted device: {exc}")
    with AtomicPath(d / F.MODEL_VS_FIO, force=True) as ap:
        ap.tmp.write_text(json.dumps(out, indent=2, default=float))
    worst = [abs(q["error"]) for r in out.get("replays", []) for q in r["quantities"][:2] if q["error"] is not None]
    return {"fitted": "error" not in out, "worst_bandwidth_error": max(worst) if worst else None}


def run_designs(d: Path, opts, say, bar) -> dict[str, Any]:
    """``swaptrace designs`` at the pipeline's budget and F.SSD, with a packed-rows twin of the trace."""
    from swaptrace.core.traceio import open_trace
    from swaptrace.designs.table import compare_designs
    from swaptrace.pipeline.designs import save_designs
    from swaptrace.ssd.swapdrive import swap_drive
    from swaptrace.timing.designs import with_step_times
    from swaptrace.workload.generate import ROW_LAYOUTS, generate_trace

    out = d / F.DESIGNS
    out.mkdir(exist_ok=True)
    tf = open_trace(d / F.ACCESS, "access")
    say("designs: the packed-rows trace")
    packed = generate_trace(opts.preset, out / "access-packed.parquet", steps=int(tf.meta["steps"]), seed=opts.seed,
                            scatter=ROW_LAYOUTS["packed"], force=True)
    with bar(2 * tf.num_rows, "accesses") as b:
        cmp = compare_designs(d / F.ACCESS, out, ssd=swap_drive(opts.device, capacity_bytes=opts.ssd_capacity_bytes),
                              packed_trace=packed, force=True, say=say, progress=b.update,
                              memory_bytes=opts.memory_bytes, memory_fraction=opts.memory_fraction)
    cmp = with_step_times(cmp)
    save_designs(cmp, out)
    return {r["design"]: r.get("device_time_gain") for r in cmp.rows}


def run_report(d: Path, opts, say, bar) -> dict[str, Any]:
    from swaptrace.pipeline.report import build_report

    rep = build_report(d, d / F.REPORT, force=True)
    return {"figures": len(rep.figures)}


def run_time(d: Path, opts, say, bar) -> dict[str, Any]:
    """Predicted step times on the pipeline's F.SSD, and on this machine's disk when fio measured its profile."""
    from swaptrace.errors import SwaptraceError
    from swaptrace.ssd.swapdrive import swap_drive
    from swaptrace.timing import model as timing
    from swaptrace.timing.device_profile import build_profile

    req = timing.read_stream(d / F.SWAPIO)
    comp = timing.measure_compute(d / F.ACCESS, req.nsteps)
    cpu = opts.time_costs if opts.time_costs is not None else timing.measure_cpu_costs()
    dev = timing.device_from_ssd(swap_drive(opts.device, capacity_bytes=opts.ssd_capacity_bytes))
    res = timing.simulate(req, dev, comp, cpu)
    timing.write_steps(res, d / F.TIMING, {"stream": str(d / F.SWAPIO)}, force=True)
    out = {"slowdown": res.slowdown, "mean_step_us": res.total_us / max(req.nsteps, 1)}
    try:  # the fio run's profile jobs, when it ran them
        disk = timing.simulate(req, build_profile(d / F.FIO_RUN, "this-disk"), comp, cpu)
        timing.write_steps(disk, d / F.TIMING_DISK, {"stream": str(d / F.SWAPIO)}, force=True)
        out["disk_slowdown"] = disk.slowdown
    except SwaptraceError as exc:
        (d / F.TIMING_DISK).unlink(missing_ok=True)
        say(f"      no prediction on this disk: {exc}")
    return out
