"""fio I/O logs: write a swap I/O stream as a v2 iolog, read v2/v3 iologs back.

Formats (fio 3.33, ``iolog.c`` and ``HOWTO.rst``, verified here):

* v2: header ``fio version 2 iolog``, then ``<file> add|open|close`` and
  ``<file> read|write|trim|sync|wait <offset> <length>``. For ``wait`` the
  offset field is **absolute milliseconds since fio started** (the HOWTO's
  "relative microseconds" is wrong for 3.33), so timed replay writes one
  ``wait`` line whenever the stream's clock passes the next millisecond, plus
  a lead of :data:`LEAD_MS` for fio's start-up.
* v3: header ``fio version 3 iolog``; every line starts with a timestamp in
  microseconds since the log started (``utime_since_now`` in ``log_io_u``).
  fio's own ``write_iolog`` writes v3. v3 *replay* pacing is unreliable in 3.33
  (upstream issue #1537: one oversleep disables pacing), which is why we write v2.

The remapping applied when the stream does not fit the target (documented in
the job folder's README and manifest, and what the replay tests check):

1. ``length`` is rounded up to a multiple of ``align_bytes`` (swap requests
   already are: they are whole pages);
2. ``offset`` is rounded down to a multiple of ``align_bytes``;
3. if the stream's end (max ``offset + length``) exceeds ``target_bytes``,
   ``offset`` becomes ``offset mod wrap_bytes`` with ``wrap_bytes`` =
   ``target_bytes`` rounded down to ``align_bytes``; a request that would then
   run past ``target_bytes`` is moved back to end exactly there
   (``target_bytes - length``, aligned down). Reads past the end abort a fio
   job, so nothing may cross it.

Discards are not written: fio 3.33 drops ``trim`` lines of text logs. Their
count is reported so a manifest can say so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swaptrace.core import traceio
from swaptrace.core.inputs import check_file
from swaptrace.errors import ConfigError, TraceFileError

IOLOG_V2_HEADER = "fio version 2 iolog"
IOLOG_V3_HEADER = "fio version 3 iolog"
#: milliseconds between fio's start and the stream's t=0 in timed replay
LEAD_MS = 200
#: name of the file inside generated logs; always redirected by ``replay_redirect``
LOG_FILE_NAME = "swaptrace-target"

_DIRECTIONS = {"read": traceio.OP_READ, "write": traceio.OP_WRITE, "trim": traceio.OP_DISCARD}


@dataclass(frozen=True)
class Remap:
    """How stream offsets map onto a target of ``target_bytes`` (see module docstring)."""

    target_bytes: int
    align_bytes: int = 4096
    wrap: bool = False

    @property
    def wrap_bytes(self) -> int:
        return self.target_bytes - self.target_bytes % self.align_bytes

    def apply(self, offset: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Remapped ``(offset, length)`` as uint64 arrays."""
        a = np.uint64(self.align_bytes)
        length = np.asarray(length, dtype=np.uint64)
        length = ((length + a - np.uint64(1)) // a) * a
        length = np.maximum(length, a)
        offset = (np.asarray(offset, dtype=np.uint64) // a) * a
        if self.wrap:
            offset = offset % np.uint64(self.wrap_bytes)
            end = np.uint64(self.target_bytes)
            over = offset + length > end
            if over.any():
                moved = ((end - length[over]) // a) * a
                offset = offset.copy()
                offset[over] = moved
        return offset, length

    def to_dict(self) -> dict:
        return {
            "target_bytes": self.target_bytes,
            "align_bytes": self.align_bytes,
            "wrap": self.wrap,
            "rule": "length rounded up and offset down to align_bytes; "
            + ("offset mod wrap_bytes, clamped to end at target_bytes" if self.wrap else "offsets unchanged"),
        }


def stream_extent(stream: traceio.TraceFile) -> tuple[int, int, int]:
    """``(end_bytes, max_length, data_requests)`` over the read/write requests of a stream."""
    end = 0
    max_len = 0
    n = 0
    for batch in stream.iter_batches(columns=["op", "offset", "length"]):
        keep = batch["op"] != traceio.OP_DISCARD
        if not keep.any():
            continue
        off = batch["offset"][keep].astype(np.uint64)
        ln = batch["length"][keep].astype(np.uint64)
        end = max(end, int((off + ln).max()))
        max_len = max(max_len, int(ln.max()))
        n += int(keep.sum())
    return end, max_len, n


def plan_remap(end_bytes: int, max_length: int, target_bytes: int, align_bytes: int = 4096) -> Remap:
    """The remapping of a stream ending at ``end_bytes`` onto ``target_bytes``."""
    if align_bytes <= 0 or align_bytes & (align_bytes - 1):
        raise ConfigError(f"align: must be a power of two, got {align_bytes}")
    needed = -(-max_length // align_bytes) * align_bytes
    if target_bytes < max(needed, align_bytes) * 2:
        raise ConfigError(
            f"size: target of {target_bytes} bytes is too small for requests of up to {max_length} bytes"
        )
    # a request's aligned end (offset down, length up) is at most the stream's end rounded up
    aligned_end = -(-end_bytes // align_bytes) * align_bytes
    return Remap(target_bytes=target_bytes, align_bytes=align_bytes, wrap=aligned_end > target_bytes)


@dataclass(frozen=True)
class IologInfo:
    """What :func:`write_iolog_v2` wrote."""

    path: Path
    requests: int
    reads: int
    writes: int
    read_bytes: int
    write_bytes: int
    discards_dropped: int
    truncated: bool
    first_t_us: float
    last_t_us: float
    end_bytes: int

    @property
    def duration_ms(self) -> float:
        return max(0.0, (self.last_t_us - self.first_t_us) / 1000.0)


def write_iolog_v2(
    stream: traceio.TraceFile,
    out: str | os.PathLike,
    remap: Remap,
    *,
    timed: bool = True,
    max_requests: int | None = None,
    lead_ms: int = LEAD_MS,
    file_name: str = LOG_FILE_NAME,
) -> IologInfo:
    """Write the read/write requests of ``stream`` as a fio v2 iolog (atomically).

    Parameters
    ----------
    stream : TraceFile
        An opened ``swapio`` file.
    out : path-like
        The iolog to write.
    remap : Remap
        Offset mapping onto the target (see the module docstring).
    timed : bool
        Write absolute ``wait`` lines (ms since fio start = ``lead_ms`` +
        stream time relative to its first request), so fio replays at the
        stream's pace. Without them fio issues requests back to back.
    max_requests : int, optional
        Stop after this many read/write requests (``truncated`` says so).
    """
    reads = writes = rbytes = wbytes = dropped = n = 0
    first_t = last_t = None
    end = 0
    last_wait_ms = -1
    truncated = False
    limit = max_requests if max_requests is not None else np.iinfo(np.int64).max
    with traceio.AtomicPath(out) as ap, open(ap.tmp, "w", encoding="ascii", buffering=1 << 20) as fh:
        fh.write(f"{IOLOG_V2_HEADER}\n{file_name} add\n{file_name} open\n")
        for batch in stream.iter_batches(columns=["t_us", "op", "offset", "length"]):
            op = batch["op"]
            keep = op != traceio.OP_DISCARD
            dropped += int((~keep).sum())
            if not keep.any():
                continue
            op = op[keep]
            t_us = batch["t_us"][keep]
            offset, length = remap.apply(batch["offset"][keep], batch["length"][keep])
            room = limit - n
            if len(op) > room:
                op, t_us, offset, length = op[:room], t_us[:room], offset[:room], length[:room]
                truncated = True
            if not len(op):
                break
            if first_t is None:
                first_t = float(t_us[0])
            last_t = float(t_us[-1])
            is_read = op == traceio.OP_READ
            reads += int(is_read.sum())
            writes += int((~is_read).sum())
            rbytes += int(length[is_read].sum())
            wbytes += int(length[~is_read].sum())
            end = max(end, int((offset + length).max()))
            wait_ms = (lead_ms + np.floor((t_us - first_t) / 1000.0)).astype(np.int64) if timed else None
            text, last_wait_ms = _iolog_lines(file_name, is_read, offset, length, wait_ms, last_wait_ms)
            fh.write(text)
            n += len(op)
            if truncated:
                break
        fh.write(f"{file_name} close\n")
    return IologInfo(
        path=Path(out),
        requests=n,
        reads=reads,
        writes=writes,
        read_bytes=rbytes,
        write_bytes=wbytes,
        discards_dropped=dropped,
        truncated=truncated,
        first_t_us=first_t or 0.0,
        last_t_us=last_t or 0.0,
        end_bytes=end,
    )


def _iolog_lines(file_name: str, is_read, offset, length, wait_ms, last_wait_ms: int) -> tuple[str, int]:
    """The v2 lines of one batch: a ``wait`` (absolute ms) before each request that starts a later millisecond."""
    names = np.where(is_read, "read", "write")
    lines = []
    for i in range(len(names)):
        if wait_ms is not None and wait_ms[i] > last_wait_ms:
            last_wait_ms = int(wait_ms[i])
            lines.append(f"{file_name} wait {last_wait_ms} 0\n")
        lines.append(f"{file_name} {names[i]} {offset[i]} {length[i]}\n")
    return "".join(lines), last_wait_ms


@dataclass(frozen=True)
class IologRequests:
    """Requests parsed from an iolog (arrays in log order)."""

    version: int
    files: tuple[str, ...]
    t_us: np.ndarray
    op: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    file_index: np.ndarray
    skipped: dict


#: file actions of a v2/v3 log (fio iolog.c, ``file_action``)
_FILE_ACTIONS = ("add", "open", "close")
#: request actions carried in the log but not block transfers
_SKIPPED_ACTIONS = ("sync", "datasync")
#: requests are whole 512-byte sectors on a block device (the kernel's SECTOR_SIZE)
SECTOR_BYTES = 512


def _check_request(p: Path, lineno: int, action: str, offset: int, length: int) -> None:
    """A block request the stream can hold: a known action, sector-aligned, non-empty, within uint64/uint32."""
    if action not in _DIRECTIONS:
        raise TraceFileError(f"{p}:{lineno}: unknown action {action!r} (fio writes "
                             f"{', '.join([*_DIRECTIONS, *_SKIPPED_ACTIONS, 'wait'])})")
    if offset < 0 or offset >= 1 << 63:
        raise TraceFileError(f"{p}:{lineno}: offset {offset} is outside 0..2**63")
    if not 0 < length < 1 << 32:
        raise TraceFileError(f"{p}:{lineno}: length {length} must be in 1..2**32-1 bytes")
    if offset % SECTOR_BYTES or length % SECTOR_BYTES:
        raise TraceFileError(f"{p}:{lineno}: offset {offset} and length {length} must be multiples of "
                             f"{SECTOR_BYTES} bytes (whole sectors)")


def read_iolog(path: str | os.PathLike) -> IologRequests:
    """Parse a fio v2 or v3 iolog into arrays.

    ``t_us`` is the v3 timestamp (µs since the log started) or, for v2, the
    most recent ``wait`` value in µs (0 before the first wait). ``trim``
    becomes ``discard``; ``sync``/``datasync``/``wait`` and file actions are
    counted in ``skipped``, not returned.

    Raises
    ------
    TraceFileError
        Not an iolog, an unsupported version, or a malformed line (named by number).
    """
    p = Path(path)
    if not p.exists():
        raise TraceFileError(f"{p}: no such file")
    if p.is_dir():
        raise TraceFileError(f"{p}: is a folder, not an iolog")
    check_file(p, "fio iolog")  # a FIFO would block the read
    files: dict[str, int] = {}
    t_list: list[float] = []
    op_list: list[int] = []
    off_list: list[int] = []
    len_list: list[int] = []
    fidx_list: list[int] = []
    skipped: dict[str, int] = {}
    clock_us = 0.0
    with open(p, encoding="utf-8", errors="replace") as fh:
        header = fh.readline().strip()
        if header == IOLOG_V2_HEADER:
            version = 2
        elif header == IOLOG_V3_HEADER:
            version = 3
        else:
            raise TraceFileError(f"{p}: not a fio v2/v3 iolog (first line {header[:60]!r})")
        for lineno, line in enumerate(fh, start=2):
            parts = line.split()
            if not parts:
                continue
            if version == 3:
                try:
                    clock_us = float(parts[0])
                except ValueError:
                    raise TraceFileError(f"{p}:{lineno}: expected a timestamp, got {parts[0]!r}") from None
                parts = parts[1:]
            if len(parts) == 2:
                if parts[1] not in _FILE_ACTIONS:
                    raise TraceFileError(f"{p}:{lineno}: unknown file action {parts[1]!r} (fio writes "
                                         f"{', '.join(_FILE_ACTIONS)})")
                skipped[parts[1]] = skipped.get(parts[1], 0) + 1
                continue
            if len(parts) != 4:
                raise TraceFileError(f"{p}:{lineno}: cannot read {line.strip()[:80]!r}")
            name, action, a, b = parts
            try:
                x, y = int(a), int(b)
            except ValueError:
                raise TraceFileError(f"{p}:{lineno}: offset/length are not integers in {line.strip()[:80]!r}") from None
            if action == "wait" and version == 2:
                clock_us = x * 1000.0
            if action == "wait" or action in _SKIPPED_ACTIONS:
                skipped[action] = skipped.get(action, 0) + 1
                continue
            _check_request(p, lineno, action, x, y)
            t_list.append(clock_us)
            op_list.append(_DIRECTIONS[action])
            off_list.append(x)
            len_list.append(y)
            fidx_list.append(files.setdefault(name, len(files)))
    return IologRequests(
        version=version,
        files=tuple(files),
        t_us=np.asarray(t_list, dtype=np.float64),
        op=np.asarray(op_list, dtype=np.int8),
        offset=np.asarray(off_list, dtype=np.uint64),
        length=np.asarray(len_list, dtype=np.uint32),
        file_index=np.asarray(fidx_list, dtype=np.int64),
        skipped=skipped,
    )


def import_iolog(
    path: str | os.PathLike,
    out: str | os.PathLike,
    *,
    file: str | None = None,
    page_bytes: int = 4096,
    device_bytes: int | None = None,
    force: bool = False,
) -> Path:
    """Convert a fio v2/v3 iolog into a ``swapio`` stream (``source: fio``).

    Parameters
    ----------
    path : path-like
        The iolog (e.g. written by fio's ``write_iolog``).
    out : path-like
        The swapio Parquet file to write.
    file : str, optional
        Keep only requests to this file name; required when the log names
        more than one file (offsets of different files do not share a space).
    page_bytes : int
        Recorded in the metadata (stream consumers use it).
    device_bytes : int, optional
        Size of the device the log was recorded on; default: the end of the
        furthest request.
    force : bool
        Overwrite ``out``.

    Returns
    -------
    pathlib.Path
        ``out``. Times come from v3 timestamps or v2 ``wait`` lines; ``step``
        is 0 and ``cause`` is ``unknown`` (an iolog records neither).
    """
    if page_bytes < SECTOR_BYTES or page_bytes & (page_bytes - 1):
        raise ConfigError(f"page-bytes: must be a power of two of at least {SECTOR_BYTES}, got {page_bytes}")
    log = read_iolog(path)
    if file is not None:
        if file not in log.files:
            raise ConfigError(f"{path}: no requests to file {file!r}; it names {', '.join(log.files) or 'none'}")
        keep = log.file_index == log.files.index(file)
    elif len(log.files) > 1:
        raise ConfigError(f"{path}: requests go to {len(log.files)} files ({', '.join(log.files)}); pick one with --file")
    else:
        keep = np.ones(len(log.op), dtype=bool)
    op, off, ln, t_us = log.op[keep], log.offset[keep], log.length[keep], log.t_us[keep]
    if len(op) == 0:
        raise TraceFileError(f"{path}: the iolog has no read, write or trim requests")
    t0 = float(t_us.min())
    t_rel = t_us - t0
    end = int((off + ln.astype(np.uint64)).max())
    if device_bytes is not None and device_bytes < end:
        raise ConfigError(f"device-size: {device_bytes} bytes is less than the end of the furthest request ({end})")
    summary = _summary(op, ln)
    meta = {
        "source": "fio",
        "page_bytes": int(page_bytes),
        "device_bytes": int(device_bytes) if device_bytes is not None else end,
        "duration_us": float(t_rel.max()) if len(t_rel) else 0.0,
        "steps": 1,
        "iolog": {"path": str(path), "version": log.version, "files": list(log.files), "skipped": log.skipped},
        "params": {"file": file, "page_bytes": int(page_bytes), "device_bytes": device_bytes},
        "summary": summary,
    }
    cause = np.full(len(op), traceio.CAUSE_DISCARD, dtype=np.int8)
    cause[op != traceio.OP_DISCARD] = traceio.CAUSE_UNKNOWN
    with traceio.TraceWriter(out, "swapio", meta, force=force) as w:
        w.write(t_us=t_rel, step=np.zeros(len(op), dtype=np.uint32), op=op, offset=off, length=ln, cause=cause)
    return Path(out)


def _summary(op: np.ndarray, length: np.ndarray) -> dict:
    """The parts of the swapio ``summary`` an iolog can know (contracts.md)."""
    hist: dict[str, dict[str, int]] = {}
    for name, code in (("read", traceio.OP_READ), ("write", traceio.OP_WRITE)):
        sizes, counts = np.unique(length[op == code], return_counts=True)
        hist[name] = {str(int(s)): int(c) for s, c in zip(sizes, counts, strict=True)}
    return {
        "bytes_read": int(length[op == traceio.OP_READ].astype(np.int64).sum()),
        "bytes_written": int(length[op == traceio.OP_WRITE].astype(np.int64).sum()),
        "requests": {
            "read": int((op == traceio.OP_READ).sum()),
            "write": int((op == traceio.OP_WRITE).sum()),
            "discard": int((op == traceio.OP_DISCARD).sum()),
        },
        "request_size_hist": hist,
    }

