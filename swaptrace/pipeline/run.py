"""The whole pipeline in one call: generate → mrc → emulate → ssd → fio jobs → fio run → model vs fio → report.

Each stage writes into one folder (``traces/demo/`` by default)::

    access.parquet        generate   page-access trace
    mrc.csv, mrc.png      mrc        exact LRU miss-ratio curve (SHARDS for long traces)
    swapio.parquet        emulate    swap I/O stream at the chosen DRAM budget
    ssd.parquet           ssd        SSD model timeline (bandwidth, WAF vs GB written)
    ssd-thesis.json       ssd        the model's request-size and sequential-write gains
    fio/                  fio jobs   replay, synthetic equivalent and the two experiments
    fio-run/              fio run    measured on a file target (skipped without fio or with --no-fio)
    fitted-device.toml    model-vs-fio  SSD-model device fitted to the fio run's measurements
    model-vs-fio.json     model-vs-fio  the swap stream on that device beside fio's replay of it
    report/               report     figures and report.md
    pipeline.json         -          what each stage ran with (parameters and input fingerprints)

A stage is skipped when its outputs exist and ``pipeline.json`` records the
same parameters and the same inputs (size and modification time of each
input file) -- so a rerun after changing ``--memory`` redoes emulate and what
follows, but not generate. ``force=True`` reruns everything. A stage left out
of a run (``--no-fio``, no ``--designs``) keeps an earlier run's outputs (a fio
run is minutes of measurement), and ``pipeline.json`` lists them as skipped so
the report leaves them out: they may belong to another swap stream.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swaptrace.core.outputs import json_marker
from swaptrace.core.traceio import AtomicPath, check_output_folder
from swaptrace.core.version import __version__
from swaptrace.errors import ConfigError
from swaptrace.pipeline import stages as S
from swaptrace.pipeline.filenames import (  # noqa: F401  (the pipeline's file names, re-exported)
    ACCESS,
    DESIGNS,
    FIO_JOBS,
    FIO_RUN,
    FITTED_DEVICE,
    KERNEL_STREAM,
    MANIFEST,
    MODEL_VS_FIO,
    MRC_CSV,
    MRC_PNG,
    REPORT,
    SSD,
    SWAPIO,
    THESIS,
    TIMING,
    TIMING_DISK,
)

#: ``bar(length, label)``: a context manager whose value has ``update(n)`` (click's progressbar fits)
ProgressBar = Callable[[int, str], contextlib.AbstractContextManager]


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline: what it reads, writes, and runs with."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    params: dict[str, Any]
    #: ``run(out_dir, say, bar)`` -> a JSON-able summary
    run: Callable[[Path, Callable[[str], None], ProgressBar], dict[str, Any] | None]
    skip_reason: str | None = None


@dataclass(frozen=True)
class PipelineOptions:
    """Parameters of :func:`run_pipeline` (see ``swaptrace run --help``)."""

    preset: str = "demo"
    #: ``--runtime`` as given (a recording or a runtime profile), and what it names, read
    #: (:func:`swaptrace.commands.common.resolve_runtime`); generate then traces the whole process
    runtime: str | None = None
    runtime_model: Any = None
    steps: int | None = None
    seed: int = 0
    memory_bytes: int | None = None
    #: the budget as a fraction of the footprint; 0.5 when neither it nor ``memory_bytes`` is given
    memory_fraction: float | None = None
    policy: str = "linux"
    readahead: str = "vma"
    device: str = "nvme-tlc"
    ssd_capacity_bytes: int | None = None
    fio: bool = True
    fio_target: str | None = None
    fio_size_bytes: int = 256 << 20
    fio_runtime_s: int = 3
    #: also run fio's queue-depth profile jobs (~2 minutes), so the time model predicts on this machine's disk
    fio_profile: bool = False
    thesis: bool = True
    #: also compare the swap designs at this budget (``swaptrace designs``; docs/designs.md)
    designs: bool = False
    #: a first look (``make demo``): the thesis's experiments on the model's small drive only (not the full
    #: 512 GiB drive in its steady state); the report names what was left out (:data:`FIRST_LOOK_LEFT_OUT`)
    first_look: bool = False
    #: run fio on the disk (:data:`BESIDE`) while the SSD model's stages run on the CPU, rather than after them:
    #: a first look's minute back, at the cost of fio sharing the CPU with them (the report says so)
    overlap: bool = False
    #: the time stage's kernel costs (:class:`swaptrace.timing.model.CpuCosts`, e.g. from a host-costs file);
    #: default: the in-process micro-benchmarks, lower bounds (docs/timing.md)
    time_costs: Any = None

    def __post_init__(self) -> None:
        if self.memory_bytes is None and self.memory_fraction is None:
            object.__setattr__(self, "memory_fraction", 0.5)


@dataclass
class PipelineResult:
    """Which stages ran, which were skipped (and why), and how long each took."""

    out_dir: Path
    ran: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    summaries: dict[str, Any] = field(default_factory=dict)


def _fingerprint(stage: Stage, out_dir: Path) -> str:
    inputs = {}
    for name in stage.inputs:
        p = out_dir / name
        if p.is_file():
            st = p.stat()
            inputs[name] = [st.st_size, st.st_mtime_ns]
        elif p.is_dir():
            inputs[name] = sorted(
                [str(q.relative_to(p)), q.stat().st_size, q.stat().st_mtime_ns] for q in p.rglob("*") if q.is_file()
            )
        else:
            inputs[name] = None
    # the package version counts as a parameter: a new release reruns every stage
    blob = json.dumps({"params": stage.params, "inputs": inputs, "version": __version__}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _spec_identity(preset: str) -> dict[str, Any]:
    """A preset name, or a TOML file's path and content hash (so editing it reruns generate)."""
    p = Path(preset)
    if p.suffix == ".toml" and p.is_file():
        return {"spec_file": str(p.resolve()), "sha256": _sha256(p)}
    return {"preset": preset}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _runtime_identity(runtime: str) -> dict[str, Any]:
    """A runtime profile's name, or a recording's or profile file's path and content hash."""
    p = Path(runtime)
    if p.is_file():
        return {"file": str(p.resolve()), "sha256": _sha256(p)}
    return {"name": runtime}


