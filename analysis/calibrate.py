"""Calibrate the emulator against the real kernel: which settings match best, and how well?

For each preset and memory budget (a fraction of the trace's footprint) this
captures the trace under the real kernel (``swaptrace.capture``, root only),
optionally twice to show the kernel's own run-to-run spread, then emulates
it with every policy x readahead mode, with ablations of the default (no
writeback lag, no zero page, neither) and with neighbouring writeback lags
(``--lags``), and compares each stream with the kernel's
(``swaptrace.compare``): relative error on pages in and pages out and on
minor faults, KS distance of read and write request sizes. ``--band`` also
runs the default at budgets within a few percent of each point, to show how
much the emulator itself moves with the budget.

Writes ``calibration.csv`` (one row per preset/budget/setting),
``calibration.md`` (the same as a table, a ranking of the settings by their
mean and worst error over all budgets, and the band table) and
``calibration.json`` into the output folder. Regenerate the README tables with::

    sudo .venv/bin/python analysis/calibrate.py --repeat -o analysis/results   # cached captures: ~1 min
    sudo .venv/bin/python analysis/calibrate.py --quick      # tiny only, 2 budgets, ~3 min

Traces and captures are cached in ``--work`` (``*.kernel.swapio.parquet``)
and reused unless ``--recapture`` is given.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

from swaptrace.compare import compare_streams
from swaptrace.units import format_bytes

POLICIES = ("lru", "clock", "linux")
READAHEADS = ("vma", "cluster", "none")
DEFAULT = ("linux", "vma")
#: ablations of the default (linux, vma): each of its two newest rules off, and both (the model before them)
ABLATIONS = (
    ("linux, lag 0", {"writeback_lag": 0}),
    ("linux, no zero page", {"zero_page": False}),
    ("linux, lag 0, no zero page", {"writeback_lag": 0, "zero_page": False}),
)
DEFAULT_STEPS = {"tiny": 50, "demo": 20}
#: budgets as fractions of the footprint; demo's 20 steps touch only ~29% of its footprint, so its budgets are lower
DEFAULT_FRACTIONS = {"tiny": (0.2, 0.4, 0.6), "demo": (0.1, 0.15, 0.2)}


def _trace(preset: str, steps: int, folder: Path) -> Path:
    from swaptrace.generate import generate_trace

    path = folder / f"{preset}-{steps}.access.parquet"
    if not path.exists():
        generate_trace(preset, path, steps=steps, seed=0)
    return path


def _capture(trace: Path, memory_bytes: int, out: Path, again: bool, compute: str | None) -> dict:
    from swaptrace.capture import capture
    from swaptrace.traceio import open_trace

    if again or not out.exists():
        t0 = time.monotonic()
        capture(trace, out, memory_bytes=memory_bytes, compute=compute, force=True)
        print(f"  captured {out.name} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    meta = open_trace(out, kind="swapio").meta
    return {"slowdown": meta["kernel"].get("slowdown"), "lost_events": meta["kernel"].get("lost_events", 0),
            "device_bytes": int(meta["device_bytes"])}


def _emulate(trace: Path, memory_bytes: int, policy: str, readahead: str, out: Path, swap_bytes: int,
             **options) -> Path:
    from swaptrace.pagecache import emulate

    # the capture's swap device size, not emulate's default (footprint + 1 page): vm_swap_full() (swap more than
    # half used) frees slots on swap-in, so a device twice as small changes which evictions need a write
    emulate(trace, out, memory_bytes=memory_bytes, policy=policy, readahead=readahead, swap_bytes=swap_bytes,
            force=True, **options)
    return out


def _minor_faults(path: Path) -> int | None:
    """Minor faults: the kernel's count (the child's getrusage), or the emulator's sum of its minor kinds."""
    from swaptrace.traceio import open_trace

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


def _band(preset, fraction, trace, memory, kernel, device_bytes, band, stem) -> dict:
    """The default setting at five budgets around ``memory``: its errors against the one kernel capture.

    Near the knee of a cyclic workload's miss curve the emulator, being deterministic, can jump by tens
    of percent between budgets a few pages apart, where the kernel's timing noise averages such jumps
    out; the band's spread and mean say how much of a point's error is that.
    """
    from swaptrace.traceio import open_trace

    k = open_trace(kernel, kind="swapio").meta["summary"]
    errs_in, errs_out = [], []
    for scale in (1 - band, 1 - band / 2, 1.0, 1 + band / 2, 1 + band):
        out = _emulate(trace, int(memory * scale) // 4096 * 4096, *DEFAULT, stem.with_suffix(".band.swapio.parquet"),
                       device_bytes)
        s = open_trace(out, kind="swapio").meta["summary"]
        errs_in.append(s["pages_in"] / k["pages_in"] - 1)
        errs_out.append(s["pages_out"] / k["pages_out"] - 1)
    return {"preset": preset, "fraction": fraction, "memory_bytes": memory, "band": band,
            "err_pages_in": errs_in, "err_pages_out": errs_out,
            "mean_err_pages_in": sum(errs_in) / len(errs_in), "mean_err_pages_out": sum(errs_out) / len(errs_out)}


