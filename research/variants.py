"""Score an emulator variant against kernel references already measured: seconds, no root, no capture.

``calibrate.py --band-captures`` keeps, for every budget it tried and its four neighbours (x0.98 ... x1.02),
the pages in and out of the kernel's median run (``band`` in ``calibration.json``). Each such file is one
set of references; the files of one session of captures (calibration and held-out budgets) together make
the 100 values the issue's target is judged on. This script emulates the same traces at the same budgets
with the default settings changed by ``--variant`` (fields of :class:`swaptrace.emulate.EmulatorConfig`,
as JSON) -- by default what ``emulate`` does, the default kernel profile's ensemble
(write costs x room offsets, :func:`swaptrace.emulate.load_profile`) and its run nearest their mean (``--single-run``: one run
per budget, the default before 0.6.0) -- and counts, per session, the values within ``--target`` -- what a full recalibration would say of
the variant's pages in and out, in a few seconds instead of ~6 minutes as root, so a rule can be tried
against every reference before it is built into the default.

``--ensemble-write-costs`` asks a question the kernel's spread raises: the default is deterministic and
lands on one side or the other of a burst that the kernel's runs take or skip from run to run. With a
list of write costs (device speeds), each budget is emulated once per cost and the run with the median
pages in is scored: what an emulator that models its uncertainty about the device would report.
``--ensemble-room-offsets`` adds the other uncertainty, the room the kernel's run actually had (the stored
captures' ``room_gain_bytes`` at one budget span up to 0.4 MiB, -0.7 ... -0.27 MiB, i.e. 0.3-0.5 % of the demo
budgets, and the emulator's pages in can move by 20 % between budgets 0.25 % apart): members are emulated at
the budget times ``1 + offset`` too, every combination with the write costs. ``--ensemble-pick`` says which value of the members is scored: ``median`` (the member with the median
pages in), ``mean`` (their mean pages in and out), or ``nearest`` (the member nearest that mean, a run that
could write its stream). The kernel's median run estimates its expected outcome, which the mean over the
members estimates too, where the median member still lands on one side of a burst.

::

    .venv/bin/python research/variants.py                                        # the default, both sessions
    .venv/bin/python research/variants.py --variant '{"write_cost": 3}'          # one field changed
    .venv/bin/python research/variants.py --ensemble-write-costs 3 4 5 6 8 -v    # every budget's errors
    .venv/bin/python research/variants.py --ensemble-write-costs 3 4 5 6 8 \
        --ensemble-room-offsets -0.005 0 0.005 --ensemble-pick nearest          # the run nearest 15's mean
    .venv/bin/python research/variants.py --after-fill                           # the step after memory fills

``--after-fill`` looks at the one step where the default errs systematically (research/notes/calibration.md, "The device's time in
the filling step"): for each budget whose ``fill`` entry keeps every kernel run's pages in at the step after
memory fills, it pools the runs of all the given files (both sessions) and sets the variant's pages in at
that step beside them, marking a budget where the variant first writes at another step than the kernel.

Traces come from ``--work`` (made there with calibrate's seed if missing); budgets, swap sizes and kernel
values come from the JSON files. Errors are (emulator - kernel) / kernel.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "analysis")]
import calibrate  # noqa: E402  (analysis/calibrate.py, a script, not a package)

RESULTS = Path(__file__).resolve().parent / "results"
#: the reference sets of each session of captures (research/notes/calibration.md, "A second session")
SESSIONS = {
    "first session": (RESULTS / "calibration.json", RESULTS / "holdout-tiny" / "calibration.json",
                      RESULTS / "holdout-demo" / "calibration.json"),
    "second session": tuple(RESULTS / "session-2" / d / "calibration.json"
                            for d in ("calibration", "holdout-tiny", "holdout-demo")),
}


@dataclasses.dataclass(frozen=True)
class Reference:
    """The kernel at one budget and its neighbours: median runs' pages in and out at each scale."""

    session: str
    preset: str
    steps: int
    fraction: float
    memory_bytes: int
    swap_bytes: int
    scales: tuple[float, ...]
    pages_in: tuple[int, ...]
    pages_out: tuple[int, ...]


