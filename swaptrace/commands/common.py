"""Pieces shared by the command modules: progress bars and common options."""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import click

#: the largest count any option takes (steps, pages, requests, ...): int64's positive range
MAX_COUNT = (1 << 63) - 1
#: seeds feed numpy's SeedSequence with the step number; kept to 64 bits as the generator's check does
MAX_SEED = (1 << 64) - 1
#: the longest fio job time taken (seconds): a week
MAX_RUNTIME_S = 7 * 24 * 3600
#: the deepest queue any option takes (fio's own iodepth limit is 65535 for most engines)
MAX_IODEPTH = 65535


class FiniteFloat(click.FloatRange):
    """A float option that refuses nan and +-inf (click's FloatRange lets nan through every bound)."""

    name = "number"

    def convert(self, value, param, ctx):
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


def number(min: float | None = None, max: float | None = None, *, min_open: bool = False,
           max_open: bool = False) -> FiniteFloat:
    """A finite float in [min, max] (open ends when asked), refused in one line otherwise."""
    return FiniteFloat(min, max, min_open=min_open, max_open=max_open)


def bounded(name: str) -> click.ParamType:
    """The click type of option ``name`` from :data:`swaptrace.core.bounds.BOUNDS`: the same bound as the TOML key."""
    from swaptrace.core.bounds import BOUNDS

    b = BOUNDS[name]
    if b.integer:
        return click.IntRange(int(b.lo), int(b.hi), min_open=b.min_open, max_open=b.max_open)
    return number(b.lo, b.hi, min_open=b.min_open, max_open=b.max_open)


class ByteSize(click.ParamType):
    """A byte-size option (``4k``, ``128KiB``, ``2GiB``), read by :func:`swaptrace.core.units.parse_bytes` as the
    option is parsed, so a bad value is refused before the command loads anything heavy."""

    name = "size"

    def __init__(self, positive: bool = False):
        self.positive = positive

    def convert(self, value, param, ctx):
        from swaptrace.core.units import parse_bytes

        if isinstance(value, int):
            return value
        label = max(param.opts, key=len) if param is not None else "size"
        return parse_bytes(value, label, positive=self.positive)  # a ConfigError is the command's one line


def byte_size(positive: bool = False) -> ByteSize:
    """A byte size in bytes (``positive``: refuse 0 too)."""
    return ByteSize(positive)


def count(min: int = 0, max: int = MAX_COUNT) -> click.IntRange:
    """An integer in [min, max]."""
    return click.IntRange(min, max)


class SchedulerAddress(click.ParamType):
    """A Dask scheduler address ``PROTOCOL://HOST:PORT``, checked for its form before any cluster is asked.

    Dask's own parser raises ValueError (a traceback) on a missing port and waits out its connect timeout on
    an empty host; this refuses both in one line. The protocols are distributed's comm backends
    (distributed/comm/registry.py).
    """

    name = "address"
    protocols = ("tcp", "tls", "ucx", "inproc", "ws", "wss")

    def convert(self, value, param, ctx):
        text = str(value).strip()
        proto, sep, rest = text.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or proto not in self.protocols or not host or not colon or not port.isdigit() \
                or not 0 < int(port) < 65536:
            self.fail(f"{value!r} is not a scheduler address ({'|'.join(self.protocols)}://HOST:PORT, "
                      "port 1-65535)", param, ctx)
        return text


def scheduler_address() -> SchedulerAddress:
    """A ``tcp://HOST:PORT`` option value, refused in one line when malformed."""
    return SchedulerAddress()


#: the most local Dask worker processes an option takes
MAX_WORKERS = 1 << 10


def figure_format(path: str) -> str:
    """The matplotlib format of a figure path from its suffix, or a one-line error naming those it draws."""
    from matplotlib.backend_bases import FigureCanvasBase

    from swaptrace.errors import ConfigError

    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = os.path.splitext(str(path))[1].lstrip(".").lower()
    if suffix not in formats:
        raise ConfigError(f"{path}: cannot draw a figure {'without a suffix' if not suffix else 'as .' + suffix}; "
                          f"give one of {', '.join('.' + f for f in sorted(formats))}")
    return suffix


