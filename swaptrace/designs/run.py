"""One pass over a trace: the ``linux`` stream and every log design's stream side by side.

The ``linux`` run (a single run, no ensemble: ``emulate --no-ensemble``'s stream, byte for byte)
records its evictions; after each chunk every log design replays the chunk's accesses and
those evictions, so all designs see the same residency decisions.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.core.traceio import TraceWriter, check_output_path, open_trace
from swaptrace.designs.log import LogConfig, LogCounters, LogSwap
from swaptrace.emulate import EmulatorConfig
from swaptrace.emulate.engine import Emulator, kernel_batches, step_counts
from swaptrace.emulate.run import stream_metadata
from swaptrace.errors import ConfigError

CHUNK_ROWS = 1 << 20


@dataclass(frozen=True)
class DesignRun:
    """One design's stream and counters."""

    name: str
    path: Path
    summary: dict[str, Any]
    log: LogCounters | None = None
    problems: tuple[str, ...] = ()


def run_designs(trace: str | os.PathLike, outputs: dict[str, str | os.PathLike], config: EmulatorConfig,
                logs: dict[str, LogConfig], *, verify: bool = False, force: bool = False,
                progress: Callable[[int], None] | None = None, chunk_rows: int = CHUNK_ROWS) -> dict[str, DesignRun]:
    """Write the ``linux`` stream and one stream per log design in one pass over ``trace``.

    Parameters
    ----------
    trace : path-like
        A ``kind: access`` file.
    outputs : dict
        ``{"linux": path, name: path for each of logs}``: the swapio files to write.
    config : EmulatorConfig
        The linux run's parameters (:meth:`EmulatorConfig.resolve`).
    logs : dict of LogConfig
        The log designs, by name.
    verify : bool
        Check the shadow map and the allocator's invariants after every chunk (slower), not only at the end.
    progress : callable, optional
        Called with the accesses processed.

    Returns
    -------
    dict of DesignRun
        By design name, ``linux`` first.
    """
    tf = open_trace(trace, kind="access")
    missing = {"linux", *logs} - set(outputs)
    if missing:
        raise ValueError(f"no output path for {', '.join(sorted(missing))}")
    for path in outputs.values():
        check_output_path(path, force)
    first_step = int(tf.meta.get("first_step", 0))
    if config.initial_state != "untouched":
        raise ConfigError("the log designs start from an empty swap area: use --initial-state untouched")
    if tf.has_column("event"):  # the log kernel replays evictions by access index and knows no free
        raise ConfigError(f"{tf.path}: the swap designs do not replay alloc and free events (column 'event') yet")
    footprint = int(tf.meta["footprint_pages"])
    with ExitStack() as stack:
        pool = stack.enter_context(ThreadPoolExecutor(2))  # the step counting pass, then the Parquet writes
        nsteps = int(tf.meta.get("steps") or 0)
        counts = pool.submit(step_counts, tf, first_step, chunk_rows) if nsteps else step_counts(tf, first_step,
                                                                                                  chunk_rows)
        nsteps = nsteps or counts.size
        emu = Emulator(config, footprint, counts, nsteps=nsteps, first_step=first_step,
                       regions=tf.meta.get("regions"), record_evictions=True)
        swaps = {name: LogSwap(cfg, footprint_pages=footprint, page_bytes=config.page_bytes, nsteps=nsteps,
                               first_step=first_step) for name, cfg in logs.items()}
        writers = {"linux": stack.enter_context(TraceWriter(outputs["linux"], "swapio", _meta(tf, emu, None),
                                                            force=force))}
        for name, swap in swaps.items():
            writers[name] = stack.enter_context(TraceWriter(outputs[name], "swapio", _meta(tf, emu, swap),
                                                            force=force))
        hists = {name: {"read": {}, "write": {}} for name in swaps}
        out = _Writes(pool)
        stack.callback(out.wait)  # on an error too: no write in flight while the writers close
        for pages, writes, steps in kernel_batches(tf, chunk_rows, events=False):
            for rows in emu.feed(pages, writes, steps, progress=progress):
                out.write(writers["linux"], rows)
            ev_at, ev_page = emu.take_evictions()
            # the designs' kernels take int64 columns (the emulator checked every page against the footprint)
            pages64, steps64 = pages.view(np.int64), steps.astype(np.int64)
            for name, swap in swaps.items():
                for rows in swap.feed(pages64, writes, steps64, ev_at, ev_page):
                    out.write(writers[name], _convert(rows, emu, hists[name]))
                if verify:
                    _raise_problems(name, swap.check_invariants())
        for name, swap in swaps.items():
            rows = swap.finish()
            if rows is not None:
                out.write(writers[name], _convert(rows, emu, hists[name]))
        out.wait()
        results = {"linux": _finish_linux(writers["linux"], emu)}
        for name, swap in swaps.items():
            problems = swap.check_invariants()
            if verify:
                _raise_problems(name, problems)
            writers[name].metadata["summary"] = _log_summary(swap, emu, hists[name])
            results[name] = DesignRun(name, writers[name].path, writers[name].metadata["summary"], swap.counters(),
                                      tuple(problems))
    return results


