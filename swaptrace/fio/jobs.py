"""A self-describing folder of fio jobs built from a swap I/O stream.

``swaptrace fio jobs STREAM -o fio_jobs/NAME/`` writes one ``.fio`` file per
job, the replay iolog, ``manifest.json`` (machine-readable: every job, its
group, what it measures, the remapping, the fitted parameters) and
``README.md`` (the same for people, with the command to run a job by hand).

Jobs (docs/fio.md lists the fio 3.33 pitfalls each one avoids):

``replay``
    The stream as a v2 iolog with absolute ``wait`` lines (timed replay; v3
    pacing is broken in 3.33). Compare the achieved ``job_runtime`` with the
    trace duration.
``replay_no_stall``
    The same log with ``replay_no_stall=1``: what the device can do.
``synthetic``
    One job fitted to the stream (:mod:`swaptrace.fio.synthetic`).
``sweep_{read,write}_{mix,4k..1m}``
    Request-size sweep: the stream's size mix of that direction, then fixed
    sizes, random offsets. Preceded by preconditioning.
``write_seq`` / ``write_rand``
    The stream's write-size mix written sequentially vs at random offsets
    (the thesis's "sequential writes gave 4.37x"), each after preconditioning;
    ``write_seq_128k`` adds large sequential writes as a reference.
``qd_{read,write}_{4k..256k}_qd{4,16}``
    Random reads and writes of fixed sizes at queue depths above 1 (``libaio``), beside the
    sweep's depth-1 jobs: the latency by size and depth that ``swaptrace fio profile`` turns into
    a device profile for the time model (:mod:`swaptrace.timing.device_profile`). Run after the sweep (whose
    preconditioning they share).
``precondition``
    SNIA-PTS-style workload-independent fill: write the whole target sequentially twice at 128 KiB
    (SNIA Solid State Storage PTS). Run by ``fio run`` before each group that asks for it; capped at
    ``SWAPTRACE_FILL_CAP`` seconds.
``steady_randwrite``
    The workload-dependent part of SNIA preconditioning: random 4 KiB writes at depth 32 until fio's
    own steady-state detection (``steadystate=iops_slope:...``, ``ss_dur``, ``ss_ramp``) says the IOPS
    stopped changing, or ``SWAPTRACE_RUNTIME`` (the time cap) ends it. Run by ``fio run --steady``
    (:mod:`swaptrace.fio.steady` sets the criteria and reads fio's verdict).

Every job file refers to the run's target and parameters through
environment variables, which fio expands (``${VAR}``); ``fio run`` sets them:

=================== ====================================================
SWAPTRACE_TARGET    target file or device (``filename``, ``replay_redirect``)
SWAPTRACE_SIZE      bytes of the target to use (``size``)
SWAPTRACE_RUNTIME   seconds for this job (``runtime``)
SWAPTRACE_JOBS      absolute path of the job folder (to find the iolog)
SWAPTRACE_LOG       prefix of this job's bandwidth log (``write_bw_log``)
SWAPTRACE_FILL_CAP  seconds the sequential fill may take at most
SWAPTRACE_SS        fio's steady-state criterion (``steadystate``)
SWAPTRACE_SS_DUR    seconds of fio's steady-state window (``ss_dur``)
SWAPTRACE_SS_RAMP   seconds before fio starts collecting (``ss_ramp``)
=================== ====================================================
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from swaptrace.core import traceio
from swaptrace.core.inputs import read_json
from swaptrace.core.units import MAX_BYTES, format_bytes, parse_bytes
from swaptrace.core.version import __version__
from swaptrace.errors import ConfigError, SwaptraceError, TraceFileError
from swaptrace.fio import iolog
from swaptrace.fio import synthetic as fitmod
from swaptrace.fio.jobfile import IOENGINES, validate_job_file

#: fixed request sizes of the sweep (fio size suffixes are binary)
SWEEP_SIZES = ("4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k", "1m")
#: request sizes and queue depths (above the sweep's 1) of the device-profile jobs
PROFILE_SIZES = ("4k", "16k", "64k", "256k")
PROFILE_DEPTHS = (4, 16)
#: fio engine of the profile jobs: psync has one request in flight whatever its iodepth
PROFILE_IOENGINE = "libaio"
#: largest replay target chosen by default; matches the Makefile's SIZE=1GiB
DEFAULT_MAX_REPLAY_BYTES = 1 << 30
DEFAULT_MAX_REQUESTS = 100_000
BW_LOG_MSEC = 250
ENV_VARS = ("SWAPTRACE_TARGET", "SWAPTRACE_SIZE", "SWAPTRACE_RUNTIME", "SWAPTRACE_JOBS", "SWAPTRACE_LOG",
            "SWAPTRACE_FILL_CAP", "SWAPTRACE_SS", "SWAPTRACE_SS_DUR", "SWAPTRACE_SS_RAMP")
#: a job file's use of a variable (fio expands ``${VAR}`` from the environment)
ENV_REFERENCE = re.compile(r"\$\{(SWAPTRACE_[A-Z0-9_]+)\}")
#: the target a job run by hand uses in README.md's examples
EXAMPLE_TARGET = "/tmp/swaptrace-fio.dat"
#: request size, queue depth and engine of the steady-state rounds (SNIA PTS's random 4 KiB at depth 32)
STEADY_BS = 4096
STEADY_IODEPTH = 32
MANIFEST = "manifest.json"
IOLOG_NAME = "replay.iolog"
#: sub-folder where ``fio run`` puts its results by default (kept by ``--force``)
RUNS_DIR = "runs"

#: group -> (run preconditioning first?, what the group measures)
GROUPS = {
    "sweep": (True, "request-size sweep: the stream's size mix vs fixed sizes, random offsets"),
    "write_seq": (True, "sequential writes: the stream's write sizes, and 128 KiB"),
    "write_rand": (True, "the stream's write sizes written at random offsets (the swap pattern)"),
    "profile": (False, "random reads and writes at queue depths above 1, for the device profile"),
    "replay": (False, "the stream itself, timed and as fast as possible"),
    "steady": (True, "random 4 KiB writes until fio's steady-state detection says they stopped changing"),
    "synthetic": (False, "one fitted job approximating the stream"),
}


@dataclass(frozen=True)
class JobSpec:
    """One fio job of the folder and what it measures."""

    name: str
    group: str
    kind: str  # replay | synthetic | sweep | write | precondition
    description: str
    options: dict[str, str]
    direction: str = "mixed"  # read | write | mixed
    request_bytes: int = 0  # fixed request size, 0 = a size mix
    pattern: str = "random"  # random | sequential | replay
    runtime_factor: int = 1
    time_based: bool = True
    iodepth: int = 0  # the job's queue depth when it differs from the folder's engine setting


    @property
    def file(self) -> str:
        return f"{self.name}.fio"


@dataclass(frozen=True)
class JobFolder:
    """What :func:`build_jobs` wrote."""

    path: Path
    manifest: dict
    jobs: tuple[JobSpec, ...] = field(default=())


def _base_options(ioengine: str, iodepth: int, direct: bool) -> dict[str, str]:
    return {"ioengine": ioengine, "iodepth": str(iodepth), "direct": "1" if direct else "0"}


def _timed(opts: dict[str, str]) -> dict[str, str]:
    return {**opts, "time_based": "1", "runtime": "${SWAPTRACE_RUNTIME}"}


def _logged(opts: dict[str, str]) -> dict[str, str]:
    return {**opts, "write_bw_log": "${SWAPTRACE_LOG}", "log_avg_msec": str(BW_LOG_MSEC)}


def _target(opts: dict[str, str]) -> dict[str, str]:
    return {"filename": "${SWAPTRACE_TARGET}", "size": "${SWAPTRACE_SIZE}", **opts}


def _size_label(n: int) -> str:
    for unit, shift in (("m", 20), ("k", 10)):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def plan_jobs(fit: fitmod.StreamFit, *, ioengine="psync", iodepth=1, direct=True, sweep_sizes=SWEEP_SIZES,
              profile_sizes=PROFILE_SIZES, profile_depths=PROFILE_DEPTHS) -> list[JobSpec]:
    """The job list for a fitted stream (no files written)."""
    base = _base_options(ioengine, iodepth, direct)
    jobs: list[JobSpec] = []
    replay = {
        **base,
        "read_iolog": "${SWAPTRACE_JOBS}/" + IOLOG_NAME,
        "replay_redirect": "${SWAPTRACE_TARGET}",
        "runtime": "${SWAPTRACE_RUNTIME}",
    }
    if direct:
        replay["replay_align"] = "4096"
    jobs.append(
        JobSpec("replay", "replay", "replay", "the stream replayed at its own pace (v2 iolog, absolute waits)",
                _logged(replay), pattern="replay", runtime_factor=10, time_based=False)
    )
    jobs.append(
        JobSpec("replay_no_stall", "replay", "replay", "the stream replayed as fast as the device allows",
                _logged({**replay, "replay_no_stall": "1"}), pattern="replay", runtime_factor=10, time_based=False)
    )
    jobs.append(
        JobSpec("synthetic", "synthetic", "synthetic",
                "one job fitted to the stream: size mix per direction, read/write mix, sequential share, zones",
                _logged(_timed(_target({**base, **fit.fio_options()}))), runtime_factor=2)
    )
    for direction, dfit in (("read", fit.read), ("write", fit.write)):
        rw = "randread" if direction == "read" else "randwrite"
        if dfit is not None:
            jobs.append(
                JobSpec(f"sweep_{direction}_mix", "sweep", "sweep",
                        f"random {direction}s with the stream's {direction} size mix",
                        _logged(_timed(_target({**base, "rw": rw, "bssplit": dfit.bssplit_text(), "norandommap": "1"}))),
                        direction=direction)
            )
        for label in sweep_sizes:
            size = parse_bytes(label, "sweep size")
            jobs.append(
                JobSpec(f"sweep_{direction}_{_size_label(size)}", "sweep", "sweep",
                        f"random {direction}s of {format_bytes(size)}",
                        _logged(_timed(_target({**base, "rw": rw, "bs": str(size), "norandommap": "1"}))),
                        direction=direction, request_bytes=size)
            )
    for direction in ("read", "write"):
        rw = "randread" if direction == "read" else "randwrite"
        for label in profile_sizes:
            size = parse_bytes(label, "profile size")
            for depth in profile_depths:
                opts = {**_base_options(PROFILE_IOENGINE, depth, direct), "rw": rw, "bs": str(size), "norandommap": "1"}
                jobs.append(
                    JobSpec(f"qd_{direction}_{_size_label(size)}_qd{depth}", "profile", "sweep",
                            f"random {direction}s of {format_bytes(size)} at queue depth {depth}",
                            _logged(_timed(_target(opts))), direction=direction, request_bytes=size, iodepth=depth)
                )
    if fit.write is not None:
        bss = fit.write.bssplit_text()
        jobs.append(
            JobSpec("write_seq", "write_seq", "write", "the stream's write sizes, written sequentially",
                    _logged(_timed(_target({**base, "rw": "write", "bssplit": bss, "norandommap": "1"}))),
                    direction="write", pattern="sequential", runtime_factor=4)
        )
        jobs.append(
            JobSpec("write_seq_128k", "write_seq", "write", "sequential writes of 128 KiB (large sequential reference)",
                    _logged(_timed(_target({**base, "rw": "write", "bs": str(128 << 10)}))),
                    direction="write", request_bytes=128 << 10, pattern="sequential", runtime_factor=4)
        )
        jobs.append(
            JobSpec("write_rand", "write_rand", "write", "the stream's write sizes at random offsets (swap pattern)",
                    _logged(_timed(_target({**base, "rw": "randwrite", "bssplit": bss, "norandommap": "1"}))),
                    direction="write", runtime_factor=4)
        )
    jobs.append(steady_job(direct=direct))
    return jobs


def steady_job(*, direct=True) -> JobSpec:
    """SNIA-style rounds: random 4 KiB writes at depth 32, ended by fio's steady-state detection or the cap."""
    opts = {**_base_options(PROFILE_IOENGINE, STEADY_IODEPTH, direct), "rw": "randwrite", "bs": str(STEADY_BS),
            "norandommap": "1", "randrepeat": "0", "steadystate": "${SWAPTRACE_SS}",
            "ss_dur": "${SWAPTRACE_SS_DUR}", "ss_ramp": "${SWAPTRACE_SS_RAMP}"}
    return JobSpec("steady_randwrite", "steady", "steady",
                   "random 4 KiB writes at depth 32 until steady state (fio's detection) or the time cap",
                   _logged(_timed(_target(opts))), direction="write", request_bytes=STEADY_BS,
                   iodepth=STEADY_IODEPTH)


