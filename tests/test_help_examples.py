"""Every command's --help example runs as written.

The examples are read from the commands' own help text (the ``Example:`` block of each docstring) and run
in pipeline order in one temporary folder, so a later example finds the files an earlier one wrote
(``generate`` writes the trace ``emulate`` reads). Files no example writes (a user's model spec, an iolog,
a measured disk profile, a kernel capture) are made first. Examples that need root, a block device, a fio run
on a real disk, an external tool or a running Dask scheduler are skipped with that reason. The examples of the
commands in :data:`LONG` run in tests/test_help_examples_long.py.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from swaptrace.cli import cli

pytestmark = pytest.mark.slow  # the examples run the demo preset and the SSD study as written (about a minute)

#: why an example cannot run here, by a word it contains
SKIP = {
    "sudo": "needs root and the machine-wide capture lock (tests/test_capture_privileged.py runs captures)",
    "capture --cleanup": "removes what killed captures left: machine-wide, not for a test",
    "cachesim": "libCacheSim's own command-line tool, not swaptrace",
    "fio run": "runs fio on a disk for minutes (tests/test_fio_run.py runs small jobs)",
    "runs/": "reads the results of a fio run on a disk",
    "--scheduler tcp://head": "needs a running Dask scheduler named head",
    "run --preset demo": "the whole demo pipeline with fio on this disk (minutes)",
    "--workers 2": "a two-process Dask cluster for rm2's 2000 steps (minutes)",
    "swaptrace train": "trains a real PyTorch model for a minute (tests/test_train.py trains small ones)",
    ".recording.parquet": "reads the recording a `sudo swaptrace capture --record` line makes "
                          "(tests/test_recgen.py records one as root)",
    "my-runtime.toml": "reads the capture of a program the sudo line makes (tests/test_train_capture_privileged.py)",
    "mydrive.toml": "the device `ssd fit` makes from a fio run on a disk (tests/test_fit_roundtrip.py)",
}


def _commands(cmd: click.Command, path: list[str]):
    yield path, cmd
    if isinstance(cmd, click.Group):  # the top group loads each command when named (swaptrace.cli.COMMANDS)
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            yield from _commands(cmd.get_command(ctx, name), [*path, name])


def examples() -> list[tuple[str, str]]:
    """``(command, example line)``: every line of every command's help that is a command (``swaptrace ...``,
    after ``Example:`` or on its own line), ``\\`` continuations joined, in the order ``--help`` lists them."""
    found = []
    for path, cmd in _commands(cli, []):
        joined = ""
        for raw in (cmd.help or "").splitlines():
            line = raw.strip().removeprefix("Example:").strip()
            if not joined and not line.startswith(("swaptrace ", "sudo ", "cachesim ")):
                continue
            joined += (" " if joined else "") + line.rstrip("\\").strip()
            if not line.endswith("\\"):
                found.append((" ".join(path) or "swaptrace", joined.split("  #")[0].strip()))
                joined = ""
    return found


EXAMPLES = examples()
#: commands whose examples run in tests/test_help_examples_long.py, not here: each runs the emulator and the SSD
#: model for tens of seconds (the designs' replays, the whole pipeline, a sweep's Dask cluster), and `make test`
#: gives a whole file to one worker (--dist loadfile), so two files let its two workers share the examples.
#: Their examples read no file made here or by another command's example (designs' generate lines are its own).
LONG = ("designs", "run", "sweep")


def example_id(command: str, line: str) -> str:
    return f"{command}: {line[:60]}"


def _inputs(work: Path) -> None:
    """The files the examples name but no example writes."""
    repo = Path(__file__).resolve().parents[1]
    shutil.copyfile(repo / "swaptrace" / "presets" / "tiny.toml", work / "my-model.toml")
    (work / "job.iolog").write_text("fio version 2 iolog\n/dev/x add\n/dev/x open\n/dev/x write 0 4096\n"
                                    "/dev/x read 4096 8192\n/dev/x close\n")
    (work / "disk.toml").write_text('kind = "swaptrace-device-profile"\nname = "disk"\nsizes_bytes = [4096, 131072]\n'
                                    'depths = [1]\n[read]\nlatency_us = [[90.0], [400.0]]\n'
                                    '[write]\nlatency_us = [[30.0], [300.0]]\n')
    r = CliRunner().invoke(cli, ["generate", "--preset", "tiny", "--steps", "3", "-o", str(work / "traces/tiny.access.parquet")])
    assert r.exit_code == 0, r.output
    # the demo pipeline folder the examples read (`run --preset demo` itself runs fio for minutes: skipped)
    # (on a 4 GiB drive: the examples read its stream and its report, not the drive's size, and the full-size
    # drive's sampled steady state takes seconds)
    r = CliRunner().invoke(cli, ["run", "--preset", "tiny", "--steps", "3", "--memory-fraction", "0.3", "--no-fio",
                                 "--no-thesis", "--ssd-capacity", "4GiB", "-o", str(work / "traces/demo")])
    assert r.exit_code == 0, r.output
    for name in ("tiny.swapio.parquet", "tiny.kernel.swapio.parquet"):  # a capture's stream stands in as B
        r = CliRunner().invoke(cli, ["emulate", str(work / "traces/tiny.access.parquet"), "--memory-fraction", "0.4",
                                     "-o", str(work / "traces" / name)])
        assert r.exit_code == 0, r.output


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    path = tmp_path_factory.mktemp("examples")
    _inputs(path)
    return path


HERE = [(c, e) for c, e in EXAMPLES if c not in LONG]


@pytest.mark.parametrize("command,line", HERE, ids=[example_id(c, e) for c, e in HERE])
def test_help_example_runs_as_written(work, monkeypatch, command, line):
    run_example(work, monkeypatch, command, line)


def run_example(work: Path, monkeypatch, command: str, line: str) -> None:
    """Run ``line`` (an example of ``command``'s --help) in ``work`` as a user would type it there."""
    reasons = [why for word, why in SKIP.items() if word in line]
    if reasons:
        pytest.skip(reasons[0])
    monkeypatch.chdir(work)
    words = shlex.split(line)
    out = None
    if ">" in words:  # a shell redirect: stdout into a file
        i = words.index(">")
        words, out = words[:i], words[i + 1]
    if "-o" in words:  # each example writes a new output, as on a first run (an existing file needs --force)
        target = work / words[words.index("-o") + 1]
        if target.is_file():
            target.unlink()
        elif target.is_dir() and target != work / "traces":  # an earlier example's folder of the same name
            shutil.rmtree(target)
    r = CliRunner().invoke(cli, words[1:])
    assert r.exit_code == 0, f"`{line}` ({command} --help) fails: {r.output[-600:]}"
    if out is not None:
        (work / out).write_text(r.stdout)


def test_every_command_has_an_example():
    with_examples = {c for c, _ in EXAMPLES}
    for path, cmd in _commands(cli, []):
        name = " ".join(path) or "swaptrace"
        if not cmd.hidden and name not in ("swaptrace", "ssd devices") and not isinstance(cmd, click.Group):
            assert name in with_examples or name.split()[0] in with_examples, f"{name} --help has no example"
