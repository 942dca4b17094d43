"""The replay child as a process: started in its cgroup, driven through READY / GO / DONE, measured.

:class:`ReplayProcess` starts ``python -m swaptrace.capture.child CONFIG.json`` so that it joins the
memory cgroup before ``exec`` (everything the interpreter loads is charged to the group) and
forwards its stdout lines; :func:`run_replay` is one run of it: the baseline once the child is
``READY``, the limit, the replay, and the group's counters while the finished child still holds its
memory. The protocol itself is :mod:`swaptrace.capture.child`'s.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swaptrace.capture import cgroup as cg
from swaptrace.capture.host import vmstat
from swaptrace.capture.oom_guard import OomGuard
from swaptrace.errors import ToolError

#: seconds the child may take from start to ``READY`` (interpreter, numba, warm-up)
READY_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class RunResult:
    """One run of the replay child (sizes in bytes, times in seconds; ``child`` is its ``DONE`` payload)."""

    baseline_bytes: int
    rss_bytes: int
    limit_bytes: int | None
    peak_bytes: int | None
    warmup_s: float
    locked: bool
    child: dict[str, Any]
    vmstat_delta: dict[str, int]
    cgroup_stat: dict[str, int]
    oom: dict[str, Any] = field(default_factory=dict)
    #: ``memory.stat`` when the baseline was measured, and the cgroup's usage once the child is done
    baseline_stat: dict[str, int] = field(default_factory=dict)
    usage_end_bytes: int | None = None


class ReplayProcess:
    """The replay child process and a thread that forwards its stdout lines."""

    def __init__(self, config: dict[str, Any], workdir: Path, tag: str, cgroup: cg.MemoryCgroup):
        self.config_path = workdir / f"child-{tag}.json"
        self.config_path.write_text(json.dumps(config))
        self.stderr_path = workdir / f"child-{tag}.stderr"
        # join the cgroup before exec, so everything the interpreter loads is charged to it
        script = 'echo $$ > "$1" && shift && exec "$@"'
        cmd = ["/bin/sh", "-c", script, "sh", str(cgroup.procs_file), sys.executable, "-m",
               "swaptrace.capture.child", str(self.config_path)]
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in close()
        # one BLAS thread: on a small machine extra threads only fight over cores and blur step times
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     text=True, start_new_session=True, env=env)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, word: str, timeout_s: float | None, on_line=None) -> dict[str, Any]:
        """Wait for the child's line starting with ``word``; return its JSON payload (``{}`` without one).

        Lines before it go to ``on_line``. ToolError if the child exits first or gives no such line
        within ``timeout_s`` seconds (None: no limit).
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                raise ToolError(f"replay child gave no {word} within {timeout_s:.0f} s") from None
            if line is None:
                self.proc.wait()
                raise ToolError(f"replay child exited with code {self.proc.returncode} before {word}: "
                                f"{self.stderr_tail()}")
            if line.startswith(word + " ") or line == word:
                payload = line[len(word):].strip()
                return json.loads(payload) if payload else {}
            if on_line is not None:
                on_line(line)

    def send(self, text: str) -> None:
        """Write one line to the child's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def stderr_tail(self) -> str:
        """The child's last stderr lines, for a message (a guess at the OOM killer when there are none)."""
        try:
            text = self.stderr_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        if any("MemoryError" in t or "Killed" in t for t in text):
            return " | ".join(text[-3:])
        return " | ".join(text[-3:]) or "(no message; killed by the OOM killer?)"

    def close(self) -> None:
        """End the child's process group if it still runs, and close its pipes and stderr file."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self._reader.join(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:  # broken pipe to a dead child
                    pass
        self._stderr.close()


def _marking_steps(stalls, on_step):
    """``on_step`` that first marks the end of step ``n`` in ``stalls`` at each ``STEP n`` line."""
    def marking(line: str) -> None:
        parts = line.split()
        if len(parts) == 2 and parts[0] == "STEP" and parts[1].lstrip("-").isdigit():
            stalls.mark(int(parts[1]))
        if on_step is not None:
            on_step(line)
    return marking


def run_replay(config: dict[str, Any], workdir: Path, tag: str, group: cg.MemoryCgroup, memory_bytes: int | None, *,
               on_go=None, on_step=None, timeout_s: float | None = None, overhead_bytes: int = 0,
               stalls=None) -> RunResult:
    """One run of the replay child in ``group``: start it, measure its baseline, set the limit, replay, measure.

    Parameters
    ----------
    config : dict
        The child's configuration (:mod:`swaptrace.capture.child`), written to the work folder.
    workdir : Path
        The capture's work folder (the child's configuration and stderr go there).
    tag : str
        Names this run's files: ``child-<tag>.json``, ``child-<tag>.stderr``.
    group : MemoryCgroup
        The run's memory cgroup (created here; the caller removes it).
    memory_bytes : int or None
        The model's budget in bytes: the limit is the child's baseline after ``READY`` plus this plus
        ``overhead_bytes``, kept by an :class:`~swaptrace.capture.oom_guard.OomGuard`. None: no limit.
    on_go : callable, optional
        Called with no argument just before ``GO`` (the limited run starts tracing there).
    on_step : callable, optional
        Called with each line the child prints between ``GO`` and ``DONE`` (``STEP n``).
    timeout_s : float, optional
        Seconds the replay (``GO`` to ``DONE``) may take.
    overhead_bytes : int
        Memory the kernel charges beyond the model's pages (page tables), added to the limit.
    stalls : StallRecorder, optional
        Measures the run's stalls from ``GO`` (:mod:`swaptrace.capture.stalls`); ``STEP n`` ends step ``n``.
    """
    if stalls is not None:
        stalls.begin(tag, group.pids)  # a quiet wait, if asked for, before the child starts
    group.create()
    group.set_limit(None)
    child = ReplayProcess(config, workdir, tag, group)
    if stalls is not None:
        stalls.root(child.proc.pid)
        on_step = _marking_steps(stalls, on_step)
    try:
        ready = child.expect("READY", READY_TIMEOUT_S)
        squeezed = group.squeeze() if memory_bytes is not None else False
        baseline = group.usage_bytes()
        baseline_stat = group.stat()
        kmem_start = baseline_stat.get("kernel")
        limit = None
        guard = None
        if memory_bytes is not None:
            limit = baseline + int(memory_bytes) + int(overhead_bytes)
            group.set_limit(limit)
            guard = OomGuard(group, limit)
        group.reset_peak()
        if on_go is not None:
            on_go()
        before = vmstat()
        if stalls is not None:
            stalls.start()
        child.send("GO")
        try:
            done = child.expect("DONE", timeout_s, on_line=(lambda line: on_step(line)) if on_step else None)
            if stalls is not None:
                stalls.end()
        finally:
            oom = guard.stop() if guard is not None else {}
            if stalls is not None:
                stalls.close()
        after = vmstat()
        usage_end = group.usage_bytes()  # the child still lives, idle (it waits for us to end it): all still charged
        peak = group.peak_bytes()
        stat = group.stat()
    finally:
        child.close()
    return RunResult(
        baseline_bytes=baseline, rss_bytes=int(ready.get("rss_bytes", 0)), limit_bytes=limit, peak_bytes=peak,
        warmup_s=float(ready.get("warmup_s", 0.0)), locked=bool(ready.get("locked")), child=done,
        vmstat_delta={k: after[k] - before.get(k, 0) for k in after}, cgroup_stat=stat,
        oom={**oom, "kmem_start_bytes": kmem_start, "baseline_squeezed": squeezed}, baseline_stat=baseline_stat,
        usage_end_bytes=usage_end,
    )