def _label(ctx: click.Context, name: str) -> str:
    """How the user wrote parameter ``name``: ``-o``, ``--plot`` or ``TRACE``."""
    for param in ctx.command.params:
        if param.name == name:
            if isinstance(param, click.Argument):
                return param.human_readable_name
            return min(param.opts, key=lambda o: (not o.startswith("-") or o.startswith("--"), len(o)))
    return name


def _folder_ok(ctx: click.Context, name: str) -> bool:
    """Whether parameter ``name`` may name a folder (a ``click.Path`` that takes one: a dataset, a run folder);
    a name-or-file option (``--preset``, ``--device``, ``--runtime``) reads a file or nothing."""
    param = next((p for p in ctx.command.params if p.name == name), None)
    return param is not None and isinstance(param.type, click.Path) and param.type.dir_okay


def _named_paths(ctx: click.Context, kwargs: dict, names: tuple[str, ...], existing: bool) -> dict:
    """``{label: path}`` of the parameters ``names`` (a repeated option gives one entry per value); inputs
    (``existing``) only where something is there that the parameter reads."""
    found = {}
    for name in names:
        value = kwargs.get(name)
        values = value if isinstance(value, tuple | list) else (value,)
        for i, v in enumerate(values):
            if v is None or not str(v).strip() or (existing and not os.path.exists(v)):
                continue  # a missing input or a preset name: nothing on disk an output could destroy
            if existing and os.path.isdir(v) and not _folder_ok(ctx, name):
                continue  # `--preset tiny` beside a folder `tiny/`: the preset is read, not the folder
            found[_label(ctx, name) + (f" #{i + 1}" if len(values) > 1 else "")] = v
    return found


@dataclass(frozen=True)
class FileRoles:
    """What a command does with each parameter that may name a file or folder (declared by :func:`writes`).

    ``outputs`` are written; ``inputs`` are read (a file, or a folder and every file in it), whether named by
    an argument or an option; ``more_inputs(kwargs)`` adds the files a command reads that no parameter names
    (a run folder's files, the trace a stream's metadata names); ``neither`` maps the parameters that look
    like paths but are neither read nor written to the reason. ``tests/test_file_options.py`` walks the CLI and
    holds every path-like parameter of every command to this declaration.
    """

    outputs: tuple[str, ...]
    inputs: tuple[str, ...]
    more_inputs: Callable[[dict], dict] | None
    neither: Mapping[str, str]


def _check_inputs_exist(ctx: click.Context, kwargs: dict, names: tuple[str, ...]) -> None:
    """Refuse a missing input file or folder before the command imports anything heavy.

    Only parameters typed ``click.Path`` are held to it: a name-or-file option (``--preset``, ``--device``)
    may name something that is not on disk. The message is the one the readers give
    (:func:`swaptrace.core.inputs.check_file`), so a user sees the same line whichever check finds it first.
    """
    from swaptrace.errors import TraceFileError

    for name in names:
        param = next((p for p in ctx.command.params if p.name == name), None)
        if param is None or not isinstance(param.type, click.Path):
            continue
        value = kwargs.get(name)
        for v in value if isinstance(value, tuple | list) else (value,):
            if v is not None and str(v).strip() and not os.path.lexists(v):
                raise TraceFileError(f"{v}: no such file")