def band_markdown(bands: list[dict], band: float) -> str:
    if not bands:
        return ""
    lines = ["", f"Default setting at five budgets within ±{band:.0%} of each point (errors against the same kernel "
             "capture; the emulator's own sensitivity to the budget):", "",
             "| preset | budget | err in: min … max (mean) | err out: min … max (mean) |", "|---|---|---|---|"]
    for b in bands:
        lines.append(f"| {b['preset']} | {format_bytes(b['memory_bytes'])} ({b['fraction']:.0%}) "
                     f"| {_pct(min(b['err_pages_in']))} … {_pct(max(b['err_pages_in']))} ({_pct(b['mean_err_pages_in'])}) "
                     f"| {_pct(min(b['err_pages_out']))} … {_pct(max(b['err_pages_out']))} ({_pct(b['mean_err_pages_out'])}) |")
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
              "| policy | readahead | worst \\|err\\| | mean \\|err\\| | mean KS read | mean KS write | within ±15% everywhere |",
              "|---|---|---|---|---|---|---|"]
    for r in ranking(rows):
        lines.append(f"| {r['policy']} | {r['readahead']} | {r['worst']:.1%} | {r['mean']:.1%} | {r['ks_read']:.3f} "
                     f"| {r['ks_write']:.3f} | {'yes' if r['worst'] <= 0.15 else 'no'} |")
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
    ap.add_argument("--repeat", action="store_true", help="capture every budget twice (kernel run-to-run spread)")
    ap.add_argument("--compute", choices=["none", "mlp"], default="none")
    ap.add_argument("--recapture", action="store_true", help="ignore cached kernel captures")
    ap.add_argument("--quick", action="store_true", help="tiny only, budgets 0.2 and 0.5")
    ap.add_argument("--band", type=float, default=0.02,
                    help="also emulate the default at budgets within this fraction (x1-b, x1-b/2, x1+b/2, x1+b): "
                         "how much the emulator itself moves with the budget; 0 to skip")
    ap.add_argument("--lags", nargs="*", type=int, default=[256, 512, 2048],
                    help="extra linux/vma rows with these --writeback-lag values (the default's neighbours)")
    ap.add_argument("-o", "--out", type=Path, default=Path("analysis/results"), help="tables go here")
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/swaptrace-calibration"),
                    help="traces and streams (cached between runs)")
    args = ap.parse_args(argv)
    if args.quick:
        args.presets, args.fractions = ["tiny"], [0.2, 0.5]
    steps = dict(DEFAULT_STEPS)
    steps.update({k: int(v) for k, v in (s.split("=") for s in args.steps)})

    from swaptrace.capture import kernel_facts
    from swaptrace.traceio import open_trace

    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    rows, extras, bands = [], [], []
    for preset in args.presets:
        trace = _trace(preset, steps.get(preset, 20), work)
        footprint = int(open_trace(trace).meta["footprint_bytes"])
        for fraction in args.fractions or DEFAULT_FRACTIONS.get(preset, (0.2, 0.4, 0.6)):
            memory = int(footprint * fraction) // 4096 * 4096
            tag = f"{preset}-{steps.get(preset, 20)}-{fraction:g}"
            kernel = work / f"{tag}.kernel.swapio.parquet"
            info = _capture(trace, memory, kernel, args.recapture, None if args.compute == "none" else args.compute)
            extras.append({"preset": preset, "fraction": fraction, **info})
            if args.repeat:
                again = work / f"{tag}.kernel2.swapio.parquet"
                _capture(trace, memory, again, args.recapture, None if args.compute == "none" else args.compute)
                rows.append(_row(preset, fraction, memory, "kernel rerun", "-", kernel, again))
            settings = [(p, ra, p, {}) for p in POLICIES for ra in READAHEADS]
            settings += [("linux", "vma", label, options) for label, options in ABLATIONS]
            settings += [("linux", "vma", f"linux, lag {lag}", {"writeback_lag": lag}) for lag in args.lags]
            for policy, readahead, label, options in settings:
                name = label.replace(", ", ".").replace(" ", "-")
                emu = _emulate(trace, memory, policy, readahead, work / f"{tag}.{name}.{readahead}.swapio.parquet",
                               info["device_bytes"], **options)
                rows.append(_row(preset, fraction, memory, label, readahead, kernel, emu))
                r = rows[-1]
                print(f"  {tag} {label:28} {readahead:7} in {_pct(r['err_pages_in']):>8} out "
                      f"{_pct(r['err_pages_out']):>8} KS {r['ks_read']:.2f}/{r['ks_write']:.2f}", file=sys.stderr)
            if args.band:
                bands.append(_band(preset, fraction, trace, memory, kernel, info["device_bytes"], args.band, work / tag))
    meta = kernel_facts()
    with open(args.out / "calibration.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (args.out / "calibration.md").write_text(markdown(rows, meta) + "\n" + band_markdown(bands, args.band))
    emu_rows = [r for r in rows if r["policy"] != "kernel rerun"]
    best = ranking(emu_rows)[0]
    (args.out / "calibration.json").write_text(json.dumps(
        {"rows": rows, "captures": extras, "kernel": meta, "ranking": ranking(emu_rows), "best": best,
         "band": bands}, indent=2))
    print(markdown(rows, meta))
    print(f"\nbest: policy={best['policy']} readahead={best['readahead']} "
          f"(mean |err| {best['mean']:.1%}, worst {best['worst']:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