def references(session: str, results: dict) -> list[Reference]:
    """The band references of one ``calibration.json`` (the default's rows with kernel captures at every scale).

    The trace length and the swap device's size are those of the point's captures (``captures``).
    """
    out = []
    for b in results.get("band", []):
        if b.get("setting") != "default" or "kernel_pages_in" not in b:
            continue
        steps, swap = _trace_and_device(results, b["preset"], b["fraction"], "band")
        out.append(Reference(session, b["preset"], steps, float(b["fraction"]), int(b["memory_bytes"]), swap,
                             calibrate.band_scales(float(b["band"])),
                             tuple(int(x) for x in b["kernel_pages_in"]),
                             tuple(int(x) for x in b["kernel_pages_out"])))
    return out


def captures_entry(results: dict, preset: str, fraction: float, what: str) -> dict:
    """A point's ``captures`` entry (its kernel runs); ``ValueError`` naming ``what`` needed it if there is none."""
    cap = next((c for c in results.get("captures", []) if (c["preset"], c["fraction"]) == (preset, fraction)), None)
    if cap is None:
        raise ValueError(f"{what} {preset} {fraction} has no captures entry")
    return cap


def _trace_and_device(results: dict, preset: str, fraction: float, what: str) -> tuple[int, int]:
    """The trace length and the swap device's size of a point's captures (its ``captures`` entry)."""
    cap = captures_entry(results, preset, fraction, what)
    m = re.match(rf"{re.escape(preset)}-(\d+)-", Path(cap["reference"]).name)
    steps = int(m.group(1)) if m else calibrate.DEFAULT_STEPS[preset]
    return steps, int(cap["runs"][0]["device_bytes"])


@dataclasses.dataclass(frozen=True)
class AfterFill:
    """The kernel's runs (all given files pooled) at the step after memory fills, at one budget."""

    preset: str
    steps: int
    fraction: float
    memory_bytes: int
    swap_bytes: int
    step: int  # index of the step after the fill, from the trace's first step
    kernel_pages_in: tuple[int, ...]  # at that step, every run, sorted
    kernel_totals: tuple[int, ...]  # in the whole trace, every run, sorted


def after_fill_references(results: Sequence[dict]) -> list[AfterFill]:
    """Every run's pages in at the step after the fill, pooled over ``results`` by budget and step.

    A budget whose kernel filled memory at another step in one file keeps a row of its own for it.
    """
    pooled: dict[tuple, tuple[list[int], list[int]]] = {}
    for res in results:
        for f in res.get("fill", []):
            steps, swap = _trace_and_device(res, f["preset"], f["fraction"], "fill")
            key = (f["preset"], steps, float(f["fraction"]), int(f["memory_bytes"]), swap, int(f["fill_step"]) + 1)
            after, totals = pooled.setdefault(key, ([], []))
            after.extend(int(x) for x in f["kernel_after_fill"])
            totals.extend(int(a) + int(r) for a, r in zip(f["kernel_after_fill"], f["kernel_rest"], strict=True))
    return [AfterFill(*key, tuple(sorted(a)), tuple(sorted(t))) for key, (a, t) in pooled.items()]


def pages_per_step(access: tuple, memory_bytes: int, swap_bytes: int, variant: dict) -> tuple[list[int], list[int]]:
    """One run of the default (changed by ``variant``; ``emulate --no-ensemble``) fed one step at a time: pages
    read and pages written in each step."""
    import numpy as np


    _, cols, step, counts, _ = access
    emu = calibrate.default_emulator(access, memory_bytes, swap_bytes, variant)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    pages_in, pages_out, before_in, before_out = [], [], 0, 0
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        for _ in emu.feed(cols["page"][lo:hi], cols["write"][lo:hi], step[lo:hi]):
            pass
        counters = emu.counters()
        now_in, now_out = counters.pages_in, counters.pages_out
        pages_in.append(now_in - before_in)
        pages_out.append(now_out - before_out)
        before_in, before_out = now_in, now_out
    return pages_in, pages_out


def pages_in_per_step(access: tuple, memory_bytes: int, swap_bytes: int, variant: dict) -> list[int]:
    """Pages read in each step of the trace (:func:`pages_per_step`)."""
    return pages_per_step(access, memory_bytes, swap_bytes, variant)[0]


