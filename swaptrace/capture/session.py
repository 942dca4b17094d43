"""Orchestration of one capture: set up, run the child twice, record, undo.

Order (docs/capture.md, "What it does"), each set-up step a method of
:class:`CaptureSession` that registers its undo on a :class:`contextlib.ExitStack`::

    the capture lock (/run/swaptrace-capture.lock; a second capture is refused)
    leftovers of dead captures removed
    refused if any other swap area is active (it would share the swap traffic)
    trace -> codes file (page << 1 | write, int64) in the work folder
    unlimited run   (own cgroup, no limit)          -> per-step wall times
    swap file -> loop -> mkswap -> swapon
    tracefs instance, filter dev == loop
    limited run     (own cgroup, limit = baseline + budget, traced)
    undo in reverse: tracing, child, cgroups, swapoff, loop, files

Everything created is named ``swaptrace-capture-<pid>...`` with the pid of the
capturing process. Undo runs on success, error, Ctrl-C and SIGTERM (turned
into KeyboardInterrupt); if the capture is killed outright (SIGKILL), the
child dies with it (``PR_SET_PDEATHSIG``) and the next capture (or
:func:`cleanup_leftovers`) finds the named leftovers of the dead pid and
removes them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.capture import cgroup as cg
from swaptrace.capture import tracing
from swaptrace.capture.convert import parse_lines, to_stream
from swaptrace.capture.reclaim import RECLAIM_EVENTS, parse_reclaim
from swaptrace.capture.swapdev import SwapDevice, remove_swap_leftovers
from swaptrace.compare import summarize_requests
from swaptrace.core import blockdev
from swaptrace.core.signals import sigterm_as_interrupt
from swaptrace.core.traceio import OP_DISCARD, AtomicPath, TraceWriter, check_output_path, open_trace
from swaptrace.emulate.config import EmulatorConfig
from swaptrace.errors import ConfigError, PrivilegeError, SwaptraceError, ToolError, TraceFileError
from swaptrace.kernels.capture import replay as replay_kernel
from swaptrace.workload.spec import mlp_layers

PREFIX = "swaptrace-capture-"
DEFAULT_WORK_BASE = Path("/var/tmp")
SWAP_HEADROOM_BYTES = 256 << 20  # the child's own heap may be swapped too
READY_TIMEOUT_S = 300.0


def _pid_of(name: str) -> int | None:
    rest = name[len(PREFIX):] if name.startswith(PREFIX) else ""
    digits = ""
    for ch in rest:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else None


def owner_alive(name: str) -> bool:
    """Whether the capture that created ``name`` (``swaptrace-capture-<pid>...``) still runs."""
    pid = _pid_of(name)
    if pid is None:
        return False
    if pid == os.getpid():
        return True
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"python" in cmdline or b"swaptrace" in cmdline


def find_leftovers(work_base: Path | None = None) -> list[str]:
    """Names of everything a dead capture left behind (nothing is changed)."""
    found = [f"tracefs instance {p}" for p in tracing.list_instances(PREFIX) if not owner_alive(p.name)]
    found += [f"cgroup {p}" for p in cg.list_groups(PREFIX) if not owner_alive(p.name)]
    for loop, backing in blockdev.loop_devices().items():
        name = Path(backing.replace(" (deleted)", "")).name
        if PREFIX in name and not owner_alive(name):
            found.append(f"{'swap+' if loop in blockdev.swap_areas() else ''}loop {loop} ({backing})")
    for base in {DEFAULT_WORK_BASE, Path(work_base or DEFAULT_WORK_BASE)}:
        if base.is_dir():
            found += [f"folder {p}" for p in base.glob(PREFIX + "*") if not owner_alive(p.name)]
    return found


def cleanup_leftovers(work_base: Path | None = None) -> list[str]:
    """Remove what dead captures left behind, in undo order; return what was removed."""
    removed = []
    for p in cg.list_groups(PREFIX):  # first: kill orphaned replays so swapoff has nothing to swap in
        if not owner_alive(p.name):
            cg.remove_group(p)
            removed.append(f"cgroup {p}")
    for p in tracing.list_instances(PREFIX):
        if not owner_alive(p.name):
            tracing.remove_instance(p)
            removed.append(f"tracefs instance {p}")
    removed += remove_swap_leftovers(PREFIX, owner_alive)
    for base in {DEFAULT_WORK_BASE, Path(work_base or DEFAULT_WORK_BASE)}:
        if base.is_dir():
            for p in base.glob(PREFIX + "*"):
                if not owner_alive(p.name):
                    shutil.rmtree(p, ignore_errors=True)
                    removed.append(f"folder {p}")
    return removed


def _vmstat() -> dict[str, int]:
    out = {}
    for line in Path("/proc/vmstat").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key in ("pswpin", "pswpout", "pgmajfault", "pgfault", "swpin_zero", "swpout_zero", "thp_swpout"):
            out[key] = int(value)
    return out


def _read_sys(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _fs_type(path: Path) -> str | None:
    """Filesystem type of the mount holding ``path`` (from /proc/mounts)."""
    target = Path(path).resolve()
    while not target.exists() and target != target.parent:
        target = target.parent
    best, kind = "", None
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3:
            mount = parts[1].replace("\\040", " ")
            if (str(target) == mount or str(target).startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
                best, kind = mount, parts[2]
    return kind


def kernel_facts() -> dict[str, Any]:
    """Kernel settings that shape swap behaviour (kernel Documentation/admin-guide/sysctl/vm.rst)."""
    return {
        "kernel": platform.release(),
        "page_cluster": _read_sys("/proc/sys/vm/page-cluster"),
        "swappiness": _read_sys("/proc/sys/vm/swappiness"),
        "vma_ra_enabled": _read_sys("/sys/kernel/mm/swap/vma_ra_enabled"),
        "thp": _read_sys("/sys/kernel/mm/transparent_hugepage/enabled"),
        "mglru": _read_sys("/sys/kernel/mm/lru_gen/enabled"),
        "zswap": _read_sys("/sys/module/zswap/parameters/enabled"),
        "cpus": os.cpu_count(),
    }


def check_privileges() -> None:
    """PrivilegeError unless root with a memory cgroup, tracefs and swap tools."""
    if os.geteuid() != 0:
        raise PrivilegeError("capture needs root (it creates a swap device, a memory cgroup and a tracefs instance)")
    cg.memory_hierarchy()
    tracing.tracefs_root()
    for tool in ("losetup", "mkswap", "swapon", "swapoff"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists() and not Path(f"/sbin/{tool}").exists():
            raise ToolError(f"{tool} is not installed (package util-linux)")


@dataclass(frozen=True)
class RunResult:
    """One run of the child."""

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


@dataclass(frozen=True)
class CaptureResult:
    """Outcome of :func:`capture` (the summary is also in the file's metadata)."""

    path: Path
    summary: dict[str, Any]
    pages_in: int
    pages_out: int
    pswpin: int
    pswpout: int
    major_faults: int
    memory_bytes: int
    baseline_bytes: int
    limit_bytes: int
    slowdown: float | None
    lost_events: int
    malformed_lines: int
    kernel: dict[str, Any] = field(default_factory=dict)
    removed_leftovers: list[str] = field(default_factory=list)


class _Child:
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
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def stderr_tail(self) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        if any("MemoryError" in t or "Killed" in t for t in text):
            return " | ".join(text[-3:])
        return " | ".join(text[-3:]) or "(no message; killed by the OOM killer?)"

    def close(self) -> None:
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


class _OomGuard:
    """Keep a v1 memory cgroup from OOM-killing the replay when reclaim merely lags.

    Legacy (v1) memcg reclaim cannot throttle on pages under writeback, so
    under heavy swap-out to a loop device it sometimes gives up and invokes the
    OOM killer although swap is free. With the killer disabled the faulting
    task instead waits; this thread notices (``under_oom 1``), raises the limit
    by ``nudge_bytes`` for a moment -- which wakes the task -- and sets it back,
    reclaiming in its own context. Stalls and the time spent above the limit
    are reported, so a reader can judge the perturbation.
    """

    def __init__(self, group: cg.MemoryCgroup, limit_bytes: int, nudge_bytes: int = 1 << 20,
                 give_up_s: float | None = None):
        self.group, self.limit, self.nudge = group, int(limit_bytes), int(nudge_bytes)
        self.stalls = 0
        self.raised_s = 0.0
        #: after this long above the limit (the usage cannot get back under it: swap full, or memory that
        #: cannot be swapped) the guard lets the kernel's OOM killer act instead of waiting for ever
        self.give_up_s = give_up_s
        self.gave_up = False
        self._stop = threading.Event()
        self.active = group.disable_oom_killer()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="swaptrace-oom-guard")
        if self.active:
            self._thread.start()

    def _watch(self) -> None:
        raised_at = None
        while not self._stop.wait(0.002):
            try:
                if raised_at is None and self.group.under_oom():
                    self.stalls += 1
                    self.group.set_limit(self.limit + self.nudge)
                    raised_at = time.monotonic()
                elif raised_at is not None and time.monotonic() - raised_at > 0.002:
                    if self.give_up_s is not None and time.monotonic() - raised_at > self.give_up_s:
                        self.gave_up = True
                        self.group.enable_oom_killer()
                        with contextlib.suppress(OSError):
                            self.group.set_limit(self.limit)
                        break
                    self.group.set_limit(self.limit)  # EBUSY while usage cannot be pushed back yet
                    self.raised_s += time.monotonic() - raised_at
                    raised_at = None
            except OSError:
                continue
        if raised_at is not None:
            self.raised_s += time.monotonic() - raised_at

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self.active:
            self._thread.join(timeout=5)
        out = {"oom_killer_disabled": self.active, "oom_stalls": self.stalls, "above_limit_s": self.raised_s}
        if self.give_up_s is not None:
            out["oom_guard_gave_up"] = self.gave_up
        return out


