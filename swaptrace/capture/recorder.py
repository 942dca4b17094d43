"""Record an unmodified program's memory once, without a limit: ``swaptrace capture --record -- CMD``.

Nothing is limited and nothing is swapped, so nothing the recorder does can change what the kernel
reclaims. Set-up, undone in reverse on success, error, Ctrl-C, SIGTERM and SIGHUP (SIGKILL: the
program dies with the recorder, ``PR_SET_PDEATHSIG``, and the next capture removes the rest by name,
:mod:`swaptrace.capture.leftovers`):

1. a private tracefs instance ``swaptrace-capture-<pid>-record`` (``mono`` clock, ``record-tgid``)
   with the memory system calls, ``exceptions:page_fault_user`` and the fork/exec/exit tracepoints
   (:data:`TRACED_EVENTS`), limited to the program and its descendants (``set_event_pid`` +
   ``options/event-fork``); ``trace_pipe`` is streamed to a scratch file;
2. the program: ``sh`` blocks on a pipe until its pid is in ``set_event_pid``, then ``exec``\\ s
   ``setpriv --pdeathsig KILL -- CMD`` with ``SWAPTRACE_MARKER`` naming the instance's
   ``trace_marker``; transparent huge pages are off for it (``PR_SET_THP_DISABLE``, set on the recorder
   around the fork: inherited and kept across ``exec``, prctl(2)) so that a fault is one 4 KiB page;
   its stdout and stderr are passed through to ours unchanged, line by line (stdout through a
   pseudo-terminal with ``--step-line``, so the C library and Python flush it at each line);
3. at each step boundary the anonymous mappings of every process of the program are read from
   ``/proc/PID/smaps`` (``Referenced:``, ``Anonymous:``) and ``/proc/PID/status`` (``RssAnon:``), then
   ``/proc/PID/clear_refs`` gets ``1`` (fs/proc/task_mmu.c): the next reading counts the pages the next
   step referenced; ``/proc/PID/task/TID/stat`` gives each thread's CPU time, so the file can say how many
   threads the program keeps busy in its steps (:func:`parallelism`, the time model's ``threads``); with
   ``--pageout`` the mappings' ``Private_Dirty:`` too, and then the program is paged out
   (:mod:`swaptrace.capture.pageout`: a swap area of its own, under the capture lock);
4. the program runs in a memory cgroup of its own with no limit (``swaptrace-capture-<pid>-record``, v1 or
   v2, :class:`~swaptrace.capture.cgroup.MemoryCgroup`), read at each reading: what the kernel charges to
   a group beyond the program's anonymous memory and page cache (page tables, slab: ``kernel``) counts
   against any limit the program later runs under, so a trace made from the recording leaves it out of
   the budget. No limit, so nothing is reclaimed; without a memory controller the readings lack it.

Steps (:class:`~swaptrace.capture.recording.Steps`): the program's ``swaptrace step N`` marks; else the
lines of its output matching ``--step-line`` (each ends a step; the recorder writes a ``swaptrace line
N`` mark as it reads one); else :func:`~swaptrace.capture.recording.detect_steps`. The file is written
by :func:`write_recording`.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import platform
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.capture import host, leftovers, tracing
from swaptrace.capture.cgroup import MemoryCgroup, memory_kinds
from swaptrace.capture.pageout import READING_CPU_S, default_swap_bytes, page_out
from swaptrace.capture.record_parse import EV, ParsedRecording, parse_lines
from swaptrace.capture.recording import AnonTracker, Steps, assign_steps, detect_steps
from swaptrace.capture.swapdev import SwapDevice
from swaptrace.core.signals import sigterm_as_interrupt
from swaptrace.core.traceio import TraceWriter, check_output_path
from swaptrace.errors import ConfigError, PrivilegeError, ToolError
from swaptrace.markers import MARKER_ENV

#: the tracepoints a recording enables (``system/event`` under the instance's ``events/``)
TRACED_EVENTS = (
    "syscalls/sys_enter_mmap", "syscalls/sys_exit_mmap", "syscalls/sys_enter_munmap", "syscalls/sys_enter_brk",
    "syscalls/sys_exit_brk", "syscalls/sys_enter_madvise", "syscalls/sys_enter_mremap", "syscalls/sys_exit_mremap",
    "exceptions/page_fault_user", "exceptions/page_fault_kernel", "sched/sched_process_fork",
    "sched/sched_process_exec", "sched/sched_process_exit",
)
#: before the first step boundary (and throughout a program with none), smaps is read this often, seconds
READING_INTERVAL_S = 0.5
#: after SIGTERM (--steps reached), the program gets this long before SIGKILL, seconds
STOP_GRACE_S = 5.0
PR_SET_THP_DISABLE = 41
# waits for the recorder to put its pid into set_event_pid (its stdin, a pipe, closes), then becomes the program
_HOLD = 'read _; exec </dev/null; exec "$@"'


def check_record_machine() -> Path:
    """Root, tracefs and the traced events; returns the tracefs root. PrivilegeError/ToolError otherwise."""
    if os.geteuid() != 0:
        raise PrivilegeError("capture --record needs root (it makes a tracefs instance and reads the program's smaps)")
    root = tracing.tracefs_root()
    missing = [e for e in TRACED_EVENTS if not (root / "events" / e).is_dir()]
    if missing:
        raise ToolError(f"this kernel lacks the tracepoints {', '.join(missing)} (CONFIG_FTRACE_SYSCALLS?)")
    return root


def program_pids(root_pid: int, proc: Path = Path("/proc")) -> list[int]:
    """``root_pid`` and its descendants (processes, from each ``/proc/PID/stat``'s parent pid)."""
    children: dict[int, list[int]] = {}
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root_pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, ()))
    return sorted(out)


