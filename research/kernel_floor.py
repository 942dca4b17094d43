"""The kernel scored as the emulator is: one of its runs against the other session's references.

The issue's target is the default emulator within ±15 % of the kernel's median run on pages in and out at
every budget tried: 100 values per session of captures, each the median of three to five runs
(``variants.py``). The kernel is not deterministic, and the emulator is one run of one model. This script
puts one kernel run where the emulator stands -- run *i* of the second session's captures at every budget,
scored against the first session's references, and the other way round -- with the same scoring code
(:func:`variants.score`). An emulator that reproduces the kernel as well as one run of it does would score
like these runs. The table's last row scores the other session's median run, which is what a model of the
kernel's median behaviour would at best predict.

The runs' pages in and out are read once from the captures (``--collect``; their folders are those the
``calibration.json`` files name) and kept in ``research/results/kernel-runs.json``, so the table is
reproduced without root or the captures. ``--collect`` checks that each budget's runs give the stored
reference (their median run, as ``calibrate.py`` takes it).

::

    .venv/bin/python research/kernel_floor.py              # from research/results/kernel-runs.json
    .venv/bin/python research/kernel_floor.py -v           # and every value outside the target
    .venv/bin/python research/kernel_floor.py --collect    # read the runs again from the captures
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "analysis")]
import calibrate  # noqa: E402  (analysis/calibrate.py and a sibling script, not packages)
import variants  # noqa: E402

RUNS = variants.RESULTS / "kernel-runs.json"
#: a capture of the replay itself (``x.kernel.swapio.parquet``, ``x.kernel2.swapio.parquet``, ...), not a
#: reclaim-traced or MLP one
RUN_NAME = re.compile(r"\.kernel\d*\.swapio\.parquet$")

Key = tuple[str, int, int]  # preset, trace steps, memory in bytes


def budget_memory(ref: variants.Reference, scale: float) -> int:
    """The budget of ``ref`` at ``scale``, in bytes, as ``calibrate.py``'s band (and ``variants.score``)."""
    return int(ref.memory_bytes * scale) // 4096 * 4096


def _run_values(path: Path) -> list[int]:
    from swaptrace.core.traceio import read_metadata

    summary = read_metadata(path)["summary"]
    return [int(summary["pages_in"]), int(summary["pages_out"])]


def collect(sessions: Mapping[str, Sequence[Path]]) -> dict:
    """Every kernel run's pages in and out at every band budget of every session.

    The runs at the budget itself are the ``captures`` entry's; those at its neighbours are the
    ``band/<tag>-<scale>.kernel*.swapio.parquet`` files beside them. Raises ``ValueError`` when a budget has no
    runs or its runs' median is not the stored reference.
    """
    out: dict[str, list[dict]] = {}
    for session, files in sessions.items():
        rows = out.setdefault(session, [])
        for f in files:
            results = json.loads(Path(f).read_text())
            for ref in variants.references(session, results):
                cap = variants.captures_entry(results, ref.preset, ref.fraction, "band")
                folder = Path(cap["runs"][0]["path"]).parent
                tag = f"{ref.preset}-{ref.steps}-{ref.fraction:g}"
                for scale, k_in, k_out in zip(ref.scales, ref.pages_in, ref.pages_out, strict=True):
                    if scale == 1.0:
                        runs = [[int(r["pages_in"]), int(r["pages_out"])] for r in cap["runs"]]
                    else:
                        paths = sorted(p for p in (folder / "band").glob(f"{tag}-{scale:g}.kernel*.swapio.parquet")
                                       if RUN_NAME.search(p.name))
                        runs = [_run_values(p) for p in paths]
                    if not runs:
                        raise ValueError(f"{tag} x{scale:g}: no kernel runs in {folder}")
                    if tuple(variants.median_member([tuple(r) for r in runs])) != (k_in, k_out):
                        raise ValueError(f"{tag} x{scale:g}: the runs in {folder} do not give the reference "
                                         f"stored in {f} ({k_in}, {k_out})")
                    rows.append({"preset": ref.preset, "steps": ref.steps, "fraction": ref.fraction,
                                 "scale": scale, "memory_bytes": budget_memory(ref, scale), "runs": runs})
    return {"sessions": out}


