"""Run a job folder with fio, safely, and collect the results.

Safety rules (docs/fio.md, "Safety"):

* fio must exist and report a version (3.33 is what the pitfalls were
  verified on; other 3.x versions run with a note).
* A regular-file target is created and **filled with data** (a file made by
  ``fallocate`` alone reads back zeros without any I/O). Files swaptrace made
  carry the extended attribute ``user.swaptrace``; overwriting any other
  existing file needs ``--force``. A folder, an active swap file and the
  backing file of a loop device are refused.
* A block device is refused unless ``allow_device`` is given **and** nothing
  else uses it (:func:`swaptrace.core.blockdev.in_use`): not mounted, nor any
  partition of it, in any mount namespace we can read; not held by another
  device (LVM, dm, md); not the backing device of a loop device; not an
  active swap device (``/proc/swaps``). No option overrides these. It must
  also carry no recognisable file system or partition-table signature
  (``blkid -p``, ``wipefs``, and our own look at the magic bytes) -- this
  check alone is waived by ``force``.
* The device is then opened with ``O_EXCL`` and kept open for the whole run:
  the kernel refuses the open if anyone holds the device exclusively (a mount
  in any namespace, md/dm, another ``O_EXCL`` opener) and, while swaptrace
  holds it, refuses them in turn.
* Every job writes JSON to its own file (``--output-format=json
  --output=FILE``); notes fio prints before the JSON are tolerated.
* Results go to a temporary folder renamed into place at the end, so an
  interrupted run leaves no half-written results.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import functools
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swaptrace.core import blockdev, traceio
from swaptrace.core.signals import sigterm_as_interrupt
from swaptrace.core.units import format_bytes
from swaptrace.errors import ConfigError, ToolError
from swaptrace.fio import busy as busymod
from swaptrace.fio import jobs as jobsmod
from swaptrace.fio import results as resmod
from swaptrace.fio import steady as ssmod
from swaptrace.fio.jobfile import validate_job_file

#: the fio the pitfalls in docs/fio.md were verified on
VERIFIED_VERSION = (3, 33)
MIN_VERSION = (3, 10)
TARGET_XATTR = "user.swaptrace"
FILL_CHUNK_BYTES = 4 << 20
DEFAULT_RUNTIME_S = 3
#: sub-folder of a run holding fio's own outputs (JSON, stderr, bandwidth logs)
RAW_DIR = "raw"


@dataclass(frozen=True)
class Fio:
    """A fio binary and its version."""

    path: str
    version: tuple[int, int]
    text: str

    @property
    def verified(self) -> bool:
        return self.version == VERIFIED_VERSION


def find_fio(fio: str | None = None) -> Fio:
    """Locate fio (``fio`` argument, else ``$PATH``) and read its version.

    Raises
    ------
    ToolError
        fio is missing, does not run, or is older than :data:`MIN_VERSION`.
    """
    path = shutil.which(fio or "fio")
    if path is None:
        raise ToolError(
            f"{fio or 'fio'}: not found; install it (Debian: apt-get install fio; `make setup` does this as root)"
        )
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        raise ToolError(f"{path}: cannot run ({exc.strerror})") from None
    text = proc.stdout.strip()
    m = re.search(r"fio-(\d+)\.(\d+)", text)
    if proc.returncode != 0 or m is None:
        raise ToolError(f"{path}: did not report a fio version (got {text[:60]!r})")
    version = (int(m.group(1)), int(m.group(2)))
    if version < MIN_VERSION:
        raise ToolError(f"{path}: {text} is too old; swaptrace needs fio >= {MIN_VERSION[0]}.{MIN_VERSION[1]}")
    return Fio(path, version, text)


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """A checked fio target."""

    path: Path
    is_device: bool
    exists: bool
    current_bytes: int

    def describe(self) -> str:
        kind = "block device" if self.is_device else ("file" if self.exists else "new file")
        return f"{self.path} ({kind})"


def check_target(path: str | os.PathLike, size_bytes: int, *, allow_device: bool = False, force: bool = False) -> Target:
    """Decide whether ``path`` may be written by fio; raise with the reason if not.

    Nothing is written. See the module docstring for the rules.

    Raises
    ------
    ConfigError
        Unsafe or unsuitable target (folder, device without ``allow_device``,
        mounted/swap/signature device, foreign file without ``force``, too small,
        not enough free space).
    """
    p = Path(path)
    if size_bytes <= 0:
        raise ConfigError(f"size: must be positive, got {size_bytes}")
    if p.is_dir():
        raise ConfigError(f"{p}: is a folder; give a file (created if missing) or a block device")
    if p.exists():
        st = os.stat(p)
        if stat.S_ISBLK(st.st_mode):
            _check_device(p, size_bytes, allow_device, force)
            return Target(p, True, True, blockdev.size_bytes(p))
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{p}: is neither a regular file nor a block device")
        if blockdev.swap_entries(p):
            raise ConfigError(f"{p}: is an active swap file; swapoff it first")
        backs = blockdev.loops_backed_by(p)
        if backs:
            raise ConfigError(f"{p}: is the backing file of {', '.join(backs)}; detach it first (losetup -d)")
        if st.st_size > 0 and not _is_ours(p) and not force:
            raise ConfigError(
                f"{p}: exists and was not created by swaptrace; fio would overwrite it (pass --force to allow)"
            )
        extra = max(0, size_bytes - st.st_size)
        _check_free(p.parent, extra)
        return Target(p, False, True, st.st_size)
    if os.path.realpath(p).startswith("/dev/"):
        raise ConfigError(f"{p}: no such device (refusing to create a regular file under /dev)")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"{p}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"{p}: folder {parent} is not writable")
    _check_free(parent, size_bytes)
    return Target(p, False, False, 0)


def fraction_of_target(path: str | os.PathLike, fraction: float) -> int:
    """``fraction`` of a block device's size, or of an existing file's, rounded down to 1 MiB.

    Raises
    ------
    ConfigError
        The target does not exist yet (a new file has no size to take a fraction of) or the result is 0.
    """
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: --capacity-fraction needs an existing device or file; give --size for a new file")
    total = blockdev.size_bytes(p) if blockdev.is_block_device(p) else p.stat().st_size
    size = int(total * fraction) // (1 << 20) * (1 << 20)
    if size <= 0:
        raise ConfigError(f"{p}: {fraction} of its {total} bytes is less than 1 MiB")
    return size


def _check_device(p: Path, size_bytes: int, allow_device: bool, force: bool) -> None:
    if not allow_device:
        raise ConfigError(f"{p}: is a block device; fio would overwrite it. Pass --allow-device if that is intended")
    busy = blockdev.in_use(p)
    if busy:  # no override: a device something else uses is never written
        raise ConfigError(f"{p}: {busy[0]}; refusing to write to it")
    sigs = blockdev.signatures(p)
    if sigs and not force:
        raise ConfigError(
            f"{p}: holds data ({', '.join(sigs)}); wipe it or pass --force together with --allow-device"
        )
    have = blockdev.size_bytes(p)
    if have < size_bytes:
        raise ConfigError(f"{p}: device has {have} bytes, less than --size {size_bytes}")


def _check_free(folder: Path, need_bytes: int) -> None:
    if need_bytes <= 0:
        return
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    if free < need_bytes:
        raise ConfigError(f"{folder}: only {format_bytes(free)} free, the target needs {format_bytes(need_bytes)} more")


def _is_ours(p: Path) -> bool:
    try:
        return os.getxattr(p, TARGET_XATTR) == b"fio-target"
    except OSError:
        return False


def prepare_file_target(target: Target, size_bytes: int, progress: Callable[[int], None] | None = None) -> int:
    """Create and/or extend a file target to ``size_bytes``, writing pseudo-random data (never fallocate).

    Returns the number of bytes written. Marks a file it created with the
    ``user.swaptrace`` extended attribute when the file system allows it.
    """
    if target.is_device or target.current_bytes >= size_bytes:
        return 0
    rng = np.random.default_rng(0x5EED)
    start = target.current_bytes - target.current_bytes % FILL_CHUNK_BYTES
    written = 0
    fd = os.open(target.path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if not target.exists:
            try:
                os.setxattr(target.path, TARGET_XATTR, b"fio-target")
            except OSError as exc:
                if exc.errno not in (errno.ENOTSUP, errno.EPERM, errno.EOPNOTSUPP):
                    raise
        pos = start
        while pos < size_bytes:
            n = min(FILL_CHUNK_BYTES, size_bytes - pos)
            buf = rng.bytes(n)
            os.pwrite(fd, buf, pos)
            pos += n
            written += n
            if progress is not None:
                progress(n)
        os.fsync(fd)
    finally:
        os.close(fd)
    return written


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Step:
    """One fio invocation of a run."""

    instance: str
    job: dict
    runtime_s: int


@dataclass(frozen=True)
class RunOutcome:
    """What :func:`run_jobs` did."""

    out_dir: Path | None
    results_path: Path | None
    bwlog_path: Path | None
    commands: tuple[str, ...]
    rows: tuple[dict, ...]
    ratios: dict


def plan_steps(manifest: dict, only: list[str] | None, runtime_s: int, precondition: bool = True,
               steady: ssmod.SteadyOptions | None = None) -> list[Step]:
    """The ordered fio invocations: each selected job, with preconditioning before groups that want it.

    The steady-state rounds (group ``steady``) run only with ``steady`` (or when named in ``only``):
    after their fill and just before the random-write group, so ``write_rand`` is measured on the
    drive in the state they reached; their cap is ``steady.cap_s``.
    """
    names = [j["name"] for j in manifest["jobs"]]
    if only:
        unknown = [n for n in only if n not in names and n != "precondition"]
        if unknown:
            raise ConfigError(f"unknown job(s) {', '.join(unknown)}; this folder has {', '.join(names)}")
    if steady is not None and "steady" not in manifest["groups"]:
        raise ConfigError("this job folder has no steady-state job (made by an older swaptrace); "
                          "regenerate it with `swaptrace fio jobs STREAM -o DIR --force`")
    selected = [j for j in manifest["jobs"] if (not only or j["name"] in only)
                and (j["group"] != "steady" or steady is not None or (only and j["name"] in only))]
    if steady is not None:  # the rounds go just before the random-write group (or last)
        rounds = [j for j in selected if j["group"] == "steady"] or \
            [j for j in manifest["jobs"] if j["group"] == "steady"]
        rest = [j for j in selected if j["group"] != "steady"]
        at = next((i for i, j in enumerate(rest) if j["group"] == "write_rand"), len(rest))
        selected = rest[:at] + rounds + rest[at:]
    steps: list[Step] = []
    if only and "precondition" in only:
        steps.append(Step("precondition", manifest["precondition"], runtime_s))
    prev_group = None
    for j in selected:
        wants = manifest["groups"][j["group"]]["precondition"]
        after_rounds = prev_group == "steady" and steady is not None  # write_rand keeps the rounds' state
        if j["group"] != prev_group and (precondition or steady is not None) and wants and not after_rounds:
            steps.append(Step(f"precondition@{j['group']}", manifest["precondition"], runtime_s))
        prev_group = j["group"]
        seconds = steady.cap_s if (j["group"] == "steady" and steady is not None) else \
            runtime_s * int(j.get("runtime_factor", 1))
        steps.append(Step(j["name"], j, seconds))
    return steps


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """What one run of a job folder knows once its target is checked; :func:`run_jobs` builds it once.

    Attributes
    ----------
    jobs_dir : Path
        The job folder, absolute (fio runs in the results folder, so every path it is given is absolute).
    manifest : dict
        The folder's manifest (:func:`swaptrace.fio.jobs.load_manifest`).
    target : Target
        The checked target (:func:`check_target`).
    target_path : Path
        The target as fio is given it: a file's absolute path, a device's path as named.
    size_bytes : int
        Bytes of the target the jobs use.
    runtime_s : int
        Seconds per time-based job, before the job's ``runtime_factor``.
    precondition : bool
        Whether the groups that ask for it are preconditioned.
    steady : SteadyOptions, optional
        SNIA-style steady-state rounds before ``write_rand`` (:mod:`swaptrace.fio.steady`); ``None``: none.
    out_dir : Path, optional
        The results folder asked for, absolute; ``None``: ``JOBS/runs/<UTC time>``.
    fio_name : str, optional
        The fio executable asked for; ``None``: ``fio`` on ``$PATH``.
    dry_run : bool
        Check everything and print the commands; a missing fio is then no error.
    echo : callable
        Where progress lines go.
    """

    jobs_dir: Path
    manifest: dict
    target: Target
    target_path: Path
    size_bytes: int
    runtime_s: int
    precondition: bool = True
    steady: ssmod.SteadyOptions | None = None
    busy_cpus: int = 0
    out_dir: Path | None = None
    fio_name: str | None = None
    dry_run: bool = False
    echo: Callable[[str], None] = print

    @functools.cached_property
    def fio(self) -> Fio:
        """The fio binary, looked up (``fio --version``) on first use; a dry run goes on without one."""
        return _find_fio_for(self.fio_name, self.dry_run)

    def results_folder(self) -> Path:
        """The folder the results go to: the one asked for, else ``JOBS/runs/<UTC time now>``."""
        return self.out_dir if self.out_dir else \
            self.jobs_dir / jobsmod.RUNS_DIR / _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")

    def env(self, step: Step) -> dict[str, str]:
        """The variables ``step``'s job file is expanded with (``${SWAPTRACE_TARGET}`` ...)."""
        return {
            "SWAPTRACE_TARGET": str(self.target_path),
            "SWAPTRACE_SIZE": str(self.size_bytes),
            "SWAPTRACE_RUNTIME": str(step.runtime_s),
            "SWAPTRACE_JOBS": str(self.jobs_dir),
            "SWAPTRACE_LOG": step.instance,
            **(self.steady.env() if self.steady is not None else ssmod.NO_STEADY_ENV),
        }

    def command(self, step: Step, raw_dir: Path) -> list[str]:
        """fio's command line for ``step``, its JSON going to ``raw_dir``.

        With ``busy_cpus``, a measured step runs a copy of its job file with the burners appended
        (``raw_dir``'s :func:`~swaptrace.fio.busy.combined_name`, written by :meth:`job_file_for`).
        """
        return [
            self.fio.path,
            "--output-format=json",
            f"--output={raw_dir / (step.instance + '.json')}",
            str(self.job_file_for(step, raw_dir)),
        ]

    def with_burners(self, step: Step) -> bool:
        """Whether ``step`` is measured with CPU burners beside it."""
        return bool(self.busy_cpus) and busymod.applies_to(step.job)

    def job_file_for(self, step: Step, raw_dir: Path, *, write: bool = False) -> Path:
        """The job file fio runs for ``step``: the folder's own, or its copy with the burners (made if ``write``)."""
        own = (self.jobs_dir / step.job["file"]).resolve()
        if not self.with_burners(step):
            return own
        path = raw_dir / busymod.combined_name(step.instance)
        if write:
            path.write_text(busymod.combined_text(own.read_text(), self.busy_cpus))
        return path

    def run_info(self, *, purge: str | None, fill: dict, steady: dict, busy: dict) -> dict:
        """The run's record (``meta["run"]`` of its results): target, engine and how the drive was prepared.

        ``purge``, ``fill`` and ``steady`` are what the preconditioning did: the purge's outcome, each fill's
        bytes written, and fio's steady-state verdict of each round (by step instance); ``busy`` is the CPU
        (% of one CPU) each burner got beside each measured step (by step instance), empty without
        ``busy_cpus``.
        """
        return {"target": str(self.target_path), "target_is_device": self.target.is_device,
                "size_bytes": self.size_bytes, "runtime_s": self.runtime_s, "fio": self.fio.text,
                "jobs_dir": str(self.jobs_dir), "engine": self.manifest.get("engine"),
                "busy_cpus": {"count": self.busy_cpus, "engine": "fio cpuio, cpuload=100",
                              "cpu_pct": busy} if self.busy_cpus else None,
                "preconditioning": {"mode": "steady" if self.steady else ("fill" if self.precondition else "none"),
                                    "criteria": self.steady.describe() if self.steady else None,
                                    "purge": purge, "fill": fill, "steady": steady}}


