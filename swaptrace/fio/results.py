"""Parse fio's JSON output and bandwidth logs into Parquet tables.

``fio-results`` (one row per job run and direction that did I/O):

=================== ======= ===================================================
instance            string  run step (``sweep_read_4k``, ``precondition@sweep``)
job                 string  job name in the folder
group               string  ``sweep``, ``write_seq``, ``write_rand``, ``replay``, ...
kind                string  ``sweep``, ``write``, ``replay``, ``synthetic``, ``precondition``
direction           string  ``read`` or ``write``
request_bytes       uint32  fixed request size; 0 for a size mix or a replay
pattern             string  ``random``, ``sequential`` or ``replay``
io_bytes            uint64  bytes transferred (fio ``io_bytes``)
ios                 uint64  requests completed (fio ``total_ios``)
bw_bytes            float64 bytes per second (fio ``bw_bytes``)
iops                float64 requests per second
clat_p50_us         float64 completion latency percentiles, microseconds
clat_p99_us         float64
clat_p999_us        float64
runtime_ms          float64 fio's runtime of this direction
trace_duration_ms   float64 replays: duration of the replayed log, else NaN
expected_ios        float64 replays: requests of this direction in the log, else NaN
=================== ======= ===================================================

For replays the JSON's ``io_bytes`` is undercounted by async engines in
fio 3.33 (docs/fio.md); ``ios`` (``total_ios``) is the count to trust,
and ``ios / expected_ios`` says how much of the log ran within the runtime.

``fio-bwlog`` (one row per bandwidth-log entry, ``write_bw_log`` +
``log_avg_msec``; lines ``time_ms, KiB/s, direction, bs, [offset,] prio``):

=================== ======= ===================================================
instance, job       string  as above
direction           string  ``read`` or ``write``
t_ms                float64 end of the averaging window, ms since the job started
bw_bytes            float64 bytes per second over the window
job_bytes           float64 bytes of this direction moved by the job so far
run_written_bytes   float64 bytes written to the target since the run began
=================== ======= ===================================================
"""

from __future__ import annotations

import glob
import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from swaptrace.core import traceio
from swaptrace.core.inputs import check_file
from swaptrace.errors import TraceFileError
from swaptrace.fio.busy import measured_job

RESULTS_SCHEMA = pa.schema(
    [
        ("instance", pa.string()),
        ("job", pa.string()),
        ("group", pa.string()),
        ("kind", pa.string()),
        ("direction", pa.string()),
        ("request_bytes", pa.uint32()),
        ("pattern", pa.string()),
        ("io_bytes", pa.uint64()),
        ("ios", pa.uint64()),
        ("bw_bytes", pa.float64()),
        ("iops", pa.float64()),
        ("clat_p50_us", pa.float64()),
        ("clat_p99_us", pa.float64()),
        ("clat_p999_us", pa.float64()),
        ("runtime_ms", pa.float64()),
        ("trace_duration_ms", pa.float64()),
        ("expected_ios", pa.float64()),
    ]
)
BWLOG_SCHEMA = pa.schema(
    [
        ("instance", pa.string()),
        ("job", pa.string()),
        ("direction", pa.string()),
        ("t_ms", pa.float64()),
        ("bw_bytes", pa.float64()),
        ("job_bytes", pa.float64()),
        ("run_written_bytes", pa.float64()),
    ]
)
traceio.register_kind("fio-results", RESULTS_SCHEMA)
traceio.register_kind("fio-bwlog", BWLOG_SCHEMA)

RESULTS_NAME = "results.parquet"
BWLOG_NAME = "bwlog.parquet"
TABLE_NAME = "results.txt"
_DIR_CODES = {0: "read", 1: "write", 2: "trim"}


def load_fio_json(path: str | os.PathLike) -> dict:
    """fio's JSON output, skipping any notes fio printed before it (e.g. psync with iodepth > 1)."""
    check_file(path, "fio JSON output")  # a FIFO would block the read
    text = Path(path).read_text(errors="replace")
    start = text.find("\n{") + 1 if not text.startswith("{") else 0
    if not text.startswith("{") and start == 0:
        raise TraceFileError(f"{path}: no JSON object in fio's output")
    try:
        return json.loads(text[start:])
    except ValueError as exc:
        raise TraceFileError(f"{path}: fio's JSON output is not valid ({exc})") from None


def _pct_us(d: dict, key: str) -> float:
    pct = (d.get("clat_ns") or {}).get("percentile") or {}
    v = pct.get(key)
    return float(v) / 1000.0 if v is not None else math.nan


