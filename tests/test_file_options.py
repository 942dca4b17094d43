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
from cli_helpers import every_command
from safety_helpers import invoke

from swaptrace.commands.common import FileRoles

commands = every_command


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


# -- each (command, file input): an output on it, four ways ------------------------------------------------

SHIPPED = Path(__file__).parents[1] / "swaptrace"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The inputs, in ``BASE/in``, made with the CLI from BASE (so the names stored in a stream's metadata or
    a sweep file are relative, ``in/...``, and point into each test's copy)."""
    from damaged import fake_capture
    from safety_helpers import fake_run_dir

    b = tmp_path_factory.mktemp("file-options")
    d = b / "in"
    d.mkdir()
    cwd = os.getcwd()
    os.chdir(b)
    try:
        assert invoke("generate", "--preset", "tiny", "--steps", 2, "-o", "in/t.access.parquet").exit_code == 0
        assert invoke("emulate", "in/t.access.parquet", "--memory-fraction", 0.3, "-o",
                      "in/t.swapio.parquet").exit_code == 0
        assert invoke("fio", "jobs", "in/t.swapio.parquet", "-o", "in/jobs", "--sweep", "4k",
                      "--max-requests", 200).exit_code == 0
    finally:
        os.chdir(cwd)
    shutil.copyfile(d / "t.access.parquet", d / "packed.access.parquet")
    shutil.copyfile(d / "t.swapio.parquet", d / "other.swapio.parquet")
    shutil.copyfile(SHIPPED / "presets" / "tiny.toml", d / "spec.toml")
    shutil.copyfile(SHIPPED / "profiles" / "runtime" / "pytorch-cpu.toml", d / "runtime.toml")
    shutil.copyfile(SHIPPED / "profiles" / "linux-6.x-cgroup1.toml", d / "kernel.toml")
    (d / "device.toml").write_text('base = "nvme-tlc"\nop = 0.28\n')
    (d / "costs.toml").write_text('kind = "swaptrace-host-costs"\nfault_cpu_us = 1.5\nreclaim_cpu_us = 0.5\n'
                                  'write_cpu_us = 0.25\n')
    (d / "ok.iolog").write_text("fio version 2 iolog\n/dev/x add\n/dev/x open\n/dev/x write 0 4096\n/dev/x close\n")
    (d / "fakefio").write_text("#!/bin/sh\nexit 0\n")
    (d / "sweep.toml").write_text('[sweep]\ntraces = ["in/t.access.parquet"]\ndevices = ["in/device.toml"]\n'
                                  "memory_fractions = [0.5]\n")
    fake_capture(d / "t.swapio.parquet", d / "capture.swapio.parquet")
    _capture_of_spec(d / "capture.swapio.parquet", d / "capture-spec.swapio.parquet", "in/spec.toml")
    fake_run_dir(d / "run")
    (d / "pipe").mkdir()
    shutil.copyfile(d / "t.swapio.parquet", d / "pipe" / "swapio.parquet")
    return b


def _capture_of_spec(capture: Path, out: Path, spec: str) -> None:
    """``capture`` as a capture of ``swaptrace train --spec SPEC`` (the spec named only in its metadata)."""
    import json

    import pyarrow.parquet as pq

    from swaptrace.core.traceio import METADATA_KEY

    table = pq.read_table(capture)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    meta["command"] = ["swaptrace", "train", "--spec", spec, "--steps", "2"]
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta)}), out)


