"""Compile swaptrace's numba kernels into their on-disk cache before the tests run.

numba compiles a kernel the first time a process calls it and keeps the machine code beside its source
(``swaptrace/kernels/*/__pycache__``, ``cache=True``). On a fresh clone every kernel is compiled by the first
test that calls it -- by both xdist workers at once when both reach it together -- which cost the parallel
pass about 70 s of CPU. ``make test`` runs this once first: small runs of the commands through the paths the
tests take (every residency policy and readahead mode, the ensemble, events, SHARDS, the SSD model's sampled
steady state and sequential preconditioning that the thesis study runs, the designs, the time model), in two processes
so both cores compile.

Usage: ``python tools/warm_kernels.py`` (prints what it ran and how long it took).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: two groups of commands, one per process; each group's commands run in order in one interpreter. The groups
#: share no kernel until the SSD group's pipeline run, which by then finds the other group's kernels cached: two
#: processes compiling one kernel at once both pay for it (the SSD group started with a pipeline run before,
#: compiled the generator and emulator beside the other process, and the step took 90 s rather than 40 s on 2 cores)
GROUPS = {
    "workload, emulator, MRC, time": [
        ["generate", "--preset", "tiny", "--steps", "4", "-o", "{w}/t.access.parquet"],
        ["generate", "--preset", "tiny", "--steps", "4", "--dedup", "step", "--reuse", "0.2",
         "-o", "{w}/d.access.parquet"],
        ["generate", "--preset", "tiny", "--steps", "3", "--runtime", "pytorch-cpu", "-o", "{w}/p.access.parquet"],
        *[["emulate", "{w}/t.access.parquet", "--memory-fraction", "0.3", "--policy", policy, "-o",
           f"{{w}}/{policy}.swapio.parquet"] for policy in ("linux", "lru", "clock")],
        *[["emulate", "{w}/t.access.parquet", "--memory-fraction", "0.3", "--readahead", mode, "-o",
           f"{{w}}/ra-{mode}.swapio.parquet"] for mode in ("none", "cluster")],
        ["emulate", "{w}/p.access.parquet", "--memory-fraction", "0.5", "-o", "{w}/p.swapio.parquet"],
        ["mrc", "{w}/t.access.parquet", "-o", "{w}/t.mrc.csv"],
        ["mrc", "{w}/t.access.parquet", "--sample-rate", "0.1", "-o", "{w}/s.mrc.csv"],
        ["time", "{w}/linux.swapio.parquet", "--device", "nvme-tlc"],
    ],
    "SSD model, designs": [
        ["ssd", "synth", "--pattern", "randwrite", "--bs", "4k", "--volume", "1x", "--device", "tiny",
         "--capacity", "64MiB", "--precondition", "seq"],
        ["run", "--preset", "tiny", "--steps", "3", "--memory-fraction", "0.3", "--no-fio", "--no-thesis",
         "--designs", "--ssd-capacity", "4GiB", "-o", "{w}/run"],
    ],
}

_RUN = """
import sys, click
from swaptrace.cli import cli
for args in {commands!r}:
    try:
        cli.main(args=args, standalone_mode=False)
    except (click.ClickException, SystemExit) as exc:
        sys.exit(f"warm: swaptrace {{' '.join(args)}} failed: {{exc}}")
"""


def main() -> int:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="swaptrace-warm-") as tmp:
        procs = []
        for i, (name, commands) in enumerate(GROUPS.items()):
            work = Path(tmp) / str(i)
            work.mkdir()
            filled = [[a.format(w=work) for a in c] for c in commands]
            procs.append((name, subprocess.Popen([sys.executable, "-c", _RUN.format(commands=filled)],
                                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
        failed = False
        took = []
        for name, p in procs:
            _, err = p.communicate()
            took.append(f"{name} {time.perf_counter() - t0:.0f} s")
            if p.returncode:
                failed = True
                print(f"warm: {name}: {err.strip().splitlines()[-1] if err.strip() else p.returncode}", file=sys.stderr)
    if failed:
        return 1
    print(f"setup: numba kernels compiled into their cache in {time.perf_counter() - t0:.0f} s ({'; '.join(took)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