def run_jobs(
    jobs_dir: str | os.PathLike,
    target: str | os.PathLike,
    *,
    size_bytes: int,
    runtime_s: int = DEFAULT_RUNTIME_S,
    out_dir: str | os.PathLike | None = None,
    only: list[str] | None = None,
    allow_device: bool = False,
    force: bool = False,
    dry_run: bool = False,
    precondition: bool = True,
    fio: str | None = None,
    echo: Callable[[str], None] = print,
    steady: ssmod.SteadyOptions | None = None,
    busy_cpus: int = 0,
) -> RunOutcome:
    """Run the jobs of a folder on ``target`` and parse the results.

    Parameters
    ----------
    jobs_dir : path-like
        A folder written by :func:`swaptrace.fio.jobs.build_jobs`.
    target : path-like
        File (created and filled if needed) or block device (see module docstring).
    size_bytes : int
        Bytes of the target the jobs use; at least the folder's ``min_target_bytes``.
    runtime_s : int
        Seconds per time-based job, times the job's ``runtime_factor`` (replays: at most this long).
    out_dir : path-like, optional
        Results folder; default ``JOBS/runs/<UTC time>``.
    only : list of str, optional
        Job names to run (``precondition`` included only if named or needed).
    allow_device, force
        See :func:`check_target`; ``force`` also replaces an existing ``out_dir``.
    dry_run, precondition : bool
        Check everything and print the commands, write nothing; run preconditioning before the groups that want it.
    steady : SteadyOptions, optional
        SNIA-style preconditioning before ``write_rand`` (:mod:`swaptrace.fio.steady`); its verdict
        and every round's throughput go to the run's metadata.
    busy_cpus : int
        CPUs kept busy beside every time-based measurement (:mod:`swaptrace.fio.busy`); at most the machine's.
    fio, echo
        fio executable (default: ``fio`` on ``$PATH``); where progress lines go.

    Returns
    -------
    RunOutcome
        Paths of the results (``None`` for a dry run), the commands, the rows and measured ratios.
    """
    busymod.check_count(busy_cpus)
    jdir = Path(jobs_dir).resolve()  # absolute paths: fio runs in the results folder, not the jobs folder
    out_dir = Path(out_dir).resolve() if out_dir is not None else None
    manifest = jobsmod.load_manifest(jdir)
    steps = _select_steps(manifest, only, jobs_dir=jdir, runtime_s=runtime_s, precondition=precondition,
                          size_bytes=size_bytes, steady=steady)
    tgt = check_target(target, size_bytes, allow_device=allow_device, force=force)
    ctx = RunContext(jobs_dir=jdir, manifest=manifest, target=tgt,
                     target_path=tgt.path.resolve() if not tgt.is_device else tgt.path, size_bytes=size_bytes,
                     runtime_s=runtime_s, precondition=precondition, steady=steady, busy_cpus=busy_cpus,
                     out_dir=out_dir, fio_name=fio, dry_run=dry_run, echo=echo)
    for s in steps:
        validate_job_file(jdir / s.job["file"], ctx.env(s))
    fio_bin = ctx.fio  # after the job files are checked (their errors come first), before the device is held
    with contextlib.ExitStack() as held:
        fd = None
        if tgt.is_device:  # O_EXCL for the whole run: the kernel refuses to mount, mkfs or assemble it under fio
            fd = blockdev.open_exclusive(ctx.target_path)
            held.callback(os.close, fd)
        if dry_run:
            return _dry_run(ctx, steps)
        if not fio_bin.verified:
            echo(f"note: {fio_bin.text}; swaptrace's fio workarounds were verified on fio-3.33")
        final = traceio.check_output_folder(ctx.results_folder(), force, _is_results_folder,
                                            "a fio results folder (results.parquet)")
        outcome = _run_into(ctx, steps, final, fd=fd)
    if out_dir is None:
        _point_latest(final)
    return outcome