#: (command, input parameter, argv, the file the output is aimed at): {IN} is the input as the option takes it
#: (absolute), {OUT} the output spelled one of four ways, {x} the file in/x; the target is relative to the
#: test's folder. A target that is a folder is aimed at by a folder output (the folder above the input's files).
#: Where a command would do real work were the check missing (capture, fio), it is kept from it: capture's
#: --buffer-size 512 (under 1 KiB a CPU) is refused after the check, fio run is a --dry-run.
CAPTURE_GUARD = ["--memory", "1MiB", "--buffer-size", "512"]
TIME = ["--compute", "none", "--fault-cpu-us", "1", "--reclaim-cpu-us", "1"]
CASES = [
    ("generate", "spec_file", ["generate", "--spec", "{IN}", "--steps", "1", "-o", "{OUT}", "--force"], "in/spec.toml"),
    ("generate", "preset", ["generate", "--preset", "{IN}", "--steps", "1", "-o", "{OUT}", "--force"], "in/spec.toml"),
    ("generate", "runtime", ["generate", "--preset", "tiny", "--steps", "1", "--runtime", "{IN}", "-o", "{OUT}",
                             "--force"], "in/runtime.toml"),
    ("emulate", "trace", ["emulate", "{IN}", "--memory-fraction", "0.5", "-o", "{OUT}", "--force"],
     "in/t.access.parquet"),
    ("emulate", "profile", ["emulate", "{t.access.parquet}", "--profile", "{IN}", "--memory-fraction", "0.5", "-o",
                            "{OUT}", "--force"], "in/kernel.toml"),
    ("mrc", "trace", ["mrc", "{IN}", "-o", "{OUT}", "--force"], "in/t.access.parquet"),
    ("mrc", "trace", ["mrc", "{IN}", "-o", "m.csv", "--plot", "{OUT}", "--force"], "in/t.access.parquet"),
    ("export", "trace", ["export", "{IN}", "-o", "{OUT}", "--force"], "in/t.access.parquet"),
    ("capture", "trace", ["capture", "{IN}", *CAPTURE_GUARD, "-o", "{OUT}", "--force"], "in/t.access.parquet"),
    ("capture", "trace", ["capture", "{IN}", *CAPTURE_GUARD, "-o", "k.parquet", "--raw-trace", "{OUT}", "--force"],
     "in/t.access.parquet"),
    ("runtime-profile", "capture", ["runtime-profile", "{IN}", "-o", "{OUT}", "--force"], "in/capture.swapio.parquet"),
    ("runtime-profile", "spec_file", ["runtime-profile", "{capture.swapio.parquet}", "--spec", "{IN}", "-o", "{OUT}",
                                      "--force"], "in/spec.toml"),
    ("runtime-profile", "preset", ["runtime-profile", "{capture.swapio.parquet}", "--preset", "{IN}", "-o", "{OUT}",
                                   "--force"], "in/spec.toml"),
    ("runtime-profile", "the capture's model", ["runtime-profile", "{capture-spec.swapio.parquet}", "-o", "{OUT}",
                                                "--force"], "in/spec.toml"),
    ("compare", "a", ["compare", "{IN}", "{other.swapio.parquet}", "--plot", "{OUT}", "--force"],
     "in/t.swapio.parquet"),
    ("compare", "b", ["compare", "{other.swapio.parquet}", "{IN}", "--plot", "{OUT}", "--force"],
     "in/t.swapio.parquet"),
    ("ssd replay", "stream", ["ssd", "replay", "{IN}", "--capacity", "4GiB", "-o", "{OUT}", "--force"],
     "in/t.swapio.parquet"),
    ("ssd replay", "device", ["ssd", "replay", "{t.swapio.parquet}", "--device", "{IN}", "-o", "{OUT}", "--force"],
     "in/device.toml"),
    ("ssd synth", "device", ["ssd", "synth", "--pattern", "randwrite", "--device", "{IN}", "-o", "{OUT}", "--force"],
     "in/device.toml"),
    ("ssd thesis", "device", ["ssd", "thesis", "--device", "{IN}", "-o", "{OUT}", "--force"], "in/device.toml"),
    ("ssd fit", "run_dir", ["ssd", "fit", "{IN}", "-o", "{OUT}", "--force"], "in/run/results.parquet"),
    ("fio jobs", "stream", ["fio", "jobs", "{IN}", "-o", "{OUT}", "--force"], "in"),
    ("fio run", "jobs_dir", ["fio", "run", "{IN}", "--target", "{OUT}", "--size", "8MiB", "--force", "--dry-run"],
     "in/jobs/manifest.json"),
    ("fio run", "jobs_dir", ["fio", "run", "{IN}", "--target", "t.dat", "--size", "8MiB", "-o", "{OUT}", "--force",
                             "--dry-run"], "in/jobs"),
    ("fio run", "fio_path", ["fio", "run", "{jobs}", "--fio", "{IN}", "--target", "{OUT}", "--size", "8MiB", "--force",
                             "--dry-run"], "in/fakefio"),
    ("fio import", "iolog", ["fio", "import", "{IN}", "-o", "{OUT}", "--force"], "in/ok.iolog"),
    ("fio profile", "run_dir", ["fio", "profile", "{IN}", "-o", "{OUT}", "--force"], "in/run/results.parquet"),
    ("fio profile", "reads_from", ["fio", "profile", "{run}", "--reads-from", "{IN}", "-o", "{OUT}", "--force"],
     "in/run/results.parquet"),
    ("time", "stream", ["time", "{IN}", "--device", "nvme-tlc", *TIME, "-o", "{OUT}", "--force"],
     "in/t.swapio.parquet"),
    ("time", "stream", ["time", "{IN}", "--device", "nvme-tlc", *TIME, "--save-costs", "{OUT}", "--force"],
     "in/t.swapio.parquet"),
    ("time", "device", ["time", "{t.swapio.parquet}", "--device", "{IN}", *TIME, "-o", "{OUT}", "--force"],
     "in/device.toml"),
    ("time", "costs_file", ["time", "{t.swapio.parquet}", "--device", "nvme-tlc", "--compute", "none", "--costs",
                            "{IN}", "--save-costs", "{OUT}", "--force"], "in/costs.toml"),
    ("time", "compute_baseline", ["time", "{t.swapio.parquet}", "--device", "nvme-tlc", "--compute-baseline", "{IN}",
                                  "-o", "{OUT}", "--force"], "in/capture.swapio.parquet"),
    ("time", "trace", ["time", "{t.swapio.parquet}", "--device", "nvme-tlc", "--trace", "{IN}", "-o", "{OUT}",
                       "--force"], "in/t.access.parquet"),
    ("time", "the stream's trace", ["time", "{t.swapio.parquet}", "--device", "nvme-tlc", "-o", "{OUT}", "--force"],
     "in/t.access.parquet"),
    ("designs", "trace", ["designs", "{IN}", "--memory-fraction", "0.5", "--device", "none", "-o", "d",
                          "--fio-target", "{OUT}", "--force"], "in/t.access.parquet"),
    ("designs", "trace", ["designs", "{IN}", "--memory-fraction", "0.5", "--device", "none", "-o", "{OUT}",
                          "--force"], "in"),
    ("designs", "packed_trace", ["designs", "{t.access.parquet}", "--packed", "{IN}", "--memory-fraction", "0.5",
                                 "--device", "none", "-o", "d", "--fio-target", "{OUT}", "--force"],
     "in/packed.access.parquet"),
    ("designs", "device", ["designs", "{t.access.parquet}", "--memory-fraction", "0.5", "--device", "{IN}", "-o", "d",
                           "--fio-target", "{OUT}", "--force"], "in/device.toml"),
    ("run", "preset", ["run", "--preset", "{IN}", "--steps", "1", "--no-thesis", "-o", "p", "--fio-target", "{OUT}"],
     "in/spec.toml"),
    ("run", "preset", ["run", "--preset", "{IN}", "--steps", "1", "--no-fio", "--no-thesis", "-o", "{OUT}"], "in"),
    ("run", "time_costs", ["run", "--preset", "tiny", "--steps", "1", "--no-thesis", "--time-costs", "{IN}", "-o", "p",
                           "--fio-target", "{OUT}"], "in/costs.toml"),
    ("run", "device", ["run", "--preset", "tiny", "--steps", "1", "--no-thesis", "--device", "{IN}", "-o", "p",
                       "--fio-target", "{OUT}"], "in/device.toml"),
    ("run", "runtime", ["run", "--preset", "tiny", "--steps", "1", "--no-thesis", "--runtime", "{IN}", "-o", "p",
                        "--fio-target", "{OUT}"], "in/runtime.toml"),
    ("sweep", "spec_file", ["sweep", "{IN}", "--workers", "1", "-o", "sw", "--plot", "{OUT}"], "in/sweep.toml"),
    ("sweep", "traces", ["sweep", "--trace", "{IN}", "--memory-fraction", "0.5", "--workers", "1", "-o", "sw",
                         "--plot", "{OUT}"], "in/t.access.parquet"),
    ("sweep", "presets", ["sweep", "--preset", "{IN}", "--memory-fraction", "0.5", "--workers", "1", "-o", "sw",
                          "--plot", "{OUT}"], "in/spec.toml"),
    ("sweep", "devices", ["sweep", "--preset", "tiny", "--device", "{IN}", "--memory-fraction", "0.5", "--workers",
                          "1", "-o", "sw", "--plot", "{OUT}"], "in/device.toml"),
    ("sweep", "the sweep file's trace", ["sweep", "{sweep.toml}", "--workers", "1", "-o", "sw", "--plot", "{OUT}"],
     "in/t.access.parquet"),
    ("sweep", "the sweep file's trace", ["sweep", "{sweep.toml}", "--workers", "1", "-o", "{OUT}"], "in"),
    ("report", "folder", ["report", "{IN}", "-o", "{OUT}"], "in/pipe"),
    ("report", "folder", ["report", "{IN}", "-o", "{OUT}"], "in"),
]
#: the input each case's {IN} stands for (the target, or the folder it lies in)
GIVEN = {("ssd fit", "run_dir"): "in/run", ("fio profile", "run_dir"): "in/run", ("fio profile", "reads_from"): "in/run",
         ("fio run", "jobs_dir"): "in/jobs",
         ("fio jobs", "stream"): "in/t.swapio.parquet", ("designs", "trace"): "in/t.access.parquet",
         ("run", "preset"): "in/spec.toml", ("report", "folder"): "in/pipe"}
