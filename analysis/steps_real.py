"""Where the real-training study's pages miss, step by step: the kernel's capture against the emulator's stream.

``validate_real.py predict`` scores each point on totals (start-up, training). This prints, for each point of
a take, the pages read and written in every step of both streams, and splits the training steps into the
first ``--settle`` (the run finding its steady state) and the rest (the steady state); the kernel's last
step, which also holds the program's exit, is left out of both (``validate_real.py`` counts training the same
way). It reads only what ``capture`` and ``predict`` left under ``traces/real-validation``.

Usage::

    .venv/bin/python analysis/steps_real.py --take 20 [--shapes dlrm-random ...] [--settle 4] [--steps]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "traces" / "real-validation"
SHAPES = ("kaggle-tenth", "dlrm-random", "rm3-eighth", "mlperf-multihot", "kaggle-tenth@torchrec")
LIMITS = ("0.85", "0.65", "0.50", "0.40")


def pages_per_step(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Pages read and pages written in each step of a swapio stream (step 0: start-up)."""
    from swaptrace import open_trace

    cols = open_trace(path, kind="swapio").read_all(["step", "op", "length"])
    step = cols["step"].astype(np.int64)
    pages = cols["length"].astype(np.int64) // 4096
    n = int(step.max()) + 1 if step.size else 0
    read, write = cols["op"] == 0, cols["op"] == 1
    return (np.bincount(step[read], weights=pages[read], minlength=n).astype(np.int64),
            np.bincount(step[write], weights=pages[write], minlength=n).astype(np.int64))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--take", required=True, help="the recording take the predictions used (e.g. 20)")
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES))
    ap.add_argument("--settle", type=int, default=4, help="training steps counted as settling (default 4)")
    ap.add_argument("--steps", action="store_true", help="also print every step's pages read")
    args = ap.parse_args(argv)
    print("| shape | limit | run | pages in, settling k / e | steady k / e (per step) | pages out, settling k / e "
          "| steady k / e (per step) |\n|---|---|---|---|---|---|---|")
    missing = 0
    for shape in args.shapes:
        for limit in LIMITS:
            for run in (0, 1):
                kernel = WORK / f"{shape}-{limit}-r{run}.kernel.swapio.parquet"
                emu = WORK / f"{shape}-{limit}-r{run}-{shape}.take{args.take}.recording.emu.swapio.parquet"
                if not (kernel.exists() and emu.exists()):
                    missing += 1
                    continue
                (k_in, k_out), (e_in, e_out) = pages_per_step(kernel), pages_per_step(emu)
                last = min(k_in.size, e_in.size) - 1  # the kernel's last step holds the exit: left out
                a, b = 1, 1 + args.settle

                def pair(k, e, lo, hi, mean=False):
                    f = np.mean if mean else np.sum
                    return f"{f(k[lo:hi]):,.0f} / {f(e[lo:hi]):,.0f}"

                print(f"| {shape} | {limit} | {run} | {pair(k_in, e_in, a, b)} | {pair(k_in, e_in, b, last, True)} | "
                      f"{pair(k_out, e_out, a, b)} | {pair(k_out, e_out, b, last, True)} |")
                if args.steps:
                    print(f"|  | kernel in | | {k_in[1:last].tolist()} |\n|  | emulator in | | {e_in[1:last].tolist()} |")
    if missing:
        print(f"\n{missing} point(s) without both streams under {WORK} (run validate_real.py capture and predict)",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
