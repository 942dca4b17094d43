"""``swaptrace report``: figures and a markdown summary of a pipeline folder.

Reads whatever the folder holds (the file names of :mod:`swaptrace.pipeline.filenames`)
and draws one PNG per figure into ``DIR/report/``, then writes
``report.md`` tying them together with the key numbers. Missing stages are
skipped and named in the report, so a partial folder still gets a report.

Figures (every axis labelled with units):

==================================== =================================================================
``rank_frequency.png``               accesses per row and per page by rank, log-log (the Zipf skew)
``mrc.png``                          LRU miss ratio against memory size, the chosen budget marked
``request_sizes.png``                swap request-size CDF by op, with the 32 KiB line
``swap_traffic.png``                 swap bytes read and written per training step
``ssd_bandwidth.png``, ``ssd_waf.png`` SSD model: bandwidth and WAF against GB written
``bandwidth_vs_request_size.png``    bandwidth against request size: the SSD model and fio
``fio_bandwidth_vs_written.png``     fio write bandwidth against GB written on the target
``emulator_vs_kernel.png``           emulator vs real-kernel capture (when ``kernel.swapio.parquet`` exists)
==================================== =================================================================

With a fio run, ``model-vs-fio.json`` (the ``model-vs-fio`` stage) adds a section: the device fitted to
the run, the fio jobs that ran and how long each took, and the swap stream's replay on the fitted
model beside fio's replay on the drive, with the error (:mod:`swaptrace.ssd.fit.check`).
"""

from __future__ import annotations

import csv
import math
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.core.inputs import read_json, read_text
from swaptrace.core.outputs import text_marker
from swaptrace.core.traceio import AtomicPath, check_output_folder, install_folder, make_partial_folder, open_trace
from swaptrace.core.units import format_bytes
from swaptrace.errors import OutputError, TraceFileError
from swaptrace.pipeline import filenames as S
from swaptrace.ssd.fit import check as modelcheck

#: the thesis's findings, for the side-by-side table (README.md, "The thesis reproduced")
THESIS = {"slowdown": "2-5x", "small_requests": "most < 32 KiB", "request_size_gain": 1.75,
          "sequential_write_gain": 4.37}
KERNEL_STREAM = S.KERNEL_STREAM


@dataclass
class Report:
    """What :func:`build_report` wrote."""

    path: Path
    figures: list[Path] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    numbers: dict[str, Any] = field(default_factory=dict)


class _CsvCurve:
    """A miss-ratio curve read back from ``mrc.csv`` (sampled sizes), enough for :func:`plot_mrc`."""

    def __init__(self, path: Path, page_bytes: int, method: str = "exact", sample_rate: float = 1.0):
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        if not rows:
            raise TraceFileError(f"{path}: empty miss-ratio curve")
        self.sizes_pages = np.array([int(r["pages"]) for r in rows], dtype=np.int64)
        self._ratio = np.array([float(r["miss_ratio"]) for r in rows])
        self.page_bytes, self.method, self.sample_rate = page_bytes, method, sample_rate

    @property
    def sizes_bytes(self) -> np.ndarray:
        return self.sizes_pages * self.page_bytes

    @property
    def miss_ratio(self) -> np.ndarray:
        return self._ratio

    def miss_ratio_at(self, pages: int) -> float:
        return float(np.interp(pages, self.sizes_pages, self._ratio))


def _figure(out: Path, name: str, draw: Callable[[Any], Any], report: Report, size=(7, 4)) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    draw(fig)
    fig.tight_layout()
    with AtomicPath(out / name) as ap:
        fig.savefig(ap.tmp, format="png", dpi=110)
    report.figures.append(out / name)