def _raise_problems(name: str, problems: list[str]) -> None:
    if problems:
        raise RuntimeError(f"design {name}: " + "; ".join(problems))


def _finish_linux(writer: TraceWriter, emu: Emulator) -> DesignRun:
    summary = emu.summary()
    writer.metadata["summary"] = summary
    writer.metadata["step_faults"] = emu.step_faults()
    return DesignRun("linux", writer.path, summary)


def _meta(tf, emu: Emulator, swap: LogSwap | None) -> dict[str, Any]:
    """The stream's metadata as ``emulate`` writes it, plus the log's parameters."""
    cfg = emu.cfg
    params = {**cfg.describe(), "requested_memory_bytes": cfg.memory_bytes, "ensemble": None}
    meta = stream_metadata(tf, emu, params, source="emulator" if swap is None else "design",
                           device_bytes=None if swap is None else swap.device_bytes)
    if swap is not None:
        meta["design"] = {"kind": "log", **swap.cfg.describe(), "segments": swap.nsegs}
    return meta


class _Writes:
    """Parquet writes on a worker thread while the (GIL-free) kernels go on, one batch in flight."""

    def __init__(self, pool: ThreadPoolExecutor):
        self.pool, self.pending = pool, None

    def write(self, writer: TraceWriter, rows: dict[str, np.ndarray]) -> None:
        self.wait()
        self.pending = self.pool.submit(writer.write, **rows)

    def wait(self) -> None:
        if self.pending is not None:
            self.pending.result()
            self.pending = None


def _convert(rows: dict[str, np.ndarray], emu: Emulator, hist: dict[str, dict[int, int]]) -> dict[str, np.ndarray]:
    """The log's rows with ``t_us`` in microseconds (as the emulator's), counted into ``hist``."""
    counts = emu.step_counts()
    si = rows["step"].astype(np.int64) - emu.first_step
    rows["t_us"] = (si + rows["t_us"] / np.maximum(counts[si], 1)) * emu.cfg.step_us
    for code, name in ((0, "read"), (1, "write")):
        sizes, n = np.unique(rows["length"][rows["op"] == code], return_counts=True)
        for size, k in zip(sizes.tolist(), n.tolist(), strict=True):
            hist[name][size] = hist[name].get(size, 0) + k
    return rows


def _log_summary(swap: LogSwap, emu: Emulator, hist: dict[str, dict[int, int]]) -> dict[str, Any]:
    c = swap.counters()
    pb = swap.page_bytes
    linux = emu.counters()
    return {
        "accesses": linux.accesses,
        "pages_in": c.pages_in,
        "pages_out": c.pages_out,
        "memory_pages": emu.cfg.budget_pages,
        "bytes_read": c.read_pages * pb,
        "bytes_written": c.write_pages * pb,
        "requests": {"read": c.read_requests, "write": c.write_requests, "discard": c.discards},
        "request_size_hist": {k: {str(s): n for s, n in sorted(h.items())} for k, h in hist.items()},
        "log": {**vars(c),
                "host_write_amplification": c.host_write_amplification},
    }
