"""What every benchmark measures the same way: median wall time, and a command's peak RSS in a child."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


def median_time(fn, repeats: int = 3):
    """``(median seconds, the last result)`` of ``repeats`` calls of ``fn``."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def child_run(args: list[str]) -> tuple[float, float]:
    """``(wall seconds, peak RSS in MiB)`` of one command, measured by a fresh parent whose only child it is."""
    probe = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", probe, *args], check=True, capture_output=True, text=True)
    seconds, rss_kib = out.stdout.split()[-2:]
    return float(seconds), int(rss_kib) / 1024.0


def child_peak_rss_mib(args: list[str]) -> float:
    """Peak RSS of one command, measured by a fresh parent whose only child it is (MiB)."""
    return child_run(args)[1]