def writes(outputs: tuple[str, ...], inputs: tuple[str, ...] = (),
           more_inputs: Callable[[dict], dict] | None = None, *, neither: Mapping[str, str] | None = None):
    """Declare a command's output and input parameters; the output rule (:mod:`swaptrace.core.outputs`) is
    checked on them before the command runs: no output is an input (by any spelling: relative, ``..``, a link,
    a hard link) or lies in an input folder, no output folder holds an input, no two outputs share a path.
    ``more_inputs(kwargs)`` adds inputs found from the arguments (a run folder's files); ``neither`` names
    the path-like parameters that are neither read nor written, with the reason. A command that writes
    nothing declares its inputs all the same (``outputs=()``). Put it just above the ``def``.
    """
    roles = FileRoles(tuple(outputs), tuple(inputs), more_inputs, dict(neither or {}))

    def decorate(f):
        @functools.wraps(f)
        def checked(*args, **kwargs):
            _check_inputs_exist(click.get_current_context(), kwargs, roles.inputs)
            if roles.outputs:
                from swaptrace.core.outputs import check_distinct

                ctx = click.get_current_context()
                outs = _named_paths(ctx, kwargs, roles.outputs, existing=False)
                if outs:
                    ins = _named_paths(ctx, kwargs, roles.inputs, existing=True)
                    if more_inputs is not None:
                        ins.update({k: v for k, v in more_inputs(kwargs).items()
                                    if v is not None and str(v).strip() and os.path.exists(v)})
                    check_distinct(outs, ins)
            return f(*args, **kwargs)

        checked.file_roles = roles
        return checked

    return decorate


def reads(*params: str):
    """Mark a ``more_inputs`` function with the parameters whose files it lists (for :class:`FileRoles`)."""
    def mark(f):
        f.reads = params
        return f

    return mark


