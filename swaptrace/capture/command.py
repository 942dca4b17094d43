"""Capture any program: ``swaptrace capture [OPTIONS] -- CMD [ARGS]...``.

:class:`CommandChild` is the second kind of child (:class:`~swaptrace.capture.contract.CaptureChild`) of
:class:`~swaptrace.capture.session.CaptureSession` (the first, :mod:`swaptrace.capture.replay`, replays an
access trace). It differs from the replayer in three things only:

* **how it starts**: the program runs with the caller's working directory and environment plus
  ``SWAPTRACE_MARKER`` (:mod:`swaptrace.markers`), joins its memory cgroup before ``exec`` (a shell
  writes its pid into ``cgroup.procs``, then ``exec setpriv --pdeathsig KILL -- CMD``), so everything
  it loads is charged, and it dies with the capture (``PR_SET_PDEATHSIG``, prctl(2)). A watchdog shell
  outside the group holds a pipe from the capture; when the pipe closes -- the capture ended or was
  killed, even by SIGKILL -- it kills every process left in the group, so the program's whole process
  tree goes with it;
* **how steps are known**: the program writes ``swaptrace step N`` to ``$SWAPTRACE_MARKER``, the
  capture's tracefs ``trace_marker``, so marks land in order with the block requests. Its start-up
  (before the first mark) is stored as step 0 and mark ``N`` as step ``N + 1`` (the step column is
  unsigned; ``meta.step_offset``). A program that writes no mark gets time windows of ``window_s``;
* **what is locked**: nothing. The limit is the whole process tree's memory (``--memory``), or a
  fraction of the unlimited run's peak usage (``--memory-fraction``).

Both runs (unlimited, then limited) record the group's memory by kind over time
(:mod:`swaptrace.capture.memwatch`: anon, page cache, swap; peaks per phase), wall times of start-up,
training and each step, and the unlimited run the anonymous memory referenced during training. The
machine's own reclaim agents (:mod:`swaptrace.capture.agents`) and the page cache charged to the
limited group are reported.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swaptrace.capture import cgroup as cg
from swaptrace.capture import tracing
from swaptrace.capture.agents import detect_reclaim_agents
from swaptrace.capture.command_record import describe_command
from swaptrace.capture.contract import SWAP_HEADROOM_BYTES, ChildContext, Description, Recording
from swaptrace.capture.convert import ParsedTrace, StreamColumns, parse_lines, to_stream
from swaptrace.capture.host import vmstat
from swaptrace.capture.memwatch import MemorySampler, ReferencedProbe
from swaptrace.capture.oom_guard import OomGuard
from swaptrace.capture.options import CaptureOptions
from swaptrace.capture.reclaim import RECLAIM_EVENTS, reclaim_record
from swaptrace.capture.session import CaptureSession
from swaptrace.core.units import format_bytes
from swaptrace.errors import ConfigError, ToolError
from swaptrace.markers import MARKER_ENV

#: steps of a program that writes no marker: windows of this many seconds
DEFAULT_WINDOW_S = 1.0
#: how often the group's memory.stat is read during a run (seconds); also at every marker
SAMPLE_INTERVAL_S = 0.025
#: how often the unlimited run reads the processes' smaps after the first marker (seconds)
SMAPS_INTERVAL_S = 0.1
#: swap size without an unlimited run to size it from
NO_BASELINE_SWAP_BYTES = 2 << 30
#: seconds the OOM guard waits above the limit before it lets the OOM killer act (see OomGuard)
OOM_GIVE_UP_S = 5.0
#: at most this much of the files the program mapped is read again before the limited run
REWARM_MAX_BYTES = 4 << 30

# kills what is left in the group once stdin closes (the capture ended or died); $1 = cgroup.procs
_WATCHDOG = ('while read -r _; do :; done; i=0; while [ $i -lt 100 ]; do p=$(cat "$1" 2>/dev/null); '
             '[ -z "$p" ] && exit 0; kill -9 $p 2>/dev/null; i=$((i+1)); sleep 0.05; done')
# joins the group before exec, so all the program loads is charged to it; $1 = cgroup.procs
_JOIN = 'echo $$ > "$1" && shift && exec "$@"'


@dataclass
class ProgramRun:
    """One run of the program (times on ``CLOCK_MONOTONIC``, ns; bytes)."""

    tag: str
    returncode: int
    stderr_tail: str
    t_spawn_ns: int
    t_exit_ns: int
    samples: list[tuple]
    peak_bytes: int | None
    limit_bytes: int | None
    oom_kills: int
    oom: dict[str, Any]
    vmstat_delta: dict[str, int]
    cgroup_stat: dict[str, int]
    referenced: dict[str, Any] | None = None
    sampler_errors: list[str] = field(default_factory=list)
    mapped_files: list[str] = field(default_factory=list)
    rewarm: dict[str, Any] | None = None
    #: ``(t_ns, n)`` of the program's step markers, from the run's trace
    marks: list[tuple[int, int]] = field(default_factory=list)


def _stderr_tail(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def command_name(argv: list[str], width: int = 100) -> str:
    """The program as one short line for messages (a ``python -c`` script's newlines would break it)."""
    text = " ".join(shlex.join(argv).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _status(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


def _mapped_files(pids: list[int]) -> list[str]:
    """Regular files mapped by ``pids`` (libraries, data): what the program's page cache holds."""
    paths: set[str] = set()
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/") and not parts[5].endswith("(deleted)"):
                paths.add(parts[5].strip())
    return sorted(paths)


def rewarm_page_cache(paths: list[str], max_bytes: int = REWARM_MAX_BYTES) -> dict[str, Any]:
    """Read the files again, so their pages are cached (and charged) outside the limited group.

    A machine-wide reclaimer such as DAMON's ``pageout`` of idle unmapped page cache
    (:mod:`swaptrace.capture.agents`) may have dropped what the unlimited run read; a read also marks
    the pages accessed, which keeps such a reclaimer off them for its age threshold.
    """
    done, files, t0 = 0, 0, time.monotonic()
    for p in paths:
        if done >= max_bytes:
            break
        try:
            with open(p, "rb", buffering=0) as fh:
                while done < max_bytes:
                    chunk = fh.read(1 << 20)
                    if not chunk:
                        break
                    done += len(chunk)
            files += 1
        except OSError:
            continue
    return {"files": files, "bytes": done, "seconds": round(time.monotonic() - t0, 3)}


class _Watchdog:
    """A shell outside the group that kills everything in it once our end of its pipe closes."""

    def __init__(self, procs_file: Path):
        self.proc = subprocess.Popen(["/bin/sh", "-c", _WATCHDOG, "sh", str(procs_file)], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _write_marker(path: Path, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(f"swaptrace {text}\n")


class CommandChild:
    """Run a program under the capture (see the module docstring). Parameters are those of :func:`capture_command`."""

    extra_events: tuple[str, ...] = ()

    def __init__(self, argv, *, memory_bytes=None, memory_fraction=None, window_s=DEFAULT_WINDOW_S,
                 sample_interval_s=SAMPLE_INTERVAL_S, progress=None, say=None, trace_reclaim=False):
        self.argv = [str(a) for a in argv]
        self.trace_reclaim = trace_reclaim
        if trace_reclaim:  # the limited run's trace also holds the reclaim tracepoints (raw text: --raw-trace)
            self.extra_events = RECLAIM_EVENTS
        self.memory_bytes, self.memory_fraction, self.window_s = memory_bytes, memory_fraction, window_s
        self.sample_interval_s, self.progress, self.say = sample_interval_s, progress, say
        self.page_bytes = os.sysconf("SC_PAGE_SIZE")

    # ------------------------------------------------------------------ checks and preparation

    def check_inputs(self, options: CaptureOptions) -> None:
        """The program, the limit and the window; ``setpriv`` (util-linux) must be installed."""
        if not self.argv:
            raise ConfigError("give a program to run after --")
        exe = self.argv[0]
        if shutil.which(exe) is None:
            raise ConfigError(f"{exe}: command not found (or not executable)")
        if (self.memory_bytes is None) == (self.memory_fraction is None):
            raise ConfigError("give exactly one of --memory and --memory-fraction")
        if self.memory_fraction is not None and not options.unlimited_run:
            raise ConfigError("--memory-fraction is a share of the unlimited run's peak: it needs --baseline")
        if self.memory_fraction is not None and not 0 < self.memory_fraction <= 1:
            raise ConfigError(f"--memory-fraction: 0 < F <= 1, got {self.memory_fraction}")
        if self.memory_bytes is not None and self.memory_bytes < (1 << 20):
            raise ConfigError(f"--memory: at least 1 MiB for a whole program, got {self.memory_bytes} bytes")
        if not self.window_s > 0:
            raise ConfigError(f"--window: seconds > 0, got {self.window_s}")
        self.setpriv = shutil.which("setpriv") or ("/usr/bin/setpriv" if Path("/usr/bin/setpriv").exists() else None)
        if self.setpriv is None:
            raise ToolError("setpriv is not installed (package util-linux)")

    def warm_up(self) -> None:
        """Note the machine's own reclaim agents (they may take memory from the program)."""
        self.agents = detect_reclaim_agents()

    def prepare(self, ctx: ChildContext) -> None:
        """Nothing: the program brings its own inputs."""

    def swap_bytes(self, ctx: ChildContext, free: ProgramRun | None) -> int:
        """``options.swap_bytes``, else the unlimited run's peak plus :data:`SWAP_HEADROOM_BYTES` (without that
        run: the larger of 2 GiB and twice ``memory_bytes``, plus the headroom)."""
        if ctx.options.swap_bytes:
            return int(ctx.options.swap_bytes)
        if free is None:
            return max(NO_BASELINE_SWAP_BYTES, 2 * int(self.memory_bytes or 0)) + SWAP_HEADROOM_BYTES
        return int(free.peak_bytes or max((r[1] or 0 for r in free.samples), default=0)) + SWAP_HEADROOM_BYTES

    def _say(self, text: str) -> None:
        if self.say is not None:
            self.say(text)

    # ------------------------------------------------------------------ the runs

    def _spawn(self, ctx: ChildContext, g: cg.MemoryCgroup, tag: str, marker: Path):
        env = {**os.environ, MARKER_ENV: str(marker)}
        out = open(ctx.workdir / f"program-{tag}.stdout", "wb")  # noqa: SIM115 - closed by the caller
        err = open(ctx.workdir / f"program-{tag}.stderr", "wb")  # noqa: SIM115
        cmd = ["/bin/sh", "-c", _JOIN, "sh", str(g.procs_file), self.setpriv, "--pdeathsig", "KILL", "--",
               *self.argv]
        # a session of its own: a Ctrl-C at the terminal reaches the capture, which ends the program itself
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                start_new_session=True)
        return proc, out, err

    def _marker_handler(self, sampler: MemorySampler, referenced: ReferencedProbe | None, errors: list[str],
                        stalls=None):
        """What the trace reader does at each marker as it is read: a memory reading, the smaps probe, and
        the stalls of the step the marker ends (mark ``N`` ends stream step ``N``: start-up is step 0)."""
        seen: dict[str, Any] = {"step": False, "last": None}

        def on_marker(t_ns: int, text: str) -> None:  # times come from the trace file later
            try:
                parts = text.split()
                what = parts[1] if len(parts) > 1 else ""
                if what == "step":
                    sampler.poke()
                    if stalls is not None and len(parts) > 2 and parts[2].lstrip("-").isdigit():
                        seen["last"] = int(parts[2])
                        stalls.mark(seen["last"])
                    if referenced is not None:
                        referenced.at_mark() if seen["step"] else referenced.first_mark()
                    seen["step"] = True
                    if self.progress is not None:
                        self.progress(1)
                elif what == "end" and referenced is not None and seen["step"]:
                    referenced.read()
            except Exception as exc:  # noqa: BLE001 - the trace reader must go on; reported in the run record
                if len(errors) < 3:
                    errors.append(f"at marker {text!r}: {exc!r}")

        on_marker.seen = seen
        return on_marker

    def _run(self, ctx: ChildContext, g: cg.MemoryCgroup, tag: str, limit: int | None, *, rec: tracing.BlockTrace,
             start_tracing, referenced: ReferencedProbe | None = None) -> ProgramRun:
        """Start the program in ``g`` under ``limit``, wait for it, and end whatever of it is left."""
        stalls = ctx.stalls
        if stalls is not None:
            stalls.begin(tag, g.pids)  # first: a quiet wait, if asked for, comes before the run's set-up
        g.create()
        g.set_limit(limit)
        guard = OomGuard(g, limit, give_up_s=OOM_GIVE_UP_S) if limit is not None else None
        oom_before = g.oom_kills() or 0
        sampler = MemorySampler(g, self.sample_interval_s)
        errors: list[str] = []
        rec.on_marker = on_marker = self._marker_handler(sampler, referenced, errors, stalls)
        watchdog = _Watchdog(g.procs_file)
        proc = files = None
        mapped: set[str] = set()
        try:
            start_tracing()
            _write_marker(rec.marker_path(), "start")
            before = vmstat()
            if stalls is not None:
                stalls.start()
            t_spawn = time.monotonic_ns()
            proc, *files = self._spawn(ctx, g, tag, rec.marker_path())
            if stalls is not None:
                stalls.root(proc.pid)
            sampler.start()
            returncode = self._wait(ctx, proc, g, limit, mapped if limit is None else None)
            t_exit = time.monotonic_ns()
            if stalls is not None:
                last = on_marker.seen["last"]
                stalls.end(last + 1 if last is not None else None)
            after = vmstat()
            _write_marker(rec.marker_path(), "end")
            oom_kills = (g.oom_kills() or 0) - oom_before
            peak, stat = g.peak_bytes(), g.stat()
        finally:
            if stalls is not None:
                stalls.close()
            samples = sampler.stop()
            oom = guard.stop() if guard is not None else {}
            ref = referenced.stop() if referenced is not None else None
            g.kill_all()
            if proc is not None and proc.poll() is None:
                proc.kill()
            if proc is not None:
                proc.wait()
            watchdog.close()
            for fh in files or ():
                fh.close()
        return ProgramRun(tag=tag, returncode=returncode, stderr_tail=_stderr_tail(ctx.workdir / f"program-{tag}.stderr"),
                          t_spawn_ns=t_spawn, t_exit_ns=t_exit, samples=samples, peak_bytes=peak, limit_bytes=limit,
                          oom_kills=oom_kills, oom=oom, vmstat_delta={k: after[k] - before.get(k, 0) for k in after},
                          cgroup_stat=stat, referenced=ref, sampler_errors=errors + sampler.errors,
                          mapped_files=sorted(mapped))

    def _wait(self, ctx: ChildContext, proc, g: cg.MemoryCgroup, limit: int | None, mapped: set[str] | None) -> int:
        """Wait for the program's exit (``--timeout``); meanwhile note the files its processes map."""
        timeout_s = ctx.options.timeout_s
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            if mapped is not None:
                mapped.update(_mapped_files(g.pids()))
            try:
                return proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() > deadline:
                    raise ToolError(f"{command_name(self.argv)} ran longer than --timeout {timeout_s:g} s in the "
                                    f"{'unlimited' if limit is None else 'limited'} run") from None

    def _check_exit(self, run: ProgramRun, which: str) -> None:
        """One line and exit code 2 when the program failed; the capture then undoes everything."""
        if run.returncode == 0:
            return
        if run.oom_kills > 0 or run.oom.get("oom_guard_gave_up"):
            limit = format_bytes(run.limit_bytes) if run.limit_bytes is not None else "no limit"
            raise ConfigError(f"{command_name(self.argv)} was killed by the OOM killer in the {which} run: the limit "
                              f"({limit}) is too small for it even with swap (raise --memory, or --swap-size)")
        tail = f": {run.stderr_tail}" if run.stderr_tail else ""
        raise ToolError(f"{command_name(self.argv)} {_status(run.returncode)} in the {which} run{tail}")

    def run_unlimited(self, ctx: ChildContext, group: cg.MemoryCgroup) -> ProgramRun:
        """The program without a limit: its peak, its phases, and what it references after start-up."""
        self._say("unlimited run ...")
        rec = tracing.BlockTrace(f"{ctx.name}-free", None, ctx.workdir / "free-trace.txt", buffer_kb=1024)
        ctx.undo(rec.teardown)
        rec.setup()
        referenced = ReferencedProbe(group, SMAPS_INTERVAL_S)
        try:
            run = self._run(ctx, group, "free", None, rec=rec, start_tracing=rec.start, referenced=referenced)
        finally:
            rec.stop()
            rec.teardown()
        self._check_exit(run, "unlimited")
        with open(rec.out_path, errors="replace") as fh:
            run.marks = _step_marks(parse_lines(fh, device=None).markers)
        return run

    def limit_bytes(self, free: ProgramRun | None) -> int:
        """The limited run's limit in bytes, in whole pages: ``memory_bytes``, or the fraction of the free run's peak."""
        if self.memory_bytes is not None:
            limit = int(self.memory_bytes)
        else:
            peak = free.peak_bytes or max((r[1] or 0 for r in free.samples), default=0)
            limit = int(self.memory_fraction * peak)
        return max(self.page_bytes, limit // self.page_bytes * self.page_bytes)

    def run_limited(self, ctx: ChildContext, group: cg.MemoryCgroup, trace: tracing.BlockTrace, start_tracing,
                    free: ProgramRun | None) -> ProgramRun:
        """The program under its limit, traced, after the unlimited run's files are read into the page cache again."""
        self.limit = self.limit_bytes(free)
        rewarm = rewarm_page_cache(free.mapped_files) if free is not None else None
        self._say(f"limited run (limit {self.limit} bytes) ...")
        run = self._run(ctx, group, "limited", self.limit, rec=trace, start_tracing=start_tracing)
        run.rewarm = rewarm
        self._check_exit(run, "limited")
        return run

    # ------------------------------------------------------------------ the stream and its description

    def stream(self, parsed: ParsedTrace, run: ProgramRun) -> StreamColumns:
        """Requests by the program's step markers (start-up as step 0), or by time windows without markers."""
        run.marks = _step_marks(parsed.markers)
        if run.marks:
            return to_stream(parsed, first_step=0, step_offset=1)
        return to_stream(parsed, window_us=self.window_s * 1e6)

    def describe(self, ctx: ChildContext, free: ProgramRun | None, run: ProgramRun,
                 recording: Recording) -> Description:
        """See :mod:`swaptrace.capture.command_record`; with ``trace_reclaim``, ``kernel.reclaim`` too."""
        desc = describe_command(self, free, run, recording)
        if self.trace_reclaim:
            desc.kernel["reclaim"] = self._reclaim(ctx, run, recording, desc.steps)
        return desc

    def _reclaim(self, ctx: ChildContext, run: ProgramRun, recording: Recording, steps: int) -> dict[str, Any]:
        """The reclaim tracepoints counted per step (:func:`swaptrace.capture.reclaim.parse_reclaim`): the
        program's mark ``n`` starts step ``n + 1`` (start-up is step 0); a program without marks is one step."""
        marks = [(t, "step", n + 1) for t, n in run.marks]
        return reclaim_record(ctx.raw_path, marks, 0, max(steps, 1) - 1 if marks else 0, recording.missing_events)


def _step_marks(markers: list[tuple[int, str, int]]) -> list[tuple[int, int]]:
    return sorted((t, n) for t, what, n in markers if what == "step")


def capture_command(
    argv,
    out: str | os.PathLike,
    options: CaptureOptions | None = None,
    *,
    window_s: float = DEFAULT_WINDOW_S,
    sample_interval_s: float = SAMPLE_INTERVAL_S,
    say=None,
    trace_reclaim: bool = False,
    **changes: Any,
):
    """Run a program under a whole-process memory limit and record its swap I/O (root only).

    Parameters
    ----------
    argv : list of str
        The program and its arguments; it runs with this process's working directory and
        environment, plus ``SWAPTRACE_MARKER`` naming the file its step markers go to.
    out : path
        The ``swapio`` file to write (``source: kernel``).
    options : CaptureOptions, optional
        How the capture runs (:class:`~swaptrace.capture.options.CaptureOptions`). For a program,
        ``memory_bytes`` is the memory cgroup's whole limit: the program's whole process tree
        (anonymous memory, page cache it is charged for, kernel memory), in bytes;
        ``memory_fraction`` instead takes this share of the unlimited run's peak usage (the cgroup's
        peak counter); ``unlimited_run`` runs the program without a limit first (slowdown, memory by
        phase, warm page cache); ``progress`` is called with 1 at each step marker.
    window_s : float
        Steps of a program that writes no marker: windows of this many seconds from its start.
    sample_interval_s : float
        How often the group's ``memory.stat`` is read during each run, in seconds.
    say : callable, optional
        Called with a short line as each run starts.
    trace_reclaim : bool
        Also trace the limited run's memcg reclaim calls and vmscan levels (``kernel.reclaim``: counters per
        step; with ``raw_trace_out`` every call in the raw text, for ``research/write_bursts.py``).
    **changes
        Fields of :class:`~swaptrace.capture.options.CaptureOptions` as keywords, each replacing that
        field of ``options``.

    Returns a :class:`~swaptrace.capture.session.CaptureResult`.
    """
    options = CaptureOptions.of(options, **changes)
    child = CommandChild(argv, memory_bytes=options.memory_bytes, memory_fraction=options.memory_fraction,
                         window_s=window_s, sample_interval_s=sample_interval_s, progress=options.progress, say=say,
                         trace_reclaim=trace_reclaim)
    return CaptureSession(child, out, options).run()
