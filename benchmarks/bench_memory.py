"""Peak memory of ``swaptrace emulate`` and ``swaptrace mrc`` against trace length (should be flat).

Generates ``criteo-kaggle`` traces of two lengths (default 4,000 and 40,000 steps: about 33 M and 330 M
accesses; kept in ``--folder`` and reused), then runs each command (``emulate`` at half the footprint with
its default ensemble and with ``--no-ensemble``) once per trace in a child process and
reads its peak RSS (``getrusage(RUSAGE_CHILDREN)`` of a parent whose only child it is). Prints a markdown
table with the long/short ratio; the target is within 10 % (ratio <= 1.10).

Usage::

    python benchmarks/bench_memory.py [--steps 4000 40000] [--folder /tmp/swaptrace-bench-memory] [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from _measure import child_peak_rss_mib  # noqa: E402  (benchmarks/, the script's folder)

PRESET = "criteo-kaggle"


def swaptrace_exe() -> str:
    return str(Path(sys.executable).with_name("swaptrace"))




def trace(steps: int, folder: Path) -> Path:
    path = folder / f"{PRESET}-{steps}.access.parquet"
    if not path.exists():
        print(f"generating {path} ...", file=sys.stderr)
        subprocess.run([swaptrace_exe(), "generate", "--preset", PRESET, "--steps", str(steps), "-o", str(path)],
                       check=True, stdout=subprocess.DEVNULL)
    return path


def measure(steps: int, folder: Path) -> dict[str, float]:
    from swaptrace import open_trace

    t = trace(steps, folder)
    exe = swaptrace_exe()
    out = str(folder / f"{t.stem}.swapio.parquet")
    emulate = child_peak_rss_mib([exe, "emulate", str(t), "--memory-fraction", "0.5", "--force", "-o", out])
    single = child_peak_rss_mib([exe, "emulate", str(t), "--memory-fraction", "0.5", "--no-ensemble", "--force",
                                 "-o", out])
    mrc = child_peak_rss_mib([exe, "mrc", str(t), "--force", "-o", str(folder / f"{t.stem}.mrc.csv")])
    return {"steps": steps, "accesses": open_trace(t).num_rows, "emulate": emulate, "single": single, "mrc": mrc}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs=2, default=[4000, 40000])
    ap.add_argument("--folder", type=Path, default=Path("/tmp/swaptrace-bench-memory"))
    ap.add_argument("--quick", action="store_true", help="400 and 4,000 steps")
    args = ap.parse_args()
    steps = [400, 4000] if args.quick else args.steps
    args.folder.mkdir(parents=True, exist_ok=True)
    rows = [measure(s, args.folder) for s in steps]
    print(f"## peak RSS against trace length ({PRESET}, emulate at half the footprint)\n")
    print("| steps | page accesses | peak RSS emulate (MiB) | emulate --no-ensemble (MiB) | peak RSS mrc (MiB) |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['steps']:,} | {r['accesses']:,} | {r['emulate']:.0f} | {r['single']:.0f} | {r['mrc']:.0f} |")
    short, long = rows
    print(f"| ratio ({long['steps'] // short['steps']}x the steps) | {long['accesses'] / short['accesses']:.1f}x | "
          f"{long['emulate'] / short['emulate']:.3f} | {long['single'] / short['single']:.3f} | "
          f"{long['mrc'] / short['mrc']:.3f} |")


if __name__ == "__main__":
    main()