SPELLINGS = ("plain", "dotdot", "symlink", "hardlink")


def _cases():
    for cmd, param, argv, target in CASES:
        for spelling in SPELLINGS:
            if spelling == "hardlink" and not Path(target).suffix and target != "in/fakefio":
                continue  # a folder has no hard links
            yield pytest.param(cmd, param, argv, target, spelling,
                               id=f"{cmd} {param} -> {target} {spelling} ({argv[argv.index('{OUT}') - 1]})")


def tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: a file's bytes (hash) and inode count, a link's target, a folder."""
    found = {}
    for p in sorted(folder.rglob("*")):
        st = os.lstat(p)
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            found[rel] = "link -> " + os.readlink(p)
        elif p.is_dir():
            found[rel] = "folder"
        else:
            found[rel] = f"file {hashlib.sha256(p.read_bytes()).hexdigest()} links {st.st_nlink}"
    return found


@pytest.mark.parametrize("cmd,param,argv,target,spelling", list(_cases()))
def test_an_output_on_an_input_is_refused_however_spelled(base, tmp_path, monkeypatch, cmd, param, argv, target,
                                                          spelling):
    shutil.copytree(base / "in", tmp_path / "in", symlinks=True)
    monkeypatch.chdir(tmp_path)
    out = {"plain": target, "dotdot": f"./x/../{target}", "symlink": "link-out", "hardlink": "hard-out"}[spelling]
    if spelling == "symlink":
        os.symlink(target, "link-out")
    elif spelling == "hardlink":
        os.link(target, "hard-out")
    before = tree(tmp_path)
    given = tmp_path / GIVEN.get((cmd, param), target)
    files = {p.name: str(p) for p in (tmp_path / "in").iterdir()} | {"IN": str(given), "OUT": out}
    r = invoke(*[re.sub(r"\{([^}]+)\}", lambda m: files[m.group(1)], a) for a in argv])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "the input" in lines[0], r.stderr
    assert tree(tmp_path) == before  # the input byte-identical, its links kept, nothing new anywhere


def test_every_input_of_every_writer_has_a_case():
    """The table above covers each (command, input) pair the declarations name, derived inputs included."""
    covered = {(cmd, param) for cmd, param, _, _ in CASES}
    derived = {"runtime-profile": "the capture's model", "time": "the stream's trace",
               "sweep": "the sweep file's trace"}
    for path, cmd in ALL:
        roles = roles_of(cmd)
        if roles is None or not roles.outputs:
            continue  # writes nothing: no output to aim at an input
        name = " ".join(path)
        wanted = {*roles.inputs, *(getattr(roles.more_inputs, "reads", ()) if roles.more_inputs else ())}
        if roles.more_inputs is not None and name in derived:  # reads the named input; lists one more file
            wanted = (wanted - set(roles.more_inputs.reads)) | set(roles.inputs) | {derived[name]}
        missing = {(name, p) for p in wanted} - covered
        assert not missing, f"no case aims an output at {sorted(missing)}"


@pytest.mark.parametrize("argv,made", [
    (["generate", "--preset", "tiny", "--steps", "1", "-o", "sub/../new.access.parquet"], "new.access.parquet"),
    (["fio", "jobs", "{stream}", "--sweep", "4k", "-o", "sub/x/../../jobs"], "jobs"),
], ids=["a file", "a folder"])
def test_a_name_through_a_missing_folder_makes_no_folder(base, tmp_path, monkeypatch, argv, made):
    """``-o sub/../x`` is ``x``: the folder the name only steps out of is not made (it stayed behind, empty)."""
    monkeypatch.chdir(tmp_path)
    r = invoke(*[a.replace("{stream}", str(base / "in" / "t.swapio.parquet")) for a in argv])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [made]


def test_a_preset_name_beside_a_folder_of_that_name_is_not_the_folder(tmp_path, monkeypatch):
    """``--preset tiny`` reads the preset, not a folder ``tiny/`` that happens to be here: an output in it is
    no output inside an input (a name-or-file option reads a file or nothing)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny").mkdir()
    r = invoke("generate", "--preset", "tiny", "--steps", 1, "-o", "tiny/t.access.parquet")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "tiny" / "t.access.parquet").is_file()
