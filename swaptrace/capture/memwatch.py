"""What a captured program holds in memory over its run: the cgroup's ``memory.stat`` and ``/proc/PID/smaps``.

Two probes, both read from a thread while the program runs (``swaptrace capture -- CMD``):

* :class:`MemorySampler` polls the group's ``memory.stat`` every ``interval_s`` (and at once on
  :meth:`MemorySampler.poke`, called at each step marker), keeping anonymous memory, page cache and
  swap (:func:`swaptrace.capture.cgroup.memory_kinds`) with the ``CLOCK_MONOTONIC`` time of each
  reading. :func:`phase_peaks` splits the readings at the first step marker into start-up and
  training and takes each kind's peak in each phase.
* :class:`ReferencedProbe` (unlimited run only) measures the anonymous memory the processes touch
  during training: at the first marker it records each process's resident anonymous memory (the
  start-up's) and writes ``1`` to ``/proc/PID/clear_refs``, which clears the referenced bits of
  every page (fs/proc/task_mmu.c, ``clear_refs_write``); afterwards it reads ``/proc/PID/smaps``
  at step markers and every ``interval_s`` (less often when a reading is slow: its page-table walks
  take at most a tenth of the time) and at the ``swaptrace end`` marker
  (``swaptrace.markers.mark("end")``: a program that writes it as training ends gets an exact
  reading), summing ``Referenced:`` over anonymous
  mappings. The largest sum seen is the anonymous memory referenced during training: its difference
  from the start-up's resident anon is memory set up and never touched again, which a model of the
  process can leave swapped out at no cost. Readings stop at the program's exit (its ``/proc``
  entries go), and frees during teardown only lower later sums, hence the maximum.

Anything unreadable is recorded as None with the reason, never raised.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

#: memory kinds of a :class:`MemorySampler` reading, in bytes
KINDS = ("anon", "file", "swap")


class MemorySampler:
    """Poll a memory cgroup's usage by kind from a thread; readings are ``(t_ns, usage, anon, file, swap)``."""

    def __init__(self, group, interval_s: float = 0.025):
        self.group = group
        self.interval_s = float(interval_s)
        self.samples: list[tuple[int, int | None, int | None, int | None, int | None]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._poke = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name="swaptrace-memory-sampler")

    def start(self) -> MemorySampler:
        self._thread.start()
        return self

    def sample(self) -> None:
        """Take one reading now (any thread)."""
        t = time.monotonic_ns()
        try:
            usage = self.group.usage_bytes()
            kinds = self.group.memory_kinds()
        except (OSError, ValueError) as exc:  # the group went away, or a file is missing on this kernel
            if len(self.errors) < 3:
                self.errors.append(str(exc))
            return
        with self._lock:
            self.samples.append((t, usage, kinds["anon"], kinds["file"], kinds["swap"]))

    def poke(self) -> None:
        """Ask the thread for a reading now (a step marker was seen)."""
        self._poke.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._poke.wait(self.interval_s)
            self._poke.clear()

    def stop(self) -> list[tuple]:
        self._stop.set()
        self._poke.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with self._lock:
            return sorted(self.samples)


def phase_peaks(samples: list[tuple], split_ns: int | None) -> dict[str, Any]:
    """Peak usage and peak of each kind, over the whole run and per phase.

    Parameters
    ----------
    samples : list of (t_ns, usage, anon, file, swap)
        :class:`MemorySampler` readings; a None value is a kind the kernel does not report.
    split_ns : int or None
        Time of the first step marker (``CLOCK_MONOTONIC`` ns): readings before it are the start-up,
        the rest training. None (no markers): the whole run is one phase, reported as ``run``.

    Returns
    -------
    dict
        ``{"run": {...}, "startup": {...} or None, "training": {...} or None}``, each
        ``{"usage": bytes, "anon": ..., "file": ..., "swap": ..., "samples": n}`` with the largest value
        of each quantity over the phase's readings (None when it had no reading of it).
    """
    def peaks(rows: list[tuple]) -> dict[str, Any] | None:
        if not rows:
            return None
        out: dict[str, Any] = {"samples": len(rows)}
        for i, key in enumerate(("usage", *KINDS), start=1):
            values = [r[i] for r in rows if r[i] is not None]
            out[key] = max(values) if values else None
        return out

    rows = sorted(samples)
    if split_ns is None:
        return {"run": peaks(rows), "startup": None, "training": None}
    # the reading the first marker triggered (within ms of it) is what start-up left: it counts for both phases
    k = next((i for i, r in enumerate(rows) if r[0] >= split_ns), len(rows))
    return {"run": peaks(rows), "startup": peaks(rows[: k + 1]), "training": peaks(rows[k:])}


def reading_after(samples: list[tuple], t_ns: int | None) -> dict[str, Any] | None:
    """The first reading at or after ``t_ns`` -- at a marker, the one it triggered -- as ``{"usage", "anon", ...}``.

    None without a time or a reading after it.
    """
    if t_ns is None:
        return None
    after = [r for r in sorted(samples) if r[0] >= t_ns]
    if not after:
        return None
    r = after[0]
    return {"usage": r[1], "anon": r[2], "file": r[3], "swap": r[4], "t_ns": r[0]}


# ---------------------------------------------------------------------------------------------------- smaps