def anon_mappings(smaps_text: str) -> list[tuple[int, int, int, int, int]]:
    """``(start, end, referenced_bytes, anonymous_bytes, private_dirty_bytes)`` of each anonymous mapping in
    ``smaps`` text.

    A mapping is anonymous when it has no backing file (no name, ``[heap]``, ``[stack...]``,
    ``[anon:...]``): the others' referenced pages are page cache.
    """
    out, cur = [], None
    for line in smaps_text.splitlines():
        head = line.split(None, 1)[0] if line.strip() else ""
        if "-" in head and not head.endswith(":"):
            if cur is not None:
                out.append(tuple(cur))
            fields = line.split(None, 5)
            name = fields[5].strip() if len(fields) > 5 else ""
            anon = name == "" or name == "[heap]" or name.startswith("[stack") or name.startswith("[anon")
            lo, hi = head.split("-")
            cur = [int(lo, 16), int(hi, 16), 0, 0, 0] if anon else None
        elif cur is not None and line.startswith(_SMAPS_FIELDS):
            cur[2 + _SMAPS_FIELDS.index(line.split(":", 1)[0] + ":")] = int(line.split()[1]) * 1024
    if cur is not None:
        out.append(tuple(cur))
    return out


#: the smaps fields :func:`anon_mappings` reads, in the order it returns them
_SMAPS_FIELDS = ("Referenced:", "Anonymous:", "Private_Dirty:")


