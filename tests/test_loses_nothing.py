"""The output rule (swaptrace/core/outputs.py), for every command that writes: nothing of the user's is lost.

Each case builds what a user has -- a folder of their own files, a trace they want to keep -- runs a command
that would have destroyed it before issue 30, and compares every byte before and after: a command refuses
(exit 2, one line) and changes nothing, or, with ``--force`` on a folder of its own, replaces only its own
files. The data-loss cases of the issue are the first rows.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from safety_helpers import invoke

from swaptrace.core.outputs import check_distinct, install_folder
from swaptrace.errors import OutputError


def digest(path: Path) -> dict[str, str]:
    """Every file under ``path`` (or ``path`` itself) with the hash of its bytes."""
    if path.is_file():
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    base = tmp_path_factory.mktemp("loses-nothing")
    t, s = base / "t.access.parquet", base / "t.swapio.parquet"
    assert invoke("generate", "--preset", "tiny", "--steps", 2, "-o", t).exit_code == 0
    assert invoke("emulate", t, "--memory-fraction", "0.3", "-o", s).exit_code == 0
    return {"T": t, "S": s, "base": base}


def _users_folder(path: Path) -> Path:
    """A folder of the user's own files, named as a pipeline's outputs are (what `run` used to replace)."""
    (path / "report").mkdir(parents=True)
    (path / "access.parquet").write_text("my own access data")
    (path / "mrc.csv").write_text("my own curve")
    (path / "report" / "notes.md").write_text("months of notes")
    (path / "manifest.json").write_text('{"kind": "my-own"}')
    return path


#: (name, argv with {T} {S} {U} {OUT}): each must refuse a folder of the user's files, --force or not
FOREIGN_FOLDER = [
    ("run", ["run", "--preset", "tiny", "--steps", 2, "--no-fio", "--no-thesis", "-o", "{U}"]),
    ("run --force", ["run", "--preset", "tiny", "--steps", 2, "--no-fio", "--no-thesis", "-o", "{U}", "--force"]),
    ("fio jobs --force", ["fio", "jobs", "{S}", "-o", "{U}", "--force", "--sweep", "4k"]),
    ("designs --force", ["designs", "{T}", "-o", "{U}", "--force", "--memory-fraction", 0.5, "--device", "none"]),
    ("report -o", ["report", "{B}", "-o", "{U}"]),
    ("fio run --force", ["fio", "run", "{J}", "--target", "{OUT}/t.dat", "--size", "8MiB", "--runtime", 1,
                         "--jobs", "sweep_read_4k", "-o", "{U}", "--force", "--dry-run"]),
]


def _fill(args, made, u: Path, out: Path) -> list[str]:
    values = {"T": made["T"], "S": made["S"], "U": u, "OUT": out, "B": made["base"], "J": made.get("J", "")}
    return [str(a).format(**values) if isinstance(a, str) else str(a) for a in args]


@pytest.mark.parametrize("name,argv", FOREIGN_FOLDER, ids=[n for n, _ in FOREIGN_FOLDER])
def test_a_folder_of_the_users_files_is_refused_force_or_not(made, tmp_path, name, argv):
    if name.startswith("fio run"):
        made["J"] = made["base"] / "jobs"
        if not made["J"].exists():
            assert invoke("fio", "jobs", made["S"], "-o", made["J"], "--sweep", "4k").exit_code == 0
    u = _users_folder(tmp_path / "mine")
    before = digest(u)
    r = invoke(*_fill(argv, made, u, tmp_path))
    if name.startswith("fio run"):  # a dry run writes nothing; without it the folder is refused the same way
        assert r.exit_code in (0, 2), r.output
    else:
        assert r.exit_code == 2, r.output
        assert "not" in r.stderr and str(u) in r.stderr, r.stderr
    assert digest(u) == before


#: an output on an input, or two outputs on one path: refused before anything is written
SAME_PATH = [
    ("mrc T -o T --force", ["mrc", "{T}", "-o", "{T}", "--force"], "{T}"),
    ("emulate T -o T --force", ["emulate", "{T}", "-o", "{T}", "--force", "--memory-fraction", 0.5], "{T}"),
    ("export T -o T --force", ["export", "{T}", "-o", "{T}", "--force"], "{T}"),
    ("time S -o S --force", ["time", "{S}", "--device", "nvme-tlc", "--compute", "none", "--fault-cpu-us", 1,
                             "--reclaim-cpu-us", 1, "-o", "{S}", "--force"], "{S}"),
    ("ssd replay S -o S --force", ["ssd", "replay", "{S}", "--device", "nvme-tlc", "--capacity", "4GiB",
                                   "-o", "{S}", "--force"], "{S}"),
    ("compare --plot S", ["compare", "{S}", "{S}", "--plot", "{S}", "--force"], "{S}"),
    ("time -o X --save-costs X", ["time", "{S}", "--device", "nvme-tlc", "--compute", "none", "--fault-cpu-us", 1,
                                  "--reclaim-cpu-us", 1, "-o", "{OUT}/x", "--save-costs", "{OUT}/x"], None),
    ("mrc -o X --plot X", ["mrc", "{T}", "-o", "{OUT}/x.png", "--plot", "{OUT}/x.png"], None),
]


@pytest.mark.parametrize("name,argv,keep", SAME_PATH, ids=[n for n, _, _ in SAME_PATH])
def test_an_output_never_destroys_an_input_or_another_output(made, tmp_path, name, argv, keep):
    t, s = tmp_path / "t.access.parquet", tmp_path / "t.swapio.parquet"
    shutil.copyfile(made["T"], t)
    shutil.copyfile(made["S"], s)
    mine = {"T": t, "S": s, "base": made["base"]}
    before = digest(tmp_path)
    r = invoke(*_fill(argv, mine, tmp_path / "u", tmp_path))
    assert r.exit_code == 2, r.output
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert digest(tmp_path) == before  # the input kept, no output written


def test_fio_run_profile_cannot_overwrite_the_run_it_reads(made, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(made["S"], run / "results.parquet")  # what the command reads (its kind checked later)
    before = digest(run)
    r = invoke("fio", "profile", run, "-o", run / "results.parquet", "--force")
    assert r.exit_code == 2 and "RUN_DIR" in r.stderr, r.output
    assert digest(run) == before


def test_force_on_a_job_folder_replaces_only_its_own_files(made, tmp_path):
    jobs = tmp_path / "jobs"
    assert invoke("fio", "jobs", made["S"], "-o", jobs, "--sweep", "4k,8k").exit_code == 0
    (jobs / "notes.txt").write_text("mine")
    (jobs / "runs").mkdir()
    (jobs / "runs" / "earlier.txt").write_text("an earlier run")
    assert invoke("fio", "jobs", made["S"], "-o", jobs, "--sweep", "4k", "--force").exit_code == 0
    assert (jobs / "notes.txt").read_text() == "mine"
    assert (jobs / "runs" / "earlier.txt").read_text() == "an earlier run"
    assert not (jobs / "sweep_read_8k.fio").exists()  # its own earlier job, not written again: removed
    assert (jobs / "sweep_read_4k.fio").exists()


def test_force_on_a_report_keeps_the_users_files(made, tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    shutil.copyfile(made["T"], folder / "access.parquet")
    shutil.copyfile(made["S"], folder / "swapio.parquet")
    assert invoke("report", folder).exit_code == 0
    (folder / "report" / "my-figure.png").write_bytes(b"mine")
    assert invoke("report", folder).exit_code == 0
    assert (folder / "report" / "my-figure.png").read_bytes() == b"mine"
    assert (folder / "report" / "report.md").exists()


def test_install_folder_moves_new_files_in_and_leaves_the_rest(tmp_path):
    final, tmp = tmp_path / "final", tmp_path / "tmp"
    final.mkdir()
    tmp.mkdir()
    (final / "old-own.txt").write_text("stale")
    (final / "users.txt").write_text("keep")
    (final / "marker").write_text("old")
    (tmp / "marker").write_text("new")
    (tmp / "new.txt").write_text("new")
    install_folder(tmp, final, stale=["old-own.txt", "marker", "../users.txt"], last="marker")
    assert sorted(p.name for p in final.iterdir()) == ["marker", "new.txt", "users.txt"]
    assert (final / "marker").read_text() == "new"
    assert not tmp.exists()


def test_check_distinct_resolves_links(tmp_path):
    real = tmp_path / "t.parquet"
    real.write_text("x")
    link = tmp_path / "link.parquet"
    link.symlink_to(real)
    with pytest.raises(OutputError, match="is the input"):
        check_distinct({"-o": link}, {"TRACE": real})
    folder = tmp_path / "ds"
    folder.mkdir()
    with pytest.raises(OutputError, match="inside the input"):
        check_distinct({"-o": folder / "m.csv"}, {"TRACE": folder})
    check_distinct({"-o": tmp_path / "other"}, {"TRACE": real})  # unrelated paths pass