def dumps(data: dict) -> str:
    """``kernel-runs.json``'s text: one line per budget, so a diff shows which runs changed."""
    sessions = data["sessions"]
    lines = ['{"sessions": {']
    for i, (session, rows) in enumerate(sessions.items()):
        lines.append(f" {json.dumps(session)}: [")
        lines += [f"  {json.dumps(r)}" + ("," if j < len(rows) - 1 else "") for j, r in enumerate(rows)]
        lines.append(" ]" + ("," if i < len(sessions) - 1 else ""))
    return "\n".join(lines) + "\n}}\n"


def runs_by_budget(data: dict) -> dict[str, dict[Key, list[tuple[int, int]]]]:
    """``kernel-runs.json`` as ``{session: {(preset, steps, memory_bytes): [(pages_in, pages_out), ...]}}``.

    Raises ``ValueError`` unless it holds two sessions, each with runs.
    """
    sessions = data["sessions"]
    if len(sessions) != 2 or not all(sessions.values()):
        raise ValueError(f"the runs must come from exactly two sessions, each with runs (got {len(sessions)})")
    out: dict[str, dict[Key, list[tuple[int, int]]]] = {}
    for session, rows in sessions.items():
        table = out.setdefault(session, {})
        for r in rows:
            table[(r["preset"], int(r["steps"]), int(r["memory_bytes"]))] = [(int(a), int(b)) for a, b in r["runs"]]
    return out


def _other(sessions: Sequence[str], session: str) -> str:
    others = [s for s in sessions if s != session]
    if len(others) != 1:
        raise ValueError(f"the runs must come from exactly two sessions, not {len(sessions)}")
    return others[0]


def _members(table: Mapping[Key, Sequence[tuple[int, int]]], ref: variants.Reference,
             memory: int) -> Sequence[tuple[int, int]]:
    """The runs at ``ref``'s budget of ``memory`` bytes in ``table`` (the other session's)."""
    members = table.get((ref.preset, ref.steps, memory))
    if not members:
        raise ValueError(f"no kernel runs at {ref.preset} {ref.fraction:.1%}, {memory} bytes, in the other session")
    return members


def _pick(table: Mapping[Key, Sequence[tuple[int, int]]], ref: variants.Reference, memory: int,
          run: int) -> tuple[int, int]:
    members = _members(table, ref, memory)
    if run >= len(members):
        raise ValueError(f"run {run + 1} asked for; {ref.preset} {ref.fraction:.1%} at {memory} bytes has {len(members)}")
    return members[run]


def score_runs(refs: Sequence[variants.Reference], runs: Mapping[str, Mapping[Key, Sequence[tuple[int, int]]]],
               run: int | str | None, target: float = calibrate.TARGET) -> list[dict]:
    """Score the other session's ``run``-th run against each session's references.

    ``run`` is 0-based, ``"median"`` (the run with the median pages in, as calibrate takes its reference) or
    ``None`` (every run). Rows are those of :func:`variants.score`, one per reference; with ``run=None`` each
    value is scored once per run, so a row holds ``2 x runs`` values per scale.
    """
    rows = []
    for session in dict.fromkeys(r.session for r in refs):  # each session's references apart: score() caches by budget
        table = runs[_other(list(runs), session)]
        mine = [r for r in refs if r.session == session]
        if run == "median":
            rows += variants.score(
                mine, lambda ref, memory, table=table: variants.median_member(_members(table, ref, memory)), target)
            continue
        if run is not None:
            rows += variants.score(mine, lambda ref, memory, table=table: _pick(table, ref, memory, run), target)
            continue
        for ref in mine:  # every run, each against the reference: the pooled rate
            err_in, err_out = [], []
            for scale, k_in, k_out in zip(ref.scales, ref.pages_in, ref.pages_out, strict=True):
                for p_in, p_out in _members(table, ref, budget_memory(ref, scale)):
                    err_in.append(p_in / k_in - 1)
                    err_out.append(p_out / k_out - 1)
            rows.append({"session": ref.session, "preset": ref.preset, "fraction": ref.fraction, "scales": ref.scales,
                         "err_pages_in": err_in, "err_pages_out": err_out,
                         "within": sum(abs(e) <= target for e in err_in + err_out),
                         "values": len(err_in) + len(err_out)})
    return rows