def _prepare_codes(trace, workdir: Path) -> dict[str, Any]:
    """Write the trace as raw int64 ``page << 1 | write`` and per-step offsets."""
    meta = trace.meta
    steps = int(meta.get("steps", 0))
    first = int(meta.get("first_step", 0))
    codes_path = workdir / "codes.i64"
    counts = np.zeros(max(steps, 1), dtype=np.int64)
    footprint_pages = int(meta["footprint_pages"])
    last_step = first
    with open(codes_path, "wb") as fh:
        for batch in trace.iter_batches(["step", "page", "write"]):
            step = batch["step"].astype(np.int64)
            if len(step) == 0:
                continue
            if step[0] < last_step or np.any(np.diff(step) < 0):
                raise TraceFileError(f"{trace.path}: steps are not in order; capture replays in file order")
            last_step = int(step[-1])
            page = batch["page"].astype(np.int64)
            if page.max(initial=0) >= footprint_pages:
                raise TraceFileError(f"{trace.path}: page {int(page.max())} outside the footprint ({footprint_pages} pages)")
            rel = step - first
            if rel.min() < 0:
                raise TraceFileError(f"{trace.path}: step {int(step.min())} before first_step {first}")
            if rel.max() >= len(counts):
                counts = np.concatenate([counts, np.zeros(int(rel.max()) + 1 - len(counts), dtype=np.int64)])
            counts += np.bincount(rel, minlength=len(counts))
            ((page << 1) | batch["write"].astype(np.int64)).tofile(fh)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    numbers = np.arange(first, first + len(counts), dtype=np.int64)
    np.save(workdir / "step_starts.npy", starts)
    np.save(workdir / "step_numbers.npy", numbers)
    return {
        "codes": str(codes_path),
        "step_starts": str(workdir / "step_starts.npy"),
        "step_numbers": str(workdir / "step_numbers.npy"),
        "steps": len(counts),
        "first_step": first,
        "accesses": int(starts[-1]),
    }