def _is_results_folder(folder: Path) -> bool:
    """A folder of an earlier ``fio run``: its ``results.parquet`` is a ``fio-results`` file, not a user's file of
    that name (which ``--force`` must never replace)."""
    from swaptrace.errors import SwaptraceError

    try:
        return traceio.open_trace(folder / resmod.RESULTS_NAME, "fio-results") is not None
    except (SwaptraceError, OSError):
        return False


def _select_steps(manifest: dict, only: list[str] | None, *, jobs_dir: Path, runtime_s: int, precondition: bool,
                  size_bytes: int, steady: ssmod.SteadyOptions | None) -> list[Step]:
    """The steps to run, after checking the runtime and that the target is big enough for them."""
    if runtime_s < 1:
        raise ConfigError(f"runtime: must be at least 1 second, got {runtime_s}")
    steps = plan_steps(manifest, only, runtime_s, precondition, steady)
    if not steps:
        raise ConfigError(f"{jobs_dir}: no jobs selected")
    needs_replay = any(s.job["kind"] == "replay" for s in steps)
    min_bytes = int(manifest["min_target_bytes"]) if needs_replay else 1 << 20
    if size_bytes < min_bytes:
        raise ConfigError(
            f"size: target of {format_bytes(size_bytes)} is too small; "
            f"these jobs need at least {format_bytes(min_bytes)} ({min_bytes} bytes)"
            + ("; or remap the replay with `swaptrace fio jobs STREAM --size SIZE`" if needs_replay else "")
        )
    return steps


