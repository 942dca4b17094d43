"""Run every ``benchmarks/bench_*.py`` in turn and print their tables (``make bench``).

Each benchmark is its own process (so peak-memory figures are its own) and
prints a markdown table of medians and ratios against the peer it runs side
by side. ``--quick`` is passed through for a fast smoke run. The combined
output is also written to ``benchmarks/results/latest.md`` and, for a full run
of every benchmark, into the "Latest run" section of ``docs/benchmarks.md``
(between its ``bench:begin`` and ``bench:end`` markers), with the date, the
machine and its load average, so the docs always show what ``make bench`` last measured.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
DOCS = HERE.parent / "docs" / "benchmarks.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def update_docs(sections: list[str], docs: Path = DOCS) -> bool:
    """Replace the text between the markers of ``docs`` with this run's tables; False if the markers are missing."""
    text = docs.read_text()
    if BEGIN not in text or END not in text:
        return False
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    head = (f"Measured by `make bench` on {time.strftime('%Y-%m-%d %H:%M')}, {platform.machine()}, "
            f"{os.cpu_count()} CPUs, load average at the end {load} (1/5/15 min).\n\n")
    body = "\n".join(s.replace("\n## ", "\n### ").replace("## bench_", "### bench_", 1) for s in sections)
    before, rest = text.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    tmp = docs.with_suffix(".md.tmp")
    tmp.write_text(f"{before}{BEGIN}\n{head}{body}\n{END}{after}")
    tmp.replace(docs)
    return True


#: a benchmark starts only below this 1-minute load average (2 cores: a second process running halves a timing)
QUIET_LOAD = 0.5


def wait_for_quiet(limit: float = QUIET_LOAD, patience_s: float = 120.0, poll_s: float = 5.0) -> float:
    """The 1-minute load average once it is below ``limit``, or after ``patience_s`` seconds of waiting."""
    deadline = time.monotonic() + patience_s
    load = os.getloadavg()[0]
    while load > limit and time.monotonic() < deadline:
        time.sleep(poll_s)
        load = os.getloadavg()[0]
    return load


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer repeats")
    parser.add_argument("--require-idle", action="store_true",
                        help=f"refuse to measure while the load average is above {QUIET_LOAD} (after waiting 2 min)")
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all), e.g. generate emulate")
    args = parser.parse_args()
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.names:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in args.names]
    sections, failed = [], []
    noisy = []
    for script in scripts:
        load = wait_for_quiet()
        if load > QUIET_LOAD:
            if args.require_idle:
                print(f"refused: load average {load:.2f} > {QUIET_LOAD} before {script.stem}; stop other work and "
                      "rerun", file=sys.stderr)
                return 2
            noisy.append(script.stem)
            print(f"warning: load average {load:.2f} > {QUIET_LOAD}: {script.stem}'s times are not an idle "
                  "machine's", file=sys.stderr)
        print(f"## {script.stem} (load {load:.2f} at the start)", flush=True)
        start = time.perf_counter()
        cmd = [sys.executable, str(script)] + (["--quick"] if args.quick else [])
        proc = subprocess.run(cmd, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        print(proc.stdout, flush=True)
        if proc.returncode != 0:
            failed.append(script.stem)
            print(proc.stderr[-3000:], file=sys.stderr)
        end_load = os.getloadavg()[0]
        flag = "" if max(load, end_load) <= QUIET_LOAD else " -- NOT IDLE, times are not comparable"
        sections.append(f"## {script.stem} ({elapsed:.0f} s; load {load:.2f} at the start, {end_load:.2f} at the "
                        f"end{flag})\n\n{proc.stdout}")
    out = HERE / "results" / "latest.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(sections))
    print(f"wrote {out}")
    if not args.quick and not args.names and update_docs(sections):
        print(f"updated {DOCS}")
    if noisy:
        print(f"measured above load {QUIET_LOAD}: {', '.join(noisy)} (their sections say so)", file=sys.stderr)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