#: the stages ``pipeline.json`` may name (:func:`plan`'s, in order)
STAGE_NAMES = ("generate", "mrc", "emulate", "fio-jobs", "fio-run", "ssd", "ssd-thesis", "model-vs-fio", "time",
               "designs", "report")
#: the stage that may run beside the others (``PipelineOptions.overlap``): fio waits on the disk, not the CPU
BESIDE = "fio-run"


def plan(opts: PipelineOptions, out_dir: Path) -> list[Stage]:
    """The stages for these options, in order (library calls, no work done yet)."""
    from swaptrace.ssd.choices import BACKGROUND

    gen_params = {**_spec_identity(opts.preset), "steps": opts.steps, "seed": opts.seed,
                  **({"runtime": _runtime_identity(opts.runtime)} if opts.runtime is not None else {})}
    mem = {"memory_bytes": opts.memory_bytes, "memory_fraction": opts.memory_fraction}
    emu_params = {**mem, "policy": opts.policy, "readahead": opts.readahead}
    fio_skip = None
    if not opts.fio:
        fio_skip = "--no-fio"
    elif shutil.which("fio") is None:
        fio_skip = "fio is not installed (make setup installs it from Debian's packages when root)"

    def runs(fn):
        return lambda d, say, bar: fn(d, opts, say, bar)

    return [
        Stage("generate", (), (ACCESS,), gen_params, runs(S.run_generate)),
        Stage("mrc", (ACCESS,), (MRC_CSV, MRC_PNG), {"exact_max": S.EXACT_MRC_MAX_ACCESSES, **mem}, runs(S.run_mrc)),
        Stage("emulate", (ACCESS,), (SWAPIO,), emu_params, runs(S.run_emulate)),
        Stage("fio-jobs", (SWAPIO,), (FIO_JOBS,), {"size": opts.fio_size_bytes}, runs(S.run_fio_jobs),
              skip_reason="--no-fio" if not opts.fio else None),
        Stage("fio-run", (FIO_JOBS,), (FIO_RUN,),
              {"target": opts.fio_target, "size": opts.fio_size_bytes, "runtime_s": opts.fio_runtime_s,
               "profile": opts.fio_profile, **({"overlapped": True} if opts.overlap else {})},
              runs(S.run_fio), skip_reason=fio_skip),
        Stage("ssd", (SWAPIO,), (SSD,), {"device": opts.device, "capacity": opts.ssd_capacity_bytes,
                                         "background": BACKGROUND}, runs(S.run_ssd)),
        Stage("ssd-thesis", (), (THESIS,),
              {**({} if opts.ssd_capacity_bytes is None else {"device": opts.device, "capacity": opts.ssd_capacity_bytes}),
               **({"first_look": True} if opts.first_look else {})},
              runs(S.run_thesis), skip_reason=None if opts.thesis else "--no-thesis"),
        Stage("model-vs-fio", (SWAPIO, FIO_RUN), (FITTED_DEVICE, MODEL_VS_FIO), {"quick": True},
              runs(S.run_model_vs_fio), skip_reason=fio_skip),
        Stage("time", (ACCESS, SWAPIO, FIO_RUN), (TIMING,),
              {"device": opts.device, "compute": "mlp",
               "costs": None if opts.time_costs is None else dataclasses.asdict(opts.time_costs)},
              runs(S.run_time)),
        Stage("designs", (ACCESS,), (DESIGNS,), {**mem, "device": opts.device, "capacity": opts.ssd_capacity_bytes},
              runs(S.run_designs), skip_reason=None if opts.designs else "not asked for (--designs)"),
        Stage("report", (ACCESS, MRC_CSV, SWAPIO, SSD, FIO_RUN, MODEL_VS_FIO, TIMING, TIMING_DISK, DESIGNS), (REPORT,), {"fio": opts.fio, "thesis": opts.thesis},
              runs(S.run_report)),
    ]


