"""The CLI answers at once: ``--help``, ``--version`` and every ``CMD --help`` load no heavy library.

What is checked is the import graph (which modules a process has loaded after the command), not a wall time:
numpy, numba, pyarrow, matplotlib, dask, torch and pandas are what make a command take a second to start
(docs/benchmarks.md times it). The lazy command table (``swaptrace.cli.COMMANDS``) is held equal to the
commands themselves, so ``swaptrace --help`` lists what the commands say of themselves.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from swaptrace.cli import COMMANDS, cli

HEAVY = ("numpy", "numba", "pyarrow", "matplotlib", "dask", "torch", "pandas")
PKG = Path(__file__).resolve().parent.parent / "swaptrace"

_PROBE = """
import json, sys
from swaptrace.cli import cli
try:
    cli(sys.argv[1:], prog_name="swaptrace")
except SystemExit:
    pass
print(json.dumps(sorted(m for m in HEAVY if m in sys.modules)), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


def heavy_after(*args: str) -> list[str]:
    """The heavy libraries a fresh process has loaded after ``swaptrace ARGS``."""
    r = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, timeout=120)
    return json.loads(r.stderr.strip().splitlines()[-1])


def _every_command() -> list[tuple[str, ...]]:
    ctx = click.Context(cli)
    out: list[tuple[str, ...]] = []
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        out.append((name,))
        if isinstance(cmd, click.Group):
            out += [(name, sub) for sub in cmd.list_commands(click.Context(cmd))]
    return out


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("fio",)], ids=" ".join)
def test_the_group_loads_nothing_heavy(args):
    assert heavy_after(*args) == []


@pytest.mark.parametrize("path", _every_command(), ids=" ".join)
def test_a_commands_help_loads_nothing_heavy(path):
    assert heavy_after(*path, "--help") == []


def test_the_probe_sees_a_heavy_import():
    """The check can fail: a command that does real work loads numpy."""
    assert "numpy" in heavy_after("inspect", str(PKG / "presets" / "tiny.toml"))


def test_the_command_table_is_every_command_and_says_what_each_says():
    modules = {p.stem for p in (PKG / "commands").glob("*.py") if p.stem not in ("__init__", "common")}
    assert {module for module, _ in COMMANDS.values()} == modules
    ctx = click.Context(cli)
    for name, (_, summary) in COMMANDS.items():
        cmd = cli.get_command(ctx, name)
        assert cmd.name == name
        for width in (30, 45, 60, 200):  # the summary is shortened as the command's own help would be
            assert click.Command(name, help=summary).get_short_help_str(width) == cmd.get_short_help_str(width)
    assert cli.get_command(ctx, "no-such-command") is None