def _cpu_ticks(stat_text: str) -> tuple[int, int]:
    """``(utime, stime)`` in clock ticks from a ``/proc/PID/stat`` or ``/proc/PID/task/TID/stat`` line (proc(5):
    fields 14 and 15; a process's sum its threads, the exited ones included)."""
    rest = stat_text[stat_text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(rest[11]), int(rest[12])


def cpu_seconds(stat_text: str, ticks_per_s: int) -> float:
    """User plus system CPU time (s) from a ``/proc/PID/stat`` or ``/proc/PID/task/TID/stat`` line."""
    return sum(_cpu_ticks(stat_text)) / ticks_per_s


def parallelism(readings: list[dict[str, Any]], t_from_ns: int, t_to_ns: int) -> dict[str, Any] | None:
    """How many threads the program kept busy between the first and last reading in ``[t_from, t_to]``.

    Each thread's CPU time in the window (``/proc/PID/task/TID/stat``; a thread started inside it counts from
    zero) gives the **effective number of threads**, ``(sum c)^2 / sum c^2`` (the participation ratio: ``n``
    threads equally busy give ``n``, one busy thread beside idle ones about 1). The time model takes it,
    rounded (at least 1), as the threads a step's faults are shared over: PyTorch's intra-op pool runs an
    embedding bag's lookups on all its threads, so they fault together. ``parallelism`` is the CPU time over
    the wall time, for reference. ``None`` with fewer than two readings in the window or no CPU time read.
    """
    inside = [r for r in readings if t_from_ns <= r["t_ns"] <= t_to_ns and r.get("threads_cpu_s")]
    if len(inside) < 2 or inside[-1]["t_ns"] <= inside[0]["t_ns"]:
        return None
    first, last = inside[0]["threads_cpu_s"], inside[-1]["threads_cpu_s"]
    busy = sorted((max(c - first.get(tid, 0.0), 0.0) for tid, c in last.items()), reverse=True)
    cpu = sum(busy)
    if cpu <= 0:
        return None
    effective = cpu * cpu / sum(c * c for c in busy)
    wall = (inside[-1]["t_ns"] - inside[0]["t_ns"]) / 1e9
    return {"threads": max(1, int(math.floor(effective + 0.5))), "effective_threads": round(effective, 3),
            "parallelism": round(cpu / wall, 3), "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
            "busiest_threads_cpu_s": [round(c, 3) for c in busy[:8]], "readings": len(inside),
            "source": "/proc/PID/task/TID/stat utime + stime of each of the program's threads, at the readings in "
                      "its training steps (start of step 1 to the exit): threads = (sum c)^2 / sum c^2, rounded"}


class ReferencedReader:
    """Per-mapping referenced pages of the program's processes, read and cleared at each step boundary, and
    the processes' CPU time (for :func:`parallelism`); with ``pageout``, the mappings' dirty pages too, and
    then all their pages paged out (:mod:`swaptrace.capture.pageout`)."""

    def __init__(self, root_pid: int, group: MemoryCgroup | None = None, *, pageout: bool = False):
        self.root_pid = root_pid
        self.group = group
        self.pageout = pageout
        self.paged_out_bytes = 0
        self.rows: list[tuple] = []  # (t_ns, t_from_ns, pid, start, end, referenced, anonymous, dirty)
        self.readings: list[dict[str, Any]] = []
        self.seconds = 0.0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._last = time.monotonic_ns()
        self.ticks_per_s = os.sysconf("SC_CLK_TCK")
        self._pids: list[int] = [root_pid]
        self._user_at_last = 0.0

    def user_cpu_since_reading(self) -> float:
        """User CPU time (s) the program's processes (as of the last reading) spent since that reading."""
        return self._user_cpu() - self._user_at_last

    def _user_cpu(self) -> float:
        total = 0
        for pid in self._pids:
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += _cpu_ticks(Path(f"/proc/{pid}/stat").read_text())[0]
        return total / self.ticks_per_s

    def read(self) -> None:
        """Read every process's anonymous mappings, then clear their referenced bits (any thread)."""
        with self._lock:
            t0 = time.monotonic_ns()
            rss, threads, pids = 0, {}, program_pids(self.root_pid)
            for pid in pids:
                try:
                    maps = anon_mappings(Path(f"/proc/{pid}/smaps").read_text(errors="replace"))
                    status = Path(f"/proc/{pid}/status").read_text()
                    Path(f"/proc/{pid}/clear_refs").write_text("1")
                    if self.pageout:  # after the reading: the next window's uses fault back in
                        self.paged_out_bytes += page_out(pid, [(lo, hi) for lo, hi, *_ in maps])
                except OSError as exc:  # exited meanwhile, or a kernel thread
                    if len(self.errors) < 3 and Path(f"/proc/{pid}").exists():
                        self.errors.append(f"pid {pid}: {exc}")
                    continue
                threads.update(self._threads_cpu(pid))  # after the mappings: a process ending now keeps them
                # paged out, the program's memory is still its own: resident plus swapped
                for name in ("RssAnon", "VmSwap") if self.pageout else ("RssAnon",):
                    m = re.search(rf"^{name}:\s+(\d+) kB", status, re.M)
                    rss += int(m.group(1)) * 1024 if m else 0
                self.rows += [(t0, self._last, pid, *mp) for mp in maps]
            group = self._group_reading()
            t1 = time.monotonic_ns()
            self.seconds += (t1 - t0) / 1e9
            self.readings.append({"t_ns": t0, "t_from_ns": self._last, "anon_rss_bytes": rss, "pids": len(pids),
                                  "threads_cpu_s": threads, "seconds": round((t1 - t0) / 1e9, 4), **group})
            self._last = t0
            self._pids = pids
            self._user_at_last = self._user_cpu()

    def _group_reading(self) -> dict[str, int]:
        """The program's group now: usage, anonymous memory and page cache (bytes; empty without a group)."""
        if self.group is None:
            return {}
        try:
            stat = self.group.stat()  # read once: the kinds, and the kernel memory where the kernel reports it
            kinds = memory_kinds(stat, self.group.version, self.group.swap_bytes())
            usage = self.group.usage_bytes()
        except (OSError, ValueError) as exc:
            if len(self.errors) < 3:
                self.errors.append(f"group {self.group.name}: {exc}")
            return {}
        if kinds.get("anon") is None or kinds.get("file") is None:
            return {}
        out = {"group_bytes": usage, "group_anon_bytes": int(kinds["anon"]), "group_file_bytes": int(kinds["file"])}
        # the group's own count (v1 kmem usage, v2 memory.stat "kernel", Linux >= 5.18): page tables, slab,
        # kernel stacks; unlike usage less anonymous memory and page cache, it holds no swap cache
        return out if stat.get("kernel") is None else {**out, "group_kernel_bytes": int(stat["kernel"])}

    def _threads_cpu(self, pid: int) -> dict[int, float]:
        """CPU time (s) of each thread of process ``pid``; a thread, or the process, that ended meanwhile is left
        out (the reading's mappings are kept whatever happens here)."""
        out: dict[int, float] = {}
        with contextlib.suppress(OSError):
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
            for task in tasks:
                with contextlib.suppress(OSError, ValueError):
                    out[int(task.name)] = cpu_seconds((task / "stat").read_text(), self.ticks_per_s)
        return out


class _Tee(threading.Thread):
    """Copy a pipe to a sink line by line, unchanged; call ``on_line()`` for lines matching ``pattern``."""

    def __init__(self, fd: int, sink, pattern: re.Pattern | None, on_line):
        super().__init__(daemon=True, name="swaptrace-record-tee")
        self.fd, self.sink, self.pattern, self.on_line = fd, sink, pattern, on_line

    def run(self) -> None:
        carry = b""
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:  # EIO: the pseudo-terminal's other side closed
                chunk = b""
            if not chunk:
                break
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            self._emit(data[:cut])
        self._emit(carry)
        os.close(self.fd)

    def _emit(self, data: bytes) -> None:
        if not data:
            return
        with contextlib.suppress(OSError, ValueError):
            self.sink.write(data)
            self.sink.flush()
        if self.pattern is None:
            return
        for line in data.splitlines():
            if self.pattern.search(line.decode(errors="replace")):
                self.on_line()


class _LineReadings(threading.Thread):
    """The readings at ``--step-line`` boundaries, off the tee that finds the lines.

    A line's mark goes into the trace the moment the tee reads it; the reading it starts (every mapping's
    smaps, ``clear_refs`` and, with ``--pageout``, paging the program out: up to seconds) runs here. Read in
    the tee, it held the next line back for as long: after the last line the program's exit had begun, and
    its first frees fell before the line's mark, in the last step (a recording whose model arrays seemed
    freed before the exit). Lines that come while a reading runs share the next reading (a reading covers
    everything since the last one); none is read once :meth:`finish` is called.
    """

    def __init__(self, boundary):
        super().__init__(daemon=True, name="swaptrace-record-readings")
        self.boundary = boundary
        self.queue: queue.SimpleQueue = queue.SimpleQueue()

    def run(self) -> None:
        while True:
            latest = self.queue.get()
            while latest is not None:
                try:
                    nxt = self.queue.get_nowait()
                except queue.Empty:
                    break
                latest = nxt
            if latest is None:
                return
            self.boundary(latest)

    def finish(self, timeout: float) -> None:
        """Stop after the reading under way (no other); wait for it at most ``timeout`` seconds."""
        self.queue.put(None)
        if self.is_alive():
            self.join(timeout=timeout)


@dataclass
class _Live:
    """What the run learns as it goes: boundaries seen, and whether --steps asks it to stop."""

    marks: int = 0
    lines: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    stopped: bool = False


def _thp_disable(value: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_THP_DISABLE, value, 0, 0, 0)


@dataclass
class RecordRequest:
    """What to record: the program, how its steps are found, where the file goes (see :func:`record_program`)."""

    argv: list[str]
    out: str | os.PathLike
    step_line: str | None = None
    steps: int | None = None
    force: bool = False
    buffer_kb: int = 32 * 1024
    work_base: str | os.PathLike | None = None
    timeout_s: float | None = None
    keep_thp: bool = False
    pageout: bool = False
    swap_bytes: int | None = None
    stdout: Any = None
    stderr: Any = None


@dataclass(frozen=True)
class RecordResult:
    """Outcome of :func:`record_program` (everything is also in the file's metadata)."""

    path: Path
    meta: dict[str, Any]


def _check_request(req: RecordRequest) -> re.Pattern | None:
    if not req.argv:
        raise ConfigError("give a program to run after --")
    if shutil.which(req.argv[0]) is None:
        raise ConfigError(f"{req.argv[0]}: command not found (or not executable)")
    if req.steps is not None and req.steps < 1:
        raise ConfigError(f"--steps: at least 1, got {req.steps}")
    if req.step_line is None:
        return None
    try:
        return re.compile(req.step_line)
    except re.error as exc:
        raise ConfigError(f"--step-line: not a regular expression ({exc}): {req.step_line!r}") from None


class _Run:
    """One recorded run of the program: the instance, the process, the tees, the readings."""

    def __init__(self, req: RecordRequest, pattern: re.Pattern | None, name: str, workdir: Path,
                 group: MemoryCgroup | None = None):
        self.req, self.pattern = req, pattern
        self.group = group
        self.trace = tracing.BlockTrace(name, None, workdir / "trace.txt", buffer_kb=req.buffer_kb,
                                        extra_events=TRACED_EVENTS, on_marker=self._on_marker)
        self.live = _Live()
        self.reader: ReferencedReader | None = None
        self.proc: subprocess.Popen | None = None
        self.tees: list[_Tee] = []
        self.line_readings = _LineReadings(self._boundary)
        self.setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        self.swap_facts: dict[str, Any] | None = None  # --pageout: the swap device's (swapdev.SwapDevice.facts)

    def _boundary(self, count: int) -> None:
        if self.reader is not None:
            self.reader.read()
        if self.req.steps is not None and count >= self.req.steps + 1:
            self.live.stop.set()

    def _on_marker(self, t_ns: int, text: str) -> None:
        """From the trace reader: the program's own step marks (and its end mark) are boundaries."""
        parts = text.split()
        if len(parts) > 1 and parts[1] == "step":
            self.live.marks += 1
            self._boundary(self.live.marks)
        elif len(parts) > 1 and parts[1] == "end" and self.reader is not None:
            self.reader.read()

    def _on_line(self) -> None:
        """From a tee: a line matched --step-line: mark it in the trace, then read (unless the program marks)."""
        self.live.lines += 1
        with contextlib.suppress(OSError):
            with open(self.trace.marker_path(), "w") as fh:
                fh.write(f"swaptrace line {self.live.lines}\n")
        if self.live.marks == 0:
            self.line_readings.queue.put(self.live.lines)

    def _spawn(self) -> tuple[int, list[tuple[int, Any]]]:
        """Start the program held before ``exec``; returns the hold pipe's write end and the pipes to tee."""
        hold_r, hold_w = os.pipe()
        out_r, out_w = os.openpty() if self.pattern is not None else os.pipe()
        if self.pattern is not None:
            import tty

            tty.setraw(out_w)  # no "\r\n" for "\n": the lines reach the user unchanged
        err_r, err_w = os.pipe()
        env = {**os.environ, MARKER_ENV: str(self.trace.marker_path())}
        cmd = ["/bin/sh", "-c", _HOLD, "sh", self.setpriv, "--pdeathsig", "KILL", "--", *self.req.argv]
        if not self.req.keep_thp:
            _thp_disable(1)  # inherited by the fork below, kept across exec; ours again right after
        try:
            self.proc = subprocess.Popen(cmd, stdin=hold_r, stdout=out_w, stderr=err_w, env=env,
                                         start_new_session=True)
        finally:
            if not self.req.keep_thp:
                _thp_disable(0)
            for fd in (hold_r, out_w, err_w):
                os.close(fd)
        return hold_w, [(out_r, self.req.stdout), (err_r, self.req.stderr)]

    def run(self) -> dict[str, Any]:
        """Trace the program from its ``exec`` to its exit; returns the run's facts."""
        self.trace.setup()
        for opt in ("record-tgid", "event-fork"):
            (self.trace.dir / "options" / opt).write_text("1")
        hold_w, pipes = self._spawn()
        try:
            (self.trace.dir / "set_event_pid").write_text(str(self.proc.pid))
            if self.group is not None:  # held before exec: the program and all it starts are charged there
                self.group.procs_file.write_text(str(self.proc.pid))
            self.reader = ReferencedReader(self.proc.pid, self.group, pageout=self.req.pageout)
            self.trace.start()
            with open(self.trace.marker_path(), "w") as fh:
                fh.write("swaptrace start\n")
            t_spawn = time.monotonic_ns()
        finally:
            os.close(hold_w)  # the program runs now (or, on an error above, its shell ends)
        self.tees = [_Tee(fd, sink, self.pattern, self._on_line) for fd, sink in pipes]
        self.line_readings.start()
        for t in self.tees:
            t.start()
        returncode = self._wait()
        t_exit = time.monotonic_ns()
        for t in self.tees:
            t.join(timeout=10)
        self.line_readings.finish(timeout=30)
        return {"returncode": returncode, "t_spawn_ns": t_spawn, "t_exit_ns": t_exit}

    def _wait(self) -> int:
        deadline = None if self.req.timeout_s is None else time.monotonic() + self.req.timeout_s
        next_read = time.monotonic() + READING_INTERVAL_S
        while True:
            try:
                return self.proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if self.live.stop.is_set() and not self.live.stopped:
                self.live.stopped = True
                self._signal(signal.SIGTERM)
                deadline = now + STOP_GRACE_S
            elif deadline is not None and now > deadline:
                if self.live.stopped:
                    self._signal(signal.SIGKILL)
                    return self.proc.wait()
                raise ToolError(f"{self.req.argv[0]} ran longer than --timeout {self.req.timeout_s:g} s")
            # until the first boundary (a mark, or a --step-line line), and throughout without either: by time
            if self.live.marks == 0 and (self.pattern is None or self.live.lines == 0) and self._reading_due(now, next_read):
                self.reader.read()
                next_read = time.monotonic() + READING_INTERVAL_S

    def _reading_due(self, now: float, next_read: float) -> bool:
        """An unmarked window ends after READING_INTERVAL_S; with --pageout, after READING_CPU_S of the program's
        user CPU time (paging out slows it, and its windows should not depend on how much)."""
        if self.req.pageout:
            return self.reader.user_cpu_since_reading() >= READING_CPU_S
        return now >= next_read

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def end(self) -> None:
        """Kill whatever of the program is left (every exit path)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self._signal(signal.SIGKILL)
                self.proc.kill()
            self.proc.wait()
        for t in self.tees:
            t.join(timeout=5)
        self.line_readings.finish(timeout=30)


def resolve_steps(parsed: ParsedRecording, steps_cap: int | None, t_exit_ns: int) -> Steps:
    """Steps from the program's marks, else from ``swaptrace line N`` marks (--step-line), else detected.

    Marks: mark ``k`` starts step ``k + 1``; the exit starts at the program's ``swaptrace end`` mark, else
    one median step after the last mark (when the program runs that long), else it is not told apart.
    Lines: each ends a step, so the last one starts the exit. ``steps_cap`` (--steps N): only the first N
    steps after start-up; the exit starts where step N + 1 would.
    """
    marks = sorted(t for t, text in parsed.markers if text.split()[1:2] == ["step"])
    lines = sorted(t for t, text in parsed.markers if text.split()[1:2] == ["line"])
    if marks:
        ends = [t for t, text in parsed.markers if text.split()[1:2] == ["end"] and t > marks[-1]]
        exit_ns, how = (min(ends), "end mark") if ends else (None, None)
        if exit_ns is None and len(marks) >= 2:
            guess = marks[-1] + int(np.median(np.diff(marks)))
            exit_ns, how = (guess, "median step") if guess < t_exit_ns else (None, None)
        found = Steps(tuple(marks), exit_ns, "marks", note=how)
    elif lines:
        found = Steps(tuple(lines[:-1]), lines[-1], "lines", note="the last matching line")
    else:
        found = detect_steps(parsed.events)
    if steps_cap is not None and len(found.boundaries) > steps_cap:
        return Steps(found.boundaries[:steps_cap], found.boundaries[steps_cap], found.how, found.period,
                     f"--steps {steps_cap}")
    return found


def build_rows(parsed: ParsedRecording, reader: ReferencedReader | None, steps: Steps, t0_ns: int):
    """The file's columns: every event (faults only in anonymous memory), then the readings, by time; with
    ``--pageout`` also ``dirty`` (a reading's smaps ``Private_Dirty:`` bytes).

    Returns ``(columns, exit_step, dropped_faults)``.
    """
    tracker = AnonTracker()
    rows, dropped = [], 0
    for ev in parsed.events:
        t, code, pid, address, length, write, flags, old_address, old_length = ev
        if code == EV["fault"] and not tracker.is_anon(pid, address):
            dropped += 1
            continue
        if code == EV["brk"]:
            sp = tracker.spaces.get(pid)
            old_address = sp.brk if sp is not None and sp.brk is not None else 0
        tracker.apply(ev)
        rows.append((t, t, code, pid, address, length, write, flags, old_address, old_length, 0, 0, 0))
    for t, t_from, pid, start, end, ref, anon, dirty in (reader.rows if reader is not None else []):
        rows.append((t, t_from, EV["referenced"], pid, start, end - start, False, 0, 0, 0, ref, anon, dirty))
    rows.sort(key=lambda r: r[0])  # stable: events keep their trace order
    cols = list(zip(*rows, strict=True)) if rows else [[]] * 13
    t_ns = np.asarray(cols[0], np.int64)
    # a reading belongs to the step its window began in (a boundary's reading ends the step before it)
    step, exit_step = assign_steps(np.asarray(cols[1], np.int64), steps)
    columns = {
        "t_us": (t_ns - t0_ns) / 1e3, "step": step, "event": np.asarray(cols[2], np.int8),
        "pid": np.asarray(cols[3], np.int32), "address": np.asarray(cols[4], np.uint64),
        "length": np.asarray(cols[5], np.uint64), "write": np.asarray(cols[6], bool),
        "flags": np.asarray(cols[7], np.uint64), "old_address": np.asarray(cols[8], np.uint64),
        "old_length": np.asarray(cols[9], np.uint64), "referenced": np.asarray(cols[10], np.uint64),
        "anonymous": np.asarray(cols[11], np.uint64),
    }
    if reader is not None and reader.pageout:  # the optional column: bytes written in the window (smaps)
        columns["dirty"] = np.asarray(cols[12], np.uint64)
    return columns, exit_step, dropped


def _read_sys(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _metadata(req: RecordRequest, run_facts: dict[str, Any], parsed: ParsedRecording, steps: Steps,
              extra: dict[str, Any]) -> dict[str, Any]:
    """The ``recording`` file's metadata (docs/formats.md)."""
    t0 = run_facts["t0_ns"]

    def us(t: int | None) -> float | None:
        return None if t is None else round((t - t0) / 1e3, 3)

    return {
        "source": "kernel", "page_bytes": 4096, "command": [str(a) for a in req.argv],
        "steps": len(steps.boundaries) + 1, "first_step": 0, "exit_step": extra["exit_step"],
        "step_source": steps.how, "step_note": steps.note, "step_period_calls": steps.period,
        "step_times_us": [us(t) for t in steps.boundaries], "exit_start_us": us(steps.exit_ns),
        "step_line": req.step_line, "steps_asked": req.steps, "stopped_after_steps": run_facts["stopped"],
        "returncode": run_facts["returncode"], "duration_us": us(run_facts["t_exit_ns"]),
        "kernel": {"release": platform.release()}, "thp": _read_sys("/sys/kernel/mm/transparent_hugepage/enabled"),
        "thp_disabled": not req.keep_thp, "loadavg_start": run_facts["load_start"],
        "loadavg_end": round(os.getloadavg()[0], 2), "facilities": extra["facilities"],
        "readings": extra["readings"], "lost_events": extra["lost"], "malformed_lines": parsed.malformed,
        "failed_calls": parsed.failed_calls, "faults_not_anonymous": extra["dropped"], "cpu": extra["cpu"],
        "pageout": req.pageout,
    }


def _facilities(run: _Run, buffer_stats: dict[str, int]) -> dict[str, Any]:
    reader = run.reader
    return {"tracepoints": list(TRACED_EVENTS), "pid_filter": "set_event_pid + options/event-fork",
            "trace_buffer": {**buffer_stats, "buffer_kb": run.req.buffer_kb, "bytes_read": run.trace.bytes_read},
            "smaps_readings": len(reader.readings) if reader else 0,
            "smaps_seconds": round(reader.seconds, 4) if reader else 0.0,
            "smaps_errors": reader.errors if reader else [],
            "referenced": "/proc/PID/smaps Referenced: per anonymous mapping, clear_refs=1 after each reading",
            "anon_rss": "/proc/PID/status RssAnon:" + (" + VmSwap:" if reader and reader.pageout else "")
                        + " summed over the program's processes",
            "pageout": None if not (reader and reader.pageout) else {
                "how": "process_madvise(MADV_PAGEOUT) of every anonymous mapping after each reading; smaps "
                       "Private_Dirty: per mapping at the next (the dirty column); re-faults are re-touches",
                "advised_bytes": reader.paged_out_bytes, "swap": run.swap_facts,
                "reading_cpu_s": READING_CPU_S, "warning": _pageout_warning(reader, run.swap_facts)},
            "group": (None if run.group is None else
                      f"memory cgroup v{run.group.version} without a limit: usage, anonymous memory and page cache "
                      "at each reading")}


def _pageout_warning(reader: ReferencedReader, swap: dict[str, Any] | None) -> str | None:
    """A line when the program's memory passed half the swap area: the kernel then frees the slot of a page
    read back (``vm_swap_full``) and dirties it, so some loads of those windows count as stores."""
    peak = max((r["anon_rss_bytes"] for r in reader.readings), default=0)
    size = int((swap or {}).get("device_bytes") or 0)
    if not size or 2 * peak <= size:
        return None
    return (f"the program held {peak / 2**20:.0f} MiB, more than half the {size / 2**20:.0f} MiB swap area: "
            "pages read back may have counted as written; give --swap-size at least twice its memory")


def _readings(reader: ReferencedReader | None, t0: int, steps: Steps) -> list[dict[str, Any]]:
    if reader is None or not reader.readings:
        return []
    step, _ = assign_steps(np.asarray([r["t_from_ns"] for r in reader.readings], np.int64), steps)
    group = ("group_bytes", "group_anon_bytes", "group_file_bytes", "group_kernel_bytes")
    return [{"t_us": round((r["t_ns"] - t0) / 1e3, 3), "step": int(s), "anon_rss_bytes": r["anon_rss_bytes"],
             "pids": r["pids"], "seconds": r["seconds"], **{k: r[k] for k in group if k in r}}
            for r, s in zip(reader.readings, step, strict=True)]


def _parallelism(reader: ReferencedReader | None, steps: Steps, t_exit_ns: int) -> dict[str, Any] | None:
    """:func:`parallelism` over the training steps: from step 1's start to the exit's (else the program's end)."""
    if reader is None or not steps.boundaries:
        return None
    return parallelism(reader.readings, steps.boundaries[0], steps.exit_ns if steps.exit_ns is not None else t_exit_ns)


def _finish(req: RecordRequest, out_path: Path, run: _Run, facts: dict[str, Any]) -> RecordResult:
    """After the program ended: stop tracing, parse, find the steps, write the file."""
    buffer_stats = run.trace.stop()
    with open(run.trace.out_path, errors="replace") as fh:
        parsed = parse_lines(fh)
    starts = [t for t, text in parsed.markers if text == "swaptrace start"]
    facts["t0_ns"] = starts[0] if starts else facts["t_spawn_ns"]
    steps = resolve_steps(parsed, req.steps, facts["t_exit_ns"])
    columns, exit_step, dropped = build_rows(parsed, run.reader, steps, facts["t0_ns"])
    lost = int(buffer_stats["overrun"] + buffer_stats["dropped"] + parsed.lost_events)
    meta = _metadata(req, facts, parsed, steps, {
        "exit_step": exit_step if steps.exit_ns is not None else None, "dropped": dropped, "lost": lost,
        "facilities": _facilities(run, buffer_stats), "readings": _readings(run.reader, facts["t0_ns"], steps),
        "cpu": _parallelism(run.reader, steps, facts["t_exit_ns"])})
    with TraceWriter(out_path, "recording", meta, force=req.force,
                     optional=("dirty",) if "dirty" in columns else ()) as w:
        w.write(**columns)
    return RecordResult(path=out_path, meta=meta)


def _record_group(name: str) -> MemoryCgroup | None:
    """The program's memory cgroup, without a limit; None where no memory controller can make one."""
    try:
        group = MemoryCgroup(name)
        group.create()
    except PrivilegeError:
        return None
    return group


def _pageout_swap(stack: contextlib.ExitStack, req: RecordRequest, workdir: Path, name: str) -> dict[str, Any]:
    """--pageout: a swap area of our own for the recording, removed when it ends (``stack``); its facts."""
    swap = SwapDevice(workdir / f"{name}.swap", req.swap_bytes or default_swap_bytes(workdir))
    stack.callback(swap.teardown)
    swap.setup()
    return {**swap.facts, "size_source": "--swap-size" if req.swap_bytes else
            "the machine's RAM, at most half the free space of the work folder"}


def _check_pageout(req: RecordRequest, base: Path, stack: contextlib.ExitStack) -> None:
    """--pageout: the machine checks of a capture (swap file not in RAM, no zswap), its lock, no other swap."""
    host.check_machine(base)
    stack.callback(os.close, host.hold_capture_lock(host.LOCK_PATH))
    host.refuse_other_swap()


def record_program(req: RecordRequest) -> RecordResult:
    """Run a program once, without a memory limit, and record what its memory does (root only).

    Parameters
    ----------
    req : RecordRequest
        ``argv`` (the program; it runs with this process's working directory and environment plus
        ``SWAPTRACE_MARKER``), ``out`` (the ``recording`` file), ``step_line`` (a regular expression: a
        line of the program's stdout or stderr that matches ends a step), ``steps`` (stop the program
        with SIGTERM once N steps after start-up are recorded), ``force``, ``buffer_kb`` (tracefs ring
        buffer per CPU, KiB), ``work_base`` (scratch folder, default /var/tmp), ``timeout_s``,
        ``keep_thp`` (leave transparent huge pages on: a fault may then map 2 MiB), ``pageout`` (page the
        program out at every reading, on a swap area of ``swap_bytes`` made for it:
        :mod:`swaptrace.capture.pageout`), and the ``stdout``/``stderr`` binary streams the program's output
        is passed to.

    Returns
    -------
    RecordResult
        The path and the metadata written (docs/formats.md, ``recording``).
    """
    out_path = check_output_path(req.out, req.force)
    pattern = _check_request(req)
    check_record_machine()
    base = Path(req.work_base or leftovers.DEFAULT_WORK_BASE)
    name = f"{leftovers.PREFIX}{os.getpid()}-record"
    with contextlib.ExitStack() as stack:
        stack.enter_context(sigterm_as_interrupt(hangup=True))
        if req.pageout:
            _check_pageout(req, base, stack)
        leftovers.cleanup_leftovers(base)
        load_start = round(os.getloadavg()[0], 2)
        workdir = base / name
        workdir.mkdir(parents=True, exist_ok=True)
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        group = _record_group(name)
        if group is not None:
            stack.callback(group.remove)  # after the program is gone (callbacks run last first)
        run = _Run(req, pattern, name, workdir, group)
        if req.pageout:
            run.swap_facts = _pageout_swap(stack, req, workdir, name)
        stack.callback(run.trace.teardown)
        stack.callback(run.end)
        facts = run.run()
        facts.update(load_start=load_start, stopped=run.live.stopped)
        if facts["returncode"] != 0 and not run.live.stopped:
            raise ToolError(f"{req.argv[0]} exited with status {facts['returncode']}; nothing written")
        return _finish(req, out_path, run, facts)