def _metadata(path) -> dict:
    """The swaptrace metadata of a Parquet input, or ``{}`` if it cannot be read (the command says why later)."""
    from swaptrace.errors import SwaptraceError

    if path is None or not os.path.exists(path):
        return {}
    try:
        from swaptrace.core.traceio import open_trace

        meta = open_trace(path).meta
    except (SwaptraceError, OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


@reads("stream")
def stream_trace_input(kwargs: dict) -> dict:
    """``time``: the access trace STREAM's metadata names, which ``--compute mlp`` reads when no ``--trace``,
    ``--step-compute-us`` or ``--compute-baseline`` is given (``swaptrace.timing.model.stream_trace_path``)."""
    if any(kwargs.get(k) is not None for k in ("trace", "step_compute_us", "compute_baseline")) \
            or kwargs.get("compute") != "mlp":
        return {}
    trace = _metadata(kwargs.get("stream")).get("trace")
    return {"the stream's trace": trace} if isinstance(trace, str) and trace.strip() else {}


@reads("capture")
def captured_model_input(kwargs: dict) -> dict:
    """``runtime-profile``: the model spec CAPTURE's command line names (``swaptrace train --spec FILE``), read
    when neither ``--spec`` nor ``--preset`` is given."""
    if kwargs.get("spec_file") is not None or kwargs.get("preset") is not None:
        return {}
    command = _metadata(kwargs.get("capture")).get("command")
    if not isinstance(command, list) or not all(isinstance(w, str) for w in command) or "train" not in command:
        return {}
    rest = command[command.index("train") + 1:]
    given = {w: rest[i + 1] for i, w in enumerate(rest[:-1]) if w in ("--spec", "--preset")}
    model = given.get("--spec") or given.get("--preset")
    return {"the capture's model": model} if model and os.path.isfile(model) else {}


@reads("spec_file")
def sweep_file_inputs(kwargs: dict) -> dict:
    """``sweep``: the traces, presets and devices SWEEP.toml names (files, where they are files)."""
    from swaptrace.errors import SwaptraceError

    spec_file = kwargs.get("spec_file")
    if spec_file is None or not os.path.exists(spec_file):
        return {}
    try:
        from swaptrace.core.inputs import read_toml

        raw = read_toml(spec_file, "sweep TOML")
    except (SwaptraceError, OSError, ValueError):
        return {}
    raw = raw.get("sweep", raw) if isinstance(raw, dict) else {}
    found = {}
    for key in ("traces", "presets", "devices") if isinstance(raw, dict) else ():
        values = raw.get(key)
        values = [values] if isinstance(values, str) else values if isinstance(values, list) else []
        for i, v in enumerate(values):  # a trace may be a dataset folder; a preset or device is a file or a name
            if isinstance(v, str) and (key == "traces" or os.path.isfile(v)):
                found[f"{os.path.basename(spec_file)}'s {key[:-1]} #{i + 1}"] = v
    return found


def _files_under(folder, skip=None) -> dict:
    """``{relative name: path}`` of the files under ``folder``, those under the folder ``skip`` left out."""
    from pathlib import Path

    from swaptrace.core.outputs import MAX_FOLDER_FILES

    found = {}
    for root, _dirs, files in os.walk(folder):
        real = Path(os.path.realpath(root))
        if skip is not None and (real == skip or skip in real.parents):
            continue
        for name in files:
            if len(found) >= MAX_FOLDER_FILES:
                return found
            p = Path(root) / name
            found[str(p.relative_to(folder))] = p
    return found


def folder_files(param: str, label: str, *, recursive: bool = True):
    """A ``more_inputs`` listing the files of the folder parameter ``param`` (not the folder itself: an output
    may lie inside it, as ``fio run``'s ``JOBS_DIR/runs/TIME`` does, but never be one of them or hold them)."""
    from pathlib import Path

    @reads(param)
    def files(kwargs: dict) -> dict:
        d = Path(kwargs[param])
        if not d.is_dir():
            return {}
        listed = _files_under(d) if recursive else {p.name: p for p in d.iterdir() if p.is_file()}
        return {f"{label}/{name}": p for name, p in listed.items()}

    return files


@reads("folder")
def report_inputs(kwargs: dict) -> dict:
    """``report``: every file under FOLDER but the report's own (the output folder, default FOLDER/report, when it
    lies inside FOLDER); an output that is FOLDER or holds it holds them all."""
    from pathlib import Path

    folder = Path(kwargs["folder"])
    if not folder.is_dir():
        return {}
    out = Path(os.path.realpath(kwargs["out"] if kwargs.get("out") is not None else folder / "report"))
    inside = Path(os.path.realpath(folder)) in out.parents
    return {f"FOLDER/{name}": p for name, p in _files_under(folder, out if inside else None).items()}


@dataclass(frozen=True)
class ModeRule:
    """An option that belongs to a mode: given on the command line outside it (``without=False``), or inside
    it (``without=True``), it would be silently unused, so it is refused in one line naming both.

    A mode is an option that is set (``--steady``, ``--plot``), an option with a value (``--precondition
    steady``), an argument that is given (``TRACE``) or ``-- CMD`` (a program after ``--``); several modes are
    alternatives (any one of them will do).
    """

    option: str
    modes: tuple[str, ...]
    without: bool = False
    why: str = ""

    def message(self, held: str | None = None) -> str:
        """The one line: ``--round goes only with --steady ...``; for a ``without`` rule, the mode ``held``."""
        why = f" ({self.why})" if self.why else ""
        if self.without:
            return f"{self.option} does not go with {held or ' or '.join(self.modes)}{why}: it would be ignored; " \
                "leave one of them out"
        modes = " or ".join(self.modes)
        return f"{self.option} goes only with {modes}{why}: without it, it would be ignored; give {modes} or " \
            f"leave {self.option} out"


def _param_of(ctx: click.Context, name: str) -> click.Parameter | None:
    """The parameter written ``name`` (``--steady``, ``--no-lock-baseline``, ``TRACE``) of the context's command."""
    for param in ctx.command.params:
        if isinstance(param, click.Argument) and param.human_readable_name == name:
            return param
        if isinstance(param, click.Option) and name in (*param.opts, *param.secondary_opts):
            return param
    return None


def _given(ctx: click.Context, name: str) -> bool:
    param = _param_of(ctx, name)
    return param is not None and ctx.get_parameter_source(param.name) == click.core.ParameterSource.COMMANDLINE


def _holds(ctx: click.Context, kwargs: dict, mode: str) -> bool:
    """Whether ``mode`` is the command's: ``-- CMD`` given, an argument given, a flag set, an option set (or
    given the value that follows its name)."""
    if mode == "-- CMD":
        return ctx.meta.get("swaptrace.capture.argv") is not None
    name, _, value = mode.partition(" ")
    param = _param_of(ctx, name)
    if param is None:
        raise AssertionError(f"mode {mode!r}: no parameter {name} on {ctx.command_path}")
    current = kwargs.get(param.name)
    if value:
        return current is not None and str(current) == value
    if isinstance(param, click.Option) and param.is_flag:
        return bool(current) if name in param.opts else not current
    return current is not None and current != ()


def check_modes(ctx: click.Context, kwargs: dict, rules) -> None:
    """Refuse the first rule's option given outside its mode (or inside, for ``without`` rules)."""
    from swaptrace.errors import ConfigError

    for rule in rules:
        if not _given(ctx, rule.option):
            continue
        held = [m for m in rule.modes if _holds(ctx, kwargs, m)]
        if bool(held) == rule.without:
            raise ConfigError(rule.message(held[0] if held else None))


def _mode_rule(rule: ModeRule):
    def decorate(f):
        @functools.wraps(f)
        def checked(*args, **kwargs):
            check_modes(click.get_current_context(), kwargs, (rule,))
            return f(*args, **kwargs)

        checked.mode_rules = (rule, *getattr(f, "mode_rules", ()))
        return checked

    return decorate


def only_with(option: str, *modes: str, why: str = ""):
    """Refuse ``option`` given without any of ``modes`` (see :class:`ModeRule`): ``only_with("--round",
    "--steady")``, ``only_with("--rwmix-read", "--pattern randrw", "--pattern swap")``,
    ``only_with("--window", "-- CMD")``. Put it with the command's other decorators, below the options."""
    return _mode_rule(ModeRule(option, tuple(modes), False, why))


def never_with(option: str, *modes: str, why: str = ""):
    """Refuse ``option`` given with any of ``modes``: ``never_with("--drive-writes", "--real")``."""
    return _mode_rule(ModeRule(option, tuple(modes), True, why))


force_option = click.option("--force", is_flag=True, help="Overwrite an existing output file.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (for machines).")


def resolve_runtime(text: str):
    """``--runtime``: a recording (``capture --record``; checked for its kind and columns) or a runtime profile
    (a shipped name or a TOML file), read before any work is done (generate, run)."""
    from swaptrace.workload.process import is_recording, load_runtime_profile

    if is_recording(text):
        from swaptrace.capture.process_trace import Recording, check_recording

        check_recording(text)
        return Recording(text)
    return load_runtime_profile(text)


def progress_enabled() -> bool:
    """Progress bars only on a terminal; quiet in pipes, CI and tests."""
    return sys.stderr.isatty()


class _NullBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int, current_item=None) -> None:
        pass


def progressbar(length: int, label: str):
    """A click progress bar on stderr, or a silent stand-in when not on a terminal.

    Library functions take a ``progress`` callback ``f(n_done_increment)``;
    pass ``bar.update``.
    """
    if progress_enabled():
        return click.progressbar(length=length, label=label, file=sys.stderr, show_pos=True)
    return _NullBar()


def echo_summary(summary: dict[str, Any], as_json: bool, render: Callable[[dict[str, Any]], str] | None = None) -> None:
    """Print a summary as JSON or as aligned ``key: value`` lines."""
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True, default=str))
        return
    if render is not None:
        click.echo(render(summary))
        return
    width = max((len(k) for k in summary), default=0)
    for key, value in summary.items():
        if isinstance(value, float):
            value = f"{value:.6g}"
        click.echo(f"{key:<{width}}  {value}")
