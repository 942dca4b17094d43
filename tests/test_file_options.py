"""Every file a command reads is an input, every file it writes an output: walked from the CLI itself.

The first test walks ``swaptrace.cli.cli`` and every subcommand's click parameters; each one that may name a
file or folder (a ``click.Path`` or ``click.File``, a name or help that says file, folder, path or dir, a positional
argument, or one of the options that take a preset name *or* a file: ``--runtime``, ``--device``, ``--profile``,
``--spec``, ``--costs``, ``--model``, ...) must be declared on its command by
:func:`swaptrace.commands.common.writes`: an output, an input (by name, or by a ``more_inputs`` function that
lists the folder's files), or neither with the reason. A new option cannot escape the output rule unseen.

The second runs, for each (command, file input) pair, the command with an output set to that input, spelled
four ways (as given, ``./x/../NAME``, a symbolic link, a hard link; for a folder input, the output is a file in
it, or for a folder output the folder above the input) and checks: exit 2, one line naming the input, the
input byte-identical and nothing left behind (no new file or folder anywhere under the test's folder).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import click
import pytest
from safety_helpers import invoke, make_inputs

from swaptrace.cli import cli
from swaptrace.commands.common import FileRoles


def commands(group: click.Group = cli, path: tuple[str, ...] = ()):
    """``(path, command)`` of every command under ``group`` (the CLI's own tree)."""
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


#: words in a parameter's name that say it may name a file or folder
PATH_WORDS = {"file", "folder", "path", "dir", "output", "out", "target", "trace", "traces", "stream", "spec",
              "preset", "presets", "device", "devices", "profile", "runtime", "costs", "model", "plot", "iolog",
              "results", "capture", "packed", "baseline"}
#: last words of a name that say it is a quantity (``--device-size``), whatever the words before it
QUANTITY_WORDS = {"size", "bytes", "offset"}
#: words in a parameter's help that say it may name a file or folder
HELP_WORDS = re.compile(r"\b(file|folder|toml|json|path|directory)\b", re.IGNORECASE)


def path_like(param: click.Parameter) -> bool:
    """Whether ``param`` may name a file or folder: by its type, its name, its help, or as a positional argument
    taking text. Flags, numbers and choices never do."""
    if isinstance(param.type, click.Path | click.File):
        return True
    if not isinstance(param.type, click.types.StringParamType) or getattr(param, "is_flag", False):
        return False
    if isinstance(param, click.Argument):
        return True
    words = re.split(r"[_\W]+", param.name or "")
    if words[-1] in QUANTITY_WORDS:
        return False
    return bool(set(words) & PATH_WORDS) or bool(HELP_WORDS.search(getattr(param, "help", None) or ""))


def roles_of(cmd: click.Command) -> FileRoles | None:
    return getattr(cmd.callback, "file_roles", None)


def declared(roles: FileRoles) -> set[str]:
    reads = getattr(roles.more_inputs, "reads", ()) if roles.more_inputs is not None else ()
    return {*roles.outputs, *roles.inputs, *reads, *roles.neither}


ALL = list(commands())


@pytest.mark.parametrize("path,cmd", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_path_option_is_declared(path, cmd):
    names = {p.name for p in cmd.params}
    found = sorted(p.name for p in cmd.params if path_like(p))
    roles = roles_of(cmd)
    if not found:
        assert roles is None or not declared(roles), f"{' '.join(path)}: declares paths it has no parameter for"
        return
    assert roles is not None, f"{' '.join(path)}: parameters {found} may name files; declare them with writes(...)"
    undeclared = [n for n in found if n not in declared(roles)]
    assert not undeclared, f"{' '.join(path)}: {undeclared} may name a file; declare each an input, an output " \
                           "or neither (with the reason)"
    assert declared(roles) <= names, f"{' '.join(path)}: declares {sorted(declared(roles) - names)}, not parameters"
    assert all(reason.strip() for reason in roles.neither.values())
    assert not set(roles.outputs) & set(roles.inputs)


def test_the_walk_finds_the_options_the_issue_names():
    """The detector itself: the options that today take a name *or* a file are found (so the table below is
    about them), and numbers, flags and choices are not."""
    by_cmd = {" ".join(p): {q.name for q in c.params if path_like(q)} for p, c in ALL}
    assert {"runtime", "spec_file", "preset", "output"} <= by_cmd["generate"]
    assert {"profile", "trace"} <= by_cmd["emulate"]
    assert {"device", "costs_file", "compute_baseline", "trace"} <= by_cmd["time"]
    assert {"device"} <= by_cmd["ssd thesis"] and {"run_dir", "out"} <= by_cmd["ssd fit"]
    assert {"model_path"} <= by_cmd["fio compare"] and {"fio_path", "target"} <= by_cmd["fio run"]
    assert {"packed_trace", "device", "fio_target"} <= by_cmd["designs"]
    assert not {"steps", "seed", "force", "memory_fraction", "policy"} & by_cmd["run"]