def save_mrc_figure(curve, path: str | os.PathLike, *, budget_bytes: int | None = None) -> Path:
    """Draw a miss-ratio curve with the budget marked into a PNG (the pipeline's ``mrc.png``).

    Parameters
    ----------
    curve : swaptrace.mrc.MissRatioCurve
        Any curve :func:`swaptrace.figures.emulate.plot_mrc` draws.
    path : path-like
        PNG file, written atomically.
    budget_bytes : int, optional
        DRAM budget in bytes, drawn as a vertical line.
    """
    from matplotlib.figure import Figure

    from swaptrace.figures.emulate import plot_mrc

    fig = Figure(figsize=(7, 4))
    plot_mrc(curve, ax=fig.subplots(), budget_bytes=budget_bytes)
    fig.tight_layout()
    with AtomicPath(Path(path)) as ap:
        fig.savefig(ap.tmp, format="png", dpi=120)
    return Path(path)


def _try(report: Report, what: str, fn: Callable[[], Any]) -> Any:
    """Run one part of the report; a missing input is recorded, not fatal."""
    try:
        return fn()
    except (TraceFileError, FileNotFoundError) as exc:
        report.skipped[what] = str(exc)
        return None


def build_report(folder: str | os.PathLike, out: str | os.PathLike | None = None, *, force: bool = True) -> Report:
    """Draw every figure the folder's files allow and write ``report.md``.

    Parameters
    ----------
    folder : path-like
        A pipeline folder (``swaptrace run -o DIR``) or any folder holding some
        of ``access.parquet``, ``mrc.csv``, ``swapio.parquet``, ``ssd.parquet``,
        ``ssd-thesis.json``, ``fio-run/``, ``kernel.swapio.parquet``.
    out : path-like, optional
        Report folder (default ``folder/report``); rewritten whole.
    """
    d = Path(folder)
    if not d.is_dir():
        raise TraceFileError(f"{d}: not a folder")
    final = Path(out) if out is not None else d / S.REPORT
    if final.resolve() == d.resolve() or final.resolve() in d.resolve().parents:
        raise OutputError(f"{final}: would replace the folder the report reads; give another --output")
    final = check_output_folder(final, force, text_marker("report.md", "# swaptrace report"), "a report (report.md)")
    stale = _own_report_files(final)
    # drawn into a temporary sibling renamed into place at the end: a failure or an interrupt leaves the
    # earlier report (or nothing), never a half-written folder
    out_dir = make_partial_folder(final)
    try:
        report = _draw_report(d, out_dir)
        if not report.figures:  # nothing drawn: not a pipeline folder (a report of nothing is an error)
            raise TraceFileError(f"{d}: holds none of the files a report draws (access.parquet, swapio.parquet, "
                                 "mrc.csv, ssd.parquet, ...); give a `swaptrace run` folder")
        install_folder(out_dir, final, stale, last="report.md")
    except BaseException:
        shutil.rmtree(out_dir, ignore_errors=True)
        raise
    report.path = final / report.path.name
    report.figures = [final / f.name for f in report.figures]
    return report


def _own_report_files(folder: Path) -> list[str]:
    """The files an earlier report in ``folder`` wrote: report.md and the figures it shows (a user's own
    files there are left alone)."""
    try:
        text = (folder / "report.md").read_text(errors="replace")
    except OSError:
        return []
    return ["report.md", *sorted(set(re.findall(r"\]\(([^)/\\]+\.(?:png|svg|pdf))\)", text)))]


