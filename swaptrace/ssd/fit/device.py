"""An SSD-model device fitted to what fio measured on a drive (``swaptrace ssd fit RUN_DIR -o my.toml``).

What each measurement of a ``fio run`` folder identifies (docs/ssd.md, "A device fitted to a drive"),
in the order the fit uses them -- each step takes the device the earlier ones found and returns a new
one, with where each parameter it set came from:

1. **Random reads at depth 1, by size** (``sweep_read_4k`` .. ``sweep_read_1m``): **tR**, **channel
   rate**, **program unit**, **channels** and, when the largest reads are link-bound, the **host link**
   (:func:`swaptrace.ssd.fit.reads.identify_read_curve`).
2. **Random reads at depths 4 and 16** (``qd_read_SIZE_qdN``): **dies per channel**, searched with the
   model itself, and every read parameter refined (:func:`swaptrace.ssd.fit.reads.identify_dies`).
   The pages-per-block prior is then reduced for the capacity simulated
   (:func:`swaptrace.ssd.fit.priors.size_blocks`).
3. **Sequential 128 KiB writes** (``write_seq_128k``): **tPROG**, with tERASE a prior
   (:func:`swaptrace.ssd.fit.writes.identify_program`).
4. **Steady random 4 KiB writes** (``steady_randwrite``; ``sweep_write_4k`` when there are none, flagged
   *not steady*): the **effective spare**, by bisection with the model itself
   (:func:`swaptrace.ssd.fit.writes.identify_spare`), given the pages-per-block prior.
   tPROG and the spare are then refined once more in turn (GC also touches the sequential pass).

Last, the device keeps the capacity fio used modulo a stripe
(:func:`swaptrace.ssd.fit.priors.same_stripe_phase`) and gets the blocks its GC needs to run the lab's
write jobs (:func:`swaptrace.ssd.fit.writes.with_gc_room`).

What stays a prior (:data:`~swaptrace.ssd.fit.priors.PRIORS`): map unit (4 KiB), planes (1: a multi-plane
program unit is indistinguishable from a bigger page), pages per block (128, fewer when the capacity
simulated would leave a die under :data:`~swaptrace.ssd.fit.priors.MIN_BLOCKS_PER_DIE` blocks: one block
per die is the spare's resolution), tERASE (so tPROG absorbs the erase time per unit), the GC policy
(greedy) and reserve, the write buffer. The user capacity is the one fio used (``--size``): the spare
inferred is the spare of that capacity (on a drive used in part, the rest acts as spare once it has been
trimmed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from swaptrace.core.toml_text import toml_comment, toml_string
from swaptrace.errors import ConfigError
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.fit.measurements import Measurements, measurements_from_rows
from swaptrace.ssd.fit.priors import PRIORS, QUICK, same_stripe_phase, size_blocks
from swaptrace.ssd.fit.reads import identify_dies, identify_read_curve
from swaptrace.ssd.fit.writes import identify_program, identify_spare, with_gc_room
from swaptrace.ssd.labjobs import LabJob, run_job


@dataclass(frozen=True)
class FitResult:
    """A fitted device and where each of its parameters came from.

    Attributes
    ----------
    config : SSDConfig
        The fitted device.
    sources : dict
        Parameter name -> the measurement it came from, or ``prior``.
    notes : list of str
        Lines of the device TOML's header: errors of the fit, bounds, blocks added for GC.
    measurements : Measurements, optional
        What the device was fitted to.
    residuals : dict
        The model's relative error on each lab job measured (:func:`residuals`), by job name.
    """

    config: SSDConfig
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    measurements: Measurements | None = None
    residuals: dict[str, float] = field(default_factory=dict)


def fit_device(meas: Measurements, *, name: str = "fitted", say: Callable[[str], None] | None = None,
               quick: bool = False) -> FitResult:
    """Fit an :class:`SSDConfig` to a lab run's measurements (module docstring, steps 1-4).

    Parameters
    ----------
    meas : Measurements
        The lab run (:func:`~swaptrace.ssd.fit.measurements.measurements_from_rows`).
    name : str
        The device's name.
    say : callable, optional
        Where progress lines go.
    quick : bool
        The pipeline's demo budget (:data:`~swaptrace.ssd.fit.priors.QUICK`): fewer read evaluations, one
        tPROG/spare round and a coarser spare search; the TOML says so.
    """
    say = say or (lambda _m: None)
    start = identify_read_curve(meas, name=name, say=say)
    dies = identify_dies(start.config, meas, quick=quick, say=say)
    blocks = size_blocks(dies.config, meas.size_bytes)
    sources = {**start.sources, **dies.sources, **blocks.sources}
    notes = [*start.notes, *dies.notes, *blocks.notes]
    cfg = blocks.config
    # GC touches the sequential pass too: tPROG and spare again, each given the other
    for _ in range(1 if quick else 2):
        program = identify_program(cfg, meas, say=say)
        program_source = program.sources.get("program_us", sources["program_us"])
        spare = identify_spare(program.config, meas, program_source=program_source, quick=quick, say=say)
        sources = {**sources, **program.sources, **spare.sources}
        cfg, round_notes = spare.config, [*program.notes, *spare.notes]
    notes += round_notes  # the last round's: it found the device written
    if quick:
        notes.append(f"quick fit (the pipeline's time budget): {QUICK}")
    cfg = same_stripe_phase(cfg, meas.size_bytes)
    writes = [j for j in meas.bw_mb_s if j.kind != "read"]
    cfg, _, room = with_gc_room(cfg, lambda c: [run_job(c, j) for j in writes], "the lab's write jobs")
    if room is not None:
        notes.append(room)
    return FitResult(cfg, sources, notes, meas)


def predict_lab_jobs(cfg: SSDConfig, jobs) -> dict[LabJob, float]:
    """Simulated bandwidth (MB/s) of each lab job on ``cfg`` (:func:`swaptrace.ssd.labjobs.run_job`)."""
    return {j: run_job(cfg, j)["bw_mb_s"] for j in jobs}


_FIELD_NOTES = {
    "channels": "channels", "dies_per_channel": "dies per channel", "page_bytes": "program unit (planes x page)",
    "read_us": "tR, us", "program_us": "tPROG, us", "channel_mb_s": "channel rate, MB/s",
    "host_mb_s": "host link, MB/s", "spare_factor": "physical spare factor (T-U)/T",
}


def render_toml(res: FitResult, run_dir: str | Path | None = None) -> str:
    """The fitted device as a TOML ``--device`` file, each parameter with where it came from."""
    cfg = res.config
    lines = [toml_comment(f"SSD-model device fitted by `swaptrace ssd fit` to {run_dir or 'a fio run'}"),
             f"# user capacity = the bytes fio used ({cfg.user_bytes}); effective OP {cfg.effective_op:.2%} "
             f"(physical {cfg.physical_op:.2%})"]
    if res.measurements is not None and res.measurements.steady is False:
        lines.append("# WARNING: random writes were not in steady state: the spare below is an upper bound")
    lines += [toml_comment(n) for n in res.notes]
    lines.append("")
    for f in dataclasses.fields(SSDConfig):
        value = getattr(cfg, f.name)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str):
            text = toml_string(value)  # a --name with a quote, a backslash or a newline stays one TOML string
        elif isinstance(value, float):
            text = repr(value)  # every digit: the device written is the device the fit simulated
        else:
            text = str(value)
        why = res.sources.get(f.name, "prior" if f.name in PRIORS else "")
        label = _FIELD_NOTES.get(f.name, "")
        comment = f"  # {label + ': ' if label else ''}{why}" if why or label else ""
        if f.name == "blocks_per_plane":
            comment = "  # sized for the capacity fio used"
        lines.append(f"{f.name} = {text}{comment}")
    return "\n".join(lines) + "\n"


def fit_run(run_dir: str | Path, *, name: str | None = None, say=None, quick: bool = False) -> FitResult:
    """:func:`fit_device` on the ``results.parquet`` of a ``fio run`` folder."""
    from swaptrace.fio import results as resmod

    d = Path(run_dir)
    if not d.is_dir() or not (d / resmod.RESULTS_NAME).is_file():
        raise ConfigError(f"{d}: not a `swaptrace fio run` results folder (no {resmod.RESULTS_NAME})")
    rows, meta = resmod.read_results(d)
    meas = measurements_from_rows(rows, meta)
    res = fit_device(meas, name=name or d.resolve().name, say=say, quick=quick)
    return dataclasses.replace(res, residuals=residuals(res.config, meas))


def residuals(cfg: SSDConfig, meas: Measurements) -> dict[str, float]:
    """The model's relative error on each lab job measured (simulated / measured - 1), by job name."""
    pred = predict_lab_jobs(cfg, meas.bw_mb_s)
    return {j.name: pred[j] / meas.bw_mb_s[j] - 1.0 for j in meas.bw_mb_s}


def write_fit(run_dir: str | Path, out: str | Path, *, name: str | None = None, force: bool = False,
              say=None, quick: bool = False) -> FitResult:
    """Fit the device of ``run_dir`` and write it (atomically) as a TOML device file."""
    from swaptrace.core.traceio import check_output_path

    check_output_path(out, force)  # refused before minutes of fitting, not after
    res = fit_run(run_dir, name=name or Path(out).stem, say=say, quick=quick)
    save_fit(res, run_dir, out, force=force)
    return res


def save_fit(res: FitResult, run_dir: str | Path, out: str | Path, *, force: bool = False) -> None:
    """Write a fitted device (atomically) as a TOML device file."""
    from swaptrace.core.traceio import AtomicPath

    with AtomicPath(out, force=force) as ap:
        ap.tmp.write_text(render_toml(res, run_dir))
