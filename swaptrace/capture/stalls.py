"""What a capture's runs waited for: task delays of the process tree, PSI, load, other processes' CPU time.

The time model (docs/timing.md) prices paging; the program's own stall times beside its wall time let
it be checked term by term (docs/capture.md, "Stalls"). Per run (``free``, ``limited``), at every step
boundary (the run's start, each step's end):

* **delays** (:mod:`swaptrace.capture.taskstats`): the summed ``struct taskstats`` of every task of the
  process tree -- the live threads in the run's memory cgroup read with ``TASKSTATS_CMD_GET``, plus the
  final stats of every thread that exited during the run, received on a socket registered for all CPUs
  (a task is the tree's when its thread group or its parent's is; kernel/taskstats.c). Kept in µs;
* **psi**: the machine's ``/proc/pressure/memory`` and ``/proc/pressure/io`` ``some``/``full`` totals
  (µs; Documentation/accounting/psi.rst) -- system-wide: other work shows up here;
* **load**: the 1-min load average before and after the run, and the CPU time of all other processes
  during it: ``/proc/stat``'s busy time (all but idle and iowait) minus the tree's utime + stime.

:meth:`StallRecorder.begin` may first wait for a quiet machine (``--wait-quiet LOAD``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swaptrace.capture.taskstats import DELAY_FIELDS, TaskstatsError, TaskstatsSocket

#: the ``some``/``full`` totals kept from each of these pressure files
PSI_RESOURCES = ("memory", "io")
#: how often a quiet wait reads the load average (seconds)
QUIET_POLL_S = 5.0


def read_psi(root: Path = Path("/proc/pressure")) -> dict[str, int] | None:
    """``{"memory_some": µs, "memory_full": µs, "io_some": ..., "io_full": ...}``; None without PSI."""
    out = {}
    try:
        for res in PSI_RESOURCES:
            for line in (root / res).read_text().splitlines():
                kind, *fields = line.split()
                for f in fields:
                    if f.startswith("total="):
                        out[f"{res}_{kind}"] = int(f[6:])
    except (OSError, ValueError):
        return None
    return out


def busy_cpu_s(path: Path = Path("/proc/stat")) -> float:
    """All CPUs' busy time since boot, in seconds: the ``cpu`` line's sum less idle and iowait (proc(5))."""
    fields = [int(x) for x in path.read_text().split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def wait_quiet(max_load: float, timeout_s: float, *, load: Callable[[], float] | None = None,
               sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
               say: Callable[[str], None] | None = None, poll_s: float = QUIET_POLL_S) -> dict[str, Any]:
    """Wait until the 1-min load average is at most ``max_load``, or ``timeout_s`` seconds have passed.

    Returns ``{"waited_s", "load_start", "quiet"}``: how long it waited, the load when it stopped waiting,
    and whether that load was quiet. ``say`` gets one line when a wait begins.
    """
    load = load or (lambda: os.getloadavg()[0])
    t0 = clock()
    current = load()
    if current > max_load and say is not None:
        say(f"waiting for load <= {max_load:g} (now {current:.2f}; at most {timeout_s:g} s) ...")
    while current > max_load and clock() - t0 < timeout_s:
        sleep(min(poll_s, max(0.0, timeout_s - (clock() - t0))))
        current = load()
    return {"waited_s": round(clock() - t0, 1), "load_start": round(current, 2), "quiet": current <= max_load}


def _zero() -> dict[str, int]:
    z = {f"{name}_{k}": 0 for name, _, _ in DELAY_FIELDS for k in ("count", "us")}
    z.update(run_real_us=0, utime_us=0, stime_us=0, tasks=0)
    return z


def _add(acc: dict[str, int], st: dict[str, int]) -> None:
    for name, count, total in DELAY_FIELDS:
        acc[f"{name}_count"] += int(st.get(count, 0))
        acc[f"{name}_us"] += int(st.get(total, 0)) // 1000
    acc["run_real_us"] += int(st.get("cpu_run_real_total", 0)) // 1000
    acc["utime_us"] += int(st.get("ac_utime", 0))
    acc["stime_us"] += int(st.get("ac_stime", 0))
    acc["tasks"] += 1


class _RunMeter:
    """One run's boundaries: cumulative tree delays, PSI and busy CPU at each."""

    def __init__(self, pids: Callable[[], list[int]], query: TaskstatsSocket | None,
                 listen: TaskstatsSocket | None):
        self.pids, self.query, self.listen = pids, query, listen
        self.known: set[int] = set()
        self.exited: dict[int, dict[str, int]] = {}  # tid -> final stats (only the tree's)
        self.pending: list[dict[str, int]] = []      # exits not yet known to be the tree's
        self.rows: list[dict[str, Any]] = []
        self.errors: list[str] = []

    def _tids(self) -> list[int]:
        out = []
        for pid in self.pids():
            self.known.add(pid)
            try:
                out += [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                continue
        return out

    def _take_exits(self) -> None:
        self.pending += self.listen.exits()
        changed = True
        while changed:  # a grandchild may end before its parent is known
            changed, rest = False, []
            for st in self.pending:
                tgid, ppid = st.get("ac_tgid") or st["ac_pid"], st.get("ac_ppid", 0)
                if tgid in self.known or ppid in self.known:
                    self.known.add(tgid)
                    self.exited[st["ac_pid"]] = st
                    changed = True
                else:
                    rest.append(st)
            self.pending = rest
        self.pending = self.pending[-4096:]

    def mark(self, label: Any) -> None:
        row: dict[str, Any] = {"label": label, "t_ns": time.monotonic_ns(), "psi": read_psi(), "busy_s": busy_cpu_s()}
        if self.query is not None:
            try:
                tids = self._tids()
                self._take_exits()
                acc = _zero()
                for st in self.exited.values():
                    _add(acc, st)
                for tid in tids:
                    if tid in self.exited:
                        continue
                    st = self.query.get(tid)
                    if st is not None:
                        _add(acc, st)
                row["delays"] = acc
            except Exception as exc:  # noqa: BLE001 - a boundary's reading must not end the run; reported
                if len(self.errors) < 3:
                    self.errors.append(repr(exc))
        self.rows.append(row)


def _diff(a: dict[str, int] | None, b: dict[str, int] | None, keys) -> dict[str, int] | None:
    if a is None or b is None:
        return None
    return {k: max(0, b[k] - a[k]) for k in keys}


class StallRecorder:
    """Stalls of a capture's runs (see the module docstring); one object for the whole capture.

    Parameters
    ----------
    wait_quiet : float, optional
        Before each run wait until the 1-min load average is at most this (None: do not wait).
    quiet_timeout_s : float
        Longest such wait, in seconds.
    say : callable, optional
        Gets the line shown while waiting.
    delays : bool
        Read the task delays (False when taskstats is unavailable: PSI and load only).
    load : callable, optional
        The 1-min load average (tests give a fake one).
    """

    def __init__(self, *, wait_quiet: float | None = None, quiet_timeout_s: float = 600.0, say=None,
                 delays: bool = True, load: Callable[[], float] | None = None):
        self.wait_quiet, self.quiet_timeout_s, self.say = wait_quiet, quiet_timeout_s, say
        self.load = load or (lambda: os.getloadavg()[0])
        self.delays_on = delays
        self.unavailable: str | None = None
        self.runs: dict[str, dict[str, Any]] = {}
        self._meter: _RunMeter | None = None
        self._lock = threading.Lock()
        self._socks: list[TaskstatsSocket] = []

    def begin(self, tag: str, pids: Callable[[], list[int]]) -> None:
        """Before run ``tag`` starts: the quiet wait, the load, the exit listener; ``pids`` lists the tree's processes."""
        run: dict[str, Any] = {}
        if self.wait_quiet is not None:
            run["quiet_wait"] = wait_quiet(self.wait_quiet, self.quiet_timeout_s, load=self.load, say=self.say)
        run["load_before"] = round(self.load(), 2)
        query = listen = None
        if self.delays_on and self.unavailable is None:
            try:
                query, listen = TaskstatsSocket(), TaskstatsSocket(listen=True)
                self._socks = [query, listen]
            except (OSError, TaskstatsError) as exc:
                self.unavailable = str(exc)
                for s in (query, listen):
                    if s is not None:
                        s.close()
                query = listen = None
        self.runs[tag] = run
        self._tag = tag
        self._meter = _RunMeter(pids, query, listen)

    def root(self, pid: int) -> None:
        """The process the tree grows from (its tasks count even if they end before any boundary)."""
        with self._lock:
            if self._meter is not None:
                self._meter.known.add(int(pid))

    def start(self) -> None:
        """The run's first boundary (the program is spawned next, or the replay is told to go)."""
        self.mark("start")

    def mark(self, label: Any) -> None:
        """A step boundary, labelled with the step that ends at it; safe to call from a trace reader's thread."""
        with self._lock:
            if self._meter is not None:
                self._meter.mark(label)

    def end(self, label: Any = None) -> None:
        """After the run: its last boundary (``label``: the step it ends; None when the last mark ended the
        run), the load, the sockets closed, its record built."""
        with self._lock:
            meter, self._meter = self._meter, None
        if meter is None:
            return
        if label is not None or len(meter.rows) < 2:
            meter.mark(label if label is not None else "end")
        for s in self._socks:
            s.close()
        self._socks = []
        run = self.runs[self._tag]
        run["load_after"] = round(self.load(), 2)
        run.update(_summarize(meter))

    def close(self) -> None:
        """Close the sockets of a run that did not end (an error); what it measured is dropped."""
        for s in self._socks:
            s.close()
        self._socks, self._meter = [], None

    def report(self) -> dict[str, Any]:
        """``{"delays": {run: ...}, "psi": {run: ...}, "load": {run: ...}}`` for the metadata's ``kernel``."""
        delays, psi, load = {}, {}, {}
        for tag, r in self.runs.items():
            if "delays" in r:
                delays[tag] = r["delays"]
            if "psi" in r:
                psi[tag] = r["psi"]
            load[tag] = {k: r[k] for k in ("load_before", "load_after", "other_cpu_s", "other_cpu_share",
                                           "wall_s", "quiet_wait") if k in r}
        out: dict[str, Any] = {"delays": delays, "psi": psi, "load": load}
        if self.unavailable:
            out["delays_unavailable"] = self.unavailable
        return out


def _summarize(meter: _RunMeter) -> dict[str, Any]:
    """Per-step arrays (between consecutive boundaries) and the run's totals."""
    rows = meter.rows
    out: dict[str, Any] = {}
    first, last = rows[0], rows[-1]
    wall_s = (last["t_ns"] - first["t_ns"]) / 1e9
    out["wall_s"] = round(wall_s, 6)
    pairs = list(zip(rows[:-1], rows[1:], strict=False))
    steps = [r["label"] for r in rows[1:]]
    if all("delays" in r for r in rows) and rows:
        keys = list(_zero())
        per = [_diff(a["delays"], b["delays"], keys) for a, b in pairs]
        total = _diff(first["delays"], last["delays"], keys)
        tree_cpu_s = (total["utime_us"] + total["stime_us"]) / 1e6
        d: dict[str, Any] = {"steps": steps, "step_wall_us": [round((b["t_ns"] - a["t_ns"]) / 1e3) for a, b in pairs],
                             "total": total, "tasks_seen": last["delays"]["tasks"],
                             "exit_overflows": meter.listen.dropped if meter.listen is not None else 0}
        for k in keys:
            if k.endswith("_us") or k.endswith("_count"):
                d[k] = [p[k] for p in per]
        if meter.errors:
            d["errors"] = meter.errors
        out["delays"] = d
    else:
        tree_cpu_s = 0.0
        if meter.errors:  # why a boundary has no delays
            out["delays"] = {"errors": meter.errors}
    if all(r["psi"] is not None for r in rows):
        keys = list(first["psi"])
        per = [_diff(a["psi"], b["psi"], keys) for a, b in pairs]
        out["psi"] = {"steps": steps, **{f"{k}_us": [p[k] for p in per] for k in keys},
                      "total": {f"{k}_us": last["psi"][k] - first["psi"][k] for k in keys}}
    other = max(0.0, last["busy_s"] - first["busy_s"] - tree_cpu_s)
    out["other_cpu_s"] = round(other, 3)
    out["other_cpu_share"] = round(other / (wall_s * (os.cpu_count() or 1)), 4) if wall_s > 0 else None
    return out
