"""Small swap I/O streams and fio helpers shared by the fio tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np

from swaptrace.core import traceio
from swaptrace.fio.steady import NO_STEADY_ENV


def make_stream(path, n=500, seed=0, device_bytes=16 << 20, duration_us=1e6, sizes_pages=(1, 2, 4, 8),
                probs=(0.7, 0.15, 0.1, 0.05), op_probs=(0.55, 0.43, 0.02), page_bytes=4096):
    """A random swapio stream written with TraceWriter (emulator-like metadata)."""
    rng = np.random.default_rng(seed)
    op = rng.choice([traceio.OP_READ, traceio.OP_WRITE, traceio.OP_DISCARD], size=n, p=op_probs).astype(np.int8)
    length = (rng.choice(sizes_pages, size=n, p=probs) * page_bytes).astype(np.uint32)
    pages = device_bytes // page_bytes
    offset = (rng.integers(0, pages - max(sizes_pages), size=n) * page_bytes).astype(np.uint64)
    t_us = np.sort(rng.uniform(0, duration_us, size=n))
    cause = np.where(op == traceio.OP_DISCARD, traceio.CAUSE_DISCARD,
                     np.where(op == traceio.OP_READ, traceio.CAUSE_FAULT, traceio.CAUSE_RECLAIM)).astype(np.int8)
    write_stream(path, t_us, op, offset, length, cause, device_bytes, page_bytes)
    return path


def write_stream(path, t_us, op, offset, length, cause=None, device_bytes=16 << 20, page_bytes=4096):
    n = len(op)
    if cause is None:
        cause = np.full(n, traceio.CAUSE_UNKNOWN, dtype=np.int8)
    meta = {"source": "emulator", "page_bytes": page_bytes, "device_bytes": int(device_bytes)}
    with traceio.TraceWriter(path, "swapio", meta, force=True) as w:
        w.write(t_us=np.asarray(t_us, dtype=np.float64), step=np.zeros(n, np.uint32), op=np.asarray(op, np.int8),
                offset=np.asarray(offset, np.uint64), length=np.asarray(length, np.uint32), cause=cause)
    return path


def fio_env(jobs_dir, target, size_bytes, runtime_s=1, log="log"):
    return {
        **os.environ,
        "SWAPTRACE_TARGET": str(target),
        "SWAPTRACE_SIZE": str(size_bytes),
        "SWAPTRACE_RUNTIME": str(runtime_s),
        "SWAPTRACE_JOBS": str(Path(jobs_dir).resolve()),
        "SWAPTRACE_LOG": log,
        **NO_STEADY_ENV,  # the steady-state job's and the fill's variables, as `fio run` sets them
    }


def per_io_log(fio_bin, args, cwd, prefix="io"):
    """Run fio with a per-I/O latency log (log_avg_msec=0, log_offset=1); return (dir, bs, offset) rows.

    fio 3.33 ignores ``write_iolog`` when ``read_iolog`` is set ("read iolog
    overrides write_iolog", verified here), so replays are recorded this way.
    """
    cmd = [fio_bin, *args, f"--write_lat_log={prefix}", "--log_offset=1", "--log_avg_msec=0",
           "--output-format=json", f"--output={prefix}.json"]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = []
    for line in (Path(cwd) / f"{prefix}_clat.1.log").read_text().splitlines():
        parts = [int(x) for x in line.split(",")]
        rows.append((parts[2], parts[3], parts[4]))
    return rows