def _find_fio_for(fio: str | None, dry_run: bool) -> Fio:
    """The fio binary; a dry run goes on without one (it only prints the commands)."""
    try:
        return find_fio(fio)
    except ToolError:
        if not dry_run:
            raise
        return Fio(fio or "fio", (0, 0), "fio (not found)")


def _dry_run(ctx: RunContext, steps: list[Step]) -> RunOutcome:
    """Print the commands a run would execute; write nothing."""
    shown = (ctx.out_dir if ctx.out_dir else ctx.jobs_dir / jobsmod.RUNS_DIR / "<time>") / RAW_DIR
    commands = []
    if ctx.steady is not None and ctx.steady.purge:
        ctx.echo(f"# would purge {ctx.target.describe()} (BLKDISCARD of the device / punch the file) before the fill")
    for s in steps:
        env = " ".join(f"{k}={v}" for k, v in ctx.env(s).items())
        commands.append(f"{env} {' '.join(ctx.command(s, shown))}")
    if not ctx.target.exists or ctx.target.current_bytes < ctx.size_bytes:
        ctx.echo(f"# would create/fill {ctx.target.describe()} to {format_bytes(ctx.size_bytes)} with data")
    for c in commands:
        ctx.echo(c)
    return RunOutcome(None, None, None, tuple(commands), (), {})


