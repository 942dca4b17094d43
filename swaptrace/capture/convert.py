"""ftrace text lines -> swap I/O stream rows.

The capture records two kinds of ftrace events in its own tracefs instance:

* ``block_rq_issue`` on the swap loop device, one per request handed to the
  driver. The text form (kernel 6.x, ``include/trace/events/block.h``) is::

      python-5613 [000] ..... 504.963477: block_rq_issue: 7,0 W 12288 () 311272 + 24 be,0,4 [python]

  i.e. ``major,minor rwbs bytes (cmd) sector + sectors ioprio [comm]`` with
  sectors of 512 bytes; older kernels print no ioprio field.
* ``tracing_mark_write`` lines written by the replaying child
  (``swaptrace start``, ``swaptrace step N``, ``swaptrace end``), which give
  the time origin and the training step of every request.

Parsing is tolerant: blank and ``#`` header lines are skipped, lines that do
not parse are counted as ``malformed`` (never fatal), and the ring buffer's
``[LOST n EVENTS]`` notes are summed into ``lost_events`` so a caller can tell
an incomplete stream from a complete one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from swaptrace.core.traceio import (
    CAUSE_DISCARD,
    CAUSE_FAULT,
    CAUSE_READAHEAD,
    CAUSE_RECLAIM,
    CAUSE_UNKNOWN,
    OP_DISCARD,
    OP_READ,
    OP_WRITE,
)

SECTOR_BYTES = 512
MARKER_PREFIX = "swaptrace"

# task-pid, optional "( tgid)", [cpu], optional irq/preempt flags, timestamp: event: body
_LINE = re.compile(
    r"^\s*(?P<task>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+"
    r"(?:(?P<flags>[^\s:]{4,6})\s+)?(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s?(?P<body>.*)$"
)
_RQ = re.compile(
    r"^(?P<major>\d+),(?P<minor>\d+)\s+(?P<rwbs>[A-Z]+)\s+(?P<bytes>\d+)\s+\((?P<cmd>[^)]*)\)\s+"
    r"(?P<sector>\d+)\s+\+\s+(?P<nr>\d+)(?:\s+[\w,]+)?\s+\[(?P<comm>.*)\]\s*$"
)
# the part before ": event: " -- task names may hold spaces and dashes, so anchor at the end
_HEAD = re.compile(r"-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:[^\s:]{4,6}\s+)?(?P<ts>\d+\.\d+)$")
_RQ_SEP = ": block_rq_issue: "
_LOST = re.compile(r"\[LOST (\d+) EVENTS\]")
_MARK = re.compile(rf"^{MARKER_PREFIX}\s+(?P<what>start|end|step)(?:\s+(?P<n>\d+))?\s*$")


@dataclass
class ParsedTrace:
    """Requests and markers from ftrace text, in file order.

    Attributes
    ----------
    t_ns : timestamps of requests, integer nanoseconds (trace clock; exact, no float rounding)
    op : ``traceio.OP_*`` codes
    offset : byte offsets on the device
    length : bytes
    readahead_flag : the request carried ``REQ_RAHEAD`` (``A`` in rwbs)
    pid : issuing task
    markers : ``(t_ns, what, n)`` tuples, ``what`` in start/step/end
    malformed : lines that look like data but did not parse
    other_events : parsed lines of other events or other devices
    flushes : requests without data (``F``/``N`` rwbs, zero bytes)
    lost_events : sum of ``[LOST n EVENTS]`` notes (ring-buffer overruns)
    """

    t_ns: np.ndarray
    op: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    readahead_flag: np.ndarray
    pid: np.ndarray
    markers: list[tuple[int, str, int]] = field(default_factory=list)
    malformed: int = 0
    other_events: int = 0
    flushes: int = 0
    lost_events: int = 0
    malformed_examples: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return len(self.t_ns)


def _ts_ns(text: str) -> int:
    """``"823.715453"`` -> 823715453000 (ftrace prints 6 or 9 fractional digits)."""
    sec, _, frac = text.partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


def _op_of(rwbs: str) -> int | None:
    """Map an rwbs string (``blk_fill_rwbs``) to an op; None for flushes/no-data."""
    if "D" in rwbs:
        return OP_DISCARD
    if "W" in rwbs:
        return OP_WRITE
    if "R" in rwbs:
        return OP_READ
    return None


def parse_lines(lines: Iterable[str], device: tuple[int, int] | None = None) -> ParsedTrace:
    """Parse ftrace text (``trace`` or ``trace_pipe`` format).

    Parameters
    ----------
    lines : iterable of str
        Lines of ftrace output, with or without trailing newlines.
    device : (major, minor), optional
        Keep only requests on this block device (the kernel-side filter
        already does this; this guards against a shared buffer).
    """
    t_ns: list[int] = []
    ops: list[int] = []
    offsets: list[int] = []
    lengths: list[int] = []
    ra: list[bool] = []
    pids: list[int] = []
    out = ParsedTrace(*(np.empty(0),) * 6)
    for raw in lines:
        line = raw.rstrip("\n")
        head, sep, body = line.partition(_RQ_SEP)
        if sep:  # fast path for the bulk of the lines
            h = _HEAD.search(head)
            rq = _RQ.match(body) if h is not None else None
            if rq is None:
                out.malformed += 1
                if len(out.malformed_examples) < 5:
                    out.malformed_examples.append(line[:200])
                continue
            _keep_request(rq, h, device, out, t_ns=t_ns, ops=ops, offsets=offsets, lengths=lengths, ra=ra,
                          pids=pids)
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        lost = _LOST.search(line)
        if lost:
            out.lost_events += int(lost.group(1))
            continue
        if stripped.startswith("#####"):  # "##### CPU 1 buffer started ####"
            continue
        m = _LINE.match(line)
        if m is None:
            out.malformed += 1
            if len(out.malformed_examples) < 5:
                out.malformed_examples.append(line[:200])
            continue
        event, body = m.group("event"), m.group("body")
        if event == "tracing_mark_write":
            mk = _MARK.match(body.strip())
            if mk is None:
                out.other_events += 1
                continue
            n = int(mk.group("n")) if mk.group("n") is not None else -1
            if mk.group("what") == "step" and n < 0:
                out.malformed += 1
                continue
            out.markers.append((_ts_ns(m.group("ts")), mk.group("what"), n))
            continue
        if event != "block_rq_issue":
            out.other_events += 1
            continue
        out.malformed += 1  # "block_rq_issue:" without the usual spacing
        if len(out.malformed_examples) < 5:
            out.malformed_examples.append(line[:200])
    out.t_ns = np.asarray(t_ns, dtype=np.int64)
    out.op = np.asarray(ops, dtype=np.int8)
    out.offset = np.asarray(offsets, dtype=np.uint64)
    out.length = np.asarray(lengths, dtype=np.uint32)
    out.readahead_flag = np.asarray(ra, dtype=bool)
    out.pid = np.asarray(pids, dtype=np.int64)
    return out


def _keep_request(rq, head, device, out, *, t_ns, ops, offsets, lengths, ra, pids) -> bool:
    """Append one parsed request to the column lists, or count why it is skipped."""
    if device is not None and (int(rq.group("major")), int(rq.group("minor"))) != tuple(device):
        out.other_events += 1
        return False
    rwbs = rq.group("rwbs")
    op = _op_of(rwbs)
    nbytes = int(rq.group("bytes")) or int(rq.group("nr")) * SECTOR_BYTES
    if op is None or nbytes == 0:
        out.flushes += 1
        return False
    t_ns.append(_ts_ns(head.group("ts")))
    ops.append(op)
    offsets.append(int(rq.group("sector")) * SECTOR_BYTES)
    lengths.append(nbytes)
    ra.append("A" in rwbs)
    pids.append(int(head.group("pid")))
    return True


def infer_causes(parsed: ParsedTrace, burst_us: float = 50.0) -> np.ndarray:
    """Best-effort cause of each request (``traceio.CAUSE_*`` codes).

    Swap writes only come from reclaim and discards from freeing slots. A read
    is ``readahead`` if the block layer marked it ``REQ_RAHEAD``. Otherwise a
    read that is alone in its burst (no other read from the same task within
    ``burst_us``) carried the faulting page, possibly with contiguous
    readahead pages merged in, which the emulator also calls a fault; reads
    in a burst of several requests mix the fault with readahead pages whose
    roles ftrace does not reveal, so they are ``unknown``.
    """
    n = parsed.requests
    cause = np.full(n, CAUSE_UNKNOWN, dtype=np.int8)
    cause[parsed.op == OP_WRITE] = CAUSE_RECLAIM
    cause[parsed.op == OP_DISCARD] = CAUSE_DISCARD
    reads = np.flatnonzero(parsed.op == OP_READ)
    if len(reads):
        gap_ns = burst_us * 1e3
        # burst boundaries per task: group reads by pid, split where the gap exceeds burst_us
        for pid in np.unique(parsed.pid[reads]):
            idx = reads[parsed.pid[reads] == pid]
            t = parsed.t_ns[idx]
            new_burst = np.concatenate(([True], np.diff(t) > gap_ns))
            burst_id = np.cumsum(new_burst)
            sizes = np.bincount(burst_id)
            alone = sizes[burst_id] == 1
            cause[idx[alone]] = CAUSE_FAULT
    cause[parsed.readahead_flag & (parsed.op == OP_READ)] = CAUSE_READAHEAD
    return cause


@dataclass(frozen=True)
class StreamColumns:
    """Columns of a swapio file (see ``traceio``), plus timing facts."""

    t_us: np.ndarray
    step: np.ndarray
    op: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    cause: np.ndarray
    duration_us: float
    before_start: int


def to_stream(parsed: ParsedTrace, first_step: int = 0, burst_us: float = 50.0, *, step_offset: int = 0,
              window_us: float | None = None) -> StreamColumns:
    """Turn parsed events into swapio columns.

    Times become microseconds after the ``swaptrace start`` marker (or the
    first request when there is none); each request gets the step of the last
    ``swaptrace step N`` marker before it, plus ``step_offset``, and
    ``first_step`` before any marker. ``before_start`` counts requests issued
    before the start marker (kept, with negative times).

    A captured command (``capture -- CMD``) stores its start-up -- the requests before its first
    marker -- as step 0 (``first_step=0``) and its marker ``N`` as step ``N + 1`` (``step_offset=1``),
    since the step column is unsigned. A program that writes no step marker gets time windows
    instead when ``window_us`` is given: step ``floor(t_us / window_us)``.
    """
    order = np.argsort(parsed.t_ns, kind="stable")  # per-CPU buffers interleave slightly out of order
    t_ns = parsed.t_ns[order]
    starts = [t for t, what, _ in parsed.markers if what == "start"]
    ends = [t for t, what, _ in parsed.markers if what == "end"]
    if starts:
        t0 = starts[0]
    elif len(t_ns):
        t0 = int(t_ns[0])
    else:
        t0 = 0
    t_us = (t_ns - t0) / 1e3
    steps = sorted((t, n) for t, what, n in parsed.markers if what == "step")
    if steps:
        mark_t = np.array([t for t, _ in steps], dtype=np.int64)
        mark_n = np.array([n for _, n in steps], dtype=np.int64) + int(step_offset)
        k = np.searchsorted(mark_t, t_ns, side="right") - 1
        step = np.where(k >= 0, mark_n[np.maximum(k, 0)], first_step)
    elif window_us is not None:
        step = np.floor(np.maximum(t_us, 0.0) / float(window_us)).astype(np.int64)
    else:
        step = np.full(len(t_ns), first_step, dtype=np.int64)
    end_t = ends[-1] if ends else (int(t_ns[-1]) if len(t_ns) else t0)
    cause = infer_causes(parsed, burst_us)[order]
    return StreamColumns(
        t_us=t_us,
        step=step.astype(np.uint32),
        op=parsed.op[order],
        offset=parsed.offset[order],
        length=parsed.length[order],
        cause=cause,
        duration_us=max(0.0, (end_t - t0) / 1e3),
        before_start=int(np.count_nonzero(t_ns < t0)),
    )