def parse_fio_json(path: str | os.PathLike, instance: str, job: dict, manifest: dict | None = None) -> list[dict]:
    """Rows of ``fio-results`` for one fio JSON output file (one job).

    Raises
    ------
    TraceFileError
        The output has no job, or fio reported an error for it.
    """
    data = load_fio_json(path)
    j = measured_job(data.get("jobs") or [])  # CPU burners (``--busy-cpus``) beside it are not results
    if j is None:
        raise TraceFileError(f"{path}: fio's output has no job")
    if j.get("error"):
        raise TraceFileError(f"{path}: fio reported error {j['error']} for job {j.get('jobname')}")
    replay = (manifest or {}).get("replay", {}) if job.get("kind") == "replay" else {}
    rows = []
    for direction in ("read", "write"):
        d = j.get(direction) or {}
        ios = int(d.get("total_ios", 0))
        if ios == 0:
            continue
        rows.append(
            {
                "instance": instance,
                "job": job["name"],
                "group": job["group"],
                "kind": job["kind"],
                "direction": direction,
                "request_bytes": int(job.get("request_bytes", 0)),
                "pattern": job.get("pattern", "random"),
                "io_bytes": int(d.get("io_bytes", 0)),
                "ios": ios,
                "bw_bytes": float(d.get("bw_bytes", 0.0)),
                "iops": float(d.get("iops", 0.0)),
                "clat_p50_us": _pct_us(d, "50.000000"),
                "clat_p99_us": _pct_us(d, "99.000000"),
                "clat_p999_us": _pct_us(d, "99.900000"),
                "runtime_ms": float(d.get("runtime", j.get("job_runtime", 0))),
                "trace_duration_ms": float(replay["trace_duration_ms"]) if replay else math.nan,
                "expected_ios": float(replay[direction + "s"]) if replay else math.nan,
            }
        )
    return rows


