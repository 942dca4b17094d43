"""Does the kernel swap differently in the same steps when the replay is longer? Captures taken in turn.

The calibration compared captures of a 20-step and a 60-step ``demo`` replay taken hours apart and found
the kernel reading more, in the steps the two traces share, in the longer one. Captures hours apart also
differ in what else the machine (and the disk under the loop device) is doing, so this script takes them
in turn: each round captures every trace length once at the same budget (the order alternating from
round to round), and the comparison is made over the steps all lengths share. Per run it records pages
in over those steps and at the step after memory fills, the kernel's active list as that step ends, and
the loop device's mean write time (``kernel.loop_stat_delta``). The default emulator is run beside it
on each trace.

Writes ``interleave.md`` and ``interleave.json`` into the output folder::

    sudo .venv/bin/python research/interleave.py --preset demo --steps 20 60 --fraction 0.2 --rounds 5 \\
        -o research/results/interleave/demo-0.2      # ~2 min on 2 cores

Traces are those of ``calibrate.py`` (same ``--work`` folder, same seed); the captures here are never
reused (``interleave-*`` names), since a cached capture is one taken at another time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "analysis")]
import calibrate  # noqa: E402  (analysis/calibrate.py, a script, not a package)


def shared_steps_pages_in(profile, steps: int) -> int:
    """Pages in over a stream's first ``steps`` steps (the steps every trace length has).

    ``profile``: the stream's :func:`swaptrace.compare.stream_profile`.
    """
    return int(profile.pages_in_per_step[:steps].sum())


def run_facts(path: Path, steps: int, fill: int | None = None) -> dict:
    """What one stream (kernel or emulator) did over the shared steps and at the step after memory fills."""
    from swaptrace import open_trace
    from swaptrace.compare import stream_profile

    profile = stream_profile(path)  # read once, for both counts
    split = calibrate.fill_split(path, fill, profile=profile)
    facts = {"pages_in_shared": shared_steps_pages_in(profile, steps), "fill_step": split["fill_step"],
             "after_fill": split["after_fill"]}
    meta = open_trace(path, kind="swapio").meta
    k = meta.get("kernel")
    if k is not None:
        after = split["fill_step"] + 1
        lists = k.get("step_lists") or {}
        active = lists.get("active_anon_pages") or []
        facts["active_after_fill"] = int(active[after]) if after < len(active) else None
        dev = k.get("loop_stat_delta") or {}
        facts["write_ms_per_request"] = (dev["write_ms"] / dev["write_ios"]
                                         if dev.get("write_ios") and "write_ms" in dev else None)
        facts["loadavg_start"] = k.get("loadavg_start")
    return facts


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def markdown(runs: list[dict], emulator: dict, preset: str, fraction: float, memory: int, shared: int) -> str:
    from swaptrace.core.units import format_bytes

    lengths = sorted({r["steps"] for r in runs})
    lines = [f"{preset}, budget {format_bytes(memory)} ({fraction:g} of the footprint); kernel captures taken in "
             f"turn, one per trace length a round. Pages in over the first {shared} steps (the steps every length "
             "shares) and at the step after memory fills; the kernel's active list as that step ends; the loop "
             "device's mean write time.", "",
             "| round | steps | pages in, first steps | after the fill (step) | active list then | ms a write | load |",
             "|---|---|---|---|---|---|---|"]
    def cell(x, fmt="{}"):
        return "-" if x is None else fmt.format(x)

    for r in runs:
        lines.append(f"| {r['round']} | {r['steps']} | {r['pages_in_shared']} | {r['after_fill']} ({r['fill_step'] + 1}) "
                     f"| {cell(r.get('active_after_fill'))} | {cell(r.get('write_ms_per_request'), '{:.1f}')} "
                     f"| {cell(r.get('loadavg_start'), '{:.2f}')} |")
    lines += ["", "| steps | kernel: pages in, first steps (median; min … max) | kernel: after the fill (median; "
              "min … max) | default: first steps | default: after the fill |", "|---|---|---|---|---|"]
    for n in lengths:
        mine = [r for r in runs if r["steps"] == n]
        a = [r["pages_in_shared"] for r in mine]
        b = [r["after_fill"] for r in mine]
        e = emulator[str(n)]
        lines.append(f"| {n} | {_median(a):.0f} ({min(a)} … {max(a)}) | {_median(b):.0f} ({min(b)} … {max(b)}) "
                     f"| {e['pages_in_shared']} | {e['after_fill']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="demo")
    ap.add_argument("--steps", nargs="+", type=int, default=[20, 60], help="trace lengths to take in turn")
    ap.add_argument("--fraction", type=float, default=0.2, help="budget, a fraction of the footprint")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/swaptrace-calibration"),
                    help="traces (shared with calibrate.py) and these captures")
    ap.add_argument("-o", "--out", type=Path, default=Path("research/results/interleave"))
    args = ap.parse_args(argv)
    if args.rounds < 1 or len(args.steps) < 2 or min(args.steps) < 2 or not 0 < args.fraction <= 1:
        ap.error("give at least two trace lengths of 2 or more steps, a fraction in (0, 1] and one round or more")

    from swaptrace import capture_trace, open_trace

    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    traces = {n: calibrate.trace_for(args.preset, n, args.work) for n in args.steps}
    footprints = {int(open_trace(t).meta["footprint_bytes"]) for t in traces.values()}
    if len(footprints) != 1:
        ap.error(f"the traces' footprints differ ({sorted(footprints)}): the budgets would not be the same")
    memory = int(footprints.pop() * args.fraction) // 4096 * 4096
    shared = min(args.steps)

    emulator, device_bytes = {}, None
    runs = []
    for r in range(args.rounds):
        order = args.steps if r % 2 == 0 else args.steps[::-1]
        for n in order:
            out = args.work / f"interleave-{args.preset}-{n}-{args.fraction:g}.r{r}.kernel.swapio.parquet"
            t0 = time.monotonic()
            capture_trace(traces[n], out, memory_bytes=memory, unlimited_run=False, force=True)
            device_bytes = int(open_trace(out, kind="swapio").meta["device_bytes"])
            facts = {"round": r, "steps": n, "path": str(out), **run_facts(out, shared)}
            runs.append(facts)
            print(f"  round {r}, {n} steps: {facts['pages_in_shared']} pages in over {shared} steps, "
                  f"{facts['after_fill']} after the fill ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    for n, trace in traces.items():
        out = calibrate.emulate_stream(trace, memory, *calibrate.DEFAULT,
                                       args.work / f"interleave-{args.preset}-{n}-{args.fraction:g}.default.swapio.parquet",
                                       device_bytes)
        emulator[str(n)] = run_facts(out, shared)

    text = markdown(runs, emulator, args.preset, args.fraction, memory, shared)
    (args.out / "interleave.md").write_text(text)
    (args.out / "interleave.json").write_text(json.dumps(
        {"preset": args.preset, "fraction": args.fraction, "memory_bytes": memory, "shared_steps": shared,
         "runs": runs, "default": emulator}, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