def check_options(opts: PipelineOptions) -> None:
    """Raise :class:`ConfigError` for any option a stage would refuse, before the first stage runs.

    The budget, policy and readahead are resolved against the model's layout by the emulator's own
    :meth:`~swaptrace.emulate.EmulatorConfig.resolve` (its footprint is known without generating).
    """
    from swaptrace.emulate import EmulatorConfig
    from swaptrace.ssd.config import load_device
    from swaptrace.workload.layout import build_layout
    from swaptrace.workload.spec import load_spec

    if opts.steps is not None and opts.steps <= 0:
        raise ConfigError(f"--steps must be positive, got {opts.steps}")
    if opts.seed < 0:
        raise ConfigError(f"--seed must not be negative, got {opts.seed}")
    if opts.fio_size_bytes <= 0 or opts.fio_runtime_s <= 0:
        raise ConfigError("--fio-size and --fio-runtime must be positive")
    if opts.ssd_capacity_bytes is not None and opts.ssd_capacity_bytes <= 0:
        raise ConfigError(f"--ssd-capacity must be positive, got {opts.ssd_capacity_bytes}")
    layout = build_layout(load_spec(opts.preset))
    meta = {"footprint_pages": layout.footprint_pages, "page_bytes": layout.page_bytes}
    EmulatorConfig.resolve(meta, memory_bytes=opts.memory_bytes, memory_fraction=opts.memory_fraction,
                           policy=opts.policy, readahead=opts.readahead, source=opts.preset)
    load_device(opts.device)


class _QuietBar:
    def update(self, n: int, current_item=None) -> None:
        pass


def _no_bar(length: int, label: str) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext(_QuietBar())


def run_pipeline(
    opts: PipelineOptions,
    out_dir: str | os.PathLike,
    *,
    force: bool = False,
    announce: Callable[[str], None] | None = None,
    progress: ProgressBar | None = None,
) -> PipelineResult:
    """Run every stage whose inputs or parameters changed; return what ran.

    Parameters
    ----------
    opts : PipelineOptions
        Preset, steps, memory budget, policy, SSD device, fio options.
    out_dir : path-like
        Folder for every stage's output (created if missing).
    force : bool
        Rerun every stage even if ``pipeline.json`` says it is up to date.
    announce : callable, optional
        Receives one line per stage (``[3/8] emulate ...``) for the terminal.
    progress : callable, optional
        ``progress(length, label)`` returns a context manager whose value has
        ``update(n)``: one progress bar per long stage (the CLI passes click's
        progress bar); none by default.
    """
    say = announce or (lambda line: None)
    out = Path(out_dir)
    check_options(opts)  # every option checked before anything is written
    # a new or empty folder, or one of our own runs (pipeline.json): never a folder of the user's files
    # pipeline.json is a JSON object keyed by stage: a file of that name without one is the user's
    out = check_output_folder(out, True, json_marker(MANIFEST, STAGE_NAMES, any_of=True),
                              "a `swaptrace run` folder (pipeline.json)")
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    except ValueError:
        manifest = {}
    book = _Book(PipelineResult(out), manifest, manifest_path, say)
    stage_list = plan(opts, out)
    beside: _Beside | None = None  # the stage running in a thread beside the others, if any
    try:
        for i, stage in enumerate(stage_list, 1):
            if beside is not None and set(stage.inputs) & set(beside.stage.outputs):
                beside, done = None, beside
                book.record(done.stage, done.fingerprint, done.tag, *done.join())  # this stage reads its output
            tag = f"[{i}/{len(stage_list)}] {stage.name}"
            if stage.skip_reason:
                book.skip(stage, tag, out)
                continue
            fp = _fingerprint(stage, out)
            if not force and book.up_to_date(stage, fp, tag, out):
                continue
            if opts.overlap and stage.name == BESIDE:
                say(f"{tag} ... (beside the stages that follow)")
                beside = _Beside.start(stage, fp, tag, out, say)
                continue
            say(f"{tag} ...")
            start = time.perf_counter()
            summary = stage.run(out, say, progress or _no_bar)
            book.record(stage, fp, tag, summary, time.perf_counter() - start)
        if beside is not None:
            beside, done = None, beside
            book.record(done.stage, done.fingerprint, done.tag, *done.join())
    finally:
        if beside is not None:  # interrupted or failed: stop the stage beside, which removes its partial output
            beside.stop()
    return book.result


