"""swaptrace: what swapping DLRM embedding tables to an SSD costs, why, and what would make it cheaper.

The pipeline (one package per stage, see docs/architecture.md)::

    spec -> generate -> access trace -> emulate / capture -> swap I/O stream
         -> ssd (model) / fio (real disk) -> time -> designs -> report

This module is the package's public face (docs/api.md): the entry point of every stage and the types they
return, importable as ``swaptrace.<name>``. Importing it stays cheap -- it loads only the version and
:func:`mark_step` -- because it runs before every ``import swaptrace.x``, a training script's
``from swaptrace import mark_step`` among them; each entry point is imported on first use (PEP 562
``__getattr__``) from the table :data:`_ENTRY_POINTS`. ``swaptrace.emulate`` and ``swaptrace.capture`` are the stage packages, so their
functions are on the face as :func:`emulate_trace` and :func:`capture_trace`.
"""

from __future__ import annotations

from swaptrace.core.version import __version__
from swaptrace.markers import mark_step

#: face name -> (module, name in that module); each is imported on first access
_ENTRY_POINTS: dict[str, tuple[str, str]] = {
    # generate
    "generate_trace": ("swaptrace.workload.generate", "generate_trace"),
    "load_spec": ("swaptrace.workload.spec", "load_spec"),
    "ModelSpec": ("swaptrace.workload.spec", "ModelSpec"),
    # mrc
    "exact_mrc": ("swaptrace.mrc", "exact_mrc"),
    "shards_mrc": ("swaptrace.mrc", "shards_mrc"),
    "MissRatioCurve": ("swaptrace.mrc", "MissRatioCurve"),
    # emulate (swaptrace.emulate is the package; its function is emulate_trace here)
    "emulate_trace": ("swaptrace.emulate.run", "emulate"),
    "EmulatorConfig": ("swaptrace.emulate.config", "EmulatorConfig"),
    "EmulationResult": ("swaptrace.emulate.run", "EmulationResult"),
    # capture (root; swaptrace.capture is the package; its function is capture_trace here)
    "capture_trace": ("swaptrace.capture", "capture"),
    "capture_command": ("swaptrace.capture.command", "capture_command"),
    "CaptureResult": ("swaptrace.capture", "CaptureResult"),
    # compare
    "compare_streams": ("swaptrace.compare", "compare_streams"),
    "StreamComparison": ("swaptrace.compare", "StreamComparison"),
    # ssd model
    "load_device": ("swaptrace.ssd.config", "load_device"),
    "SSDConfig": ("swaptrace.ssd.config", "SSDConfig"),
    "replay": ("swaptrace.ssd.run", "replay"),
    "synth": ("swaptrace.ssd.run", "synth"),
    "SSDResult": ("swaptrace.ssd.run", "SSDResult"),
    # fio
    "build_jobs": ("swaptrace.fio.jobs", "build_jobs"),
    "JobFolder": ("swaptrace.fio.jobs", "JobFolder"),
    "run_jobs": ("swaptrace.fio.runner", "run_jobs"),
    "RunOutcome": ("swaptrace.fio.runner", "RunOutcome"),
    "read_results": ("swaptrace.fio.results", "read_results"),
    # ssd fit
    "fit_run": ("swaptrace.ssd.fit.device", "fit_run"),
    "FitResult": ("swaptrace.ssd.fit.device", "FitResult"),
    # time
    "predict": ("swaptrace.timing.model", "predict"),
    "TimingResult": ("swaptrace.timing.model", "TimingResult"),
    # designs
    "compare_designs": ("swaptrace.designs.table", "compare_designs"),
    "DesignSet": ("swaptrace.designs.table", "DesignSet"),
    "DesignComparison": ("swaptrace.designs.table", "DesignComparison"),
    # report
    "build_report": ("swaptrace.pipeline.report", "build_report"),
    "Report": ("swaptrace.pipeline.report", "Report"),
    # run (the whole chain)
    "run_pipeline": ("swaptrace.pipeline.run", "run_pipeline"),
    "PipelineOptions": ("swaptrace.pipeline.run", "PipelineOptions"),
    "PipelineResult": ("swaptrace.pipeline.run", "PipelineResult"),
    "progressbar": ("swaptrace.commands.common", "progressbar"),
    # the files every stage reads and writes
    "open_trace": ("swaptrace.core.traceio", "open_trace"),
    "TraceFile": ("swaptrace.core.traceio", "TraceFile"),
    # errors
    "SwaptraceError": ("swaptrace.errors", "SwaptraceError"),
    "SpecError": ("swaptrace.errors", "SpecError"),
    "TraceFileError": ("swaptrace.errors", "TraceFileError"),
    "OutputError": ("swaptrace.errors", "OutputError"),
    "ConfigError": ("swaptrace.errors", "ConfigError"),
    "GCStallError": ("swaptrace.errors", "GCStallError"),
    "ToolError": ("swaptrace.errors", "ToolError"),
    "PrivilegeError": ("swaptrace.errors", "PrivilegeError"),
}