def parse_smaps_rollup(text: str) -> dict[str, int]:
    """The ``kB`` fields of ``/proc/PID/smaps_rollup`` (or of one ``smaps`` entry) in bytes, e.g. ``Rss``."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if sep and len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * 1024
    return out


def _is_anon_mapping(header: str) -> bool:
    """An ``smaps`` mapping line without a backing file (heap, stack, ``[anon:...]`` or no name)."""
    fields = header.split(None, 5)
    name = fields[5].strip() if len(fields) > 5 else ""
    return name == "" or name in ("[heap]", "[stack]") or name.startswith("[anon") or name.startswith("[stack:")


def parse_smaps(text: str) -> dict[str, int]:
    """Sum ``/proc/PID/smaps`` into ``rss``, ``anonymous``, ``referenced`` and ``anon_referenced`` bytes.

    ``anonymous`` is the ``Anonymous:`` field over all mappings (file mappings hold anonymous pages
    too once written, e.g. a library's data); ``anon_referenced`` sums ``Referenced:`` over mappings
    without a backing file, where every referenced page is anonymous (fs/proc/task_mmu.c,
    ``show_smap``).
    """
    totals = {"rss": 0, "anonymous": 0, "referenced": 0, "anon_referenced": 0}
    anon_vma = False
    for line in text.splitlines():
        head = line.split(None, 1)[0] if line.strip() else ""
        if "-" in head and not head.endswith(":"):  # "7f..-7f.. rw-p 00000000 00:00 0   [heap]"
            anon_vma = _is_anon_mapping(line)
            continue
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or len(parts) != 2 or parts[1] != "kB" or not parts[0].isdigit():
            continue
        value = int(parts[0]) * 1024
        if key == "Rss":
            totals["rss"] += value
        elif key == "Anonymous":
            totals["anonymous"] += value
        elif key == "Referenced":
            totals["referenced"] += value
            if anon_vma:
                totals["anon_referenced"] += value
    return totals


def _sum_smaps(pids: list[int], proc: Path) -> dict[str, int] | None:
    """:func:`parse_smaps` summed over ``pids`` (None when none could be read)."""
    total: dict[str, int] | None = None
    for pid in pids:
        try:
            one = parse_smaps((proc / str(pid) / "smaps").read_text(errors="replace"))
        except OSError:  # exited meanwhile
            continue
        total = one if total is None else {k: total[k] + one[k] for k in total}
    return total


class ReferencedProbe:
    """Anonymous memory resident after start-up and referenced during training (see the module docstring)."""

    def __init__(self, group, interval_s: float = 0.25, proc: Path = Path("/proc")):
        self.group, self.interval_s, self.proc = group, float(interval_s), Path(proc)
        self.startup: dict[str, int] | None = None
        self.best: dict[str, int] | None = None
        self.readings = 0
        self.cleared_pids = 0
        self.reason: str | None = "no step marker: training was never told apart from start-up"
        self._armed = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._last = 0.0
        self._gap = float(interval_s)

    def at_mark(self) -> None:
        """A step marker: read now unless the last reading is too recent (marks may be dense; see :meth:`read`)."""
        if time.monotonic() - self._last >= self._gap:
            self.read()

    def first_mark(self) -> None:
        """Record start-up's resident anon and clear every process's referenced bits (called once)."""
        if self._armed.is_set():
            return
        pids = self.group.pids()
        self.startup = _sum_smaps(pids, self.proc)
        for pid in pids:
            try:
                (self.proc / str(pid) / "clear_refs").write_text("1")
                self.cleared_pids += 1
            except OSError as exc:
                self.reason = f"cannot clear referenced bits of pid {pid}: {exc.strerror or exc}"
        if self.cleared_pids:
            self.reason = None
        self._armed.set()
        self._thread = threading.Thread(target=self._run, daemon=True, name="swaptrace-smaps")
        self._thread.start()

    def read(self) -> None:
        """One reading of every process's smaps; keep the largest referenced sum (any thread)."""
        if not self._armed.is_set() or not self.cleared_pids:
            return
        t0 = time.monotonic()
        now = _sum_smaps(self.group.pids(), self.proc)
        if now is None:
            return
        with self._lock:
            self.readings += 1
            self._last = time.monotonic()
            # a reading walks every page table of the processes (~20 ns a page): keep it under a tenth of the run
            self._gap = max(self.interval_s, 10 * (self._last - t0))
            if self.best is None or now["anon_referenced"] > self.best["anon_referenced"]:
                self.best = now

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if time.monotonic() - self._last >= self._gap:
                self.read()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        s, b = self.startup, self.best
        if b is None and self.reason is None:
            self.reason = "the program ended before smaps could be read after the first marker"
        return {
            "anon_resident_startup_bytes": None if s is None else s["anonymous"],
            "rss_startup_bytes": None if s is None else s["rss"],
            "anon_referenced_training_bytes": None if b is None or self.reason else b["anon_referenced"],
            "referenced_training_bytes": None if b is None or self.reason else b["referenced"],
            "anon_resident_training_bytes": None if b is None or self.reason else b["anonymous"],
            "smaps_readings": self.readings,
            "interval_s": self.interval_s,
            "why_null": self.reason if (b is None or self.reason) else None,
        }
