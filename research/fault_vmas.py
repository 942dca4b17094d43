"""Which of a training program's mappings the kernel swaps in, and how many pages each fault reads.

A study tool for the real-training validation (``analysis/validate_real.py``): it repeats one of its
captures (same shape, same limit) while a tracefs instance of its own records the program's user page
faults (``exceptions:page_fault_user``: address, thread) and the bios queued on the swap device
(``block:block_bio_queue``, reads only), and snapshots ``/proc/PID/maps`` every second. A fault followed,
in the same thread and before that thread's next fault, by reads is a swap-in that read: the faulting page
plus the swap readahead window (``swap_vma_readahead``, mm/swap_state.c), as one-page bios. Swap-ins of
pages of zeros read nothing (``swap_read_folio_zeromap``) and are not seen.

Each such fault is attributed to the mapping that held its address (the latest snapshot that has one),
named as ``/proc/PID/maps`` names it (``[heap]``, a file, or ``anon`` with its size), and anonymous
mappings of the model's arrays are told apart by size. The same point's emulation (``generate --runtime``
of the shape's recording, ``emulate`` at the capture's limit and swap size) is broken down the same way,
by trace region (the fault's access index from the emulator's output rows).

Usage (root; the machine otherwise idle)::

    .venv/bin/python research/fault_vmas.py SHAPE FRAC --take K [--run R] -o DIR

writes ``DIR/SHAPE-FRAC.json`` and prints both breakdowns (the capture and its trace text are removed); with ``--knee 0 4 8 16`` it only emulates the
point with that many MiB less memory (no capture) and writes ``DIR/SHAPE-FRAC-rR.knee.json``. Costs: the tracing slows the program down
(2.2 M faults at ``dlrm-random`` 0.4: about 10 %), and the trace is parsed as text (~10 s per million
events).
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "analysis"))
import validate_real as vr  # noqa: E402  (the study's shapes, paths and capture command)

TRACEFS = Path("/sys/kernel/tracing/instances")
LINE = re.compile(r"^\s*(\S+)-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+): (page_fault_user|block_bio_queue): (.*)$")
BIO = re.compile(r"(\d+),(\d+) (\S+) (\d+) \+ (\d+)")


def loop_dev_t(device: str) -> int:
    """The kernel's ``dev_t`` of a block device (major << 20 | minor), as tracepoints print and filter it."""
    st = os.stat(device)
    return (os.major(st.st_rdev) << 20) | os.minor(st.st_rdev)


