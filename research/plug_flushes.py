"""Which block plug sent the kernel's swap-out requests: flushes read off a capture, and the rotations counted.

Two questions of the first swap-out's large writes (docs/process.md, "The misses left"):

* **Did a flush carry many requests at once?** ``flushes`` groups a capture's requests (``*.swapio.parquet``,
  one row per ``block_rq_issue``) into runs issued less than ``--gap`` microseconds apart: the requests one
  ``blk_mq_flush_plug_list`` hands to the driver (block/blk-mq.c), or several flushes too close to tell
  apart. A plug of its own per priority level (``shrink_lruvec``) flushes once a level ends, so a run of
  32 requests (``BLK_MAX_REQUEST_COUNT``, include/linux/blkdev.h) of 128 pages each means the writes of
  many levels waited in one plug that outlived the levels: a swap-in's (``swap_vma_readahead`` holds a plug
  while it charges each page it reads, and the reclaim that charge runs nests its own plug inside, a no-op).
  Reported per phase: the write pages in runs of at least ``--min-requests`` writes, and the run sizes.
  Kernel captures only: an emulation's ``t_us`` is built from access indices, not issue times.
* **Were the written pages rotated?** ``rotated`` repeats one of ``analysis/validate_real.py``'s captures
  (root; as ``research/fault_vmas.py`` does, after one unlimited step so the program's files are cached)
  while a thread samples ``/proc/vmstat`` every 20 ms: ``pgrotated`` (``folio_rotate_reclaimable`` moved a
  folio whose write ended to the inactive tail, mm/swap.c) against ``pswpout``. The machine's counters, so
  the run must be the only thing swapping.

::

    .venv/bin/python research/plug_flushes.py flushes traces/real-validation/rm3-eighth-0.65-r0.kernel.swapio.parquet
    sudo .venv/bin/python research/plug_flushes.py rotated rm3-eighth 0.65 -o /tmp/rot
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PAGE_BYTES = 4096
#: the /proc/vmstat counters sampled beside a capture
VMSTAT_KEYS = ("pgrotated", "pswpout", "pswpin", "nr_vmscan_write", "nr_vmscan_immediate_reclaim")


@dataclass(frozen=True)
class Flushes:
    """The write requests of one phase, grouped into runs issued close together."""

    write_pages: int
    #: per run of at least ``min_requests`` writes: its write requests and their pages
    runs: tuple[tuple[int, int], ...]

    @property
    def share(self) -> float:
        """The fraction of the phase's write pages in those runs."""
        return sum(p for _, p in self.runs) / self.write_pages if self.write_pages else 0.0


def flushes(t_us: np.ndarray, op: np.ndarray, pages: np.ndarray, *, gap_us: float = 30.0,
            min_requests: int = 16) -> Flushes:
    """Group requests (in issue order) into runs whose consecutive issues are under ``gap_us`` apart.

    Parameters
    ----------
    t_us : ndarray of float
        Issue times, microseconds, non-decreasing.
    op : ndarray of str
        ``"read"`` or ``"write"`` per request.
    pages : ndarray of int
        Pages per request.
    gap_us : float
        A gap of at least this long starts a new run (us). A flush issues its requests within a few
        microseconds each; the study's captures show 31 requests within 21 us.
    min_requests : int
        Runs with fewer write requests are not reported.
    """
    t_us, pages = np.asarray(t_us, dtype=float), np.asarray(pages, dtype=np.int64)
    write = np.asarray(op) == "write"
    if not t_us.size:
        return Flushes(write_pages=0, runs=())
    starts = np.r_[0, np.flatnonzero(np.diff(t_us) >= gap_us) + 1]
    ends = np.r_[starts[1:], t_us.size]
    runs = []
    for a, b in zip(starts, ends, strict=True):
        w = write[a:b]
        if w.sum() >= min_requests:
            runs.append((int(w.sum()), int(pages[a:b][w].sum())))
    return Flushes(write_pages=int(pages[write].sum()), runs=tuple(runs))