def _draw_report(d: Path, out_dir: Path) -> Report:
    """Every figure and report.md into ``out_dir``."""
    report = Report(out_dir / "report.md")
    n = report.numbers

    access = _try(report, "trace", lambda: open_trace(d / S.ACCESS, "access"))
    swapio = _try(report, "swap stream", lambda: open_trace(d / S.SWAPIO, "swapio"))
    if access is not None:
        n["trace"] = {k: access.meta.get(k) for k in ("preset", "steps", "seed", "footprint_bytes", "rows")}
        _try(report, "rank-frequency", lambda: _rank_frequency(access, out_dir, report))
    if (d / S.MRC_CSV).exists() and access is not None:
        budget = int(swapio.meta["memory_bytes"]) if swapio is not None else None
        curve = _CsvCurve(d / S.MRC_CSV, access.page_bytes)

        def draw_mrc(fig):
            from swaptrace.figures.emulate import plot_mrc

            plot_mrc(curve, ax=fig.subplots(), budget_bytes=budget)

        _figure(out_dir, "mrc.png", draw_mrc, report)
        if budget is not None:
            n["lru_miss_ratio_at_budget"] = curve.miss_ratio_at(budget // access.page_bytes)
    else:
        report.skipped["miss-ratio curve"] = f"{d / S.MRC_CSV}: missing"
    if swapio is not None:
        from swaptrace.figures.emulate import plot_request_size_cdf, plot_swap_traffic

        n["swap"] = _swap_numbers(swapio)
        _figure(out_dir, "request_sizes.png", lambda fig: plot_request_size_cdf(swapio.path, ax=fig.subplots()),
                report)
        _figure(out_dir, "swap_traffic.png", lambda fig: plot_swap_traffic(swapio.path, ax=fig.subplots()), report)
    stale = stale_outputs(d)
    n["first_look"] = first_look_left_out(d)
    _try(report, "SSD model", lambda: _ssd_parts(d, out_dir, report, stale))
    for what, name, part in (
            ("fio", S.FIO_RUN, lambda: _fio_parts(d, out_dir, report)),
            ("model vs fio", S.MODEL_VS_FIO,
             lambda: report.numbers.update(model_vs_fio=modelcheck.load_summary(d / S.MODEL_VS_FIO)))):
        if name in stale:
            report.skipped[what] = stale[name]
        else:
            _try(report, what, part)
    if (d / KERNEL_STREAM).exists() and swapio is not None:
        _try(report, "emulator vs kernel", lambda: _kernel_parts(d, out_dir, report))
    _try(report, "time model", lambda: _timing_parts(d, out_dir, report))
    _try(report, "swap designs", lambda: _designs_parts(d, out_dir, report, stale))
    with AtomicPath(report.path) as ap:
        ap.tmp.write_text(render_markdown(report, d))
    return report


def first_look_left_out(d: Path) -> list[str]:
    """What a ``swaptrace run --first-look`` (``make demo``) left out of this folder, each with the command that
    runs it; empty for a full run or a folder put together by hand."""
    try:
        manifest = read_json(d / S.MANIFEST, "pipeline manifest") if os.path.lexists(d / S.MANIFEST) else {}
    except TraceFileError:
        return []
    if not isinstance(manifest, dict):
        return []
    params = {k: (v.get("params") or {}) for k, v in manifest.items() if isinstance(v, dict)}
    gen = params.get("generate", {})
    model = gen.get("preset") or gen.get("spec_file") or "PRESET"
    out = []
    if params.get("ssd-thesis", {}).get("first_look"):
        out.append("the thesis's experiments on the full 512 GiB `nvme-tlc` drive in its steady state (about 30 s "
                   f"more): `swaptrace run --preset {model} -o {d}` without `--first-look`, or "
                   "`swaptrace ssd thesis --real`")
    runtime = params.get("fio-run", {}).get("runtime_s")
    if isinstance(runtime, int) and runtime < 3:
        out.append(f"fio's time-based jobs at 3 s each (this run gave each {runtime} s, so the sweep and the "
                   f"experiments are noisier): `swaptrace run --preset {model} --fio-runtime 3 -o {d}`")
    if params.get("fio-run", {}).get("overlapped"):
        out.append("fio measured on its own: this run measured the disk while the SSD model's stages ran on the CPU "
                   f"(a minute saved; fio's figures may shift a little): `swaptrace run --preset {model} -o {d}` "
                   "without `--first-look`")
    if out:
        out.append("the full-size reproduction of the thesis, the fio queue-depth profile and every experiment at "
                   "its full size: `make reproduce` (docs/report.md)")
    return out


def stale_outputs(d: Path) -> dict[str, str]:
    """Outputs in a ``swaptrace run`` folder that its last run skipped the stage of, and why they are left out.

    The pipeline keeps an earlier run's outputs of a stage it skips (``pipeline.json`` lists them under
    that stage with ``skipped``); they may belong to another swap stream, so the report does not show
    them as this run's. A folder without ``pipeline.json`` (put together by hand) has none.
    """
    if not os.path.lexists(d / S.MANIFEST):
        return {}
    try:
        manifest = read_json(d / S.MANIFEST, "pipeline manifest")
    except TraceFileError:  # damaged or not a file (a FIFO is never read): no stage is known to have skipped
        return {}
    out = {}
    for stage, entry in manifest.items() if isinstance(manifest, dict) else ():
        if isinstance(entry, dict) and "skipped" in entry:
            outputs = entry.get("outputs")
            for name in outputs if isinstance(outputs, list) else ():
                if isinstance(name, str):
                    out[name] = (f"{name}: an earlier run's, left out (the last `swaptrace run` skipped "
                                 f"{stage}: {entry['skipped']})")
    return out


def _designs_parts(d: Path, out_dir: Path, report: Report, stale: dict[str, str] | None = None) -> None:
    """The tables and device-time figures of ``swaptrace designs`` runs in ``designs*/`` (``run --designs``,
    ``make designs``), but not the pipeline's own ``designs/`` when its last run skipped that stage."""
    stale = stale or {}
    for name in stale:
        if (d / name / "designs.md").exists():
            report.skipped[f"swap designs in {name}/"] = stale[name]
    found = sorted(md for md in d.glob("designs*/designs.md") if md.parent.name not in stale)
    for md in found:
        name = md.parent.name
        table = [line for line in read_text(md, "designs table").splitlines() if not line.startswith("## ")]
        report.numbers.setdefault("designs", []).append({"name": name, "markdown": "\n".join(table).strip()})
        png = md.parent / "designs-device-time.png"
        if png.exists():
            shutil.copyfile(png, out_dir / f"{name}-device-time.png")
            report.figures.append(out_dir / f"{name}-device-time.png")


def _rank_frequency(access, out_dir: Path, report: Report) -> None:
    """Rows of the largest table (re-drawn from the trace's seed: exactly its lookups) and table pages."""
    from swaptrace.figures.generate import plot_rank_frequency, trace_page_counts
    from swaptrace.workload.generate import draw_rows
    from swaptrace.workload.spec import spec_from_dict

    meta = access.meta
    spec = spec_from_dict(meta["spec"], where=str(access.path))
    params = meta.get("params", {})
    largest = max(range(len(spec.tables)), key=lambda i: spec.tables[i].rows)
    rows = draw_rows(spec, largest, steps=int(meta["steps"]), seed=int(meta["seed"]),
                     first_step=int(meta.get("first_step", 0)), alpha=params.get("alpha"),
                     scatter=params.get("scatter", True), reuse=params.get("reuse", 0.0))
    data = {f"rows of {spec.tables[largest].name} ({spec.tables[largest].rows:,} rows)": rows,
            "embedding-table pages (counts)": trace_page_counts(access.path)}
    _figure(out_dir, "rank_frequency.png", lambda fig: plot_rank_frequency(data, ax=fig.subplots()), report)


def _swap_numbers(swapio) -> dict[str, Any]:
    summary = swapio.meta.get("summary", {})
    hist = summary.get("request_size_hist", {})
    out: dict[str, Any] = {k: summary.get(k) for k in ("faults", "pages_in", "pages_out", "bytes_read",
                                                       "bytes_written", "readahead_issued", "readahead_hit")}
    out["memory_bytes"] = swapio.meta.get("memory_bytes")
    for op in ("read", "write"):
        h = {int(k): int(v) for k, v in hist.get(op, {}).items()}
        total = sum(h.values())
        if total:
            out[f"{op}_requests"] = total
            out[f"{op}_small_share"] = sum(v for k, v in h.items() if k < 32 * 1024) / total
            out[f"{op}_mean_bytes"] = sum(k * v for k, v in h.items()) / total
    return out


def _fixed(x: float | None, fmt: str) -> str:
    return "n/a" if x is None or x != x else fmt.format(x)


def _ssd_parts(d: Path, out_dir: Path, report: Report, stale: dict[str, str] | None = None) -> None:
    from swaptrace.figures import ssd as F
    from swaptrace.ssd.run import read_timeline

    stale = stale or {}

    if (d / S.SSD).exists():
        timeline, meta = read_timeline(d / S.SSD)
        summary = meta.get("summary", {})
        bw = timeline["bandwidth_mb_s"]
        report.numbers["ssd"] = {
            "device": _device_text(meta.get("device") or {}),
            **_ssd_state_lines(meta.get("device") or {}, summary),
            # an empty stream (no writes) has no WAF and no throughput: the summary holds None for them
            "WAF (cumulative)": _fixed(summary.get("waf"), "{:.2f}"),
            "throughput": _fixed(summary.get("throughput_mb_s"), "{:.0f} MB/s"),
            "bandwidth, first window -> last window": f"{bw[0]:.0f} -> {bw[-1]:.0f} MB/s" if len(bw) else "n/a",
        }
        _figure(out_dir, "ssd_bandwidth.png", lambda fig: F.plot_bandwidth_vs_written(timeline, ax=fig.subplots()),
                report)
        _figure(out_dir, "ssd_waf.png", lambda fig: F.plot_waf_vs_written(timeline, ax=fig.subplots()), report)
    else:
        report.skipped["SSD timeline"] = f"{d / S.SSD}: missing"
    if S.THESIS in stale:
        report.skipped["SSD request-size sweep"] = stale[S.THESIS]
    elif (d / S.THESIS).exists():
        model = _try(report, "SSD request-size sweep", lambda: load_json(d / S.THESIS))
        if model is None:
            return
        report.numbers["thesis_model"] = model
        _figure(out_dir, "bandwidth_vs_request_size.png", lambda fig: _draw_request_sizes(fig, d, model), report,
                size=(12, 4))
    else:
        report.skipped["SSD request-size sweep"] = f"{d / S.THESIS}: missing"


def _real_drive_lines(real: dict[str, Any] | None) -> list[str]:
    """The two ratios on the real drive in steady state, beside the thesis's, with its OP and background."""
    if not real:
        return []
    inp = real["inputs"]
    bg = inp["background"]
    state = (f"{inp['device']} at its real size ({inp['physical_bytes'] >> 30} GiB raw), physical OP "
             f"{inp['physical_op']:.0%} (effective {inp['effective_op']:.1%}), {inp['swap_bytes'] >> 30} GiB swap "
             f"partition, the rest {bg['fill']:.0%} full and {bg['overwritten']:.0%} of it overwritten at random "
             f"(sampled steady state)")
    lines = ["", f"On the real drive in steady state -- {state}:", "",
             "| ratio | thesis | SSD model, real drive |", "|---|---:|---:|",
             f"| 128 KiB vs swap-size requests | {THESIS['request_size_gain']:.2f}x | "
             f"{real['request_size_gain']:.2f}x |",
             f"| sequential vs swap-pattern writes | {THESIS['sequential_write_gain']:.2f}x | "
             f"{real['sequential_write_gain']:.2f}x (random-write WAF {real['parts']['random_write_waf_steady']:.2f}) |"]
    sens = real.get("sensitivity")
    if sens:
        lines += ["", "| OP | fill | 128 KiB / swap-size reads | sequential / swap-pattern writes | random-write WAF |",
                  "|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['op']:.0%} | {r['fill']:.0%} | {r['request_size_gain']:.2f}x | "
                  f"{r['sequential_write_gain']:.2f}x | {r['random_write_waf']:.2f} |" for r in sens["rows"]]
    return lines


def _ssd_state_lines(dev: dict[str, Any], summary: dict[str, Any]) -> dict[str, str]:
    """Spare (physical OP, GC reserve, effective), the drive's starting state and the steady-state WAF."""
    out: dict[str, str] = {}
    if "effective_op" in dev:
        out["spare"] = (f"physical OP {dev['physical_op']:.1%}, GC reserve {dev['gc_reserve_op']:.1%}, "
                        f"effective OP {dev['effective_op']:.1%}")
    start = summary.get("start") or {}
    if "background" in start:
        bg = start["background"]
        out["drive state"] = (f"swap partition {format_bytes(start['swap_bytes'])}; the rest {bg['fill']:.0%} full, "
                              f"{bg['overwritten']:.0%} of it overwritten at random (sampled steady state); "
                              f"swap area's prior content: {bg['swap_prior']}")
    sw = summary.get("steady_waf") or {}
    if sw:
        out["steady-state WAF"] = f"{sw['waf']:.2f} ({'steady' if sw['steady'] else 'not steady'}, {sw['over']})"
    return out


def _device_text(dev: dict[str, Any]) -> str:
    if not dev:
        return "unknown"
    return (f"{dev.get('name')}, {format_bytes(dev.get('user_bytes', 0))} user capacity, "
            f"OP {100 * dev.get('over_provisioning', 0):.0f}%, {dev.get('dies')} dies, "
            f"{dev.get('pages_per_block')} x {format_bytes(dev.get('page_bytes', 0))} pages per block, "
            f"{dev.get('gc_policy')} GC")


def _draw_request_sizes(fig, d: Path, model: dict[str, Any]) -> None:
    """Model (left) and, when fio ran, this machine's disk (right): bandwidth against request size."""
    from swaptrace.figures.ssd import plot_bandwidth_vs_request_size

    run = d / S.FIO_RUN / "results.parquet"
    if run.exists():
        from swaptrace.figures.fio import plot_bandwidth_vs_request_size as plot_fio

        left, right = fig.subplots(1, 2)
        plot_bandwidth_vs_request_size(model, ax=left)
        plot_fio(run, ax=right)
        right.set_title("fio on this machine's disk")
    else:
        plot_bandwidth_vs_request_size(model, ax=fig.subplots())


def _fio_parts(d: Path, out_dir: Path, report: Report) -> None:
    from swaptrace.figures.fio import plot_bandwidth_vs_written
    from swaptrace.fio.results import read_results

    run = d / S.FIO_RUN
    rows, meta = read_results(run)
    report.numbers["fio"] = {"ratios": meta.get("ratios", {}), "target": (meta.get("run") or {}).get("target")}
    _figure(out_dir, "fio_bandwidth_vs_written.png", lambda fig: plot_bandwidth_vs_written(run, ax=fig.subplots()),
            report)


def _kernel_parts(d: Path, out_dir: Path, report: Report) -> None:
    from swaptrace.compare import compare_streams
    from swaptrace.figures.compare import plot_pages_per_step, plot_request_sizes

    cmp = compare_streams(d / KERNEL_STREAM, d / S.SWAPIO)
    report.numbers["kernel"] = {"verdict": cmp.verdict, "ks": cmp.ks}

    def draw(fig):
        grid = fig.add_gridspec(2, 2)
        plot_pages_per_step(cmp, fig.add_subplot(grid[0, :]))
        plot_request_sizes(cmp, fig.add_subplot(grid[1, 0]), "read")
        plot_request_sizes(cmp, fig.add_subplot(grid[1, 1]), "write")

    _figure(out_dir, "emulator_vs_kernel.png", draw, report, size=(11, 7))


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def render_markdown(report: Report, folder: Path) -> str:
    """The text of ``report.md``."""
    n = report.numbers
    lines = [f"# swaptrace report: {folder}", ""]
    if n.get("first_look"):
        lines += ["**A first look** (`swaptrace run --first-look`, as `make demo` runs it). Left out, and the "
                  "command that runs each:", ""] + [f"- {item}" for item in n["first_look"]] + [""]
    t = n.get("trace")
    if t:
        lines += [
            f"Model **{t.get('preset')}**, {t.get('steps')} training steps (seed {t.get('seed')}): "
            f"{t.get('rows'):,} page accesses over a footprint of {format_bytes(t.get('footprint_bytes') or 0)}.",
            "",
        ]
    s = n.get("swap")
    if s:
        lines += [
            "## Swap traffic at the DRAM budget",
            "",
            f"Budget {format_bytes(s.get('memory_bytes') or 0)}"
            + (f"; exact-LRU miss ratio there {n['lru_miss_ratio_at_budget']:.3f}." if "lru_miss_ratio_at_budget" in n
               else "."),
            "",
            "| | reads | writes |",
            "|---|---:|---:|",
            f"| pages | {s.get('pages_in') or 0:,} | {s.get('pages_out') or 0:,} |",
            f"| bytes | {format_bytes(s.get('bytes_read') or 0)} | {format_bytes(s.get('bytes_written') or 0)} |",
            f"| requests | {s.get('read_requests', 0):,} | {s.get('write_requests', 0):,} |",
            f"| share < 32 KiB | {_pct(s.get('read_small_share'))} | {_pct(s.get('write_small_share'))} |",
            f"| mean request | {format_bytes(s.get('read_mean_bytes') or 0)} | {format_bytes(s.get('write_mean_bytes') or 0)} |",
            "",
        ]
    if "ssd" in n:
        lines += ["## SSD model", ""] + [f"- {k}: {v}" for k, v in n["ssd"].items()] + [""]
    gains = []
    model = n.get("thesis_model") or {}
    fio = (n.get("fio") or {}).get("ratios") or {}
    if model or fio:
        lines += ["## The thesis's two fio experiments", "",
                  "| ratio | thesis | SSD model | fio on this machine |", "|---|---:|---:|---:|"]
        for key, label in (("request_size_gain", "128 KiB vs swap-size requests"),
                           ("sequential_write_gain", "sequential vs swap-pattern writes")):
            m, f = model.get(key), fio.get(key)
            gains.append(key)
            measured = "n/a" if f is None else f"{f:.2f}x"
            if key == "sequential_write_gain" and fio.get("sequential_write_gain_128k") is not None:
                measured += f" (same sizes); {fio['sequential_write_gain_128k']:.2f}x (128 KiB sequential)"
            lines.append(f"| {label} | {THESIS[key]:.2f}x | {'n/a' if m is None else f'{m:.2f}x'} | {measured} |")
        lines += _real_drive_lines(model.get("real_drive"))
        lines += ["", "The model's sequential-write gain compares 128 KiB sequential writes with steady-state random "
                  "writes of the swap size mix. fio numbers are what this machine's disk (often a virtual disk, "
                  "not an SSD) measured.", ""]
    lines += modelcheck.markdown_lines(n.get("model_vs_fio"))
    if "kernel" in n:
        lines += ["## Emulator vs real kernel", "", n["kernel"]["verdict"], ""]
    lines += _timing_lines(n.get("timing"))
    if n.get("designs"):
        lines += ["## Linux swap vs the fixes", "", "`swaptrace designs` runs in this folder (docs/designs.md).", ""]
        for part in n["designs"]:
            lines += [f"### {part['name']}", "", part["markdown"], ""]
    lines += ["## Figures", ""]
    for fig in report.figures:
        lines += [f"![{fig.stem}]({fig.name})", ""]
    if report.skipped:
        lines += ["## Not in this report", ""] + [f"- {k}: {v}" for k, v in report.skipped.items()] + [""]
    return "\n".join(lines)


def load_json(path: Path) -> dict[str, Any]:
    """The SSD model's thesis JSON (``ssd-thesis.json``), checked for what the report reads from it."""
    model = read_json(path, "SSD thesis JSON")
    try:
        if not isinstance(model, dict):
            raise TypeError("not an object")
        for key in ("request_size_gain", "sequential_write_gain"):
            v = model.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)):
                raise TypeError(f"{key} = {v!r}")
        _real_drive_lines(model.get("real_drive"))
        from matplotlib.figure import Figure

        from swaptrace.figures.ssd import plot_bandwidth_vs_request_size

        plot_bandwidth_vs_request_size(model, ax=Figure().subplots())  # what the report will draw from it
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise TraceFileError(f"{path}: damaged or not `swaptrace ssd thesis` output ({type(exc).__name__}: "
                             f"{exc})") from None
    return model


