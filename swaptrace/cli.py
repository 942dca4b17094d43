"""The ``swaptrace`` command: a thin click layer over the library.

Each stage's commands live in ``swaptrace/commands/<stage>.py`` and expose a
``command`` (a click command or group); this module assembles them and turns
every :class:`~swaptrace.errors.SwaptraceError` (and OS errors on user paths)
into one line on stderr and exit code 2 -- never a traceback.
"""

from __future__ import annotations

import re
import sys

import click

from swaptrace.commands import (
    capture,
    compare,
    designs,
    emulate,
    export,
    fio,
    generate,
    inspect,
    mrc,
    presets,
    report,
    run,
    runtime_profile,
    ssd,
    sweep,
    time,
    train,
)
from swaptrace.core.version import __version__
from swaptrace.errors import SwaptraceError


class UserError(click.ClickException):
    """A one-line error with exit code 2 (bad input, as opposed to a crash).

    A temporary output's name (``.NAME.PID.RANDOM.partial``, an internal detail) is shown as the output's own.
    """

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(_PARTIAL.sub(r"\1", " ".join(str(message).split())))


_PARTIAL = re.compile(r"\.([^/\s]+?)\.\d+\.[A-Za-z0-9_]+\.partial")


def _help_or_one_line(exc: click.UsageError):
    """A group called with nothing (``swaptrace fio``) shows its help as click would, exit 0; any other usage
    error becomes one line."""
    if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:
        click.echo(exc.ctx.get_help())
        sys.exit(0)
    return _one_line_usage_error(exc)


def _one_line_usage_error(exc: click.UsageError) -> UserError:
    """click's three-line Usage/Try/Error as one line that names the command and, where it has them,
    the valid choices (click's own message already lists a Choice's values and similar options)."""
    message = " ".join(exc.format_message().split())
    if isinstance(exc, click.NoSuchOption) and not exc.possibilities and exc.ctx is not None:
        names = sorted({o for p in exc.ctx.command.params for o in getattr(p, "opts", []) if o.startswith("--")})
        message += f" (options: {', '.join(names)})" if names else ""
    elif "No such command" in message and exc.ctx is not None and isinstance(exc.ctx.command, click.Group):
        message += f" (commands: {', '.join(exc.ctx.command.list_commands(exc.ctx))})"
    # the program's own name, also when run as `python -m` or from click's test runner
    where = " ".join(["swaptrace", *exc.ctx.command_path.split()[1:]]) if exc.ctx is not None else "swaptrace"
    return UserError(f"{where}: {message}")


class SwaptraceGroup(click.Group):
    """Keeps commands in pipeline order and maps library and usage errors to one line and exit code 2."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            raise _help_or_one_line(exc) from None

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _help_or_one_line(exc) from None
        except SwaptraceError as exc:
            raise UserError(str(exc)) from None
        except OSError as exc:  # the user's environment (a full disk, a name too long, no permission): one line
            where = f"{exc.filename}: " if exc.filename else ""
            raise UserError(f"{where}{exc.strerror or exc}") from None
        except KeyboardInterrupt:
            click.echo("Interrupted; partial outputs were removed.", err=True)
            sys.exit(130)


@click.group(cls=SwaptraceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="swaptrace")
def cli() -> None:
    """Measure what swapping DLRM embedding tables to an SSD costs.

    \b
    Pipeline:  generate -> emulate (or capture) -> ssd / fio -> report
    Example:   swaptrace generate --preset demo --steps 50 -o traces/demo.access.parquet
    """


# in pipeline order, as ``--help`` lists them
for _module in (presets, generate, train, inspect, emulate, mrc, export, capture, runtime_profile, compare, ssd, fio,
                time, designs, run, sweep, report):
    cli.add_command(_module.command)


if __name__ == "__main__":  # `python -m swaptrace.cli ...` runs the command (it did nothing, exit 0, before)
    cli(prog_name="swaptrace")