def parse_bw_log(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """One fio bandwidth log as arrays ``t_ms``, ``bw_bytes`` (bytes/s), ``direction`` (0 read, 1 write)."""
    values = []
    with open(path, encoding="ascii", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            parts = line.split(",")
            if not line.strip():
                continue
            try:
                values.append((float(parts[0]), float(parts[1]), float(parts[2])))
            except (ValueError, IndexError):
                raise TraceFileError(f"{path}:{lineno}: not a fio bandwidth log line: {line.strip()[:60]!r}") from None
    raw = np.array(values, dtype=np.float64).reshape(-1, 3)
    return {"t_ms": raw[:, 0], "bw_bytes": raw[:, 1] * 1024.0, "direction": raw[:, 2].astype(np.int64)}


def find_bw_logs(folder: str | os.PathLike, prefix: str) -> list[Path]:
    """fio names logs ``PREFIX_bw.N.log`` (N = job index); one-job files give ``.1.log``."""
    return sorted(Path(p) for p in glob.glob(os.path.join(glob.escape(str(folder)), glob.escape(prefix) + "_bw.*.log")))


def collect_bw_logs(folder: Path, steps: list[tuple[str, str]]) -> dict[str, np.ndarray]:
    """Bandwidth logs of a run's steps ``(instance, job)``, in run order, with bytes integrated."""
    cols: dict[str, list] = {n: [] for n in BWLOG_SCHEMA.names}
    run_written = 0.0
    for instance, job in steps:
        for log in find_bw_logs(folder, instance):
            arr = parse_bw_log(log)
            for code in (0, 1):
                sel = arr["direction"] == code
                if not sel.any():
                    continue
                t = arr["t_ms"][sel]
                bw = arr["bw_bytes"][sel]
                dt_s = np.diff(np.concatenate([[0.0], t])) / 1000.0
                moved = np.cumsum(bw * dt_s)
                cols["instance"] += [instance] * len(t)
                cols["job"] += [job] * len(t)
                cols["direction"] += [_DIR_CODES[code]] * len(t)
                cols["t_ms"].append(t)
                cols["bw_bytes"].append(bw)
                cols["job_bytes"].append(moved)
                if code == 1:
                    cols["run_written_bytes"].append(run_written + moved)
                    run_written += float(moved[-1])
                else:
                    cols["run_written_bytes"].append(np.full(len(t), run_written))
    out = {}
    for name in BWLOG_SCHEMA.names:
        v = cols[name]
        if name in ("instance", "job", "direction"):
            out[name] = np.asarray(v, dtype=object)
        else:
            out[name] = np.concatenate(v) if v else np.empty(0)
    return out


def write_run_results(folder: Path, parsed: list, manifest: dict, run_meta: dict):
    """Write ``results.parquet``, ``bwlog.parquet`` and ``results.txt`` into ``folder``.

    fio's own outputs (``NAME.json``, ``NAME.stderr``, ``NAME_bw.1.log``) are in ``folder/raw``.

    Returns ``(results_path, bwlog_path, rows, ratios)``.
    """
    from swaptrace.fio.compare import bandwidth_decline, measured_ratios

    rows = [r for _, rs in parsed for r in rs]
    ratios = measured_ratios(rows, manifest)
    bw = collect_bw_logs(folder / "raw", [(s.instance, s.job["name"]) for s, _ in parsed])
    sel = (bw["instance"] == "write_rand") & (bw["direction"] == "write")
    decline = bandwidth_decline(bw["bw_bytes"][sel]) if len(sel) else None
    if decline is not None:
        ratios["bandwidth_decline"] = decline
    meta = {
        "page_bytes": int((manifest.get("stream_meta") or {}).get("page_bytes") or 4096),
        "run": run_meta,
        "stream": manifest.get("stream"),
        "ratios": ratios,
    }
    res_path = folder / RESULTS_NAME
    with traceio.TraceWriter(res_path, "fio-results", meta, force=True) as w:
        w.write_table(rows_to_table(rows))
    bw_path = folder / BWLOG_NAME
    with traceio.TraceWriter(bw_path, "fio-bwlog", meta, force=True) as w:
        w.write_table(pa.table({n: pa.array(bw[n], type=BWLOG_SCHEMA.field(n).type) for n in BWLOG_SCHEMA.names}))
    steady = (run_meta.get("preconditioning") or {}).get("steady")
    (folder / TABLE_NAME).write_text(format_table(rows, ratios, steady) + "\n")
    return res_path, bw_path, rows, ratios


def rows_to_table(rows: list[dict]) -> pa.Table:
    """Rows (dicts) as an Arrow table with the ``fio-results`` schema."""
    return pa.table({f.name: pa.array([r[f.name] for r in rows], type=f.type) for f in RESULTS_SCHEMA})


def read_results(path: str | os.PathLike) -> tuple[list[dict], dict]:
    """Rows and metadata of a ``fio-results`` file (or of ``results.parquet`` in a run folder)."""
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS_NAME
    tf = traceio.open_trace(p, "fio-results")
    _check_run_meta(tf.path, tf.meta)
    return tf.read_table().to_pylist(), tf.meta


def _check_run_meta(path: Path, meta: dict) -> None:
    """The run settings the readers use (``run``: the target's size, the engine, the preconditioning record;
    ``ratios``) are of their types: a damaged results file is one line naming it, not a TypeError in a fit."""
    from swaptrace.core.units import MAX_BYTES
    from swaptrace.errors import TraceFileError

    def bad(what: str) -> TraceFileError:
        return TraceFileError(f"{path}: metadata {what}; not a `swaptrace fio run` results file")

    run = meta.get("run") or {}
    size = run.get("size_bytes")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_BYTES):
        raise bad(f"run.size_bytes = {size!r} is not a size in bytes")
    engine = run.get("engine") or {}
    depth = engine.get("iodepth", 1) if isinstance(engine, dict) else None
    if not isinstance(engine, dict) or not isinstance(engine.get("ioengine", "psync"), str) or \
            isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 65535:
        raise bad(f"run.engine = {engine!r} is not an engine and a queue depth in [1, 65535]")
    pre = run.get("preconditioning") or {}
    if not isinstance(pre, dict) or not isinstance(pre.get("steady") or {}, dict) or \
            not all(isinstance(v, dict) for v in (pre.get("steady") or {}).values()):
        raise bad("run.preconditioning is not a preconditioning record")
    for key in ("target", "fio"):
        if run.get(key) is not None and not isinstance(run[key], str):
            raise bad(f"run.{key} = {run[key]!r} is not text")
    for key, v in (meta.get("ratios") or {}).items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise bad(f"ratios.{key} = {v!r} is not a number")


def format_table(rows: list[dict], ratios: dict | None = None, steady: dict | None = None) -> str:
    """A plain-text table of results plus the measured ratios.

    ``steady`` (the run's ``preconditioning.steady`` record) labels the steady-state rounds: their
    bandwidth is the mean of fio's last window, *steady* only when the verdict says so.
    """
    head = f"{'job':<26} {'dir':<5} {'size':>6} {'MB/s':>9} {'IOPS':>9} {'p50 us':>9} {'p99 us':>9} {'p99.9 us':>9} {'time s':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        size = _size_text(r["request_bytes"]) if r["request_bytes"] else ("log" if r["pattern"] == "replay" else "mix")
        lines.append(
            f"{r['instance']:<26} {r['direction']:<5} {size:>6} {r['bw_bytes'] / 1e6:>9.2f} {r['iops']:>9.0f} "
            f"{r['clat_p50_us']:>9.1f} {r['clat_p99_us']:>9.1f} {r['clat_p999_us']:>9.1f} {r['runtime_ms'] / 1000:>7.2f}"
        )
        if r["kind"] == "steady":
            v = (steady or {}).get(r["instance"]) or {}
            lines.append(f"{'':<26} {v.get('reason', 'not steady: no steady-state verdict recorded')}")
        if r["kind"] == "replay" and r["trace_duration_ms"] == r["trace_duration_ms"]:
            lines.append(
                f"{'':<26} replayed {r['ios']}/{int(r['expected_ios'])} {r['direction']}s in "
                f"{r['runtime_ms'] / 1000:.2f} s (log spans {r['trace_duration_ms'] / 1000:.2f} s)"
            )
    if ratios:
        lines.append("")
        for key, value in ratios.items():
            if isinstance(value, float):
                lines.append(f"{key:<36} {value:.3f}")
    return "\n".join(lines)


def _size_text(n: int) -> str:
    for unit, shift in (("m", 20), ("k", 10)):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)
