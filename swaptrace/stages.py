"""The pipeline's stages as library calls (used by :mod:`swaptrace.pipeline`).

Each ``_run_*`` function takes the output folder and a ``say`` callable for
one-line progress, calls the stage's library function, and returns a small
JSON-able summary recorded in ``pipeline.json``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

ACCESS = "access.parquet"
MRC_CSV, MRC_PNG = "mrc.csv", "mrc.png"
SWAPIO = "swapio.parquet"
SSD = "ssd.parquet"
THESIS = "ssd-thesis.json"
FIO_JOBS = "fio"
FIO_RUN = "fio-run"
REPORT = "report"

#: above this many accesses the pipeline's MRC uses SHARDS (rate 0.01) instead of the exact pass
EXACT_MRC_MAX_ACCESSES = 200_000_000
#: per-preset geometry changes for the pipeline's SSD: none -- the drive keeps its real size and
#: geometry and starts in the sampled steady state of SSD_BACKGROUND (swaptrace.ssd.steady)
SSD_OVERRIDES: dict[str, dict] = {}
#: what the pipeline's drive holds outside the swap partition: 80 % full, half of it overwritten at
#: random (steady state), the swap partition used before (its content part of the overwritten data)
SSD_BACKGROUND = {"fill": 0.8, "overwritten": 0.5, "swap_prior": "pool"}


def build(opts, out_dir: Path, spec_identity: dict[str, Any]) -> list:
    """The stage list for :class:`~swaptrace.pipeline.PipelineOptions` ``opts``."""
    from swaptrace.pipeline import Stage

    gen_params = {**spec_identity, "steps": opts.steps, "seed": opts.seed}
    mem = {"memory_bytes": opts.memory_bytes} if opts.memory_bytes else {"memory_fraction": opts.memory_fraction}
    emu_params = {**mem, "policy": opts.policy, "readahead": opts.readahead}
    fio_skip = None
    if not opts.fio:
        fio_skip = "--no-fio"
    elif shutil.which("fio") is None:
        fio_skip = "fio is not installed (make setup installs it from Debian's packages when root)"
    stages = [
        Stage("generate", (), (ACCESS,), gen_params, lambda d, say: _run_generate(d, opts, say)),
        Stage("mrc", (ACCESS,), (MRC_CSV, MRC_PNG), {"exact_max": EXACT_MRC_MAX_ACCESSES, **mem},
              lambda d, say: _run_mrc(d, opts, say)),
        Stage("emulate", (ACCESS,), (SWAPIO,), emu_params, lambda d, say: _run_emulate(d, opts, say)),
        Stage("ssd", (SWAPIO,), (SSD,), {"device": opts.device, "capacity": opts.ssd_capacity_bytes,
                                         "background": SSD_BACKGROUND}, lambda d, say: _run_ssd(d, opts, say)),
        Stage("ssd-thesis", (), (THESIS,), {}, lambda d, say: _run_thesis(d, opts, say),
              skip_reason=None if opts.thesis else "--no-thesis"),
        Stage("fio-jobs", (SWAPIO,), (FIO_JOBS,), {"size": opts.fio_size_bytes}, lambda d, say: _run_fio_jobs(d, opts, say),
              skip_reason="--no-fio" if not opts.fio else None),
        Stage("fio-run", (FIO_JOBS,), (FIO_RUN,),
              {"target": opts.fio_target, "size": opts.fio_size_bytes, "runtime_s": opts.fio_runtime_s},
              lambda d, say: _run_fio(d, opts, say), skip_reason=fio_skip),
        Stage("report", (ACCESS, MRC_CSV, SWAPIO, SSD), (REPORT,), {"fio": opts.fio, "thesis": opts.thesis},
              lambda d, say: _run_report(d, opts, say)),
    ]
    return stages


def _bar(length: int, label: str):
    """A progress bar for one stage (on a terminal only), indented under the stage's line."""
    from swaptrace.commands._common import progressbar

    return progressbar(length, f"      {label}")


def _run_generate(d: Path, opts, say) -> dict[str, Any]:
    from swaptrace.generate import generate_trace
    from swaptrace.spec import load_spec
    from swaptrace.traceio import open_trace

    spec = load_spec(opts.preset)
    steps = opts.steps or spec.default_steps
    with _bar(steps, "steps") as bar:
        path = generate_trace(spec, d / ACCESS, steps=steps, seed=opts.seed, force=True, progress=bar.update)
    meta = open_trace(path).meta
    return {"steps": steps, "accesses": meta["rows"], "footprint_bytes": meta["footprint_bytes"]}