def precondition_job(*, ioengine="psync", iodepth=1, direct=True) -> JobSpec:
    """Sequential fill of twice the target at 128 KiB (SNIA Solid State Storage PTS)."""
    opts = _logged(_target({**_base_options(ioengine, iodepth, direct), "rw": "write", "bs": "128k", "loops": "2",
                            "runtime": "${SWAPTRACE_FILL_CAP}"}))
    return JobSpec("precondition", "precondition", "precondition",
                   "SNIA-style preconditioning: the whole target written sequentially twice at 128 KiB",
                   opts, direction="write", request_bytes=128 << 10, pattern="sequential", time_based=False)


def render_job(job: JobSpec) -> str:
    """The text of a one-job fio file."""
    lines = [
        f"; {job.name}: {job.description}",
        f"; group {job.group}; generated by swaptrace {__version__}; run with `swaptrace fio run`",
        "; or by hand with the SWAPTRACE_* environment variables set (see README.md)",
        f"[{job.name}]",
    ]
    lines += [f"{k}={v}" for k, v in job.options.items()]
    return "\n".join(lines) + "\n"


def build_jobs(
    stream_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    size_bytes: int | None = None,
    max_requests: int | None = DEFAULT_MAX_REQUESTS,
    ioengine: str = "psync",
    iodepth: int = 1,
    direct: bool = True,
    sweep_sizes: tuple[str, ...] = SWEEP_SIZES,
    profile_sizes: tuple[str, ...] = PROFILE_SIZES,
    profile_depths: tuple[int, ...] = PROFILE_DEPTHS,
    force: bool = False,
) -> JobFolder:
    """Write the job folder for a swap I/O stream (atomically: a temporary folder renamed into place).

    Parameters
    ----------
    stream_path : path-like
        A ``swapio`` Parquet file.
    out_dir : path-like
        The folder to create (refused if it exists and is not empty, unless
        ``force``, which replaces the jobs but keeps earlier results in ``runs/``).
    size_bytes : int, optional
        Size of the target the replay is mapped onto; ``fio run --size`` must
        be at least this. Default: the stream's extent rounded up to 1 MiB, at
        most :data:`DEFAULT_MAX_REPLAY_BYTES` (larger streams wrap around).
    max_requests : int, optional
        Cap on the requests written to the replay log.
    ioengine, iodepth, direct
        fio engine settings of every job (default ``psync``, 1, O_DIRECT).
    sweep_sizes : tuple of str
        Fixed request sizes of the sweep.
    profile_sizes, profile_depths : tuple
        Request sizes and queue depths of the device-profile jobs (one job per direction, size and depth).

    Raises
    ------
    TraceFileError
        Not a swapio file, or no read/write requests in it.
    ConfigError
        Bad sizes or options.
    OutputError
        ``out_dir`` exists (without ``force``) or cannot be written.
    """
    stream = traceio.open_trace(stream_path, "swapio")
    _check_job_options(ioengine, iodepth, max_requests, sweep_sizes, profile_sizes, profile_depths)
    end, max_len, n = iolog.stream_extent(stream)
    if n == 0:
        raise TraceFileError(f"{stream_path}: the stream has no read or write requests")
    if size_bytes is None:
        size_bytes = min(-(-end // (1 << 20)) * (1 << 20), DEFAULT_MAX_REPLAY_BYTES)
    remap = iolog.plan_remap(end, max_len, size_bytes)
    out = _check_out_dir(Path(out_dir), force)
    tmp = traceio.make_partial_folder(out)
    try:
        info = iolog.write_iolog_v2(stream, tmp / IOLOG_NAME, remap, timed=True, max_requests=max_requests)
        fit = fitmod.fit_stream(stream, remap)
        jobs = plan_jobs(fit, ioengine=ioengine, iodepth=iodepth, direct=direct, sweep_sizes=sweep_sizes,
                         profile_sizes=profile_sizes, profile_depths=profile_depths)
        pre = precondition_job(ioengine=ioengine, iodepth=iodepth, direct=direct)
        reads = {}
        for job in [pre, *jobs]:
            text = render_job(job)
            (tmp / job.file).write_text(text)
            reads[job.name] = job_variables(text)  # what the README tells a user to set: what the file reads
        manifest = _manifest(stream, Path(stream_path), remap, info, fit=fit, pre=pre, jobs=jobs, ioengine=ioengine,
                             iodepth=iodepth, direct=direct)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        (tmp / "README.md").write_text(render_readme(manifest, reads))
        for job in [pre, *jobs]:
            validate_job_file(tmp / job.file, example_env(tmp, manifest["min_target_bytes"]))
        # into an earlier job folder: its own files are replaced, runs/ and anything else stay
        traceio.install_folder(tmp, out, _own_files(out), last=MANIFEST)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return JobFolder(out, manifest, tuple(jobs))


def _check_job_options(ioengine: str, iodepth: int, max_requests: int | None, sweep_sizes: tuple[str, ...],
                       profile_sizes: tuple[str, ...], profile_depths: tuple[int, ...]) -> None:
    if ioengine not in IOENGINES:
        raise ConfigError(f"ioengine: {ioengine!r} is not one of {', '.join(IOENGINES)}")
    if iodepth < 1:
        raise ConfigError(f"iodepth: must be at least 1, got {iodepth}")
    if max_requests is not None and max_requests < 1:
        raise ConfigError(f"max-requests: must be at least 1, got {max_requests}")
    if not sweep_sizes:
        raise ConfigError("sweep: give at least one request size")
    for what, labels in (("sweep", sweep_sizes), ("profile", profile_sizes)):
        for label in labels:
            size = parse_bytes(label, f"{what} size")
            if size <= 0 or size % 512:
                raise ConfigError(f"{what} size: {label!r} is not a positive multiple of 512 bytes")
    for depth in profile_depths:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ConfigError(f"profile depth: must be a whole number of at least 1, got {depth!r}")


def _is_job_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a fio job folder's manifest (``kind: fio-jobs``), checked whole."""
    try:
        load_manifest(folder)
    except SwaptraceError:
        return False
    return True


def _own_files(folder: Path) -> list[str]:
    """The files an earlier ``fio jobs`` wrote in ``folder`` (its manifest's jobs, the iolog, README)."""
    if not _is_job_folder(folder):
        return []
    m = load_manifest(folder)
    return [j["file"] for j in [m["precondition"], *m["jobs"]]] + [IOLOG_NAME, "README.md", MANIFEST]


def _check_out_dir(out: Path, force: bool) -> Path:
    return traceio.check_output_folder(out, force, _is_job_folder, "a fio job folder (manifest.json)")


def _manifest(stream, stream_path, remap, info, *, fit, pre, jobs, ioengine, iodepth, direct) -> dict:
    meta = stream.meta
    return {
        "swaptrace_version": __version__,
        "kind": "fio-jobs",
        "stream": str(stream_path.resolve()),
        "stream_meta": {k: meta.get(k) for k in ("source", "page_bytes", "device_bytes", "memory_bytes", "duration_us")},
        "stream_summary": meta.get("summary"),
        "min_target_bytes": int(remap.target_bytes) if remap.wrap else max(int(info.end_bytes), 1 << 20),
        "remap": remap.to_dict(),
        "replay": {
            "iolog": IOLOG_NAME,
            "format": "fio v2 iolog, absolute wait lines in ms since fio start",
            "lead_ms": iolog.LEAD_MS,
            "requests": info.requests,
            "reads": info.reads,
            "writes": info.writes,
            "read_bytes": info.read_bytes,
            "write_bytes": info.write_bytes,
            "discards_dropped": info.discards_dropped,
            "truncated": info.truncated,
            "trace_duration_ms": info.duration_ms,
            "end_bytes": info.end_bytes,
        },
        "fit": {
            "read": asdict(fit.read) if fit.read else None,
            "write": asdict(fit.write) if fit.write else None,
            "rwmixread": fit.rwmixread,
            "zones": list(fit.zones),
            **fit.extra,
        },
        "engine": {"ioengine": ioengine, "iodepth": iodepth, "direct": direct},
        "env": list(ENV_VARS),
        "groups": {g: {"precondition": p, "description": d} for g, (p, d) in GROUPS.items()},
        "precondition": _job_entry(pre),
        "jobs": [_job_entry(j) for j in jobs],
    }


def _job_entry(j: JobSpec) -> dict:
    return {
        "name": j.name,
        "file": j.file,
        "group": j.group,
        "kind": j.kind,
        "direction": j.direction,
        "request_bytes": j.request_bytes,
        "pattern": j.pattern,
        "runtime_factor": j.runtime_factor,
        "time_based": j.time_based,
        "iodepth": j.iodepth or None,
        "description": j.description,
    }


def job_variables(text: str) -> tuple[str, ...]:
    """The ``SWAPTRACE_*`` variables a job file reads (``${VAR}``), in :data:`ENV_VARS` order."""
    found = set(ENV_REFERENCE.findall(text))
    unknown = found - set(ENV_VARS)
    if unknown:  # a job that reads a variable fio run does not set, and README.md could not document
        raise ValueError(f"job file reads {sorted(unknown)}, not one of ENV_VARS")
    return tuple(v for v in ENV_VARS if v in found)


def hand_env(manifest: dict) -> dict[str, tuple[str, str]]:
    """``{variable: (what it is, the value to give)}`` for running a job by hand, as README.md states them;
    ``$PWD`` is this folder (run from it), ``<job>`` the job's name. The steady-state values are those
    ``fio run --steady`` gives by default."""
    from swaptrace.fio.steady import SteadyOptions

    steady = SteadyOptions()
    ss = steady.env()
    size = max(1 << 30, int(manifest["min_target_bytes"]))
    return {
        "SWAPTRACE_TARGET": ("the target: a file (created and filled) or a block device", EXAMPLE_TARGET),
        "SWAPTRACE_SIZE": (f"bytes of the target the job uses (at least {manifest['min_target_bytes']})", str(size)),
        "SWAPTRACE_RUNTIME": ("seconds the job runs (`fio run --runtime` times its factor, below; for "
                              "`steady_randwrite` the rounds' time cap)", "10"),
        "SWAPTRACE_JOBS": ("absolute path of this folder (the replay's iolog is in it)", "$PWD"),
        "SWAPTRACE_LOG": ("prefix of the job's bandwidth log", "<job>"),
        "SWAPTRACE_FILL_CAP": ("seconds the sequential fill may take at most", ss["SWAPTRACE_FILL_CAP"]),
        "SWAPTRACE_SS": ("fio's steady-state criterion (`steadystate`)", ss["SWAPTRACE_SS"]),
        "SWAPTRACE_SS_DUR": (f"seconds of fio's steady-state window ({steady.rounds} rounds)", ss["SWAPTRACE_SS_DUR"]),
        "SWAPTRACE_SS_RAMP": ("seconds before fio starts collecting (`ss_ramp`)", ss["SWAPTRACE_SS_RAMP"]),
    }


def hand_command(job: str, variables: tuple[str, ...], values: dict[str, tuple[str, str]]) -> str:
    """The shell line that runs job ``job`` by hand from its folder, with exactly the variables it reads."""
    env = " ".join(f"{v}={values[v][1].replace('<job>', job)}" for v in variables)
    return f"{env} fio --output-format=json {job}.fio"


def render_readme(manifest: dict, reads: dict[str, tuple[str, ...]]) -> str:
    """README.md of a job folder: each job, what it tests and the variables it reads (``reads``: job name ->
    :func:`job_variables` of its file), how to run them all or one by hand, the remapping."""
    rp = manifest["replay"]
    values = hand_env(manifest)
    used = [v for v in ENV_VARS if any(v in r for r in reads.values())]
    examples = [n for n in (next((j["name"] for j in manifest["jobs"] if j["group"] == "sweep"), None), "replay",
                            manifest["precondition"]["name"], "steady_randwrite") if n in reads]
    lines = [
        "# fio jobs generated by swaptrace",
        "",
        f"From the swap I/O stream `{manifest['stream']}` (source: {manifest['stream_meta'].get('source')}).",
        "",
        "Run them all (creates and fills a file target, refuses unsafe devices, parses results):",
        "",
        f"    swaptrace fio run THIS_FOLDER --target {EXAMPLE_TARGET} --size 1GiB",
        "",
        "Or one job by hand, from this folder: fio expands `${SWAPTRACE_...}` from the environment, and each job",
        "reads the variables its row in the table of jobs names (the last column), with these values:",
        "",
        "| variable | what it is | value to give |",
        "|---|---|---|",
        *(f"| `{v}` | {values[v][0]} | `{values[v][1]}` |" for v in used),
        "",
        "`$PWD` is this folder and `<job>` the job's name. For example:",
        "",
        *(f"    {hand_command(n, reads[n], values)}" for n in examples),
        "",
        f"The target must be at least {manifest['min_target_bytes']} bytes ({format_bytes(manifest['min_target_bytes'])}).",
        "",
        "| job | group | tests | runtime | reads |",
        "|---|---|---|---|---|",
    ]
    pre = manifest["precondition"]
    def names(job: str) -> str:
        return ", ".join(f"`{v}`" for v in reads[job])

    lines.append(f"| `{pre['name']}` | - | {pre['description']} (run before groups marked *) | until done (at most "
                 f"SWAPTRACE_FILL_CAP) | {names(pre['name'])} |")
    for j in manifest["jobs"]:
        star = "*" if manifest["groups"][j["group"]]["precondition"] else ""
        rt = f"{j['runtime_factor']} x SWAPTRACE_RUNTIME" + ("" if j["time_based"] else " at most")
        if j["group"] == "steady":
            rt = "until steady, at most SWAPTRACE_RUNTIME (the time cap)"
        lines.append(f"| `{j['name']}` | {j['group']}{star} | {j['description']} | {rt} | {names(j['name'])} |")
    lines += [
        "",
        "## Replay",
        "",
        f"`{rp['iolog']}`: {rp['format']} ({rp['lead_ms']} ms lead for fio's start-up; fio 3.33's v3 pacing",
        "is unreliable, so v2 waits are used). Compare the achieved `job_runtime` of `replay` with the",
        f"trace duration ({rp['trace_duration_ms']:.1f} ms); `replay_no_stall` shows what the device can do.",
        f"Requests: {rp['requests']} ({rp['reads']} reads, {rp['writes']} writes)"
        + (", truncated to the cap" if rp["truncated"] else "")
        + f"; {rp['discards_dropped']} discards dropped (fio 3.33 ignores trim lines in text logs).",
        "",
        f"Remapping: {manifest['remap']['rule']} (target_bytes = {manifest['remap']['target_bytes']}).",
        "`replay_redirect` always points fio at the run's target, never at the file named in the log.",
        "",
        "## Caveats",
        "",
        "- `bssplit` jobs use `norandommap=1` (without it fio truncates sizes).",
        "- fio's `--parse-only` checks option names only; `swaptrace fio run` also validates values.",
        "- Ratios measured on a disk that is not an SSD (or on a file in a file system) describe that disk.",
    ]
    return "\n".join(lines) + "\n"


def load_manifest(jobs_dir: str | os.PathLike) -> dict:
    """Read and check a job folder's manifest."""
    d = Path(jobs_dir)
    if not d.is_dir():
        raise ConfigError(f"{d}: not a job folder (make one with `swaptrace fio jobs STREAM -o {d}`)")
    mpath = d / MANIFEST
    if not os.path.lexists(mpath):
        raise ConfigError(f"{d}: has no {MANIFEST}; not a swaptrace job folder")
    manifest = read_json(mpath, "fio job manifest", "is not valid JSON")
    if not isinstance(manifest, dict) or manifest.get("kind") != "fio-jobs" or "jobs" not in manifest:
        raise ConfigError(f"{mpath}: is not a swaptrace fio-jobs manifest")
    _check_manifest(manifest, mpath)
    return manifest


#: the fields of a job entry the runner reads, and their types
_JOB_TEXT = ("name", "file", "group", "kind", "direction", "pattern")
#: the longest a job runs, in multiples of --runtime (the replays run 10x; far above any job written)
MAX_RUNTIME_FACTOR = 1000


def _check_manifest(m: dict, where: Path) -> None:
    """The manifest's job entries, groups and sizes are of the types and ranges `fio run` uses; a damaged or
    hand-edited one is refused in one line naming it (not a TypeError, or a job file outside the folder)."""
    def bad(what: str) -> TraceFileError:
        return TraceFileError(f"{where}: {what}; make the job folder again with `swaptrace fio jobs`")

    groups = m.get("groups")
    if not isinstance(groups, dict) or not all(isinstance(g, dict) and isinstance(g.get("precondition"), bool)
                                               for g in groups.values()):
        raise bad("groups is not an object of groups (each with precondition true or false)")
    if not isinstance(m["jobs"], list) or not m["jobs"]:
        raise bad("jobs is not a list of jobs")
    for job in [m.get("precondition"), *m["jobs"]]:
        if not isinstance(job, dict):
            raise bad(f"a job is {job!r}, not an object")
        for key in _JOB_TEXT:
            if not isinstance(job.get(key), str):
                raise bad(f"job {job.get('name')!r}: {key} is {job.get(key)!r}, not text")
        if job["file"] != Path(job["file"]).name or job["file"] in ("", ".", ".."):
            raise bad(f"job {job['name']!r}: file {job['file']!r} is not a file of the job folder")
        if job is not m.get("precondition") and job["group"] not in groups:
            raise bad(f"job {job['name']!r}: group {job['group']!r} is not one of its groups")
        factor = job.get("runtime_factor", 1)
        if isinstance(factor, bool) or not isinstance(factor, int) or not 1 <= factor <= MAX_RUNTIME_FACTOR:
            raise bad(f"job {job['name']!r}: runtime_factor {factor!r} is not a whole number in "
                      f"[1, {MAX_RUNTIME_FACTOR}]")
        for key, top in (("request_bytes", MAX_BYTES), ("iodepth", 65535)):
            v = job.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= top):
                raise bad(f"job {job['name']!r}: {key} {v!r} is not a whole number in [0, {top}]")
    v = m.get("min_target_bytes")
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_BYTES:
        raise bad(f"min_target_bytes {v!r} is not a size in bytes")
    if not isinstance(m.get("engine") or {}, dict):
        raise bad("engine is not an object")


def example_env(jobs_dir: Path, size_bytes: int, target: str = "/tmp/swaptrace-example.dat", runtime_s: int = 1) -> dict[str, str]:
    """Environment values used to parse and validate jobs without running them."""
    return {
        "SWAPTRACE_TARGET": target,
        "SWAPTRACE_SIZE": str(size_bytes),
        "SWAPTRACE_RUNTIME": str(runtime_s),
        "SWAPTRACE_JOBS": str(Path(jobs_dir).resolve()),
        "SWAPTRACE_LOG": "example",
        "SWAPTRACE_FILL_CAP": "86400",
        "SWAPTRACE_SS": "iops_slope:2.5%",
        "SWAPTRACE_SS_DUR": "5",
        "SWAPTRACE_SS_RAMP": "0",
    }
