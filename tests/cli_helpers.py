"""Running the CLI in-process (click's CliRunner) and reading its one-line errors."""

from __future__ import annotations

import click
from click.testing import CliRunner, Result

from swaptrace.cli import cli


def run_cli(*args) -> Result:
    """``swaptrace ARGS...`` in this process; arguments may be paths or numbers."""
    return CliRunner().invoke(cli, [str(a) for a in args])


def the_error(r: Result) -> str:
    """The one ``Error: ...`` line of a rejected command (exit code 2, no traceback), asserted as such."""
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    errors = [line for line in r.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, r.output
    return errors[0]


def every_command(group: click.Group = cli, path: tuple[str, ...] = ()):
    """``(path, command)`` of every command under ``group`` (the CLI's own tree, each command loaded)."""
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from every_command(cmd, (*path, name))
        else:
            yield (*path, name), cmd
