"""Each step's swap writes, split by size and by whether their slots were written before.

A write request of one page and one of several, each counted by pages, to offsets some earlier request of the
stream wrote ("old") or to offsets never written ("new"), per step -- for a kernel capture and an emulator
stream side by side. It shows where a stream's single-page rewrites come from: the emulator rewrote pages
in place one by one after the capture's swap filled past half, where the kernel wrote them in runs through
reclaimed slots (research/results/real-training/boot-2/README.md, fifteenth session).

::

    .venv/bin/python research/step_writes.py KERNEL.swapio.parquet EMULATOR.swapio.parquet
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

PAGE = 4096
COLUMNS = ("single_old", "single_new", "multi_old", "multi_new")


def step_writes(path: Path) -> dict[int, dict[str, int]]:
    """Per step: pages written by single-page requests to old / new offsets, and by larger ones, old / new.

    Old means an earlier write request of the stream covered that page offset; a request's pages count one by
    one, so a multi-page request can hold both.
    """
    t = pq.read_table(path, columns=["step", "op", "offset", "length"])
    op = np.asarray(t["op"].to_pylist())
    w = op == "write"
    step = t["step"].to_numpy()[w]
    off = t["offset"].to_numpy()[w] // PAGE
    n = t["length"].to_numpy()[w] // PAGE
    written = np.zeros(int((off + n).max()) + 1 if len(off) else 1, bool)
    out: dict[int, dict[str, int]] = {}
    for s, a, k in zip(step.tolist(), off.tolist(), n.tolist(), strict=True):
        row = out.setdefault(s, dict.fromkeys(COLUMNS, 0))
        old = int(written[a:a + k].sum())
        if k == 1:
            row["single_old" if old else "single_new"] += 1
        else:
            row["multi_old"] += old
            row["multi_new"] += k - old
        written[a:a + k] = True
    return out


def table(kernel: dict, emulator: dict) -> str:
    head = "| step | " + " | ".join(f"{c} k / e" for c in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 1)]
    zero = dict.fromkeys(COLUMNS, 0)
    for s in sorted(set(kernel) | set(emulator)):
        k, e = kernel.get(s, zero), emulator.get(s, zero)
        lines.append(f"| {s} | " + " | ".join(f"{k[c]} / {e[c]}" for c in COLUMNS) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kernel", type=Path, help="a capture's swap stream (swapio parquet)")
    p.add_argument("emulator", type=Path, help="the emulator's stream for the same run")
    args = p.parse_args(argv)
    for path in (args.kernel, args.emulator):
        if not path.is_file():
            print(f"step_writes: {path}: no such file", file=sys.stderr)
            return 2
    print(table(step_writes(args.kernel), step_writes(args.emulator)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