def _timing_parts(d: Path, out_dir: Path, report: Report) -> None:
    """The time model's slowdown (``timing.parquet``, ``timing-disk.parquet``) and its per-step figure."""
    from swaptrace.figures.timing import plot_step_times
    from swaptrace.timing import model as timing  # noqa: F401 - registers the timing-steps kind

    model = open_trace(d / S.TIMING, "timing-steps")
    t = {"ssd": model.meta["summary"]}
    disk = open_trace(d / S.TIMING_DISK, "timing-steps") if (d / S.TIMING_DISK).exists() else None
    if disk is not None:
        t["disk"] = disk.meta["summary"]
    kernel_us = None
    if (d / KERNEL_STREAM).exists():
        k = open_trace(d / KERNEL_STREAM, "swapio").meta.get("kernel") or {}
        kernel_us, t["kernel_slowdown"] = k.get("step_wall_us"), k.get("slowdown")
    report.numbers["timing"] = t
    shown = disk if disk is not None and kernel_us is not None else model
    _figure(out_dir, "step_time.png", lambda fig: plot_step_times(
        shown.read_all(), ax=fig.subplots(), kernel_us=kernel_us,
        label="model on this disk" if shown is disk else "model on the SSD"), report)


def _timing_lines(t: dict[str, Any] | None) -> list[str]:
    if not t:
        return []

    def x(v):
        return "n/a" if v is None else f"{v:.2f}x"

    def spread(s):  # the slowdowns at the host costs' lowest and highest fault cost, when they were measured
        r = s.get("slowdown_range")
        return f" ({r[0]:.2f}-{r[1]:.2f}x)" if r else ""

    rows = [("SSD model (" + str(t["ssd"]["device"]) + ")", t["ssd"])]
    if "disk" in t:
        rows.append(("this machine's disk (fio profile)", t["disk"]))
    lines = ["## Training time (time model)", "", "| device | slowdown | mean step | compute | fault wait | queueing "
             "| kernel CPU |", "|---|---:|---:|---:|---:|---:|---:|"]
    for label, s in rows:
        b = s["breakdown_us"]
        lines.append(f"| {label} | {x(s['slowdown'])}{spread(s)} | {s['mean_step_us'] / 1e3:.1f} ms | {b['compute'] / 1e6:.2f} s "
                     f"| {b['fault_wait'] / 1e6:.2f} s | {b['queueing'] / 1e6:.2f} s "
                     f"| {(b['fault_cpu'] + b['reclaim_cpu']) / 1e6:.2f} s |")
    if t.get("kernel_slowdown") is not None:
        lines.append(f"| real kernel (capture) | {x(t['kernel_slowdown'])} | | | | | |")
    if any(s.get("slowdown_range") for _, s in rows):
        costs = t["ssd"]["cpu_costs"]
        parts = [f"{r[0]:.1f}-{r[1]:.1f} us per {what}" for what, r in
                 (("fault", costs.get("fault_cpu_us_range")), ("page written", costs.get("write_cpu_us_range"))) if r]
        lines += ["", "In brackets: the slowdown at the lowest and the highest costs the host's measurements "
                      f"gave ({', '.join(parts)})."]
    return lines + [""]
