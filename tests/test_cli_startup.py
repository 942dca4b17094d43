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


#: usage errors a command finds before its real work: a missing input, a bad value, a name that is not a preset
USAGE_ERRORS = [
    ("generate", "--preset", "nope", "-o", "OUT.parquet"),
    ("generate", "--runtime", "nope", "-o", "OUT.parquet"),
    ("generate", "--page-bytes", "abc", "-o", "OUT.parquet"),
    ("train", "--spec", "nope"),
    ("run", "--memory", "abc"),
    ("emulate", "MISSING.parquet", "--memory", "1GiB", "-o", "OUT.parquet"),
    ("emulate", "STREAM", "--memory", "abc", "-o", "OUT.parquet"),
    ("mrc", "MISSING.parquet", "-o", "OUT.csv"),
    ("ssd", "MISSING.parquet"),
    ("ssd", "replay", "STREAM", "--capacity", "abc"),
    ("inspect", "MISSING.parquet"),
    ("compare", "MISSING.parquet", "MISSING2.parquet"),
    ("export", "MISSING.parquet", "-o", "OUT.bin"),
    ("runtime-profile", "MISSING.parquet", "-o", "OUT.toml"),
    ("time", "MISSING.parquet", "--device", "tiny"),
    ("time", "STREAM", "--device", "nope"),
    ("designs", "STREAM", "--memory", "abc", "-o", "OUT"),
    ("sweep", "--preset", "nope", "--memory", "1GiB", "-o", "OUT"),
    ("sweep", "--preset", "tiny", "--memory", "abc", "-o", "OUT"),
    ("capture", "--memory", "abc", "-o", "OUT.parquet", "--", "true"),
    ("capture", "--memory", "1GiB", "--", "true"),
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=" ".join)
def test_a_usage_error_loads_nothing_heavy(args, tmp_path):
    """A bad option value or a missing input is refused (exit 2, one line) before numpy, numba or Dask load.

    ``STREAM`` is an existing file whose contents the command never reaches (the bad value comes first).
    """
    stream = tmp_path / "stream.parquet"
    stream.write_bytes(b"not read")
    argv = [str(stream) if a == "STREAM" else str(tmp_path / a) if a.isupper() or a.startswith("OUT") else a
            for a in args]
    probe = _PROBE.replace("except SystemExit:\n    pass", "except SystemExit as e:\n    print('EXIT', e.code, file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert lines[-2] == "EXIT 2", r.stderr
    assert json.loads(lines[-1]) == [], r.stderr
    assert not any(p.name.startswith("OUT") for p in tmp_path.iterdir())
