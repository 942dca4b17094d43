"""The ``swaptrace`` command: a thin click layer over the library.

Each stage's commands live in ``swaptrace/commands/<stage>.py`` and expose a
``command`` (a click command or group); this module names them in
:data:`COMMANDS` and turns every :class:`~swaptrace.errors.SwaptraceError` (and
OS errors on user paths) into one line on stderr and exit code 2 -- never a
traceback.

A command's module is imported only when that command is named (click's lazy
group pattern): ``swaptrace --help`` lists the commands from :data:`COMMANDS`
alone, and ``swaptrace CMD --help`` loads one light module (its options), so
neither pays for numpy, numba, pyarrow or matplotlib; the command's body
imports what its work needs (``tests/test_cli_startup.py`` checks both).
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Mapping

import click

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


#: command name -> (its module in swaptrace/commands/, its summary as ``swaptrace --help`` shows it: the first
#: sentence of the command's own help, which tests/test_cli_startup.py holds equal); in pipeline order
COMMANDS: dict[str, tuple[str, str]] = {
    "presets": ("presets", "List the model presets, or show one (NAME or a .toml file) with its footprint."),
    "generate": ("generate", "Generate a page-level access trace of DLRM training steps (Parquet)."),
    "train": ("train", "Train a DLRM in PyTorch on exactly the lookups `generate` draws for the same spec and seed."),
    "inspect": ("inspect", "Show what a swaptrace Parquet file holds: kind, rows, steps, footprint, read/write split, "
                           "alloc and free events and busiest regions (access traces), and its metadata."),
    "emulate": ("emulate", "Emulate Linux swapping of TRACE under a DRAM budget; write the swap I/O stream."),
    "mrc": ("mrc", "LRU miss-ratio curve of TRACE for every memory size, in one pass."),
    "export": ("export", "Export TRACE for libCacheSim (oracleGeneral binary) or as CSV, next-access times "
                         "included; or a swap I/O stream for MQSim (--format mqsim)."),
    "capture": ("capture", "Record swap I/O under the real kernel: replay TRACE, or run -- CMD (root only)."),
    "runtime-profile": ("runtime_profile", "Derive a runtime profile from a `capture -- CMD` of a training program."),
    "compare": ("compare", "Compare swap I/O stream B with reference A (e.g. emulator vs kernel)."),
    "ssd": ("ssd", "Simulate an SSD (FTL, GC, write amplification, die/channel timing)."),
    "fio": ("fio", "Validate the model on a real disk with fio."),
    "time": ("time", "Predict the step time and training slowdown of STREAM on a device."),
    "designs": ("designs", "Compare swap designs on TRACE at one DRAM budget: Linux's stream and the fixes."),
    "run": ("run", "Run generate → mrc → emulate → ssd → fio jobs → fio run → report."),
    "sweep": ("sweep", "Run a parameter sweep on Dask distributed and write one Parquet dataset of results."),
    "report": ("report", "Draw the figures of FOLDER and write report.md beside them."),
}


class _CommandTable(Mapping):
    """``name -> command`` over :data:`COMMANDS`, each command's module imported when it is first looked up
    (what click's ``Group.commands`` is, for code that walks a group's commands)."""

    def __getitem__(self, name: str) -> click.Command:
        entry = COMMANDS[name]
        # an import error here is a broken install, not a missing command: it propagates as it is
        return importlib.import_module(f"swaptrace.commands.{entry[0]}").command

    def __iter__(self):
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class SwaptraceGroup(click.Group):
    """Loads each command when it is named, keeps them in pipeline order, and maps library and usage errors
    to one line and exit code 2."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = _CommandTable()

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return self.commands[name] if name in COMMANDS else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help`` from :data:`COMMANDS`, without importing any command."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        # a stand-in command shortens the summary as the real one would (click's own rule, at this width)
        rows = [(name, click.Command(name, help=summary).get_short_help_str(limit))
                for name, (_, summary) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            raise _help_or_one_line(exc) from None

    def invoke(self, ctx: click.Context):
        from swaptrace.core.signals import sigterm_as_interrupt

        try:
            # SIGTERM (a service manager's stop, `kill`) ends a command as Ctrl-C does: one line, exit 130, its
            # partial outputs removed, rather than the process killed with its temporaries left behind
            with sigterm_as_interrupt():
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


if __name__ == "__main__":  # `python -m swaptrace.cli ...` runs the command (it did nothing, exit 0, before)
    cli(prog_name="swaptrace")
