"""Outputs are regular files or new names: `-o SPECIAL --force` is refused by every writer.

Device nodes are copies made with mknod in tmp (root only); FIFOs, sockets and links work anywhere.
One owner for the rule: :func:`swaptrace.core.traceio.check_output_path` (files) and
:func:`swaptrace.core.traceio.check_output_folder` (folders); each command below must reach it.
"""

from __future__ import annotations

import os
import shutil

import pytest
from safety_helpers import SPECIAL_KINDS, file_type, invoke, make_inputs, snapshot, special_file

from swaptrace.core.traceio import AtomicPath, check_output_folder, check_output_path
from swaptrace.errors import OutputError


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return make_inputs(tmp_path_factory.mktemp("inputs"))


#: command -> arguments, with OUT where the special output goes
WRITERS = {
    "generate": ["generate", "--preset", "tiny", "--steps", "1", "-o", "OUT"],
    "emulate": ["emulate", "{access}", "--memory-fraction", "0.5", "-o", "OUT"],
    "mrc-csv": ["mrc", "{access}", "-o", "OUT"],
    "mrc-png": ["mrc", "{access}", "-o", "{tmp}/ok.csv", "--plot", "OUT"],
    "export-libcachesim": ["export", "{access}", "-o", "OUT"],
    "export-csv": ["export", "{access}", "--format", "csv", "-o", "OUT"],
    "ssd-replay": ["ssd", "{stream}", "--capacity", "256MiB", "-o", "OUT"],
    "ssd-synth": ["ssd", "synth", "--pattern", "randwrite", "--volume", "0.01x", "--capacity", "64MiB",
                  "--no-timing", "-o", "OUT"],
    "ssd-thesis": ["ssd", "thesis", "-o", "OUT"],
    "fio-import": ["fio", "import", "{iolog}", "-o", "OUT"],
    "fio-jobs": ["fio", "jobs", "{stream}", "-o", "OUT"],
    "compare-plot": ["compare", "{stream}", "{stream}", "--plot", "OUT"],
    "report": ["report", "{base}", "-o", "OUT"],
    "run": ["run", "--preset", "tiny", "--steps", "1", "--no-fio", "-o", "OUT"],
}


def _args(template, inputs, tmp_path, out):
    return [a.replace("OUT", str(out)).format(tmp=tmp_path, **{k: str(v) for k, v in inputs.items()})
            for a in template] + (["--force"] if template[0] not in ("report", "run") else [])


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_special_output_is_refused_and_left_alone(inputs, tmp_path, writer, kind):
    if kind in ("chardev", "blockdev") and os.geteuid() != 0:
        pytest.skip("mknod needs root")
    out = special_file(kind, tmp_path / "out")
    before, was = snapshot(tmp_path), file_type(out)
    r = invoke(*_args(WRITERS[writer], inputs, tmp_path, out))
    assert r.exit_code == 2, r.output
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert "Traceback" not in r.output
    assert file_type(out) == was
    assert snapshot(tmp_path) == before


def test_fio_run_output_must_be_a_folder(inputs, tmp_path):
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    out = special_file("fifo", tmp_path / "out")
    r = invoke("fio", "run", inputs["jobs"], "--target", tmp_path / "t.dat", "--size", "8MiB", "--runtime", "1",
               "--jobs", "seqwrite", "-o", out, "--force")
    assert r.exit_code == 2, r.output
    assert len(r.stderr.splitlines()) == 1
    assert file_type(out) == "fifo"
    assert not (tmp_path / "t.dat").exists()


@pytest.mark.parametrize("path", ["/dev/null", "/dev/zero", "/dev/full"])
def test_real_device_nodes_are_refused_by_the_check_itself(path):
    # only the check runs here: nothing would be written even if it failed
    with pytest.raises(OutputError, match="character device"):
        check_output_path(path, force=True)
    with pytest.raises(OutputError, match="not a folder"):
        check_output_folder(path, force=True)


def test_a_regular_file_and_a_link_to_one_are_replaced(tmp_path):
    (tmp_path / "old").write_text("old")
    (tmp_path / "link").symlink_to("old")
    for name in ("old", "link"):
        with AtomicPath(tmp_path / name, force=True) as ap:
            ap.tmp.write_text("new")
        assert (tmp_path / name).read_text() == "new"


def test_a_fifo_made_while_writing_is_not_replaced(tmp_path):
    out = tmp_path / "out"
    ap = AtomicPath(out, force=True)
    ap.tmp.write_text("x")
    os.mkfifo(out)
    with pytest.raises(OutputError, match="FIFO"):
        with ap:
            pass
    assert file_type(out) == "fifo"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_empty_output_name_is_refused(inputs, tmp_path):
    before = snapshot(tmp_path)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = invoke("generate", "--preset", "tiny", "--steps", "1", "-o", "")
    finally:
        os.chdir(cwd)
    assert r.exit_code == 2 and "empty" in r.stderr
    assert snapshot(tmp_path) == before


def test_outputs_are_readable_like_any_new_file(inputs, tmp_path):
    out = tmp_path / "x.csv"
    r = invoke("mrc", inputs["access"], "-o", out)
    assert r.exit_code == 0, r.output
    mask = os.umask(0o022)
    os.umask(mask)
    assert os.stat(out).st_mode & 0o777 == 0o666 & ~mask