def misses(refs: Sequence[variants.Reference], runs: Mapping[str, Mapping[Key, Sequence[tuple[int, int]]]],
           target: float = calibrate.TARGET) -> list[dict]:
    """Every run's value outside the target of the other session's reference, worst first."""
    out = []
    for ref in refs:
        table = runs[_other(list(runs), ref.session)]
        for scale, k_in, k_out in zip(ref.scales, ref.pages_in, ref.pages_out, strict=True):
            for i, (p_in, p_out) in enumerate(_members(table, ref, budget_memory(ref, scale))):
                for what, value, k in (("in", p_in, k_in), ("out", p_out, k_out)):
                    err = value / k - 1
                    if abs(err) > target:
                        out.append({"references": ref.session, "preset": ref.preset, "fraction": ref.fraction,
                                    "scale": scale, "pages": what, "run": i + 1, "value": value, "reference": k,
                                    "err": err})
    return sorted(out, key=lambda m: -abs(m["err"]))


def markdown(refs: Sequence[variants.Reference], runs: Mapping[str, Mapping[Key, Sequence[tuple[int, int]]]],
             target: float = calibrate.TARGET, verbose: bool = False) -> str:
    sessions = list(dict.fromkeys(r.session for r in refs))
    n_runs = min(len(m) for table in runs.values() for m in table.values())
    head = " | ".join(f"{s}'s references, {_other(list(runs), s)}'s run" for s in sessions)
    lines = [f"One kernel run scored as the emulator is (values within ±{target:.0%} of the other session's "
             "median run; worst |err|).", "", f"| run | {head} |", "|---" * (len(sessions) + 1) + "|"]

    def cells(rows: list[dict]) -> str:
        t = variants.totals(rows)
        return " | ".join(f"{t[s]['within']} of {t[s]['values']} ({t[s]['worst']:.1%})" for s in sessions)

    for i in range(n_runs):
        lines.append(f"| {i + 1} | {cells(score_runs(refs, runs, i, target))} |")
    lines.append(f"| every run | {cells(score_runs(refs, runs, None, target))} |")
    lines.append(f"| the median run | {cells(score_runs(refs, runs, 'median', target))} |")
    if verbose:
        lines += ["", "| references | preset | budget | scale | pages | run | kernel run | reference | err |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for m in misses(refs, runs, target):
            lines.append(f"| {m['references']} | {m['preset']} | {m['fraction']:.1%} | ×{m['scale']:g} | {m['pages']} "
                         f"| {m['run']} | {m['value']} | {m['reference']} | {m['err'] * 100:+.1f}% |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collect", action="store_true",
                    help="read every run from the captures named in the calibration.json files and write --runs")
    ap.add_argument("--runs", type=Path, default=RUNS, help=f"the runs' pages in and out (default: {RUNS})")
    ap.add_argument("--target", type=float, default=calibrate.TARGET)
    ap.add_argument("-v", "--verbose", action="store_true", help="also list every value outside the target")
    args = ap.parse_args(argv)
    from swaptrace import SwaptraceError

    try:
        refs = [ref for session, files in variants.SESSIONS.items() for f in files
                for ref in variants.references(session, json.loads(Path(f).read_text()))]
        if args.collect:
            data = collect(variants.SESSIONS)
            tmp = args.runs.with_name(args.runs.name + ".part")  # never a half-written file under the final name
            tmp.write_text(dumps(data))
            tmp.replace(args.runs)
            print(f"wrote {args.runs}", file=sys.stderr)
        else:
            try:
                data = json.loads(args.runs.read_text())
            except FileNotFoundError:
                raise ValueError(f"{args.runs} does not exist (make it with --collect)") from None
        runs = runs_by_budget(data)
        missing = sorted({r.session for r in refs} - set(runs))
        if missing:
            raise ValueError(f"{args.runs} has no runs of the {', '.join(missing)} (make it again with --collect)")
        print(markdown(refs, runs, args.target, args.verbose))
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError, SwaptraceError) as e:
        print(f"kernel_floor.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