def after_fill_markdown(refs: Sequence[AfterFill], work: Path, variant: dict, label: str) -> str:
    """Pages in at the step after the fill (the kernel's pooled runs: min / median / max) and in the whole trace
    (the runs' median), and the variant's."""
    import statistics

    traces: dict[tuple[str, int], tuple] = {}
    elsewhere: list[str] = []
    lines = [f"Pages in at the step after memory fills: the kernel's runs of every given file, and {label}.", "",
             "| preset | budget | step | kernel runs | min / median / max | emulator | whole trace: kernel median "
             "| emulator | err |", "|---|---|---|---|---|---|---|---|---|"]
    for r in refs:
        if (r.preset, r.steps) not in traces:
            traces[r.preset, r.steps] = calibrate.read_access(calibrate.trace_for(r.preset, r.steps, work))
        emu, emu_out = pages_per_step(traces[r.preset, r.steps], r.memory_bytes, r.swap_bytes, variant)
        k, whole = r.kernel_pages_in, statistics.median(r.kernel_totals)
        # the step after the kernel's fill need not follow the emulator's: say so rather than compare unlike steps
        emu_after = next((i + 1 for i, x in enumerate(emu_out) if x > 0), len(emu_out))
        mark = "" if emu_after == r.step else f" (fills before step {emu_after})"
        if mark:
            elsewhere.append(f"{r.preset} {r.fraction:.1%}: the emulator's step after the fill is {emu_after}, "
                             f"the kernel's {r.step}")
        lines.append(f"| {r.preset} | {r.fraction:.1%} | {r.step} | {len(k)} "
                     f"| {min(k)} / {statistics.median(k):g} / {max(k)} | {emu[r.step]}{mark} "
                     f"| {whole:g} | {sum(emu)} | {sum(emu) / whole - 1:+.1%} |")
    if elsewhere:
        lines += ["", "Memory fills at another step in the emulator than in the kernel, so its value above is not "
                  "that of its own step after the fill:", *(f"* {e}" for e in elsewhere)]
    return "\n".join(lines)