#: every face name, by stage (the same names as :data:`_ENTRY_POINTS`, plus the two loaded at once)
__all__ = [
    "__version__", "mark_step",
    "generate_trace", "load_spec", "ModelSpec",
    "exact_mrc", "shards_mrc", "MissRatioCurve",
    "emulate_trace", "EmulatorConfig", "EmulationResult",
    "capture_trace", "capture_command", "CaptureResult",
    "compare_streams", "StreamComparison",
    "load_device", "SSDConfig", "replay", "synth", "SSDResult",
    "build_jobs", "JobFolder", "run_jobs", "RunOutcome", "read_results",
    "fit_run", "FitResult",
    "predict", "TimingResult",
    "compare_designs", "DesignSet", "DesignComparison",
    "build_report", "Report",
    "run_pipeline", "PipelineOptions", "PipelineResult", "progressbar",
    "open_trace", "TraceFile",
    "SwaptraceError", "SpecError", "TraceFileError", "OutputError", "ConfigError", "GCStallError", "ToolError",
    "PrivilegeError",
]

#: ``typing.TYPE_CHECKING`` without importing typing (~9 ms): static checkers take the block below as run
TYPE_CHECKING = False

if TYPE_CHECKING:  # what static checkers and editors see; at run time the table above loads them
    from swaptrace.capture import CaptureResult
    from swaptrace.capture import capture as capture_trace
    from swaptrace.capture.command import capture_command
    from swaptrace.commands.common import progressbar
    from swaptrace.compare import StreamComparison, compare_streams
    from swaptrace.core.traceio import TraceFile, open_trace
    from swaptrace.designs.table import DesignComparison, DesignSet, compare_designs
    from swaptrace.emulate.config import EmulatorConfig
    from swaptrace.emulate.run import EmulationResult
    from swaptrace.emulate.run import emulate as emulate_trace
    from swaptrace.errors import (
        ConfigError,
        GCStallError,
        OutputError,
        PrivilegeError,
        SpecError,
        SwaptraceError,
        ToolError,
        TraceFileError,
    )
    from swaptrace.fio.jobs import JobFolder, build_jobs
    from swaptrace.fio.results import read_results
    from swaptrace.fio.runner import RunOutcome, run_jobs
    from swaptrace.mrc import MissRatioCurve, exact_mrc, shards_mrc
    from swaptrace.pipeline.report import Report, build_report
    from swaptrace.pipeline.run import PipelineOptions, PipelineResult, run_pipeline
    from swaptrace.ssd.config import SSDConfig, load_device
    from swaptrace.ssd.fit.device import FitResult, fit_run
    from swaptrace.ssd.run import SSDResult, replay, synth
    from swaptrace.timing.model import TimingResult, predict
    from swaptrace.workload.generate import generate_trace
    from swaptrace.workload.spec import ModelSpec, load_spec


def __getattr__(name: str) -> object:
    """Import a face name's module on first use and keep the name here (PEP 562).

    Parameters
    ----------
    name : str
        A name of :data:`__all__`.

    Returns
    -------
    object
        The function or class the name stands for.

    Raises
    ------
    AttributeError
        ``name`` is not on the face (the import system then looks for a subpackage of that name).
    """
    import importlib

    try:
        module, attr = _ENTRY_POINTS[name]
    except KeyError:
        raise AttributeError(f"module 'swaptrace' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # later lookups find it without calling this again
    return value


def __dir__() -> list[str]:
    """The module's names and every face name, loaded or not (for ``dir()`` and tab completion)."""
    return sorted(set(globals()) | set(__all__))