class Snapshots(threading.Thread):
    """Every ``period`` s: the program's threads and mappings (from its first ``swaptrace train`` process)."""

    def __init__(self, period: float = 1.0):
        super().__init__(daemon=True)
        self.period, self.stop = period, threading.Event()
        self.pid: int | None = None
        self.tids: set[int] = set()
        self.maps: list[tuple[float, list[tuple[int, int, str]]]] = []

    def _find(self) -> int | None:
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    argv = (d / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if len(argv) > 2 and argv[1].endswith(b"swaptrace") and argv[2] == b"train":
                    return int(d.name)
                if len(argv) > 1 and argv[0].endswith(b"swaptrace") and argv[1] == b"train":
                    return int(d.name)
        return None

    def run(self) -> None:
        while not self.stop.is_set():
            self.pid = self.pid or self._find()
            if self.pid:
                try:
                    self.tids.update(int(t) for t in os.listdir(f"/proc/{self.pid}/task"))
                    rows = []
                    for line in Path(f"/proc/{self.pid}/maps").read_text().splitlines():
                        parts = line.split(None, 5)
                        lo, hi = (int(x, 16) for x in parts[0].split("-"))
                        rows.append((lo, hi, parts[5] if len(parts) > 5 else f"anon {(hi - lo) >> 20} MiB"))
                    self.maps.append((time.clock_gettime(time.CLOCK_MONOTONIC), rows))
                except OSError:
                    pass
            self.stop.wait(self.period)


def trace_capture(shape: str, frac: float, run: int, out: Path) -> tuple[Path, Snapshots]:
    """Repeat the study's capture of ``shape`` at ``frac`` (run ``run``'s limit) with the fault/bio instance."""
    meta = vr._meta(vr.capture_path(shape, frac, run))
    device = meta["kernel"].get("loop_device") or "/dev/loop0"
    vr.warm(shape)  # before the instance records: the warming run's faults are not the capture's
    inst = TRACEFS / "fault_vmas"
    inst.mkdir(exist_ok=True)
    try:
        (inst / "tracing_on").write_text("0")
        (inst / "trace_clock").write_text("mono")
        (inst / "buffer_size_kb").write_text("300000")
        (inst / "trace").write_text("")
        (inst / "events/exceptions/page_fault_user/filter").write_text('comm == "swaptrace"')
        (inst / "events/block/block_bio_queue/filter").write_text(f"dev == {loop_dev_t(device)}")
        for ev in ("exceptions/page_fault_user", "block/block_bio_queue"):
            (inst / "events" / ev / "enable").write_text("1")
        snaps = Snapshots()
        snaps.start()
        (inst / "tracing_on").write_text("1")
        vr.repeat_capture(shape, frac, run, out / f"{shape}-{frac:.2f}.kernel.swapio.parquet")
        (inst / "tracing_on").write_text("0")
        snaps.stop.set()
        snaps.join()
        text = out / f"{shape}-{frac:.2f}.trace.txt"
        with open(inst / "trace", "rb") as src, open(text, "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        return text, snaps
    finally:
        for ev in ("exceptions/page_fault_user", "block/block_bio_queue"):
            (inst / "events" / ev / "enable").write_text("0")
        inst.rmdir()


def faults_that_read(text: Path, tids: set[int]) -> tuple[list[tuple[float, int, int]], float]:
    """``(time s, address, pages read)`` of every fault of the program's threads followed by swap reads, and
    the time of the first read (s, the trace's monotonic clock)."""
    open_fault: dict[int, list] = {}
    out = []
    first_read = float("inf")
    with open(text) as fh:
        for line in fh:
            m = LINE.match(line)
            if not m or int(m.group(2)) not in tids:
                continue
            tid, ts, ev, rest = int(m.group(2)), float(m.group(3)), m.group(4), m.group(5)
            if ev == "page_fault_user":
                prev = open_fault.pop(tid, None)
                if prev and prev[2]:
                    out.append(tuple(prev))
                a = re.search(r"address=0x([0-9a-f]+)", rest)
                if a:
                    open_fault[tid] = [ts, int(a.group(1), 16), 0]
            else:
                b = BIO.match(rest)
                if b and "R" in b.group(3) and tid in open_fault:
                    open_fault[tid][2] += int(b.group(5)) * 512 // 4096
                    first_read = min(first_read, ts)
    out += [tuple(f) for f in open_fault.values() if f[2]]
    return out, first_read


def phases(faults, first_read: float, capture: Path) -> dict[str, list]:
    """The faults of start-up, training and the last step (which holds the exit; the study leaves it out): the
    capture's clock starts where its first read row's ``t_us`` puts it before the trace's first read; start-up
    ends ``startup_s`` later, training after every step's wall but the last's."""
    import pyarrow.parquet as pq

    meta = vr._meta(capture)
    t = pq.read_table(capture, columns=["t_us", "op"])
    reads = np.flatnonzero(np.asarray(t["op"].to_pylist(), dtype=object) == "read")
    start = first_read - float(t["t_us"].to_numpy()[reads[0]]) / 1e6
    limited = meta["kernel"]["limited"]
    ends = (start + limited["startup_s"], start + limited["startup_s"] + sum(limited["step_wall_us"][:-1]) / 1e6)
    out: dict[str, list] = {"startup": [], "training": [], "last step and exit": []}
    for f in faults:
        out["startup" if f[0] < ends[0] else "training" if f[0] < ends[1] else "last step and exit"].append(f)
    return out


def by_mapping(faults, snaps: Snapshots) -> dict[str, dict]:
    """Faults and pages read per mapping name (the latest snapshot before each fault that maps its address)."""
    times = [t for t, _ in snaps.maps]
    index = [([lo for lo, _, _ in rows], rows) for _, rows in snaps.maps]
    agg: dict[str, dict] = collections.defaultdict(lambda: {"faults": 0, "pages": 0, "hist": collections.Counter()})
    for ts, addr, pages in faults:
        name = "unmapped at every snapshot"
        i = bisect.bisect_right(times, ts) - 1
        for j in [*range(max(i, 0), -1, -1), *range(max(i, 0) + 1, len(index))]:
            los, rows = index[j]
            k = bisect.bisect_right(los, addr) - 1
            if k >= 0 and addr < rows[k][1]:
                name = rows[k][2]
                break
        e = agg[name]
        e["faults"] += 1
        e["pages"] += pages
        e["hist"][min(pages, 9)] += 1
    return {k: {**v, "hist": dict(sorted(v["hist"].items()))} for k, v in agg.items()}


def emulated(shape: str, take: int, limit: int, swap: int) -> dict[str, dict[str, dict]]:
    """The same breakdown for the emulator, by trace region kind, for start-up (step 0) and training (the
    steps before the last, as the study counts)."""
    import pyarrow.parquet as pq

    import swaptrace.kernels.emulate.state as ks
    from swaptrace.cli import cli

    trace = vr.WORK / f"{shape}-{shape}.take{take}.recording.access.parquet"
    emu_out = vr.WORK / f"{shape}.fault-vmas.emu.swapio.parquet"
    raw: list[dict] = []
    take_rows = ks.EmuState.take_rows

    def keep(self):  # the rows' t_us is still the access's index within its step here
        rows = take_rows(self)
        if rows is not None:
            raw.append({k: v.copy() for k, v in rows.items()})
        return rows

    ks.EmuState.take_rows = keep
    try:
        cli(["emulate", str(trace), "--memory", str(limit), "--swap-bytes", str(swap), "--write-cost",
             str(vr.WRITE_COST), "-o", str(emu_out), "--force"], standalone_mode=False)
    finally:
        ks.EmuState.take_rows = take_rows
        emu_out.unlink(missing_ok=True)
    rows = {k: np.concatenate([r[k] for r in raw]) for k in raw[0]}
    t = pq.read_table(trace, columns=["step", "region"])
    regions = json.loads(pq.read_schema(trace).metadata[b"swaptrace"])["regions"]
    step, region = t["step"].to_numpy(), t["region"].to_numpy()
    starts = np.searchsorted(step, np.arange(int(step.max()) + 2))
    last = int(step.max())
    sel = (rows["op"] == ks.OP_READ) & (rows["step"] < last)
    key = rows["step"][sel].astype(np.int64) << 32 | rows["t_us"][sel].astype(np.int64)
    u, inv = np.unique(key, return_inverse=True)
    pages = np.bincount(inv, weights=rows["length"][sel] // 4096).astype(np.int64)
    kind = [regions[r]["kind"] for r in region[starts[u >> 32] + (u & 0xFFFFFFFF)]]
    out = {}
    for ph, in_phase in (("startup", (u >> 32) == 0), ("training", (u >> 32) > 0)):
        agg: dict[str, dict] = collections.defaultdict(lambda: {"faults": 0, "pages": 0, "hist": collections.Counter()})
        for k, p in zip(np.asarray(kind)[in_phase].tolist(), pages[in_phase].tolist(), strict=True):
            agg[k]["faults"] += 1
            agg[k]["pages"] += p
            agg[k]["hist"][min(p, 9)] += 1
        out[ph] = {k: {**v, "hist": dict(sorted(v["hist"].items()))} for k, v in agg.items()}
    return out


def knee(shape: str, frac: float, run: int, take: int, less_mib: list[int]) -> list[dict]:
    """Training pages in of the point's emulation with ``less_mib`` MiB less memory than its capture's limit
    (how steep the miss-ratio curve is there), beside the capture's."""
    capture = vr.capture_path(shape, frac, run)
    meta, kernel = vr._meta(capture), vr.phase_numbers(capture)["training"]
    trace = vr.WORK / f"{shape}-{shape}.take{take}.recording.access.parquet"
    out = vr.WORK / f"{shape}.knee.emu.swapio.parquet"
    rows = []
    try:
        for less in less_mib:
            vr.sh(vr.SWAPTRACE, "emulate", str(trace), "--memory", str(int(meta["memory_bytes"]) - (less << 20)),
                  "--swap-bytes", str(int(meta["params"]["swap_bytes"])), "--write-cost", str(vr.WRITE_COST),
                  "-o", str(out), "--force")
            e = vr.phase_numbers(out)["training"]
            rows.append({"less_mib": less, "pages_in": e["pages_in"], "reads": e["reads"],
                         "kernel_pages_in": kernel["pages_in"], "kernel_reads": kernel["reads"]})
            print(f"  {less:3d} MiB less: emulator training pages in {e['pages_in']:8d} (kernel {kernel['pages_in']})")
    finally:
        out.unlink(missing_ok=True)
    return rows


def table(title: str, agg: dict[str, dict], top: int = 12) -> str:
    faults, pages = sum(e["faults"] for e in agg.values()), sum(e["pages"] for e in agg.values())
    lines = [f"{title}: {faults} faults that read, {pages} pages"]
    for name, e in sorted(agg.items(), key=lambda x: -x[1]["pages"])[:top]:
        hist = " ".join(f"{k}:{v}" for k, v in e["hist"].items())
        lines.append(f"  {name[-40:]:40s} faults {e['faults']:8d}  pages {e['pages']:9d}  "
                     f"({e['pages'] / e['faults']:.2f}/fault)  {hist}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("shape", choices=[*vr.SHAPES, *(f"{s}@torchrec" for s in vr.SHAPES)])
    p.add_argument("frac", type=float)
    p.add_argument("--run", type=int, default=0, help="whose limit (the study's run R of the point)")
    p.add_argument("--take", type=int, required=True, help="the recording the emulation is generated from")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--knee", type=int, nargs="+", metavar="MIB",
                   help="instead: emulate the point with these MiB less memory (no capture, no root)")
    args = p.parse_args(argv)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    if args.knee:
        rows = knee(args.shape, args.frac, args.run, args.take, args.knee)
        (out / f"{args.shape}-{args.frac:.2f}-r{args.run}.knee.json").write_text(json.dumps(rows, indent=1))
        return 0
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=vr.WORK) as tmp:
        text, snaps = trace_capture(args.shape, args.frac, args.run, Path(tmp))
        faults, first_read = faults_that_read(text, snaps.tids)
        capture = Path(tmp) / f"{args.shape}-{args.frac:.2f}.kernel.swapio.parquet"
        kernel = {ph: by_mapping(fs, snaps) for ph, fs in phases(faults, first_read, capture).items()}
    meta = vr._meta(vr.capture_path(args.shape, args.frac, args.run))
    emu = emulated(args.shape, args.take, int(meta["memory_bytes"]), int(meta["params"]["swap_bytes"]))
    result = {"shape": args.shape, "frac": args.frac, "run": args.run, "take": args.take,
              "load_before": load0, "load_after": os.getloadavg()[0], "threads": sorted(snaps.tids),
              "kernel": kernel, "emulator": emu}
    (out / f"{args.shape}-{args.frac:.2f}.json").write_text(json.dumps(result, indent=1))
    for ph, agg in kernel.items():
        print(table(f"kernel ({args.shape} at {args.frac}), {ph}", agg))
    for ph, agg in emu.items():
        print(table(f"emulator (take {args.take}), {ph}", agg))
    print(f"load {load0:.2f} -> {result['load_after']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
