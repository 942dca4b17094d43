"""Export an access trace for other cache simulators (libCacheSim and anything that reads CSV), and a
swap I/O stream for MQSim.

``libcachesim`` format: libCacheSim's ``oracleGeneral`` binary trace, one
packed little-endian 24-byte record per access (docs/formats.md;
libCacheSim ``traceReader/customizedReader/oracle/oracleGeneralBin.h``):

========= ====== ==========================================================
offset    type   field
========= ====== ==========================================================
0         uint32 clock_time -- the access's training step
4         uint64 obj_id -- the page number
12        uint32 obj_size -- the page size in bytes
16        int64  next_access_vtime -- 1-based index of the next access to
                 the same page, -1 if there is none (as libCacheSim's
                 ``traceConv`` writes it)
========= ====== ==========================================================

``csv`` format: header ``time,obj_id,obj_size,op,next_access_vtime`` (op is
``read`` or ``write``); libCacheSim reads it with
``-t csv -t-params "time-col=1,obj-id-col=2,obj-size-col=3,has-header=true"``.

``mqsim`` format (a swap I/O stream, kind ``swapio``): MQSim's ASCII trace
(Tavakkol et al., FAST 2018; MQSim ``src/host/ASCII_Trace_Definition.h`` and
``IO_Flow_Trace_Based.cpp``), one request per line, five fields separated by
one space: arrival time (integer nanoseconds, the stream's ``t_us`` x 1000,
made non-decreasing), device number (0), start sector (512-byte LBA, the
swap byte offset plus ``--swap-offset``, / 512), size in sectors, type (``0``
write, ``1`` read). MQSim's trace has no discard: discards are left out and
counted. Give MQSim ``<Time_Unit>NANOSECOND</Time_Unit>`` in the workload.

An access trace's alloc and free events (docs/formats.md) are left out of
both formats (oracleGeneral has no delete): the files hold the access rows,
and next-access times count access rows only, across frees.

Next-access times need the future, so export makes two passes, both
streaming: a backward pass over the Parquet row groups (keeping one int64
per footprint page: the index of the page's next access) writes the binary
records straight to their place in the output file (whose size is known from
the row count); for CSV the backward pass fills a temporary int64 file that a
forward pass then zips with the trace. Memory is O(footprint + row group).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from swaptrace.core.traceio import AtomicPath, TraceFile, check_output_path, damaged_data, open_trace, partial_name
from swaptrace.errors import ConfigError
from swaptrace.kernels.jit import jit
from swaptrace.workload.choices import FORMATS  # noqa: F401  (re-exported)

#: libCacheSim oracleGeneral record (packed, 24 bytes)
ORACLE_GENERAL_DTYPE = np.dtype([("clock_time", "<u4"), ("obj_id", "<u8"), ("obj_size", "<u4"), ("next_access_vtime", "<i8")])
assert ORACLE_GENERAL_DTYPE.itemsize == 24

#: MQSim's ASCII trace: sector size and type codes (ASCII_Trace_Definition.h)
MQSIM_SECTOR_BYTES = 512
MQSIM_WRITE, MQSIM_READ = 0, 1


@jit
def _next_access_backward(pages, base, next_seen, out):
    """Walk a chunk backwards: ``out[i]`` = 1-based index of the next access to ``pages[i]`` or -1."""
    for i in range(pages.shape[0] - 1, -1, -1):
        p = pages[i]
        out[i] = next_seen[p]
        next_seen[p] = base + i + 1


def next_access_vtimes(pages: np.ndarray) -> np.ndarray:
    """Next-access vtimes of an in-memory page sequence (tests and small traces)."""
    pages = np.ascontiguousarray(pages, dtype=np.int64)
    out = np.empty(pages.size, np.int64)
    seen = np.full(int(pages.max()) + 1 if pages.size else 0, -1, np.int64)
    _next_access_backward(pages, 0, seen, out)
    return out


def _kept(tf: TraceFile, g: int, events: bool) -> np.ndarray | None:
    """The access rows of row group ``g`` (a bool mask), or None when the trace has no ``event`` column."""
    if not events:
        return None
    return tf.read_row_group(g, columns=["event"]).column(0).to_numpy(zero_copy_only=False) == 0


def _kept_rows(tf: TraceFile) -> np.ndarray:
    """Access rows (events left out: oracleGeneral has no delete) of each row group."""
    if not tf.has_column("event"):
        return tf.row_group_rows()
    return np.asarray([int(np.count_nonzero(_kept(tf, g, True))) for g in range(tf.num_row_groups)], np.int64)


def _backward_chunks(tf: TraceFile, footprint: int, progress: Callable[[int], None] | None):
    """Yield ``(start_row, group, next_vtimes, kept)`` for the row groups (of a file or a dataset's parts), last
    first: rows and vtimes count access rows only; ``kept`` masks them (None: every row is one)."""
    sizes = _kept_rows(tf)
    events = tf.has_column("event")
    starts = np.concatenate([[0], np.cumsum(sizes)])
    next_seen = np.full(footprint, -1, np.int64)
    for g in range(sizes.size - 1, -1, -1):
        pages = np.ascontiguousarray(tf.read_row_group(g, columns=["page"]).column(0).to_numpy(), dtype=np.int64)
        if pages.size and (pages.min() < 0 or pages.max() >= footprint):
            raise ConfigError(f"{tf.path}: page {int(pages.max())} outside the footprint of {footprint} pages")
        rows = pages.size
        kept = _kept(tf, g, events)
        if kept is not None:
            pages = np.ascontiguousarray(pages[kept])
        out = np.empty(pages.size, np.int64)
        _next_access_backward(pages, int(starts[g]), next_seen, out)
        if progress is not None:
            progress(rows)
        yield int(starts[g]), g, out, kept


def export_trace(
    trace: str | os.PathLike,
    out: str | os.PathLike,
    *,
    fmt: str = "libcachesim",
    force: bool = False,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Write ``trace`` (kind ``access``) in a peer simulator's format.

    Parameters
    ----------
    trace : path-like
        Access trace.
    out : path-like
        Output file (written atomically).
    fmt : {"libcachesim", "csv", "mqsim"}
        ``libcachesim``: oracleGeneral 24-byte records; ``csv``: one line per access;
        ``mqsim``: a swap I/O stream as MQSim's ASCII trace (:func:`export_mqsim`).
    force : bool
        Overwrite ``out``.
    progress : callable, optional
        Called with rows done (each pass reports, so the total is twice the rows for csv).

    Returns
    -------
    pathlib.Path
        The written file.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "mqsim":
        return export_mqsim(trace, out, force=force, progress=progress)[0]
    tf = open_trace(trace, kind="access")
    footprint = int(tf.meta.get("footprint_pages", 0))
    if footprint <= 0:
        raise ConfigError(f"{tf.path}: metadata has no positive footprint_pages")
    check_output_path(out, force)
    page_bytes = tf.page_bytes
    with damaged_data(tf.path), AtomicPath(out, force) as ap:
        if fmt == "libcachesim":
            with open(ap.tmp, "r+b") as fh:
                fh.truncate(int(_kept_rows(tf).sum()) * ORACLE_GENERAL_DTYPE.itemsize)
                for start, g, nxt, kept in _backward_chunks(tf, footprint, progress):
                    table = tf.read_row_group(g, columns=["step", "page"])
                    if kept is not None:
                        table = table.filter(pa.array(kept))
                    rec = np.empty(nxt.size, ORACLE_GENERAL_DTYPE)
                    rec["clock_time"] = table.column("step").to_numpy()
                    rec["obj_id"] = table.column("page").to_numpy()
                    rec["obj_size"] = page_bytes
                    rec["next_access_vtime"] = nxt
                    fh.seek(start * ORACLE_GENERAL_DTYPE.itemsize)
                    fh.write(rec.tobytes())
        else:
            _write_csv(tf, footprint, page_bytes, ap, progress)
    return ap.path


def _write_csv(tf, footprint, page_bytes, ap: AtomicPath, progress) -> None:
    tmp_path = ap.tmp
    # named like the output's own temporary (owner pid inside), so a killed export's scratch is cleared too
    prefix, suffix = partial_name(ap.path)
    fd, scratch = tempfile.mkstemp(prefix=prefix, suffix=".next-access" + suffix, dir=Path(tmp_path).parent)
    os.close(fd)
    try:
        n = int(_kept_rows(tf).sum())
        nxt_all = np.memmap(scratch, dtype=np.int64, mode="w+", shape=(max(n, 1),))
        for start, _g, nxt, _kept_mask in _backward_chunks(tf, footprint, progress):
            nxt_all[start : start + nxt.size] = nxt
        nxt_all.flush()
        schema = pa.schema(
            [("time", pa.uint32()), ("obj_id", pa.uint64()), ("obj_size", pa.uint32()), ("op", pa.string()),
             ("next_access_vtime", pa.int64())]
        )
        ops = pa.array(["read", "write"])
        options = pacsv.WriteOptions(include_header=False, quoting_style="none")
        with open(tmp_path, "wb") as fh, pacsv.CSVWriter(fh, schema, write_options=options) as w:
            fh.write((",".join(schema.names) + "\n").encode())
            start = 0
            events = tf.has_column("event")
            for g in range(tf.num_row_groups):
                t = tf.read_row_group(g, columns=["step", "page", "write"])
                rows = t.num_rows
                kept = _kept(tf, g, events)
                if kept is not None:
                    t = t.filter(pa.array(kept))
                k = t.num_rows
                op = ops.take(pa.array(t.column("write").to_numpy(zero_copy_only=False).astype(np.int8)))
                w.write_table(pa.table(
                    [t.column("step"), t.column("page"), pa.array(np.full(k, page_bytes, np.uint32)), op,
                     pa.array(np.asarray(nxt_all[start : start + k]))],
                    schema=schema,
                ))
                start += k
                if progress is not None:
                    progress(rows)
        del nxt_all
    finally:
        Path(scratch).unlink(missing_ok=True)


def libcachesim_lru_misses(path: str | os.PathLike, cache_pages: int, page_bytes: int = 4096) -> int:
    """Misses of libCacheSim's LRU over an oracleGeneral file, with a cache of ``cache_pages`` pages.

    Needs the ``libcachesim`` package (test extra). Its ``process_trace``
    returns the miss ratio; times the request count it is the miss count.
    """
    import libcachesim as lcs

    reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
    cache = lcs.LRU(cache_size=int(cache_pages) * int(page_bytes))
    miss_ratio, _byte_miss_ratio = cache.process_trace(reader)
    n = os.path.getsize(path) // ORACLE_GENERAL_DTYPE.itemsize
    return int(round(miss_ratio * n))


def mqsim_lines(t_us: np.ndarray, op: np.ndarray, offset: np.ndarray, length: np.ndarray, *,
                swap_offset_bytes: int = 0, last_ns: int = 0) -> tuple[pa.Table, int]:
    """MQSim ASCII-trace columns for one batch of a swap I/O stream (discards dropped).

    Returns the table (time_ns, device, sector, sectors, type) and the batch's last arrival time,
    which the next batch continues from (arrival times are made non-decreasing).
    """
    from swaptrace.core import traceio

    keep = op != traceio.OP_DISCARD
    t_ns = np.round(np.asarray(t_us, dtype=np.float64)[keep] * 1000.0).astype(np.int64)
    t_ns = np.maximum.accumulate(np.maximum(t_ns, last_ns)) if len(t_ns) else t_ns
    start = np.asarray(offset, dtype=np.int64)[keep] + swap_offset_bytes
    end = start + np.asarray(length, dtype=np.int64)[keep]
    sector = start // MQSIM_SECTOR_BYTES
    sectors = np.maximum(-(-end // MQSIM_SECTOR_BYTES) - sector, 1)
    kind = np.where(op[keep] == traceio.OP_WRITE, MQSIM_WRITE, MQSIM_READ).astype(np.int8)
    table = pa.table({"t": t_ns, "dev": np.zeros(len(t_ns), dtype=np.int8), "lba": sector, "n": sectors,
                      "type": kind})
    return table, int(t_ns[-1]) if len(t_ns) else last_ns


def export_mqsim(stream: str | os.PathLike, out: str | os.PathLike, *, swap_offset_bytes: int = 0,
                 force: bool = False, progress: Callable[[int], None] | None = None) -> tuple[Path, dict]:
    """Write a swap I/O stream (kind ``swapio``) as MQSim's ASCII trace (module docstring).

    Parameters
    ----------
    stream : path-like
        The swapio Parquet file.
    out : path-like
        Trace file to write (atomically).
    swap_offset_bytes : int
        Where the swap partition starts on the simulated drive (multiple of 512).
    progress : callable, optional
        Called with the requests of each batch.

    Returns
    -------
    (path, counts)
        The file and ``{"requests", "writes", "reads", "discards_dropped", "last_ns"}``.
    """
    if swap_offset_bytes < 0 or swap_offset_bytes % MQSIM_SECTOR_BYTES:
        raise ConfigError(f"--swap-offset must be a multiple of {MQSIM_SECTOR_BYTES} bytes, got {swap_offset_bytes}")
    tf = open_trace(stream, kind="swapio")
    check_output_path(out, force)
    counts = {"requests": 0, "writes": 0, "reads": 0, "discards_dropped": 0, "last_ns": 0}
    options = pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    with AtomicPath(out, force) as ap:
        with pacsv.CSVWriter(ap.tmp, pa.schema([("t", pa.int64()), ("dev", pa.int8()), ("lba", pa.int64()),
                                                ("n", pa.int64()), ("type", pa.int8())]),
                             write_options=options) as w:
            for b in tf.iter_batches(["t_us", "op", "offset", "length"]):
                table, counts["last_ns"] = mqsim_lines(b["t_us"], b["op"], b["offset"], b["length"],
                                                       swap_offset_bytes=swap_offset_bytes,
                                                       last_ns=counts["last_ns"])
                w.write_table(table)
                kinds = table.column("type").to_numpy()
                counts["requests"] += len(kinds)
                counts["writes"] += int((kinds == MQSIM_WRITE).sum())
                counts["reads"] += int((kinds == MQSIM_READ).sum())
                counts["discards_dropped"] += len(b["op"]) - len(kinds)
                if progress is not None:
                    progress(len(b["op"]))
    return ap.path, counts