def _run_mrc(d: Path, opts, say) -> dict[str, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from swaptrace.figures.emulate import plot_mrc
    from swaptrace.mrc import exact_mrc, shards_mrc, write_csv
    from swaptrace.traceio import AtomicPath, open_trace

    tf = open_trace(d / ACCESS, "access")
    with _bar(tf.num_rows, "accesses") as bar:
        if tf.num_rows <= EXACT_MRC_MAX_ACCESSES:
            curve = exact_mrc(d / ACCESS, progress=bar.update)
        else:
            curve = shards_mrc(d / ACCESS, 0.01, progress=bar.update)
    write_csv(curve, d / MRC_CSV, force=True)
    budget = _budget_bytes(tf.meta, opts)
    fig, ax = plt.subplots(figsize=(7, 4))
    plot_mrc(curve, ax=ax, budget_bytes=budget)
    fig.tight_layout()
    with AtomicPath(d / MRC_PNG) as ap:
        fig.savefig(ap.tmp, format="png", dpi=120)
    plt.close(fig)
    pages = budget // curve.page_bytes
    return {"method": curve.method, "lru_miss_ratio_at_budget": float(curve.miss_ratio[min(pages, len(curve.misses) - 1)])}


def _budget_bytes(access_meta: dict[str, Any], opts) -> int:
    if opts.memory_bytes:
        return int(opts.memory_bytes)
    return int(int(access_meta["footprint_pages"]) * opts.memory_fraction) * int(access_meta["page_bytes"])


def _run_emulate(d: Path, opts, say) -> dict[str, Any]:
    from swaptrace.pagecache import emulate
    from swaptrace.traceio import open_trace

    tf = open_trace(d / ACCESS, "access")
    mem = {"memory_bytes": opts.memory_bytes} if opts.memory_bytes else {"memory_fraction": opts.memory_fraction}
    with _bar(tf.num_rows, "accesses") as bar:
        res = emulate(d / ACCESS, d / SWAPIO, policy=opts.policy, readahead=opts.readahead, force=True,
                      progress=bar.update, **mem)
    return {k: res.summary.get(k) for k in ("faults", "pages_in", "pages_out", "bytes_read", "bytes_written")}


def ssd_config_for(opts, device_bytes: int):
    """The SSD the pipeline replays the stream on.

    A preset keeps its real size and geometry (``opts.ssd_capacity_bytes``
    resizes it if given); the swap device is a partition at its start and the
    rest of the drive holds :data:`SSD_BACKGROUND`, in its sampled steady
    state (:mod:`swaptrace.ssd.steady`; a few seconds for a 512 GiB drive), so
    the short demo stream meets a drive's real GC from its first write.
    A ``.toml`` device file is taken as it is.
    """
    from swaptrace.ssd.config import load_device

    if opts.device.endswith(".toml"):
        return load_device(opts.device)
    return load_device(opts.device, SSD_OVERRIDES.get(opts.device), capacity_bytes=opts.ssd_capacity_bytes)


def _run_ssd(d: Path, opts, say) -> dict[str, Any]:
    from swaptrace.ssd.run import replay
    from swaptrace.ssd.steady import Background
    from swaptrace.traceio import open_trace

    tf = open_trace(d / SWAPIO, "swapio")
    cfg = ssd_config_for(opts, int(tf.meta.get("device_bytes") or 0))
    with _bar(tf.num_rows, "requests") as bar:
        res = replay(d / SWAPIO, cfg, out=d / SSD, precondition="steady", background=Background(**SSD_BACKGROUND),
                     force=True, progress=bar.update)
    keep = ("waf", "steady_waf", "op", "start", "throughput_mb_s", "write_mb_s", "read_mb_s", "simulated_time_us",
            "host_write_bytes")
    return {k: res.summary[k] for k in keep if k in res.summary}


def _run_thesis(d: Path, opts, say) -> dict[str, Any]:
    import json

    from swaptrace.ssd.thesis import run_thesis
    from swaptrace.traceio import AtomicPath

    result = run_thesis(real_drive=True, log=lambda line: say(f"      {line}"))
    with AtomicPath(d / THESIS) as ap:
        ap.tmp.write_text(json.dumps(result, indent=2, default=float))
    out = {k: result[k] for k in ("request_size_gain", "sequential_write_gain", "bandwidth_decline")}
    real = result.get("real_drive") or {}
    out.update({f"real_drive_{k}": real[k] for k in ("request_size_gain", "sequential_write_gain") if k in real})
    return out


def _run_fio_jobs(d: Path, opts, say) -> dict[str, Any]:
    from swaptrace.fio.jobs import build_jobs

    folder = build_jobs(d / SWAPIO, d / FIO_JOBS, size_bytes=opts.fio_size_bytes, force=True)
    return {"jobs": len(getattr(folder, "jobs", []) or [])}


def _run_fio(d: Path, opts, say) -> dict[str, Any]:
    from swaptrace.fio.runner import run_jobs

    target = opts.fio_target or "/tmp/swaptrace-fio.dat"
    outcome = run_jobs(d / FIO_JOBS, target, size_bytes=opts.fio_size_bytes, runtime_s=opts.fio_runtime_s,
                       out_dir=d / FIO_RUN, force=True, echo=lambda line: say(f"      {line}"))
    return {"ratios": getattr(outcome, "ratios", None)}


def _run_report(d: Path, opts, say) -> dict[str, Any]:
    from swaptrace.report import build_report

    rep = build_report(d, d / REPORT, force=True)
    return {"figures": len(rep.figures)}