def capture_flushes(path: Path, *, gap_us: float, min_requests: int) -> dict[str, Flushes]:
    """:func:`flushes` of a capture's start-up (step 0) and of the rest before its last step."""
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["t_us", "step", "op", "length"])
    step = t["step"].to_numpy()
    op = np.asarray(t["op"].to_pylist(), dtype=object)
    t_us, pages = t["t_us"].to_numpy(), t["length"].to_numpy() // PAGE_BYTES
    last = int(step.max()) if step.size else 0
    out = {}
    for phase, sel in (("startup", step == step.min()), ("training", (step > step.min()) & (step < last))):
        out[phase] = flushes(t_us[sel], op[sel], pages[sel], gap_us=gap_us, min_requests=min_requests)
    return out


def rotation(samples: list[tuple[float, dict[str, int]]]) -> dict[str, float]:
    """Counter deltas over the samples and ``pgrotated / pswpout`` (the share of written pages rotated)."""
    first, last = samples[0][1], samples[-1][1]
    delta = {k: last[k] - first[k] for k in VMSTAT_KEYS}
    delta["rotated_share"] = delta["pgrotated"] / delta["pswpout"] if delta["pswpout"] else float("nan")
    return delta


def _vmstat() -> dict[str, int]:
    out = {}
    with open("/proc/vmstat") as f:
        for line in f:
            key, value = line.split()
            if key in VMSTAT_KEYS:
                out[key] = int(value)
    return out


def rotated(shape: str, frac: float, run: int, out: Path) -> dict[str, float]:
    """Repeat the study's capture of ``shape`` at ``frac`` (run ``run``'s limit) with /proc/vmstat sampled."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
    import validate_real as vr

    vr.warm(shape)
    samples: list[tuple[float, dict[str, int]]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.monotonic(), _vmstat()))
            stop.wait(0.02)

    out.mkdir(parents=True, exist_ok=True)
    thread = threading.Thread(target=sample, name="vmstat")
    load = [Path("/proc/loadavg").read_text().split()[0]]
    thread.start()
    try:
        vr.repeat_capture(shape, frac, run, out / f"{shape}-{frac:.2f}-r{run}.kernel.swapio.parquet")
    finally:
        stop.set()
        thread.join()
    load.append(Path("/proc/loadavg").read_text().split()[0])
    result = {**rotation(samples), "load_before": float(load[0]), "load_after": float(load[1])}
    (out / f"{shape}-{frac:.2f}-r{run}.vmstat.json").write_text(json.dumps({"result": result, "samples": samples}))
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("flushes", help="runs of requests issued together, per phase, from captures")
    f.add_argument("captures", nargs="+", type=Path)
    f.add_argument("--gap", type=float, default=30.0, help="us between issues that starts a new run")
    f.add_argument("--min-requests", type=int, default=16)
    r = sub.add_parser("rotated", help="repeat a study capture with /proc/vmstat sampled (root)")
    r.add_argument("shape")
    r.add_argument("frac", type=float)
    r.add_argument("--run", type=int, default=0)
    r.add_argument("-o", "--out", type=Path, required=True)
    args = p.parse_args(argv)
    if args.cmd == "flushes":
        for path in args.captures:
            for phase, fl in capture_flushes(path, gap_us=args.gap, min_requests=args.min_requests).items():
                sizes = sorted(n for n, _ in fl.runs)
                print(f"{path.name} {phase}: {fl.write_pages} write pages, {len(fl.runs)} runs of "
                      f">= {args.min_requests} writes holding {fl.share:.0%}; writes per run "
                      f"{sizes[:3]}..{sizes[-3:]}" if sizes else f"{path.name} {phase}: no such run")
    else:
        print(json.dumps(rotated(args.shape, args.frac, args.run, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
