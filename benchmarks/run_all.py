"""Run every ``benchmarks/bench_*.py`` in turn and print their tables (``make bench``).

Each benchmark is its own process (so peak-memory figures are its own) and
prints a markdown table of medians and ratios against the peer it runs side
by side. ``--quick`` is passed through for a fast smoke run. The combined
output is also written to ``benchmarks/results/latest.md``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer repeats")
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all), e.g. generate emulate")
    args = parser.parse_args()
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.names:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in args.names]
    sections, failed = [], []
    for script in scripts:
        print(f"## {script.stem}", flush=True)
        start = time.perf_counter()
        cmd = [sys.executable, str(script)] + (["--quick"] if args.quick else [])
        proc = subprocess.run(cmd, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        print(proc.stdout, flush=True)
        if proc.returncode != 0:
            failed.append(script.stem)
            print(proc.stderr[-3000:], file=sys.stderr)
        sections.append(f"## {script.stem} ({elapsed:.0f} s)\n\n{proc.stdout}")
    out = HERE / "results" / "latest.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(sections))
    print(f"wrote {out}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
