"""How fast the CLI answers: ``swaptrace --help``, ``--version``, every ``CMD --help`` and usage errors.

Each case is a fresh process (``.venv/bin/swaptrace ...``), timed whole (median of ``--repeats``) with its peak
RSS; the peer run side by side is ``python -c pass`` (the interpreter's own start), so the table shows what
swaptrace adds. The goal (issue 40): every case at most 0.15 s and 60 MB on this 2-core machine. What a case
loads is checked by tests/test_cli_startup.py; this benchmark only times it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _measure import child_run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXE = str(Path(sys.executable).with_name("swaptrace"))
GOAL_S, GOAL_MB = 0.15, 60.0

CASES = {
    "--help": ["--help"],
    "--version": ["--version"],
    "emulate --help": ["emulate", "--help"],
    "ssd replay --help": ["ssd", "replay", "--help"],
    "fio run --help": ["fio", "run", "--help"],
    "generate --help": ["generate", "--help"],
    "run --help": ["run", "--help"],
    "usage: emulate --memory 0 (no such trace)": ["emulate", "--memory", "0", "/nonexistent/x.parquet"],
    "usage: unknown command": ["no-such-command"],
    "usage: generate --steps -1": ["generate", "--preset", "tiny", "--steps", "-1", "-o", "/tmp/x.parquet"],
}


def measure(args: list[str], repeats: int) -> tuple[float, float]:
    """Median wall seconds and the largest peak RSS (MiB) of ``repeats`` runs (a usage error exits 2: fine)."""
    runs = []
    for _ in range(repeats):
        runs.append(child_run(["sh", "-c", '"$@" >/dev/null 2>&1; exit 0', "sh", *args]))
    return statistics.median(t for t, _ in runs), max(m for _, m in runs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    ap.add_argument("--repeats", type=int, default=None)
    args = ap.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 7)
    base_s, base_mb = measure([sys.executable, "-c", "pass"], repeats)
    print(f"load average at the start {os.getloadavg()[0]:.2f}; median of {repeats} runs; peer: python -c pass "
          f"{base_s * 1e3:.0f} ms, {base_mb:.0f} MB\n")
    print("| case | median (s) | peak RSS (MB) | over `python -c pass` (s) | goal (<= 0.15 s, 60 MB) |")
    print("|---|---:|---:|---:|---|")
    worst = 0.0
    for name, case in CASES.items():
        s, mb = measure([EXE, *case], repeats)
        worst = max(worst, s)
        ok = "met" if s <= GOAL_S and mb <= GOAL_MB else "MISSED"
        print(f"| `swaptrace {name}` | {s:.3f} | {mb:.0f} | {s - base_s:.3f} | {ok} |")
    print(f"\nslowest case {worst:.3f} s; load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
