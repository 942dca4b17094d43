"""Does reclaim see every access to a page, or can a cached translation hide one? A check of the emulator's premise.

The ``linux`` policy sets a page's young bit on every access (``_linux_hit``). On x86 the kernel clears the
accessed bit during reclaim (``folio_referenced`` -> ``ptep_clear_flush_young``, arch/x86/mm/pgtable.c)
*without* flushing the TLB -- its comment calls the resulting misjudged hot page a low-probability cost.
While a translation stays cached the CPU need not walk the page table again, so an access need not set
the bit: a hot page whose entry never leaves the TLB would look unused at its second look, never be
activated and be swapped out and read back again and again. A replay that touches a few hot pages between
many cold ones is where this would show.

The experiment: in a memory cgroup with room for half of a 160 MiB anonymous region, swap on a loop
device, a child alternates reads of ``K`` hot pages (round robin; ``K`` well inside the TLB) with a cold
sweep over the rest of the region, six sweeps in all. In ``flush`` mode it also flushes its whole TLB
every 64 pairs of reads (an ``mprotect`` over 256 pages, above the kernel's 33-page
``tlb_single_page_flush_ceiling``, flushes the mm's entries). From the third sweep on, it counts hot pages
found swapped out (``mincore``) every 100 chunks; at the end, the cgroup's active list. If cached
translations hid accesses, the ``none`` mode would lose hot pages and keep none active, and ``flush``
would not. (The cold sweep faults every ~16 reads -- one read brings 8 pages with readahead -- so the
process sleeps on the device that often; a replay running long stretches without a fault is not what
this tests.)

::

    sudo .venv/bin/python research/accessed_bit.py                # four runs, ~2 min; prints a table

Everything is undone on exit (the cgroup, swapoff, the loop device and its file).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

REGION_PAGES = 40_000
ROOM_BYTES = 80 << 20  # half the region
SWEEPS = 6
CHUNK = 64  # pairs of reads between TLB flushes (flush mode) and between calls into the numba loop
NAME = "swaptrace-accessed-bit"


def child(mode: str, hot: int, cgroup: str) -> None:
    """The replay: ``hot`` hot pages, each read between two cold ones; prints one JSON line."""
    import ctypes
    import mmap
    import resource

    import numpy as np
    from numba import njit

    page = 4096

    @njit(cache=False)
    def reads(mem, h0, c0, ncold, pairs, k):  # read a hot page, then the next cold one
        s = 0
        c = c0
        for j in range(pairs):
            s += mem[((h0 + j) % k) * 4096]
            s += mem[(k + c) * 4096]
            c = c + 1 if c + 1 < ncold else 0
        return s

    libc = ctypes.CDLL(None, use_errno=True)
    dummy = mmap.mmap(-1, 256 * page)
    dummy[:] = b"x" * (256 * page)
    daddr = ctypes.addressof(ctypes.c_char.from_buffer(dummy))
    reads(np.zeros(2 * page, np.uint8), 0, 0, 1, 4, 1)  # compile before the limit
    libc.mlockall(1)  # MCL_CURRENT: the interpreter and numba stay; the region below is not locked
    usage = int(Path(cgroup, "memory.usage_in_bytes").read_text())
    Path(cgroup, "memory.limit_in_bytes").write_text(str(usage + ROOM_BYTES))
    region = mmap.mmap(-1, REGION_PAGES * page, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    mem = np.frombuffer(region, np.uint8)
    mem[::page] = 1  # every page written: real, dirty anonymous memory
    vec = (ctypes.c_ubyte * hot)()
    ncold = REGION_PAGES - hot
    lost = checks = done = 0
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    while done < SWEEPS * ncold:
        reads(mem, done, done % ncold, ncold, CHUNK, hot)
        done += CHUNK
        if mode == "flush":  # PROT_READ then back: the downgrade flushes the mm's TLB entries
            libc.mprotect(ctypes.c_void_p(daddr), 256 * page, 1)
            libc.mprotect(ctypes.c_void_p(daddr), 256 * page, 3)
        if (done // CHUNK) % 100 == 0 and done > 2 * ncold:
            libc.mincore(ctypes.c_void_p(mem.ctypes.data), hot * page, vec)
            lost += sum(1 for v in vec if not v & 1)
            checks += 1
    stat = dict(line.split() for line in Path(cgroup, "memory.stat").read_text().splitlines())
    print(json.dumps({"mode": mode, "hot_pages": hot,
                      "major_faults": resource.getrusage(resource.RUSAGE_SELF).ru_majflt - faults0,
                      "hot_swapped_out_mean": lost / max(checks, 1),
                      "active_pages_end": int(stat["active_anon"]) // page}), flush=True)


def hidden_accesses(rows: list[dict], tolerance: float = 0.01) -> bool:
    """Whether the runs show accesses hidden by cached translations.

    True when, for some hot-set size, the runs without flushes lose more than ``tolerance`` of the hot
    pages on average (swapped out though read every ``2 K`` reads) while the runs with flushes do not.
    """
    by = {}
    for r in rows:
        by.setdefault(r["hot_pages"], {}).setdefault(r["mode"], []).append(r["hot_swapped_out_mean"] / r["hot_pages"])
    for modes in by.values():
        if "none" in modes and "flush" in modes:
            if max(modes["none"]) > tolerance and max(modes["flush"]) <= tolerance:
                return True
    return False


def markdown(rows: list[dict]) -> str:
    lines = ["| mode | hot pages | hot pages swapped out (mean of checks) | active list at the end (pages) "
             "| major faults |", "|---|---|---|---|---|"]
    lines += [f"| {r['mode']} | {r['hot_pages']} | {r['hot_swapped_out_mean']:.1f} | {r['active_pages_end']} "
              f"| {r['major_faults']} |" for r in rows]
    verdict = ("accesses hidden by cached translations: hot pages are swapped out without flushes only"
               if hidden_accesses(rows) else
               "no access hidden: hot pages stay resident and active with or without TLB flushes")
    return "\n".join(lines) + f"\n\n{verdict}\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hot", type=int, nargs="+", default=[512, 1536], help="hot-set sizes in pages")
    ap.add_argument("--work", type=Path, default=Path("/var/tmp"), help="folder for the swap file (on a disk)")
    ap.add_argument("--child", nargs=3, metavar=("MODE", "HOT", "CGROUP"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return 0
    if any(k <= 0 or k >= REGION_PAGES // 2 for k in args.hot):
        print(f"accessed_bit.py: --hot sizes must be between 1 and {REGION_PAGES // 2 - 1} pages", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("accessed_bit.py: needs root (swap on a loop device, a memory cgroup)", file=sys.stderr)
        return 2
    from swaptrace import SwaptraceError
    from swaptrace.capture.cgroup import MemoryCgroup
    from swaptrace.capture.swapdev import SwapDevice

    def stop(signum, frame):  # SIGTERM undoes everything as Ctrl-C does
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    swap = SwapDevice(args.work / f"{NAME}.swap", 512 << 20)
    group = MemoryCgroup(NAME)
    rows = []
    try:
        swap.setup()
        group.create()
        if group.version != 1:
            raise SwaptraceError("this check is written for the cgroup v1 memory controller")
        for hot in args.hot:
            for mode in ("none", "flush", "none", "flush"):
                script = 'echo $$ > "$1"; shift; exec "$@"'
                out = subprocess.run(["/bin/sh", "-c", script, "sh", str(group.procs_file), sys.executable,
                                      __file__, "--child", mode, str(hot), str(group.path)],
                                     check=True, capture_output=True, text=True).stdout
                rows.append(json.loads(out.strip().splitlines()[-1]))
                print(f"  {mode} {hot}: {rows[-1]}", file=sys.stderr)
    except (SwaptraceError, subprocess.CalledProcessError) as exc:
        print(f"accessed_bit.py: {exc}", file=sys.stderr)
        return 2
    finally:
        group.remove()
        swap.teardown()
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