def median_member(members: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The ``(pages_in, pages_out)`` of the member with the median pages in (the lower middle one if even),
    as calibrate takes the kernel's median run."""
    ranked = sorted(members)
    return ranked[(len(ranked) - 1) // 2]


def mean_member(members: Sequence[tuple[int, int]]) -> tuple[float, float]:
    """The members' mean ``(pages_in, pages_out)``."""
    return (sum(m[0] for m in members) / len(members), sum(m[1] for m in members) / len(members))


def nearest_member(members: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The member nearest the members' mean, as ``emulate`` chooses the run it writes
    (:func:`swaptrace.emulate.nearest_member`)."""
    from swaptrace.emulate import nearest_member as nearest_index

    return members[nearest_index(members)]


PICKS = {"median": median_member, "mean": mean_member, "nearest": nearest_member}


def score(refs: Sequence[Reference], emulate: Callable[[Reference, int], tuple[int, int]],
          target: float = calibrate.TARGET) -> list[dict]:
    """Errors of ``emulate(ref, memory_bytes) -> (pages_in, pages_out)`` at every scale of every reference.

    A budget asked for twice (two sessions share their budgets) is emulated once.
    """
    cache: dict[tuple, tuple[int, int]] = {}
    rows = []
    for ref in refs:
        err_in, err_out = [], []
        for scale, k_in, k_out in zip(ref.scales, ref.pages_in, ref.pages_out, strict=True):
            memory = int(ref.memory_bytes * scale) // 4096 * 4096  # as calibrate.py's band
            key = (ref.preset, ref.steps, memory, ref.swap_bytes)
            if key not in cache:
                cache[key] = emulate(ref, memory)
            e_in, e_out = cache[key]
            err_in.append(e_in / k_in - 1)
            err_out.append(e_out / k_out - 1)
        within = sum(abs(e) <= target for e in err_in + err_out)
        rows.append({"session": ref.session, "preset": ref.preset, "fraction": ref.fraction, "scales": ref.scales,
                     "err_pages_in": err_in, "err_pages_out": err_out, "within": within,
                     "values": len(err_in) + len(err_out)})
    return rows


def totals(rows: Sequence[dict]) -> dict[str, dict]:
    """Per session: values within the target, values, and the worst |error|."""
    out: dict[str, dict] = {}
    for r in rows:
        t = out.setdefault(r["session"], {"within": 0, "values": 0, "worst": 0.0})
        t["within"] += r["within"]
        t["values"] += r["values"]
        t["worst"] = max(t["worst"], *(abs(e) for e in r["err_pages_in"] + r["err_pages_out"]))
    return out


def _percents(errors: Sequence[float]) -> str:
    return ", ".join(f"{e * 100:+.1f}" for e in errors)


def markdown(rows: Sequence[dict], label: str, verbose: bool = False, target: float = calibrate.TARGET) -> str:
    lines = []
    if verbose:
        lines += ["| session | preset | budget | err in (×0.98 … ×1.02) | err out | within |", "|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['session']} | {r['preset']} | {r['fraction']:.1%} | {_percents(r['err_pages_in'])} "
                         f"| {_percents(r['err_pages_out'])} | {r['within']} of {r['values']} |")
        lines.append("")
    for session, t in totals(rows).items():
        lines.append(f"{label}, {session}: {t['within']} of {t['values']} within ±{target:.0%} "
                     f"(worst |err| {t['worst']:.1%})")
    return "\n".join(lines)


def emulator_for(work: Path, variant: dict, write_costs: Sequence[int], room_offsets: Sequence[float] = (),
                 pick: str | None = None, single: bool = False) -> Callable[[Reference, int], tuple[float, float]]:
    """``emulate(ref, memory_bytes)`` for the default changed by ``variant``.

    With ``write_costs`` and/or ``room_offsets`` (fractions of the budget), an ensemble: one member per
    combination, at :func:`~swaptrace.emulate.member_budget_pages`, scored as ``pick`` (:data:`PICKS`,
    default median) chooses. Without them, what ``emulate`` does: the default ensemble and its nearest member
    where it applies (a device without a fixed write cost), unless ``single``, else one run.
    """
    from swaptrace import emulate as pagecache

    device = variant.get("writeback_completion", pagecache.DEFAULT_WRITEBACK_COMPLETION) == "device"
    if not (write_costs or room_offsets or single) and device and "write_cost" not in variant:
        ens = pagecache.load_profile().ensemble
        write_costs, room_offsets = ens.write_costs, ens.room_offsets
        pick = pick or "nearest"

    traces: dict[tuple[str, int], tuple] = {}  # each trace read once for all its budgets

    def load(ref: Reference) -> tuple:
        key = (ref.preset, ref.steps)
        if key not in traces:
            traces[key] = calibrate.read_access(calibrate.trace_for(ref.preset, ref.steps, work))
        return traces[key]

    def one(ref: Reference, memory: int, **extra) -> tuple[int, int]:
        access = load(ref)
        _, cols, step, _, _ = access
        emu = calibrate.default_emulator(access, memory, ref.swap_bytes, {**variant, **extra})
        for _ in emu.feed(cols["page"], cols["write"], step):
            pass
        counters = emu.counters()
        return counters.pages_in, counters.pages_out

    if not write_costs and not room_offsets:
        return one
    costs = [{"write_cost": c} for c in write_costs] or [{}]
    offsets = list(room_offsets) or [0.0]
    choose = PICKS[pick or "median"]

    def ensemble(ref: Reference, memory: int) -> tuple[float, float]:
        footprint = int(load(ref)[0]["footprint_pages"])
        budgets = [pagecache.member_budget_pages(memory // 4096, d, footprint) * 4096 for d in offsets]
        return choose([one(ref, m, **c) for m in budgets for c in costs])

    return ensemble


def parse_variant(text: str) -> dict:
    """``--variant`` as a dict of :class:`EmulatorConfig` fields; a one-line ``ValueError`` otherwise."""
    from swaptrace import EmulatorConfig

    try:
        variant = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--variant is not JSON: {e}") from None
    if not isinstance(variant, dict):
        raise ValueError("--variant must be a JSON object of emulator settings")
    known = {f.name for f in dataclasses.fields(EmulatorConfig)}
    unknown = sorted(set(variant) - known)
    if unknown:
        raise ValueError(f"--variant: unknown setting(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return variant


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", default="{}", help="emulator settings to change, as JSON (default: none)")
    ap.add_argument("--ensemble-write-costs", type=int, nargs="+", default=[], metavar="N",
                    help="emulate each budget once per write cost and score the run with the median pages in")
    ap.add_argument("--ensemble-room-offsets", type=float, nargs="+", default=[], metavar="F",
                    help="emulate each budget also at budget x (1 + F) for each F (fractions, |F| < 0.1)")
    ap.add_argument("--ensemble-pick", choices=sorted(PICKS),
                    help="score the member with the median pages in (default), the members' mean, or the member "
                         "nearest it")
    ap.add_argument("--single-run", action="store_true",
                    help="one run per budget, not emulate's default ensemble (the default before 0.6.0)")
    ap.add_argument("--results", type=Path, nargs="+", metavar="JSON",
                    help="calibration.json files to score against (default: both sessions' in research/results)")
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/swaptrace-calibration"),
                    help="folder of calibrate's traces (made there if missing)")
    ap.add_argument("--target", type=float, default=calibrate.TARGET)
    ap.add_argument("-v", "--verbose", action="store_true", help="every budget's errors, not only the totals")
    ap.add_argument("--after-fill", action="store_true",
                    help="pages in at the step after memory fills, against every kernel run, instead of the score")
    args = ap.parse_args(argv)
    try:
        variant = parse_variant(args.variant)
        if any(c <= 0 for c in args.ensemble_write_costs):
            raise ValueError("--ensemble-write-costs: write costs are positive integers")
        if any(not -0.1 < d < 0.1 for d in args.ensemble_room_offsets):
            raise ValueError("--ensemble-room-offsets: offsets are fractions of the budget between -0.1 and 0.1")
        ensemble = bool(args.ensemble_write_costs or args.ensemble_room_offsets)
        if args.after_fill and ensemble:
            raise ValueError("--after-fill emulates one device: leave out --ensemble-write-costs and "
                             "--ensemble-room-offsets")
        if args.single_run and ensemble:
            raise ValueError("--single-run is one run per budget: leave out --ensemble-write-costs and "
                             "--ensemble-room-offsets")
        if args.ensemble_pick and not ensemble:
            raise ValueError("--ensemble-pick needs --ensemble-write-costs or --ensemble-room-offsets")
        sets = ({str(p): (p,) for p in args.results} if args.results else SESSIONS)
        refs, loaded = [], []
        for session, files in sets.items():
            for f in files:
                try:
                    loaded.append(json.loads(Path(f).read_text()))
                    refs += references(session, loaded[-1])
                except (OSError, json.JSONDecodeError, KeyError, ValueError) as e:
                    raise ValueError(f"{f}: not a calibration.json with band captures ({e})") from None
        if not refs:
            raise ValueError("no band references with kernel captures in the given files (calibrate.py --band-captures)")
        try:
            fills = after_fill_references(loaded) if args.after_fill else []
        except KeyError as e:
            raise ValueError(f"a fill entry without {e}") from None
        if args.after_fill and not fills:
            raise ValueError("no fill entries in the given files (calibrate.py keeps them since 0.5.0)")
    except ValueError as e:
        print(f"variants.py: {e}", file=sys.stderr)
        return 2
    label = "default" + (f" + {json.dumps(variant)}" if variant else "") + (", one run" if args.single_run else "")
    if ensemble:
        over = [f"write costs {' '.join(map(str, args.ensemble_write_costs))}"] if args.ensemble_write_costs else []
        over += [f"room offsets {' '.join(f'{d:+g}' for d in args.ensemble_room_offsets)}"] \
            if args.ensemble_room_offsets else []
        label += f", {args.ensemble_pick or 'median'} of {' x '.join(over)}"
    from swaptrace import SwaptraceError

    try:
        if args.after_fill:
            print(after_fill_markdown(fills, args.work, variant, label))
            return 0
        rows = score(refs, emulator_for(args.work, variant, args.ensemble_write_costs, args.ensemble_room_offsets,
                                        args.ensemble_pick, args.single_run), args.target)
    except (OSError, SwaptraceError, TypeError, ValueError) as e:  # a trace not made or read; a bad setting value
        print(f"variants.py: {e}", file=sys.stderr)
        return 2
    print(markdown(rows, label, args.verbose, args.target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
