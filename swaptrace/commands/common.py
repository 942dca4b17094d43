"""Pieces shared by the command modules: progress bars and common options."""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable
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


def _named_paths(ctx: click.Context, kwargs: dict, names: tuple[str, ...], existing: bool) -> dict:
    """``{label: path}`` of the parameters ``names`` (a repeated option gives one entry per value)."""
    found = {}
    for name in names:
        value = kwargs.get(name)
        values = value if isinstance(value, tuple | list) else (value,)
        for i, v in enumerate(values):
            if v is None or not str(v).strip() or (existing and not os.path.exists(v)):
                continue  # a missing input or a preset name: nothing on disk an output could destroy
            found[_label(ctx, name) + (f" #{i + 1}" if len(values) > 1 else "")] = v
    return found


def writes(outputs: tuple[str, ...], inputs: tuple[str, ...] = (),
           more_inputs: Callable[[dict], dict] | None = None):
    """Declare a command's output and input parameters; the output rule (:mod:`swaptrace.core.outputs`) is
    checked on them before the command runs: no output is an input or lies in an input folder, no two
    outputs share a path. ``more_inputs(kwargs)`` adds inputs found from the arguments (a run folder's files).
    Put it just above the ``def``.
    """
    def decorate(f):
        @functools.wraps(f)
        def checked(*args, **kwargs):
            from swaptrace.core.outputs import check_distinct

            ctx = click.get_current_context()
            ins = _named_paths(ctx, kwargs, inputs, existing=True)
            if more_inputs is not None:
                ins.update({k: v for k, v in more_inputs(kwargs).items() if v is not None and os.path.exists(v)})
            check_distinct(_named_paths(ctx, kwargs, outputs, existing=False), ins)
            return f(*args, **kwargs)

        return checked

    return decorate


force_option = click.option("--force", is_flag=True, help="Overwrite an existing output file.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (for machines).")


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