def _run_into(ctx: RunContext, steps: list[Step], final: Path, *, fd: int | None = None) -> RunOutcome:
    """Run every step into a temporary folder renamed to ``final`` at the end (removed on any failure).

    ``fd`` holds a device target (``O_EXCL``); a purge discards the device through it.
    """
    tmp = traceio.make_partial_folder(final)
    commands: list[str] = []
    with sigterm_as_interrupt():
        try:
            purged = _prepare_target(ctx, fd)
            raw = tmp / RAW_DIR
            raw.mkdir()
            parsed, fills, verdicts, busy = [], {}, {}, {}
            for i, s in enumerate(steps, start=1):
                command, rows = _run_step(ctx, s, raw, index=i, count=len(steps))
                commands.append(command)
                if ctx.with_burners(s):
                    jobs = resmod.load_fio_json(raw / f"{s.instance}.json").get("jobs") or []
                    busy[s.instance] = [round(v, 1) for v in busymod.burner_cpu_pct(jobs)]
                if s.job["kind"] == "precondition":
                    fills[s.instance] = _fill_record(ctx, s, rows)
                elif s.job["kind"] == "steady" and ctx.steady is not None:
                    verdicts[s.instance], rows = _steady_record(ctx, s, rows, raw)
                parsed.append((s, rows))
            run_info = ctx.run_info(purge=purged, fill=fills, steady=verdicts, busy=busy)
            res_path, bw_path, rows, ratios = resmod.write_run_results(tmp, parsed, ctx.manifest,
                                                                       {**run_info, "commands": commands})
            traceio.install_folder(tmp, final, last=res_path.name)  # a user's other files there stay
        except BaseException:
            # subprocess.run has already killed a running fio; drop the partial results
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return RunOutcome(final, final / res_path.name, final / bw_path.name, tuple(commands), tuple(rows), ratios)


