"""Calibrate the emulator against the real kernel: which settings match best, and how well?

For each preset and memory budget (a fraction of the trace's footprint) this
captures the trace ``--runs`` times under the real kernel
(``swaptrace.capture``, root only): the kernel is not deterministic -- its
page counts at one budget differ by up to ~20 % between runs -- so the
reference is the run with the median pages in, and the other runs appear as
``kernel rerun`` rows (the kernel's own spread, the floor for any model).
Then it emulates the trace with every policy x readahead mode and with the
:data:`ABLATIONS` of the default (other write costs and writeback rules,
exact statistics, no zero page, the 0.4.0 and 0.3.0 defaults; writeback
lags with ``--lags``), and compares each stream with the
reference (``swaptrace.compare``): relative error on pages in and pages out
and on minor faults, KS distance of read and write request sizes. ``--band``
also runs the default at budgets within a few percent of each point, to show
how much the emulator itself moves with the budget; ``--band-captures`` also
captures the kernel once at each of those budgets and compares there (the
kernel moves with the budget too). ``--trace-reclaim`` makes
one more capture per point with the kernel's reclaim tracepoints
(:mod:`swaptrace.capture.reclaim`) and sets its reclaim counters (calls, pages
scanned, freed, activated, deactivated) beside the default emulator's, in
total and per step (``reclaim.md``, ``calibration.json``).

Writes ``calibration.csv`` (one row per preset/budget/setting),
``calibration.md`` (the same as a table, a ranking of the settings by their
mean and worst error over all budgets, and the band table) and
``calibration.json`` into the output folder. Regenerate the tables of research/notes/calibration.md with::

    sudo .venv/bin/python analysis/calibrate.py -o research/results   # 5 runs per budget: ~10 min; cached: ~6 min
    sudo .venv/bin/python analysis/calibrate.py --quick --runs 3      # tiny only, 2 budgets, ~3 min

Traces and captures are cached in ``--work`` (``*.kernel.swapio.parquet``,
``*.kernel2.swapio.parquet``, ...) and reused unless ``--recapture`` is given.
Every capture reads the cgroup's ``memory.stat`` as each step ends (its list
sizes are recorded), which also flushes the memcg statistics reclaim reads:
the kernel's reclaim then sees them refreshed once per step, on any machine,
rather than every 2 s of wall time.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

from swaptrace import compare_streams
from swaptrace.core.units import format_bytes

POLICIES = ("lru", "clock", "linux")
READAHEADS = ("vma", "cluster", "none")
DEFAULT = ("linux", "vma")
#: the 0.4.0 default: writes complete as the priority level after theirs ends, exact memcg statistics
PREVIOUS = {"writeback_completion": "next-level", "stats_flush_steps": 0}
#: the 0.3.0 default: 32-page rounds, writes complete after 640 isolated pages (or at a read)
ROUNDS_030 = {"scan_priorities": False, "writeback_completion": "lag", "writeback_lag": 640, "stats_flush_steps": 0}
#: ablations of the default (linux, vma: priority levels, writes on a device of write cost 4, statistics
#: flushed every step)
ABLATIONS = (
    ("linux, the 0.4.0 default (writes by next level, exact statistics)", PREVIOUS),
    ("linux, 32-page rounds, lag 640 (the 0.3.0 default)", ROUNDS_030),
    ("linux, exact statistics", {"stats_flush_steps": 0}),
    ("linux, write cost 3", {"write_cost": 3}),
    ("linux, write cost 5", {"write_cost": 5}),
    ("linux, write cost 6", {"write_cost": 6}),
    ("linux, write cost 8", {"write_cost": 8}),
    ("linux, write cost 12", {"write_cost": 12}),
    ("linux, write cost 16", {"write_cost": 16}),
    ("linux, exact statistics, write cost 12", {"stats_flush_steps": 0, "write_cost": 12}),
    ("linux, writes per level", {"writeback_completion": "level"}),
    ("linux, writes by next level", {"writeback_completion": "next-level"}),
    ("linux, writes per call", {"writeback_completion": "call"}),
    ("linux, lag 320", {"writeback_completion": "lag", "writeback_lag": 320}),
    ("linux, synchronous writes (lag 0)", {"writeback_completion": "lag", "writeback_lag": 0}),
    ("linux, no zero page", {"zero_page": False}),
)
#: settings also run at the neighbouring budgets of ``--band`` (the default always is)
BAND_SETTINGS = (("linux, the 0.4.0 default (writes by next level, exact statistics)", PREVIOUS),
                 ("linux, exact statistics", {"stats_flush_steps": 0}),
                 ("linux, write cost 3", {"write_cost": 3}),
                 ("linux, write cost 6", {"write_cost": 6}),
                 ("linux, write cost 8", {"write_cost": 8}),
                 ("linux, writes per call", {"writeback_completion": "call"}))
DEFAULT_STEPS = {"tiny": 50, "demo": 20}
#: budgets as fractions of the footprint; demo's 20 steps touch only ~29% of its footprint, so its budgets are lower
DEFAULT_FRACTIONS = {"tiny": (0.2, 0.4, 0.6), "demo": (0.1, 0.15, 0.2)}
#: the issue's target: the default within this relative error on pages in and out at every budget tried
TARGET = 0.15


#: a capture whose model ended up with more room than this beyond its budget (or 0.5 % of it) is made again:
#: near a cyclic workload's knee a few hundred KiB move pages in by several percent (kernel.room_gain_bytes)
ROOM_GAIN_LIMIT_BYTES = 256 << 10
CAPTURE_ATTEMPTS = 3


def trace_for(preset: str, steps: int, folder: Path) -> Path:
    """The access trace of ``steps`` steps of ``preset`` (seed 0) in ``folder``, generated once and reused.

    Parameters
    ----------
    preset : str
        A preset name (``tiny``, ``demo``, ...).
    steps : int
        Training steps.
    folder : pathlib.Path
        The cache folder (``--work``); the file is ``PRESET-STEPS.access.parquet``.

    Returns
    -------
    pathlib.Path
        The trace, written by :func:`swaptrace.generate_trace` if it was not there.
    """
    from swaptrace import generate_trace

    path = folder / f"{preset}-{steps}.access.parquet"
    if not path.exists():
        generate_trace(preset, path, steps=steps, seed=0)
    return path


def _capture(trace: Path, memory_bytes: int, out: Path, again: bool, compute: str | None,
             unlimited_run: bool = True, trace_reclaim: bool = False) -> dict:
    from swaptrace import capture_trace, open_trace

    if again or not out.exists():
        for attempt in range(1, CAPTURE_ATTEMPTS + 1):
            t0 = time.monotonic()
            capture_trace(trace, out, memory_bytes=memory_bytes, compute=compute, unlimited_run=unlimited_run,
                    trace_reclaim=trace_reclaim, force=True)
            gain = open_trace(out, kind="swapio").meta["kernel"].get("room_gain_bytes") or 0
            print(f"  captured {out.name} in {time.monotonic() - t0:.0f} s (model room {gain / 1024:+.0f} KiB)",
                  file=sys.stderr)
            if gain <= max(ROOM_GAIN_LIMIT_BYTES, memory_bytes // 200):
                break
            print(f"  the model had {gain / 1024:.0f} KiB more than its budget: capturing again (attempt "
                  f"{attempt + 1} of {CAPTURE_ATTEMPTS})" if attempt < CAPTURE_ATTEMPTS else
                  "  kept after the last attempt", file=sys.stderr)
    meta = open_trace(out, kind="swapio").meta
    return {"path": str(out), "slowdown": meta["kernel"].get("slowdown"),
            "lost_events": meta["kernel"].get("lost_events", 0), "device_bytes": int(meta["device_bytes"]),
            "pages_in": int(meta["summary"]["pages_in"]), "pages_out": int(meta["summary"]["pages_out"]),
            "baseline_bytes": int(meta["kernel"]["baseline_bytes"]), "room_gain_bytes": meta["kernel"].get("room_gain_bytes")}


def _captures(trace: Path, memory_bytes: int, work: Path, tag: str, runs: int, again: bool,
              compute: str | None, unlimited_first: bool = True) -> tuple[Path, list[dict]]:
    """``runs`` captures of one budget (the first also replays without a limit); the median one is the reference.

    The median is taken over pages in, the quantity with the widest run-to-run spread; with an even number
    of runs the lower middle run is taken.
    """
    infos = []
    for i in range(1, runs + 1):
        path = work / (f"{tag}.kernel.swapio.parquet" if i == 1 else f"{tag}.kernel{i}.swapio.parquet")
        infos.append(_capture(trace, memory_bytes, path, again, compute, unlimited_run=unlimited_first and i == 1))
    ranked = sorted(infos, key=lambda c: c["pages_in"])
    return Path(ranked[(len(ranked) - 1) // 2]["path"]), infos


def emulate_stream(trace: Path, memory_bytes: int, policy: str, readahead: str, out: Path, swap_bytes: int,
                   **options) -> Path:
    """The emulator's stream of ``trace`` at a capture's budget and swap size, as ``swaptrace emulate`` makes it.

    Parameters
    ----------
    trace : pathlib.Path
        An access trace.
    memory_bytes : int
        The budget, bytes.
    policy, readahead : str
        The residency policy and readahead mode (:data:`DEFAULT` is the default's).
    out : pathlib.Path
        The swapio file to write (replaced if it exists).
    swap_bytes : int
        The swap device's size, bytes: the capture's.
    options
        Other :func:`swaptrace.emulate_trace` options; ``ensemble`` is the command's default (None) unless given.

    Returns
    -------
    pathlib.Path
        ``out``.
    """
    from swaptrace import emulate_trace

    # the capture's swap device size, not emulate's default (footprint + 1 page): vm_swap_full() (swap more than
    # half used) frees slots on swap-in, so a device twice as small changes which evictions need a write
    emulate_trace(trace, out, memory_bytes=memory_bytes, policy=policy, readahead=readahead, swap_bytes=swap_bytes,
                  force=True, **{"ensemble": None, **options})  # the command's default unless options say otherwise
    return out


def fill_split(path: Path, fill: int | None = None, profile=None) -> dict:
    """Pages in of a stream at the step after memory fills, and in all other steps.

    ``fill`` (an index into the stream's steps) is the first step that writes; given, it is used as is, so
    several streams are cut at the same step. The step after it is where runs of the kernel differ most
    (demo, 20 steps: 2800 to 5500 pages in, run to run and budget to budget; research/notes/calibration.md, "Held out").
    ``profile``: the stream's :func:`swaptrace.compare.stream_profile`, if the caller has read it already.
    """
    import numpy as np

    from swaptrace.compare import stream_profile

    p = profile if profile is not None else stream_profile(path)
    pin, pout = p.pages_in_per_step, p.pages_out_per_step
    if fill is None:
        fill = int(np.argmax(pout > 0)) if pout.any() else len(pout)
    after = int(pin[fill + 1]) if fill + 1 < len(pin) else 0
    return {"fill_step": fill, "after_fill": after, "rest": int(pin.sum()) - after}


def fill_markdown(splits: list[dict]) -> str:
    if not splits:
        return ""
    lines = ["", "Pages in at the step after memory fills and in the other steps (kernel: every run, sorted; "
             "emulator: the default). That one step is where the kernel's runs differ most from one another:", "",
             "| preset | budget | step | kernel after the fill | emulator | kernel, other steps | emulator |",
             "|---|---|---|---|---|---|---|"]
    for sp in splits:
        lines.append(f"| {sp['preset']} | {format_bytes(sp['memory_bytes'])} ({sp['fraction']:.0%}) "
                     f"| {sp['fill_step'] + 1} | {', '.join(str(x) for x in sorted(sp['kernel_after_fill']))} "
                     f"| {sp['emulator_after_fill']} | {', '.join(str(x) for x in sorted(sp['kernel_rest']))} "
                     f"| {sp['emulator_rest']} |")
    return "\n".join(lines) + "\n"


#: emulator registers that count what the kernel's reclaim tracepoints count (capture/reclaim.py)
#: the reclaim tables' columns and the emulator counters (:class:`swaptrace.emulate.Counters`) they show
RECLAIM_COUNTERS = {"calls": "reclaim_calls", "scanned": "scanned", "reclaimed": "evictions",
                    "activated": "activations", "deactivated": "deactivations"}


def read_access(trace: Path) -> tuple[dict, dict, object, object, int]:
    """An access trace in memory, for feeding an :class:`~swaptrace.emulate.Emulator` directly.

    Returns ``(meta, cols, step, counts, first)``: the metadata, the ``step``/``page``/``write`` columns,
    the steps as int64, accesses per step and the first step's number.
    """
    import numpy as np

    from swaptrace import open_trace

    tf = open_trace(trace, kind="access")
    cols = tf.read_all(["step", "page", "write"])
    step = cols["step"].astype(np.int64)
    first = int(tf.meta.get("first_step", 0))
    return tf.meta, cols, step, np.bincount(step - first), first


def default_emulator(access: tuple, memory_bytes: int, swap_bytes: int, variant: dict | None = None, **options):
    """The default emulator (changed by ``variant``: :class:`EmulatorConfig` fields) for a :func:`read_access` trace.

    ``options`` go to :meth:`EmulatorConfig.resolve` (the keyword options of ``emulate``); ``variant``
    replaces fields of the resolved configuration.
    """
    import dataclasses

    from swaptrace import EmulatorConfig
    from swaptrace.emulate import Emulator

    meta, _, _, counts, first = access
    cfg = EmulatorConfig.resolve(meta, memory_bytes=memory_bytes, swap_bytes=swap_bytes, policy=DEFAULT[0],
                         readahead=DEFAULT[1], **options)
    if variant:
        cfg = dataclasses.replace(cfg, **variant)
    return Emulator(cfg, int(meta["footprint_pages"]), counts, nsteps=len(counts), first_step=first)


def _emulator_reclaim_steps(trace: Path, memory_bytes: int, swap_bytes: int, **options) -> dict[str, list[int]]:
    """The default emulator's reclaim counters per step (it is fed one step at a time and read in between)."""
    import numpy as np

    access = read_access(trace)
    _, cols, step, counts, first = access
    emu = default_emulator(access, memory_bytes, swap_bytes, **options)
    out: dict[str, list[int]] = {"steps": list(range(first, first + len(counts))), **{k: [] for k in RECLAIM_COUNTERS}}
    bounds = np.concatenate([[0], np.cumsum(counts)])
    prev = np.zeros(len(RECLAIM_COUNTERS), np.int64)
    for i in range(len(counts)):
        sl = slice(int(bounds[i]), int(bounds[i + 1]))
        for _ in emu.feed(cols["page"][sl], cols["write"][sl], step[sl]):
            pass
        counters = emu.counters()
        now = np.array([getattr(counters, c) for c in RECLAIM_COUNTERS.values()], np.int64)
        for k, v in zip(RECLAIM_COUNTERS, now - prev, strict=True):
            out[k].append(int(v))
        prev = now
    out["stats_flush_steps"] = emu.cfg.stats_flush_steps
    return out


def reclaim_markdown(rows: list[dict]) -> str:
    """Kernel (tracepoints) vs default emulator: reclaim totals per point."""
    if not rows:
        return ""
    names = list(RECLAIM_COUNTERS)
    lines = ["Reclaim as the kernel's tracepoints count it (one extra capture per point, `--trace-reclaim`), as the "
             "default emulator counts it, and as the 0.4.0 default did (writes by next level, exact statistics) "
             "(kernel / default / 0.4.0; `reclaimed` = pages freed):", "",
             "| preset | budget | " + " | ".join(names) + " | stats flushes (kernel) |",
             "|---|---|" + "---|" * (len(names) + 1)]
    for r in rows:
        k, e, lv = r["kernel"]["totals"], r["emulator"], r["emulator_previous"]
        cells = [f"{k[n]} / {sum(e[n])} / {sum(lv[n])}" for n in names]
        lines.append(f"| {r['preset']} | {format_bytes(r['memory_bytes'])} ({r['fraction']:.0%}) | "
                     + " | ".join(cells) + f" | {k['flushes']} |")
    return "\n".join(lines) + "\n"


def _minor_faults(path: Path) -> int | None:
    """Minor faults: the kernel's count (the child's getrusage), or the emulator's sum of its minor kinds."""
    from swaptrace import open_trace

    meta = open_trace(path, kind="swapio").meta
    if "kernel" in meta:
        return meta["kernel"].get("minor_faults")
    s = meta["summary"]
    return s["faults"] - s["major_faults"] if "zero_page" in s else None


def _row(preset, fraction, memory_bytes, policy, readahead, kernel_path, other_path) -> dict:
    c = compare_streams(kernel_path, other_path)
    k_minor, minor = _minor_faults(kernel_path), _minor_faults(other_path)
    return {
        "preset": preset, "fraction": fraction, "memory_bytes": memory_bytes, "policy": policy,
        "readahead": readahead,
        "kernel_pages_in": c.a.summary["pages_in"], "kernel_pages_out": c.a.summary["pages_out"],
        "pages_in": c.b.summary["pages_in"], "pages_out": c.b.summary["pages_out"],
        "err_pages_in": c.rel_error["pages_in"], "err_pages_out": c.rel_error["pages_out"],
        "err_read_requests": c.rel_error["read_requests"], "err_write_requests": c.rel_error["write_requests"],
        "ks_read": c.ks["read"], "ks_write": c.ks["write"], "match": c.ok,
        "err_minor_faults": (minor - k_minor) / k_minor if k_minor and minor is not None else None,
    }


def smoothed_error(emulator: list[int], kernel: list[int]) -> float:
    """The median of the emulator's values over a band of budgets against the median of the kernel's, minus 1."""
    import statistics

    return statistics.median(emulator) / statistics.median(kernel) - 1


def within_target(errors: list[float]) -> int:
    """How many relative errors are within the target (``TARGET``, both ends included, as in the ranking)."""
    return sum(abs(e) <= TARGET for e in errors)


def band_scales(band: float) -> tuple[float, ...]:
    return (1 - band, 1 - band / 2, 1.0, 1 + band / 2, 1 + band)


def _band(preset, fraction, trace, memory, kernel, device_bytes, band, stem, label="default",
          kernels: dict[float, Path] | None = None, **options) -> dict:
    """A setting (the default, or ``options``) at five budgets around ``memory``: errors against the reference.

    Near the knee of a cyclic workload's miss curve the emulator, being deterministic, can jump by tens
    of percent between budgets a few pages apart; the band's spread and mean say how much of a point's error
    is that. With ``kernels`` (a capture at each other budget, ``--band-captures``) each budget is also
    compared with the kernel at that budget -- the kernel moves with the budget too.
    """
    import statistics

    from swaptrace import open_trace

    k = open_trace(kernel, kind="swapio").meta["summary"]
    errs_in, errs_out, matched_in, matched_out, kernel_in = [], [], [], [], []
    emu_in, emu_out, kernel_out = [], [], []
    for scale in band_scales(band):
        out = emulate_stream(trace, int(memory * scale) // 4096 * 4096, *DEFAULT, stem.with_suffix(".band.swapio.parquet"),
                             device_bytes, **options)
        s = open_trace(out, kind="swapio").meta["summary"]
        errs_in.append(s["pages_in"] / k["pages_in"] - 1)
        errs_out.append(s["pages_out"] / k["pages_out"] - 1)
        emu_in.append(int(s["pages_in"]))
        emu_out.append(int(s["pages_out"]))
        if kernels is not None:
            ks_ = k if scale == 1.0 else open_trace(kernels[scale], kind="swapio").meta["summary"]
            matched_in.append(s["pages_in"] / ks_["pages_in"] - 1)
            matched_out.append(s["pages_out"] / ks_["pages_out"] - 1)
            kernel_in.append(int(ks_["pages_in"]))
            kernel_out.append(int(ks_["pages_out"]))
    out = {"setting": label, "preset": preset, "fraction": fraction, "memory_bytes": memory, "band": band,
           "err_pages_in": errs_in, "err_pages_out": errs_out, "emulator_pages_in": emu_in, "emulator_pages_out": emu_out,
           "mean_err_pages_in": sum(errs_in) / len(errs_in), "mean_err_pages_out": sum(errs_out) / len(errs_out)}
    if kernels is not None:
        # the band's medians against each other: what the emulator says of the budget region, with the
        # kernel's budget-to-budget jumps (and the emulator's own) smoothed out -- a second view, not the target
        out.update({"kernel_pages_in": kernel_in, "kernel_pages_out": kernel_out, "matched_err_pages_in": matched_in,
                    "matched_err_pages_out": matched_out,
                    "median_matched_err_pages_in": statistics.median(matched_in),
                    "median_matched_err_pages_out": statistics.median(matched_out),
                    "smoothed_err_pages_in": smoothed_error(emu_in, kernel_in),
                    "smoothed_err_pages_out": smoothed_error(emu_out, kernel_out),
                    "within_target": within_target(matched_in + matched_out),
                    "values": len(matched_in) + len(matched_out)})
    return out


def band_markdown(bands: list[dict], band: float, band_runs: int = 1) -> str:
    if not bands:
        return ""
    lines = ["", f"Settings at five budgets within ±{band:.0%} of each point (errors against the same kernel "
             "capture; the emulator's own sensitivity to the budget):", "",
             "| setting | preset | budget | err in: min … max (mean) | err out: min … max (mean) |",
             "|---|---|---|---|---|"]
    for b in bands:
        lines.append(f"| {b['setting']} | {b['preset']} | {format_bytes(b['memory_bytes'])} ({b['fraction']:.0%}) "
                     f"| {_pct(min(b['err_pages_in']))} … {_pct(max(b['err_pages_in']))} ({_pct(b['mean_err_pages_in'])}) "
                     f"| {_pct(min(b['err_pages_out']))} … {_pct(max(b['err_pages_out']))} ({_pct(b['mean_err_pages_out'])}) |")
    matched = [b for b in bands if "matched_err_pages_in" in b]
    if matched:
        runs = "one run" if band_runs <= 1 else f"the median of {band_runs} runs"
        lines += ["", f"The same budgets against the kernel at each of them (`--band-captures`; {runs} per budget, "
                  "the median run at ×1): the kernel's own pages in over the five budgets, the emulator's errors "
                  f"(median of five, min … max), how many of the ten values are within ±{TARGET:.0%}, and the "
                  "band's median against the kernel's (\"smoothed\": the budget-to-budget jumps of both averaged "
                  "out; a second view, not the target):", "",
                  "| setting | preset | budget | kernel pages in | err in: median (min … max) "
                  "| err out: median (min … max) | within | smoothed in / out |",
                  "|---|---|---|---|---|---|---|---|"]
        for b in matched:
            mi, mo = b["matched_err_pages_in"], b["matched_err_pages_out"]
            lines.append(f"| {b['setting']} | {b['preset']} | {format_bytes(b['memory_bytes'])} ({b['fraction']:.0%}) "
                         f"| {min(b['kernel_pages_in'])} … {max(b['kernel_pages_in'])} "
                         f"| {_pct(b['median_matched_err_pages_in'])} ({_pct(min(mi))} … {_pct(max(mi))}) "
                         f"| {_pct(b['median_matched_err_pages_out'])} ({_pct(min(mo))} … {_pct(max(mo))}) "
                         + (f"| {b['within_target']}/{b['values']} "
                            f"| {_pct(b['smoothed_err_pages_in'])} / {_pct(b['smoothed_err_pages_out'])} |"
                            if "smoothed_err_pages_in" in b else "| | |"))
    return "\n".join(lines) + "\n"


def _pct(x: float) -> str:
    return f"{x:+.1%}" if abs(x) != float("inf") else "inf"


def markdown(rows: list[dict], meta: dict) -> str:
    lines = ["| preset | budget | policy | readahead | kernel in/out (pages) | emulator in/out | err in | err out "
             "| err read req | err write req | KS read | KS write | err minor faults |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = f"**{r['policy']}**" if (r["policy"], r["readahead"]) == DEFAULT else r["policy"]
        minor = _pct(r["err_minor_faults"]) if r.get("err_minor_faults") is not None else "-"
        lines.append(
            f"| {r['preset']} | {format_bytes(r['memory_bytes'])} ({r['fraction']:.0%}) | {name} | {r['readahead']} "
            f"| {r['kernel_pages_in']} / {r['kernel_pages_out']} | {r['pages_in']} / {r['pages_out']} "
            f"| {_pct(r['err_pages_in'])} | {_pct(r['err_pages_out'])} | {_pct(r['err_read_requests'])} "
            f"| {_pct(r['err_write_requests'])} | {r['ks_read']:.3f} | {r['ks_write']:.3f} | {minor} |")
    lines += ["", "Ranking of settings by mean |error| on pages in/out over every preset and budget "
              "(kernel rerun = the kernel against itself: its run-to-run spread):", "",
              "| policy | readahead | worst \\|err\\| | mean \\|err\\| | mean KS read | mean KS write "
              f"| within ±{TARGET:.0%} everywhere |",
              "|---|---|---|---|---|---|---|"]
    for r in ranking(rows):
        lines.append(f"| {r['policy']} | {r['readahead']} | {r['worst']:.1%} | {r['mean']:.1%} | {r['ks_read']:.3f} "
                     f"| {r['ks_write']:.3f} | {'yes' if r['worst'] <= TARGET else 'no'} |")
    lines += ["", f"Kernel {meta.get('kernel')}, {meta.get('cpus')} CPUs; page-cluster {meta.get('page_cluster')}, "
              f"swappiness {meta.get('swappiness')}, MGLRU {meta.get('mglru') or 'absent'}; swap on a non-rotational "
              f"loop device of the size the emulator is also given; child memory locked, budget on top of its "
              f"baseline and page tables. "
              f"Errors are (emulator - kernel) / kernel."]
    return "\n".join(lines)


def ranking(rows: list[dict]) -> list[dict]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["policy"], r["readahead"]), []).append(r)
    out = []
    for (policy, readahead), rs in groups.items():
        errs = [abs(x) for r in rs for x in (r["err_pages_in"], r["err_pages_out"])]
        out.append({"policy": policy, "readahead": readahead, "worst": max(errs), "mean": sum(errs) / len(errs),
                    "ks_read": sum(r["ks_read"] for r in rs) / len(rs),
                    "ks_write": sum(r["ks_write"] for r in rs) / len(rs)})
    # mean first: the worst point is usually one budget where every setting misses alike
    return sorted(out, key=lambda r: (r["mean"], r["worst"]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["tiny", "demo"])
    ap.add_argument("--fractions", nargs="+", type=float,
                    help="memory budgets as fractions of the footprint (default: per preset, see DEFAULT_FRACTIONS)")
    ap.add_argument("--steps", nargs="*", default=[], help="per preset, e.g. tiny=50 demo=20")
    ap.add_argument("--runs", type=int, default=5,
                    help="kernel captures per budget; the one with the median pages in is the reference")
    ap.add_argument("--compute", choices=["none", "mlp"], default="none")
    ap.add_argument("--recapture", action="store_true", help="ignore cached kernel captures")
    ap.add_argument("--quick", action="store_true", help="tiny only, budgets 0.2 and 0.5")
    ap.add_argument("--band", type=float, default=0.02,
                    help="also emulate the default at budgets within this fraction (x1-b, x1-b/2, x1+b/2, x1+b): "
                         "how much the emulator itself moves with the budget; 0 to skip")
    ap.add_argument("--lags", nargs="*", type=int, default=[],
                    help="extra linux/vma rows with writes completing after these --writeback-lag values")
    ap.add_argument("--band-captures", action="store_true",
                    help="also capture the kernel once at each budget of the band and compare there")
    ap.add_argument("--band-runs", type=int, default=3,
                    help="kernel captures per neighbouring budget with --band-captures; the median one is compared")
    ap.add_argument("--trace-reclaim", action="store_true",
                    help="one more capture per budget with the reclaim tracepoints, compared with the emulator's counters")
    ap.add_argument("-o", "--out", type=Path, default=Path("research/results"), help="tables go here")
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/swaptrace-calibration"),
                    help="traces and streams (cached between runs)")
    args = ap.parse_args(argv)
    if args.quick:
        args.presets, args.fractions = ["tiny"], [0.2, 0.5]
    steps = dict(DEFAULT_STEPS)
    steps.update({k: int(v) for k, v in (s.split("=") for s in args.steps)})

    from swaptrace import open_trace
    from swaptrace.capture import kernel_facts

    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    rows, extras, bands, reclaims, splits = [], [], [], [], []
    for preset in args.presets:
        trace = trace_for(preset, steps.get(preset, 20), work)
        footprint = int(open_trace(trace).meta["footprint_bytes"])
        for fraction in args.fractions or DEFAULT_FRACTIONS.get(preset, (0.2, 0.4, 0.6)):
            memory = int(footprint * fraction) // 4096 * 4096
            tag = f"{preset}-{steps.get(preset, 20)}-{fraction:g}"
            kernel, infos = _captures(trace, memory, work, tag, max(1, args.runs), args.recapture,
                                      None if args.compute == "none" else args.compute)
            info = infos[0]
            extras.append({"preset": preset, "fraction": fraction, "reference": kernel.name, "runs": infos})
            for other in infos:
                if other["path"] != str(kernel):
                    rows.append(_row(preset, fraction, memory, "kernel rerun", "-", kernel, Path(other["path"])))
            settings = [(p, ra, p, {}) for p in POLICIES for ra in READAHEADS]
            settings += [("linux", "vma", label, options) for label, options in ABLATIONS]
            settings += [("linux", "vma", f"linux, lag {lag}", {"writeback_completion": "lag", "writeback_lag": lag})
                         for lag in args.lags]
            for policy, readahead, label, options in settings:
                name = label.replace(", ", ".").replace(" ", "-")
                emu = emulate_stream(trace, memory, policy, readahead, work / f"{tag}.{name}.{readahead}.swapio.parquet",
                                     info["device_bytes"], **options)
                if (policy, readahead) == DEFAULT and not options:
                    default_stream = emu
                rows.append(_row(preset, fraction, memory, label, readahead, kernel, emu))
                r = rows[-1]
                print(f"  {tag} {label:28} {readahead:7} in {_pct(r['err_pages_in']):>8} out "
                      f"{_pct(r['err_pages_out']):>8} KS {r['ks_read']:.2f}/{r['ks_write']:.2f}", file=sys.stderr)
            ref = fill_split(kernel)  # every run and the emulator cut at the reference run's filling step
            runs_split = [ref if other["path"] == str(kernel) else fill_split(Path(other["path"]), ref["fill_step"])
                          for other in infos]
            emu_split = fill_split(default_stream, ref["fill_step"])
            splits.append({"preset": preset, "fraction": fraction, "memory_bytes": memory,
                           "fill_step": ref["fill_step"],
                           "kernel_after_fill": [r["after_fill"] for r in runs_split],
                           "kernel_rest": [r["rest"] for r in runs_split],
                           "emulator_after_fill": emu_split["after_fill"], "emulator_rest": emu_split["rest"]})
            if args.trace_reclaim:
                traced = work / f"{tag}.kernel-reclaim.swapio.parquet"
                _capture(trace, memory, traced, args.recapture, None if args.compute == "none" else args.compute,
                         unlimited_run=False, trace_reclaim=True)
                kmeta = open_trace(traced, kind="swapio").meta
                reclaims.append({"preset": preset, "fraction": fraction, "memory_bytes": memory,
                                 "kernel": kmeta["kernel"]["reclaim"],
                                 "kernel_pages_in_out": [kmeta["summary"]["pages_in"], kmeta["summary"]["pages_out"]],
                                 "emulator": _emulator_reclaim_steps(trace, memory, info["device_bytes"]),
                                 "emulator_previous": _emulator_reclaim_steps(trace, memory, info["device_bytes"], **PREVIOUS)})
            if args.band:
                kernels = None
                if args.band_captures:  # one capture at each other budget of the band (no unlimited run)
                    kernels = {}
                    (work / "band").mkdir(exist_ok=True)
                    for scale in band_scales(args.band):
                        if scale != 1.0:  # the median of --band-runs captures, as at the point itself
                            kernels[scale], _ = _captures(
                                trace, int(memory * scale) // 4096 * 4096, work / "band", f"{tag}-{scale:g}",
                                max(1, args.band_runs), args.recapture,
                                None if args.compute == "none" else args.compute, unlimited_first=False)
                bands.append(_band(preset, fraction, trace, memory, kernel, info["device_bytes"], args.band, work / tag,
                                   kernels=kernels))
                bands += [_band(preset, fraction, trace, memory, kernel, info["device_bytes"], args.band, work / tag,
                                label, kernels=kernels, **options) for label, options in BAND_SETTINGS]
    meta = kernel_facts()
    with open(args.out / "calibration.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (args.out / "calibration.md").write_text(markdown(rows, meta) + "\n" + band_markdown(bands, args.band, args.band_runs)
                                             + fill_markdown(splits))
    if reclaims:
        (args.out / "reclaim.md").write_text(reclaim_markdown(reclaims))
    emu_rows = [r for r in rows if r["policy"] != "kernel rerun"]
    best = ranking(emu_rows)[0]
    (args.out / "calibration.json").write_text(json.dumps(
        {"rows": rows, "captures": extras, "kernel": meta, "ranking": ranking(emu_rows), "best": best,
         "band": bands, "reclaim": reclaims, "fill": splits}, indent=2))
    print(markdown(rows, meta))
    print(f"\nbest: policy={best['policy']} readahead={best['readahead']} "
          f"(mean |err| {best['mean']:.1%}, worst {best['worst']:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
