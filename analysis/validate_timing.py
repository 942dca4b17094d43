"""Validate the time model (swaptrace.timing) against the real kernel.

Captures each (shape, budget) point of :data:`POINTS` with ``swaptrace capture --compute mlp`` (root) at
least twice, emulates the same trace at the same budget, runs the time model on the emulated stream (and,
to separate the emulator's error from the time model's, on the kernel's own stream) with this disk's
measured profile and the measured compute time, and writes predicted vs measured slowdown and mean step
time per point, with the per-step correlation, to ``analysis/results/timing/``.

Usage (root, from the repository; captures are cached under ``traces/timing-validation``)::

    sudo .venv/bin/python analysis/validate_timing.py capture          # the captures (minutes)
    .venv/bin/python analysis/validate_timing.py profile               # fio run on /tmp + profile
    .venv/bin/python analysis/validate_timing.py predict -o analysis/results/timing

Which points chose anything: see :data:`TUNING` (the ``tiny`` points) -- the other shapes are held out.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "traces" / "timing-validation"
SWAPTRACE = str(ROOT / ".venv" / "bin" / "swaptrace")
STEPS = 20

#: shape -> (preset name or spec TOML, budgets as fractions of the footprint)
SHAPES = {
    "tiny": ("tiny", (0.15, 0.35, 0.6)),
    "few-sgd": (str(ROOT / "analysis" / "timing_specs" / "few-sgd.toml"), (0.1, 0.25, 0.4, 0.6)),
    "adam-flat": (str(ROOT / "analysis" / "timing_specs" / "adam-flat.toml"), (0.1, 0.25, 0.4, 0.6)),
}
#: the points that were looked at while choosing how the model maps a device onto the stream;
#: every other point is held out (no constant or modelling choice was made on it)
TUNING = {("tiny", 0.35)}
RUNS = 2


def trace_path(shape: str) -> Path:
    return WORK / f"{shape}.access.parquet"


def capture_path(shape: str, frac: float, run: int) -> Path:
    return WORK / f"{shape}-{frac:.2f}-r{run}.kernel.swapio.parquet"


def sh(*args: str) -> None:
    print("+", " ".join(args), flush=True)
    subprocess.run(args, check=True)


def do_capture(args) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    for shape, (spec, _fracs) in SHAPES.items():
        tp = trace_path(shape)
        if not tp.exists():
            flag = "--spec" if spec.endswith(".toml") else "--preset"
            sh(SWAPTRACE, "generate", flag, spec, "--steps", str(STEPS), "--seed", "0", "-o", str(tp))
    for run in range(args.runs):  # runs interleaved, so a busy spell of the machine hits one run of a point
        for shape, (_spec, fracs) in SHAPES.items():
            for frac in fracs:
                out = capture_path(shape, frac, run)
                if out.exists():
                    continue
                sh(SWAPTRACE, "capture", str(trace_path(shape)), "--memory-fraction", str(frac), "--compute", "mlp",
                   "--timeout", "900", "-o", str(out))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("--runs", type=int, default=RUNS)
    args = ap.parse_args(argv)
    if args.cmd == "capture":
        do_capture(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