@dataclass
class _Book:
    """What a run did, kept in ``pipeline.json`` as each stage ends (the report stage reads it)."""

    result: PipelineResult
    manifest: dict[str, Any]
    path: Path
    say: Callable[[str], None]

    def skip(self, stage: Stage, tag: str, out: Path) -> None:
        self.result.skipped[stage.name] = stage.skip_reason
        kept = [o for o in stage.outputs if (out / o).exists()]
        if kept:  # an earlier run's, kept (a fio run is minutes of measurement) but no longer this run's
            self.say(f"{tag}: skipped ({stage.skip_reason}); an earlier run's {', '.join(kept)} kept, "
                     "left out of the report")
            self.manifest[stage.name] = {"skipped": stage.skip_reason, "outputs": kept}
        else:
            self.say(f"{tag}: skipped ({stage.skip_reason})")
            self.manifest.pop(stage.name, None)
        _save_manifest(self.path, self.manifest)

    def up_to_date(self, stage: Stage, fp: str, tag: str, out: Path) -> bool:
        done = self.manifest.get(stage.name, {})
        if done.get("fingerprint") != fp or not all((out / o).exists() for o in stage.outputs):
            return False
        self.say(f"{tag}: up to date")
        self.result.skipped[stage.name] = "up to date"
        self.result.summaries[stage.name] = done.get("summary")
        return True

    def record(self, stage: Stage, fp: str, tag: str, summary: dict[str, Any] | None, seconds: float) -> None:
        self.result.ran.append(stage.name)
        self.result.seconds[stage.name] = seconds
        self.result.summaries[stage.name] = summary
        # fingerprint after running: outputs of this stage are inputs of the next
        self.manifest[stage.name] = {"fingerprint": fp, "params": stage.params, "seconds": round(seconds, 3),
                                     "finished": time.strftime("%Y-%m-%dT%H:%M:%S"), "summary": summary}
        _save_manifest(self.path, self.manifest)
        self.say(f"{tag}: done in {seconds:.1f} s")


@dataclass
class _Beside:
    """A stage running in a thread beside the main one (its lines go to ``say``; it shows no progress bar)."""

    stage: Stage
    fingerprint: str
    tag: str
    pool: concurrent.futures.ThreadPoolExecutor
    future: concurrent.futures.Future

    @classmethod
    def start(cls, stage: Stage, fp: str, tag: str, out: Path, say: Callable[[str], None]) -> _Beside:
        def work() -> tuple[dict[str, Any] | None, float]:
            t0 = time.perf_counter()
            summary = stage.run(out, say, _no_bar)
            return summary, time.perf_counter() - t0

        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"swaptrace-{stage.name}")
        return cls(stage, fp, tag, pool, pool.submit(work))

    def join(self) -> tuple[dict[str, Any] | None, float]:
        """Wait for the stage; its summary and seconds (its error, if it failed)."""
        try:
            return self.future.result()
        finally:
            self.pool.shutdown(wait=True)

    def stop(self) -> None:
        """End the stage early and wait for it: its programs (fio) get SIGTERM until it returns.

        Ctrl-C reaches fio by itself (it is in the terminal's process group), but SIGTERM, turned into an
        interrupt of the main thread only (:mod:`swaptrace.core.signals`), does not; the stage then fails on
        fio's exit and removes its partial results as on any failure.
        """
        while not self.future.done():
            for pid in _children():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
            concurrent.futures.wait([self.future], timeout=0.2)
        self.pool.shutdown(wait=True)


def _children() -> list[int]:
    """This process's child processes (``/proc/self/task/*/children``, Linux 3.5+ with CONFIG_PROC_CHILDREN)."""
    pids = []
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            pids += [int(p) for p in (task / "children").read_text().split()]
    return pids


def _save_manifest(path: Path, manifest: dict) -> None:
    with AtomicPath(path) as ap:
        ap.tmp.write_text(json.dumps(manifest, indent=2, default=str))
