"""Write-request sizes of the first swap-out against the rest of a run, kernel against emulator.

For each pair ``KERNEL=EMULATOR`` of swapio streams (``swaptrace capture`` / ``swaptrace emulate`` of the same
access trace at the same budget) this prints, for the whole run and for the first step that writes (the
first swap-out: a process trace's start-up, where its idle runtime memory goes to swap for the first time)
and the steps after it: the write requests, their mean size (KiB), the relative error of the emulator's
mean, and the two-sample KS distance of the request sizes. It also counts the single-page writes to a slot
written before in the run (a slot reused: a hole left by a swap-in freeing its slot, or a page rewritten in
place), which cut the runs of fresh consecutive slots (research/notes/swapout-first.md).

::

    .venv/bin/python research/first_swapout.py k.swapio.parquet=e.swapio.parquet [more pairs]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq

PAGE = 4096


@dataclass(frozen=True)
class Writes:
    """One stream's write requests in issue order: step, first slot and length (pages)."""

    step: np.ndarray
    slot: np.ndarray
    pages: np.ndarray


def read_writes(path: str) -> Writes:
    """The write requests of a swapio Parquet file (``op == "write"``), in file order."""
    t = pq.read_table(path, columns=["step", "op", "offset", "length"])
    op = np.asarray(t.column("op").to_pylist(), dtype=object)
    w = op == "write"
    step = t.column("step").to_numpy()[w].astype(np.int64)
    off = t.column("offset").to_numpy()[w].astype(np.int64)
    length = t.column("length").to_numpy()[w].astype(np.int64)
    return Writes(step, off // PAGE, length // PAGE)


def ks(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov distance (largest gap of the empirical CDFs); NaN if one is empty."""
    if len(a) == 0 or len(b) == 0:
        return float("nan")
    a, b = np.sort(a), np.sort(b)
    x = np.union1d(a, b)
    fa = np.searchsorted(a, x, side="right") / len(a)
    fb = np.searchsorted(b, x, side="right") / len(b)
    return float(np.max(np.abs(fa - fb)))


def reused_single(w: Writes) -> int:
    """Single-page writes whose slot an earlier write of the run already covered."""
    seen = np.zeros(int((w.slot + w.pages).max()) + 1 if len(w.slot) else 0, dtype=bool)
    n = 0
    for s, p in zip(w.slot.tolist(), w.pages.tolist(), strict=True):
        if p == 1 and seen[s]:
            n += 1
        seen[s:s + p] = True
    return n


def parts(w: Writes, first: int) -> dict[str, np.ndarray]:
    """Request sizes (KiB) of the whole run, of step ``first`` and of the steps after it."""
    kib = w.pages * (PAGE // 1024)
    return {"all": kib, "first": kib[w.step == first], "rest": kib[w.step > first]}


def compare(kernel: Writes, emul: Writes) -> list[dict]:
    """One row per part: requests, mean KiB each side, the emulator's relative error and the KS distance."""
    first = int(kernel.step.min()) if len(kernel.step) else 0
    pk, pe = parts(kernel, first), parts(emul, first)
    rows = []
    for name in ("all", "first", "rest"):
        a, b = pk[name], pe[name]
        mk = float(a.mean()) if len(a) else float("nan")
        me = float(b.mean()) if len(b) else float("nan")
        rows.append({"part": name if name != "first" else f"step {first}", "n_k": len(a), "n_e": len(b),
                     "mean_k": mk, "mean_e": me, "err": me / mk - 1 if len(a) and len(b) else float("nan"),
                     "ks": ks(a, b)})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", help="KERNEL=EMULATOR swapio files")
    args = ap.parse_args(argv)
    print("| pair | part | requests k / e | mean write KiB k / e | err | KS | reused single-page slots k / e |")
    print("|---|---|---|---|---|---|---|")
    for pair in args.pairs:
        if "=" not in pair:
            print(f"error: {pair!r} is not KERNEL=EMULATOR", file=sys.stderr)
            return 2
        kp, ep = pair.split("=", 1)
        k, e = read_writes(kp), read_writes(ep)
        reuse = f"{reused_single(k)} / {reused_single(e)}"
        for r in compare(k, e):
            print(f"| {kp.rsplit('/', 1)[-1]} | {r['part']} | {r['n_k']} / {r['n_e']} | {r['mean_k']:.1f} / "
                  f"{r['mean_e']:.1f} | {r['err']:+.0%} | {r['ks']:.2f} | {reuse if r['part'] == 'all' else ''} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