def page_table_bytes(footprint_bytes: int) -> int:
    """Memory the kernel charges for the page tables of a mapping of this size (x86-64, 4-level).

    One 4 KiB PTE page per 2 MiB of address space, one PMD page per 1 GiB,
    plus one PUD page; charged to the memory cgroup (``__GFP_ACCOUNT``) but no
    part of the model, so the capture adds it to the limit.
    """
    pte = -(-int(footprint_bytes) // (2 << 20))
    pmd = -(-int(footprint_bytes) // (1 << 30))
    return (pte + pmd + 1) * 4096


#: memory.stat fields kept in the metadata
STAT_KEYS = ("pgmajfault", "pgfault", "pgpgin", "pgpgout", "rss", "cache", "swap", "anon", "file", "unevictable",
             "swapcached", "active_anon", "inactive_anon", "active_file", "inactive_file", "mapped_file", "kernel",
             "pagetables")


def room_gain_bytes(baseline_bytes: int, overhead_bytes: int, usage_end_bytes: int | None,
                    model_resident_bytes: int | None) -> int | None:
    """How much more memory the model had at the end of the run than its budget (negative: less).

    The limit is ``baseline + budget + overhead`` on the assumption that the rest of the process keeps
    holding ``baseline + overhead`` throughout. At the end, what the rest holds is the cgroup's usage less
    the model's own charged pages (:class:`swaptrace.capture.child.ResidencyProbe`). If the rest holds less
    -- memory the baseline counted was freed or reclaimed during the run: allocator caches returned late,
    page cache read at start-up -- the model had that much extra room, and the capture is of a larger
    budget than asked: a few hundred KiB shift a cyclic workload near its knee by whole percents.
    """
    if usage_end_bytes is None or model_resident_bytes is None:
        return None
    return int(baseline_bytes) + int(overhead_bytes) - (int(usage_end_bytes) - int(model_resident_bytes))


def _run_child(config: dict[str, Any], workdir: Path, tag: str, group: cg.MemoryCgroup, memory_bytes: int | None,
               on_go=None, on_step=None, timeout_s: float | None = None, overhead_bytes: int = 0) -> RunResult:
    group.create()
    group.set_limit(None)
    child = _Child(config, workdir, tag, group)
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
            guard = _OomGuard(group, limit)
        group.reset_peak()
        if on_go is not None:
            on_go()
        before = _vmstat()
        child.send("GO")
        try:
            done = child.expect("DONE", timeout_s, on_line=(lambda line: on_step(line)) if on_step else None)
        finally:
            oom = guard.stop() if guard is not None else {}
        after = _vmstat()
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


#: held (``flock``) for the whole of a capture: two at once would share the swap device's traffic and the CPUs
LOCK_PATH = Path("/run/swaptrace-capture.lock")


def _hold_capture_lock(path: Path) -> int:
    """Take the capture lock without waiting; return its descriptor (closing it releases the lock).

    Raises
    ------
    ConfigError
        Another capture holds it (its pid, written into the file, is named).
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise ConfigError(f"another capture is running (pid {holder} holds {path}); wait for it to finish") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _refuse_other_swap() -> None:
    """ConfigError when any swap area is active: the kernel would share the capture's swap traffic with it."""
    areas = blockdev.swap_areas()
    if areas:
        raise ConfigError(f"swap is already active on {', '.join(areas)}; the kernel would spread the capture's "
                          f"swap I/O over it: swapoff it for the capture")


@dataclass(frozen=True)
class Description:
    """What a kind of child adds to a capture's file and result (:meth:`ReplayChild.describe`)."""

    summary: dict[str, Any]
    kernel: dict[str, Any]
    meta: dict[str, Any]
    params: dict[str, Any]
    steps: int
    first_step: int
    memory_bytes: int
    baseline_bytes: int
    limit_bytes: int
    slowdown: float | None
    major_faults: int


class CaptureSession:
    """One capture: checks, then set-up steps each registering its undo on an :class:`contextlib.ExitStack`.

    Set up in this order, undone in reverse (on success, error, Ctrl-C and
    SIGTERM/SIGHUP, which are turned into KeyboardInterrupt): signal
    handlers, the capture lock, the work folder, the unlimited run's cgroup,
    the swap device (file, loop, swapon), the limited run's cgroup, the
    tracefs instance. An undo step that fails does not stop the others; its
    error is raised at the end (as :class:`~swaptrace.errors.ToolError`)
    unless another error is already on its way out.

    What runs in the cgroups is the ``child``, of one of two kinds with the same methods:
    :class:`ReplayChild` (replays an access trace; :func:`capture`) and
    :class:`swaptrace.capture.command.CommandChild` (runs any program; ``capture -- CMD``). A child
    checks its own inputs (``check_inputs``), prepares its files (``warm_up``, ``prepare``), runs
    unlimited and limited (``run_unlimited``, ``run_limited``: how it starts, what it locks, what
    the limit is), says how big the swap must be (``swap_bytes``), turns the trace into steps
    (``stream``) and describes its runs (``describe``). The lock, leftovers, swap, cgroups, tracefs,
    clean-up, the stream's cross-check with the device and the file are this class's.

    Parameters are those of :func:`capture` that are not the child's.
    """

    def __init__(self, child, out, *, unlimited_run=True, swap_bytes=None, rotational=False, work_base=None,
                 buffer_kb=32 * 1024, timeout_s=None, raw_trace_out=None, force=False):
        self.child, self.out, self.force = child, out, force
        self.unlimited_run, self.swap_bytes, self.rotational = unlimited_run, swap_bytes, rotational
        self.work_base = Path(work_base or DEFAULT_WORK_BASE)
        self.buffer_kb, self.timeout_s, self.raw_trace_out = buffer_kb, timeout_s, raw_trace_out
        self.name = f"{PREFIX}{os.getpid()}"
        self.workdir = self.work_base / self.name
        self._cleanup_errors: list[str] = []

    # ------------------------------------------------------------------ checks (nothing changed yet)

    def _check_machine(self) -> None:
        check_privileges()
        kind = _fs_type(self.work_base)
        if kind in ("tmpfs", "ramfs"):
            raise ConfigError(f"{self.work_base} is on {kind}: a swap file there lives in RAM; use --work-dir on a disk")
        if (_read_sys("/sys/module/zswap/parameters/enabled") or "N").upper().startswith("Y"):
            raise ConfigError("zswap is enabled, so swapped pages are compressed in RAM instead of written to the "
                              "device; disable it for a capture: echo N > /sys/module/zswap/parameters/enabled")

    # ------------------------------------------------------------------ set-up steps, each with its undo

    def _undo(self, stack: contextlib.ExitStack, step) -> None:
        """Register an undo step; a failure is recorded and the remaining steps still run."""
        def quietly():
            try:
                step()
            except (OSError, SwaptraceError) as exc:
                self._cleanup_errors.append(str(exc))
        stack.callback(quietly)

    def _raise_cleanup_errors(self, exc_type, exc, tb) -> bool:
        if self._cleanup_errors and exc_type is None:
            raise ToolError("capture finished but cleanup failed: " + "; ".join(self._cleanup_errors))
        return False

    def _lock(self, stack: contextlib.ExitStack) -> None:
        stack.callback(os.close, _hold_capture_lock(LOCK_PATH))

    def _make_workdir(self, stack: contextlib.ExitStack) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        stack.callback(shutil.rmtree, self.workdir, ignore_errors=True)

    def _run_unlimited(self, stack: contextlib.ExitStack):
        g = cg.MemoryCgroup(f"{self.name}-free")
        self._undo(stack, g.remove)
        free = self.child.run_unlimited(self, stack, g)
        g.remove()
        return free

    def _setup_swap(self, stack: contextlib.ExitStack, size_bytes: int) -> SwapDevice:
        swap = SwapDevice(self.workdir / f"{self.name}.swap", int(size_bytes), rotational=self.rotational)
        self._undo(stack, swap.teardown)
        swap.setup()
        return swap

    def _setup_group(self, stack: contextlib.ExitStack) -> cg.MemoryCgroup:
        g = cg.MemoryCgroup(self.name)
        self._undo(stack, g.remove)
        return g

    def _setup_tracing(self, stack: contextlib.ExitStack, device) -> tracing.BlockTrace:
        self.raw_path = self.workdir / "trace.txt"
        rec = tracing.BlockTrace(self.name, device, self.raw_path, buffer_kb=self.buffer_kb,
                                 extra_events=self.child.extra_events)
        self._undo(stack, rec.teardown)
        rec.setup()
        return rec

    # ------------------------------------------------------------------ the capture

    def run(self) -> CaptureResult:
        """Check, set up, run (unlimited, then limited and traced), write the stream, undo."""
        self.out_path = check_output_path(self.out, self.force)
        self.child.check_inputs(self)
        self._check_machine()
        with contextlib.ExitStack() as stack:
            stack.push(self._raise_cleanup_errors)  # outermost: sees every undo step's outcome
            self._lock(stack)
            self.removed = cleanup_leftovers(self.work_base)
            _refuse_other_swap()
            # other work on the machine changes the kernel's timing (when writes complete, who runs reclaim)
            self.load_start = os.getloadavg()[0]
            self.child.warm_up()
            self.facts = kernel_facts()
            stack.enter_context(sigterm_as_interrupt(hangup=True))  # a closed terminal (SIGHUP) too
            self._make_workdir(stack)
            self.child.prepare(self)
            self.free = free = self._run_unlimited(stack) if self.unlimited_run else None
            swap = self._setup_swap(stack, self.child.swap_bytes(self, free))
            group = self._setup_group(stack)
            rec = self._setup_tracing(stack, swap.device)
            run, buffer_stats, loop_delta = self._run_limited(swap, group, rec)
            return self._record(free, run, swap, group, rec, buffer_stats, loop_delta)

    def _run_limited(self, swap: SwapDevice, g: cg.MemoryCgroup, rec: tracing.BlockTrace):
        """The traced run under the memory limit; returns the child's run, the ring-buffer stats, the loop's counters."""
        loop_before: dict[str, int] = {}

        def start_tracing():
            loop_before.update(swap.stat())
            rec.start()

        run = self.child.run_limited(self, g, rec, start_tracing, self.free)
        buffer_stats = rec.stop()
        loop_after = swap.stat()
        g.remove()
        loop_delta = {k: loop_after[k] - loop_before.get(k, 0) for k in loop_after}
        return run, buffer_stats, loop_delta

    def _record(self, free, run, swap: SwapDevice, g: cg.MemoryCgroup, rec: tracing.BlockTrace,
                buffer_stats, loop_delta) -> CaptureResult:
        """Write the ``swapio`` file with its metadata and return the result."""
        with open(self.raw_path, errors="replace") as fh:
            parsed = parse_lines(fh, device=swap.device)
        if self.raw_trace_out is not None:
            with AtomicPath(self.raw_trace_out, self.force) as ap:
                shutil.copyfile(self.raw_path, ap.tmp)
        stream = self.child.stream(parsed, run)
        # cross-check with the device's own counters: every request the loop device completed must be in the trace
        missing = (loop_delta["read_ios"] + loop_delta["write_ios"]) - int(np.count_nonzero(stream.op != OP_DISCARD))
        lost = int(buffer_stats["overrun"] + buffer_stats["dropped"] + parsed.lost_events) + max(0, missing)
        req = summarize_requests(stream.op, stream.length, self.child.page_bytes)
        d = self.child.describe(self, free, run, parsed, stream, req, loop_delta, missing, rec)
        kernel = {
            **self.facts, **swap.facts, "cgroup_version": g.version, **d.kernel,
            "trace_buffer": {**buffer_stats, "buffer_kb": self.buffer_kb, "bytes_read": rec.bytes_read},
            "lost_events": lost,
            "malformed_lines": parsed.malformed,
            "requests_before_start": stream.before_start,
            "removed_leftovers": self.removed,
            "loadavg_start": round(self.load_start, 2),
            "loadavg_end": round(os.getloadavg()[0], 2),
        }
        params = {**d.params, "unlimited_run": self.unlimited_run, "swap_bytes": swap.facts["device_bytes"],
                  "rotational": self.rotational, "buffer_kb": self.buffer_kb}
        metadata = {
            "source": "kernel", "page_bytes": self.child.page_bytes, "device_bytes": swap.facts["device_bytes"],
            "memory_bytes": d.memory_bytes, "steps": d.steps, "first_step": d.first_step,
            "duration_us": stream.duration_us, **d.meta, "params": params, "summary": d.summary, "kernel": kernel,
        }
        with TraceWriter(self.out_path, "swapio", metadata, force=self.force) as w:
            w.write(t_us=stream.t_us, step=stream.step, op=stream.op, offset=stream.offset,
                    length=stream.length, cause=stream.cause)
        return CaptureResult(
            path=self.out_path, summary=d.summary, pages_in=req["pages_in"], pages_out=req["pages_out"],
            pswpin=d.summary["pswpin"], pswpout=d.summary["pswpout"], major_faults=d.major_faults,
            memory_bytes=d.memory_bytes, baseline_bytes=d.baseline_bytes, limit_bytes=d.limit_bytes,
            slowdown=d.slowdown, lost_events=lost, malformed_lines=parsed.malformed, kernel=kernel,
            removed_leftovers=self.removed,
        )


class ReplayChild:
    """The trace replayer: a child that replays an access trace with real loads and stores (:mod:`.child`).

    It locks its own memory (interpreter, numba) after warm-up, so the limit is its measured baseline
    plus the model's budget plus the page tables of the footprint mapping; steps are the trace's,
    marked by the child itself. Parameters are those of :func:`capture`.
    """

    def __init__(self, trace, *, memory_bytes=None, memory_fraction=None, compute=None, lock_baseline=True,
                 trace_reclaim=False, progress=None):
        self.trace, self.memory_bytes, self.memory_fraction, self.compute = trace, memory_bytes, memory_fraction, compute
        self.lock_baseline, self.trace_reclaim, self.progress = lock_baseline, trace_reclaim, progress
        self.extra_events = RECLAIM_EVENTS if trace_reclaim else ()

    def check_inputs(self, s: CaptureSession) -> None:  # noqa: ARG002 - the same methods as CommandChild
        self.tf = open_trace(self.trace, kind="access")
        meta = self.tf.meta
        for key in ("footprint_pages", "page_bytes"):
            if key not in meta:
                raise TraceFileError(f"{self.tf.path}: access trace metadata lacks {key!r}")
        self.page_bytes = int(meta["page_bytes"])
        if self.page_bytes % 4096:
            raise ConfigError(f"page_bytes {self.page_bytes} is not a multiple of 4096")
        self.footprint_bytes = int(meta.get("footprint_bytes", int(meta["footprint_pages"]) * self.page_bytes))
        self.memory_bytes = self._budget_bytes()
        if self.compute not in (None, "none", "mlp"):
            raise ConfigError(f"--compute must be 'mlp' or 'none', got {self.compute!r}")
        self.compute = None if self.compute == "none" else self.compute

    def _budget_bytes(self) -> int:
        """The model's budget in bytes: the emulator's rule (:meth:`EmulatorConfig.budget_pages_for`), so a
        capture and an emulation of the same options get the same whole pages."""
        pages = EmulatorConfig.budget_pages_for(self.footprint_bytes // self.page_bytes, self.page_bytes,
                                                memory_bytes=self.memory_bytes, memory_fraction=self.memory_fraction)
        return pages * self.page_bytes

    def warm_up(self) -> None:
        # compile the child's replay kernel here: a child that compiles it carries the compiler's memory
        # into its measured baseline (3-14 MiB), which the model gets back as extra room once freed
        replay_kernel.warm_up()

    def prepare(self, s: CaptureSession) -> None:
        self.prep = _prepare_codes(self.tf, s.workdir)
        layers, batch = mlp_layers(self.tf.meta)
        self.base_config = {
            "parent_pid": os.getpid(), "page_bytes": self.page_bytes, "footprint_bytes": self.footprint_bytes,
            "compute": self.compute, "mlp_layers": layers, "batch_size": batch, "lock_baseline": self.lock_baseline,
            **{k: self.prep[k] for k in ("codes", "step_starts", "step_numbers")},
        }

    def swap_bytes(self, s: CaptureSession, free) -> int:  # noqa: ARG002
        return int(s.swap_bytes or self.footprint_bytes + SWAP_HEADROOM_BYTES)

    def run_unlimited(self, s: CaptureSession, stack, g: cg.MemoryCgroup) -> RunResult:  # noqa: ARG002
        return _run_child(self.base_config, s.workdir, "free", g, None, timeout_s=s.timeout_s)

    def run_limited(self, s: CaptureSession, g: cg.MemoryCgroup, rec: tracing.BlockTrace, start_tracing,
                    free: RunResult | None):  # noqa: ARG002
        """The traced replay; returns the run and the LRU list sizes at each step's end."""
        page_bytes = self.page_bytes
        step_lists: dict[str, list[int]] = {"step": [], "active_anon_pages": [], "inactive_anon_pages": []}

        def on_step(line: str):
            if not line.startswith("STEP"):
                return
            # the LRU list sizes as the step ends (read while the child starts the next one): what the
            # emulator's per-step list sizes are compared with
            try:
                st = g.stat()
                step_lists["step"].append(int(line.split()[1]))
                step_lists["active_anon_pages"].append(int(st.get("active_anon", 0)) // page_bytes)
                step_lists["inactive_anon_pages"].append(int(st.get("inactive_anon", 0)) // page_bytes)
            except (OSError, ValueError, IndexError):
                pass
            if self.progress is not None:
                self.progress(1)

        self.overhead = page_table_bytes(self.footprint_bytes)
        run = _run_child({**self.base_config, "marker": str(rec.marker_path())}, s.workdir, "limited", g,
                         self.memory_bytes, on_go=start_tracing, on_step=on_step, timeout_s=s.timeout_s,
                         overhead_bytes=self.overhead)
        return run, step_lists

    def stream(self, parsed, run):  # noqa: ARG002
        return to_stream(parsed, first_step=self.prep["first_step"])

    def _reclaim(self, s: CaptureSession, parsed, rec: tracing.BlockTrace) -> dict[str, Any] | None:
        if not self.trace_reclaim:
            return None
        with open(s.raw_path, errors="replace") as fh:
            reclaim = parse_reclaim(fh, parsed.markers, first_step=self.prep["first_step"],
                                    last_step=self.prep["first_step"] + self.prep["steps"] - 1).to_meta()
        reclaim["missing_events"] = list(rec.missing_events)
        return reclaim

    def describe(self, s: CaptureSession, free: RunResult | None, limited, parsed, stream, req, loop_delta,
                 missing, rec) -> Description:
        run, step_lists = limited
        child = run.child
        summary = {
            "accesses": self.prep["accesses"],
            "faults": int(child["major_faults"]),
            **req,
            "pswpin": run.vmstat_delta.get("pswpin", 0),
            "pswpout": run.vmstat_delta.get("pswpout", 0),
            "major_faults": int(child["major_faults"]),
        }
        slowdown = None
        if free is not None and free.child["total_us"] > 0:
            slowdown = child["total_us"] / free.child["total_us"]
        kernel = _run_record(run, self.overhead, free, slowdown, loop_delta, missing, step_lists,
                             self._reclaim(s, parsed, rec))
        params = {"memory_bytes": self.memory_bytes, "memory_fraction": self.memory_fraction,
                  "compute": self.compute or "none", "lock_baseline": self.lock_baseline}
        return Description(
            summary=summary, kernel=kernel, meta={"trace": str(self.tf.path), "footprint_bytes": self.footprint_bytes},
            params=params, steps=self.prep["steps"], first_step=self.prep["first_step"],
            memory_bytes=self.memory_bytes, baseline_bytes=run.baseline_bytes, limit_bytes=int(run.limit_bytes or 0),
            slowdown=slowdown, major_faults=summary["major_faults"],
        )


def _run_record(run: RunResult, overhead: int, free: RunResult | None, slowdown: float | None,
                loop_delta: dict[str, int], missing: int, step_lists: dict[str, list[int]],
                reclaim: dict[str, Any] | None) -> dict[str, Any]:
    """The limited run's (and the unlimited run's) part of the ``kernel`` metadata, in the order it is written."""
    child = run.child
    return {
        "baseline_bytes": run.baseline_bytes,
        "baseline_rss_bytes": run.rss_bytes,
        "page_table_bytes": overhead,
        "limit_bytes": run.limit_bytes,
        "peak_bytes": run.peak_bytes,
        "warmup_s": run.warmup_s,
        "baseline_locked": run.locked,
        **run.oom,
        "vmstat_delta": run.vmstat_delta,
        "loop_stat_delta": loop_delta,
        "requests_missing_vs_device": missing,
        "cgroup_stat": {k: v for k, v in run.cgroup_stat.items() if k in STAT_KEYS},
        "baseline_stat": {k: v for k, v in run.baseline_stat.items() if k in STAT_KEYS},
        "usage_end_bytes": run.usage_end_bytes,
        "model_resident_end_bytes": child.get("model_resident_bytes"),
        "room_gain_bytes": room_gain_bytes(run.baseline_bytes, overhead, run.usage_end_bytes,
                                           child.get("model_resident_bytes")),
        "minor_faults": int(child["minor_faults"]),
        "step_lists": step_lists,
        "reclaim": reclaim,
        "step_wall_us": child["step_wall_us"],
        "step_minor_faults": child.get("step_minor_faults"),
        "step_major_faults": child.get("step_major_faults"),
        "replay_us": child["replay_us"],
        "compute_us": child["compute_us"],
        "total_us": child["total_us"],
        "unlimited": None if free is None else {
            "step_wall_us": free.child["step_wall_us"], "replay_us": free.child["replay_us"],
            "compute_us": free.child["compute_us"], "total_us": free.child["total_us"],
            "major_faults": free.child["major_faults"], "baseline_bytes": free.baseline_bytes,
            "peak_bytes": free.peak_bytes,
        },
        "slowdown": slowdown,
    }


def capture(
    trace: str | os.PathLike,
    out: str | os.PathLike,
    *,
    memory_bytes: int | None = None,
    memory_fraction: float | None = None,
    compute: str | None = None,
    unlimited_run: bool = True,
    swap_bytes: int | None = None,
    rotational: bool = False,
    work_base: str | os.PathLike | None = None,
    buffer_kb: int = 32 * 1024,
    timeout_s: float | None = None,
    lock_baseline: bool = True,
    raw_trace_out: str | os.PathLike | None = None,
    trace_reclaim: bool = False,
    force: bool = False,
    progress=None,
) -> CaptureResult:
    """Replay an access trace under the real kernel and record its swap I/O.

    Parameters
    ----------
    trace : path
        An ``access`` trace (generate).
    out : path
        The ``swapio`` file to write (``source: kernel``).
    memory_bytes, memory_fraction : int or float
        Budget for the model's pages, in bytes or as a fraction of the
        trace's footprint (exactly one). The cgroup limit is the child's own
        baseline after warm-up plus this budget plus the page tables of the
        footprint mapping (:func:`page_table_bytes`), which the kernel
        charges to the cgroup but the emulator does not model.
    compute : {None, "mlp"}
        Run the preset's dense MLP forward/backward (numpy) after each step.
    unlimited_run : bool
        Also replay without a memory limit first, for the slowdown ratio.
    swap_bytes : int, optional
        Swap size; default footprint + 256 MiB.
    rotational : bool
        Present the loop device as rotational (cluster readahead) instead of
        as an SSD (VMA readahead, the default).
    work_base : path
        Folder for the swap file and scratch files (default /var/tmp; must
        not be tmpfs, whose pages would themselves be swapped).
    buffer_kb : int
        Per-CPU tracefs ring-buffer size in KiB.
    timeout_s : float, optional
        Give up on a run that takes longer.
    lock_baseline : bool
        Lock the child's own memory after warm-up (``mlockall``) so that the
        kernel cannot swap the interpreter out to make room for the model.
    raw_trace_out : path, optional
        Also keep the raw ftrace text here (for debugging and test data).
    trace_reclaim : bool
        Also record the vmscan and memcg tracepoints of the limited run
        (:mod:`swaptrace.capture.reclaim`) and store reclaim counters per
        step under ``kernel.reclaim``. Off by default: the extra events are
        not free, and the stream is the ground truth.
    progress : callable, optional
        Called with 1 after each replayed step of the traced run.

    One capture runs at a time on a machine (a lock on :data:`LOCK_PATH`),
    and only while no other swap area is active: the kernel would spread
    the capture's swap traffic over it. See :class:`CaptureSession`.
    """
    child = ReplayChild(trace, memory_bytes=memory_bytes, memory_fraction=memory_fraction, compute=compute,
                        lock_baseline=lock_baseline, trace_reclaim=trace_reclaim, progress=progress)
    session = CaptureSession(child, out, unlimited_run=unlimited_run, swap_bytes=swap_bytes, rotational=rotational,
                             work_base=work_base, buffer_kb=buffer_kb, timeout_s=timeout_s,
                             raw_trace_out=raw_trace_out, force=force)
    return session.run()