def _prepare_target(ctx: RunContext, fd: int | None) -> str | None:
    """Fill a file target with data up to the run's size, then purge the target if the steady options ask.

    Returns what the purge did (:func:`swaptrace.fio.steady.purge`), ``None`` when there was none.
    """
    written = prepare_file_target(ctx.target, ctx.size_bytes)
    if written:
        ctx.echo(f"filled {ctx.target.describe()}: {format_bytes(written)} of data")
    if ctx.steady is None or not ctx.steady.purge:
        return None
    size_bytes = blockdev.size_bytes(ctx.target_path) if ctx.target.is_device else ctx.size_bytes
    purged = ssmod.purge(ctx.target_path, is_device=ctx.target.is_device, fd=fd, size_bytes=size_bytes)
    ctx.echo(f"purged {ctx.target.describe()}: {purged}")
    return purged


def _fill_record(ctx: RunContext, step: Step, rows: list[dict]) -> dict:
    """What a fill step wrote: ``{"written_bytes", "complete"}``, complete when it wrote the target twice over.

    A fill its time cap stopped short is also echoed.
    """
    written = sum(int(r["io_bytes"]) for r in rows if r["direction"] == "write")
    if written < 2 * ctx.size_bytes:
        ctx.echo(f"      {step.instance}: the fill stopped at its cap after {format_bytes(written)} "
                 f"of {format_bytes(2 * ctx.size_bytes)}")
    return {"written_bytes": written, "complete": written >= 2 * ctx.size_bytes}


def _steady_record(ctx: RunContext, step: Step, rows: list[dict], raw: Path) -> tuple[dict, list[dict]]:
    """fio's steady-state verdict of the rounds (:func:`swaptrace.fio.steady.verdict`) and their rows.

    The verdict is about the window's mean only, so the returned rows carry that mean as their write bandwidth
    (bytes/s) and IOPS; ``rows`` themselves are left as they are.
    """
    job = busymod.measured_job(resmod.load_fio_json(raw / f"{step.instance}.json").get("jobs") or []) or {}
    verdict = ssmod.verdict(job, ctx.steady)
    logs = resmod.find_bw_logs(raw, step.instance)
    if logs:
        log = resmod.parse_bw_log(logs[0])
        rounds = ssmod.rounds_from_bw_log(log["t_ms"], log["bw_bytes"], ctx.steady.round_s)
        verdict = {**verdict, "rounds_bw_bytes": rounds}
    window = verdict["window_bw_bytes"]
    rows = [{**r, "bw_bytes": window, "iops": verdict["window_iops_mean"]}
            if r["direction"] == "write" and window > 0 else r for r in rows]
    ctx.echo(f"      {step.instance}: {verdict['reason']}")
    return verdict, rows


def _run_step(ctx: RunContext, step: Step, raw: Path, *, index: int, count: int) -> tuple[str, list[dict]]:
    """Run one fio invocation (step ``index`` of ``count``), keep its JSON and stderr in ``raw``.

    Returns the command line and the step's parsed rows.
    """
    ctx.job_file_for(step, raw, write=True)
    cmd = ctx.command(step, raw)
    env = {**os.environ, **ctx.env(step)}
    proc = subprocess.run(cmd, env=env, cwd=raw, capture_output=True, text=True)
    json_path = raw / f"{step.instance}.json"
    (raw / f"{step.instance}.stderr").write_text(proc.stderr)
    if proc.returncode != 0 or not json_path.exists():
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
        raise ToolError(f"fio failed on job {step.instance} (exit {proc.returncode}): {last}")
    rows = resmod.parse_fio_json(json_path, step.instance, step.job, ctx.manifest)
    summary = ", ".join(f"{r['direction']} {r['bw_bytes'] / 1e6:.1f} MB/s" for r in rows) or "no I/O"
    ctx.echo(f"[{index}/{count}] {step.instance}: {summary}")
    return " ".join(cmd), rows


def _point_latest(run_dir: Path) -> None:
    """Make ``runs/latest`` a relative symlink to the newest run (replaced atomically)."""
    link = run_dir.parent / "latest"
    tmp = run_dir.parent / ".latest.partial"
    tmp.unlink(missing_ok=True)
    os.symlink(run_dir.name, tmp)
    os.replace(tmp, link)
