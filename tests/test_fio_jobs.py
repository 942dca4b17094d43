"""Job folder generation, fitting and value validation."""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from click.testing import CliRunner
from fio_helpers import fio_env, make_stream, write_stream
from hypothesis import given, settings
from hypothesis import strategies as st

from swaptrace.cli import cli
from swaptrace.core import traceio
from swaptrace.errors import ConfigError, OutputError, TraceFileError
from swaptrace.fio import iolog, jobfile, jobs
from swaptrace.fio import synthetic as fit


@pytest.fixture
def folder(tmp_path):
    s = make_stream(tmp_path / "s.parquet", n=600, device_bytes=32 << 20)
    return jobs.build_jobs(s, tmp_path / "jobs")


def test_folder_is_self_describing(folder):
    names = {p.name for p in folder.path.iterdir()}
    assert {"manifest.json", "README.md", "replay.iolog", "precondition.fio"} <= names
    m = json.loads((folder.path / "manifest.json").read_text())
    for j in m["jobs"]:
        assert j["file"] in names
        assert f"`{j['name']}`" in (folder.path / "README.md").read_text()
    expected = {"replay", "replay_no_stall", "synthetic", "write_seq", "write_seq_128k", "write_rand", "sweep_read_mix",
                "sweep_write_mix", "steady_randwrite"} | {f"sweep_{d}_{s}" for d in ("read", "write") for s in jobs.SWEEP_SIZES} | {
                f"qd_{d}_{s}_qd{q}" for d in ("read", "write") for s in jobs.PROFILE_SIZES for q in jobs.PROFILE_DEPTHS}
    assert {j["name"] for j in m["jobs"]} == expected
    assert m["remap"]["wrap"] is False and m["min_target_bytes"] <= 32 << 20
    assert m["replay"]["discards_dropped"] > 0


@pytest.mark.fio
def test_every_job_passes_fio_parse_only_and_validation(folder, fio_bin, tmp_path):
    size = folder.manifest["min_target_bytes"]
    env = fio_env(folder.path, tmp_path / "t.dat", size)
    files = sorted(folder.path.glob("*.fio"))
    assert len(files) == len(folder.manifest["jobs"]) + 1
    # one fio parses them all (each file is one job section, no [global] to carry into the next; one bad file
    # fails the lot): a fio start is ~0.2 s of clock calibration, 9 s for the 44 files one by one. Only on a
    # failure is each file parsed alone, to name the one fio refused.
    assert not [f.name for f in files if "[global]" in f.read_text()]
    together = subprocess.run([fio_bin, "--parse-only", *map(str, files)], env=env, capture_output=True, text=True)
    if together.returncode != 0:
        for f in files:
            proc = subprocess.run([fio_bin, "--parse-only", str(f)], env=env, capture_output=True, text=True)
            assert proc.returncode == 0, f"{f.name}: {proc.stderr}"
        pytest.fail(f"fio refused the files together but parses each alone: {together.stderr}")
    for f in files:
        jobfile.validate_job_file(f, env)
    assert not (tmp_path / "t.dat").exists()


@pytest.mark.fio
def test_parse_only_fails_without_environment(folder, fio_bin):
    """Guards the design: jobs depend on SWAPTRACE_* (so they are never run against a default path)."""
    env = {k: v for k, v in fio_env(folder.path, "/x", 1).items() if not k.startswith("SWAPTRACE_")}
    proc = subprocess.run([fio_bin, "--parse-only", str(folder.path / "sweep_read_4k.fio")], env=env,
                          capture_output=True, text=True)
    assert proc.returncode != 0
    with pytest.raises(ConfigError, match="not set"):
        jobfile.validate_job_file(folder.path / "sweep_read_4k.fio", {})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("bssplit=4k/60:8k/30", "add up to 90"),
        ("bssplit=4k/60.5:8k/39.5", "not an integer"),
        ("bs=1000", "multiple of 512"),
        ("rw=randomwrite", "not a fio direction"),
        ("rwmixread=120", "0..100"),
        ("random_distribution=zoned:50/10:50/80", "size percentages add up to 90"),
        ("random_distribution=zoned:60/10:30/90", "access percentages add up to 90"),
        ("random_distribution=zoned:60.5/10:39.5/90", "not integer"),
        ("runtime=0", "positive"),
        ("bs=64m", "exceeds size"),
    ],
)
def test_validation_catches_bad_values(tmp_path, line, message):
    f = tmp_path / "j.fio"
    f.write_text(f"[j]\nsize=16m\nnorandommap=1\n{line}\n")
    with pytest.raises(ConfigError, match=message):
        jobfile.validate_job_file(f, {})


def test_validation_of_replay(tmp_path, folder):
    env = fio_env(folder.path, tmp_path / "t", folder.manifest["min_target_bytes"])
    jobfile.validate_job_file(folder.path / "replay.fio", env)
    small = {**env, "SWAPTRACE_SIZE": str(1 << 20)}
    with pytest.raises(ConfigError, match="past the target"):
        jobfile.validate_job_file(folder.path / "replay.fio", small)
    f = tmp_path / "noredirect.fio"
    f.write_text(f"[r]\nread_iolog={folder.path / 'replay.iolog'}\n")
    with pytest.raises(ConfigError, match="replay_redirect"):
        jobfile.validate_job_file(f, env)
    f.write_text("[r]\nrw=randwrite\nbssplit=4k/100\n")
    with pytest.raises(ConfigError, match="norandommap"):
        jobfile.validate_job_file(f, env)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=30).filter(lambda w: sum(w) > 0))
def test_largest_remainder_sums_to_100(weights):
    pct = fit.largest_remainder_percent(np.array(weights))
    assert pct.sum() == 100 and (pct >= 0).all()
    exact = np.array(weights) / sum(weights) * 100
    assert (np.abs(pct - exact) < 1).all()


def test_fit_of_known_stream(tmp_path):
    # 6 sequential 4k writes, 2 random 8k reads, 2 random 32k reads; all in the first 10% of 10 MiB
    op = [1] * 6 + [0] * 4
    off = [i * 4096 for i in range(6)] + [800 * 1024, 200 * 1024, 500 * 1024, 40 * 1024]
    ln = [4096] * 6 + [8192, 8192, 32768, 32768]
    s = write_stream(tmp_path / "s.parquet", np.arange(10) * 1000.0, op, off, ln, device_bytes=10 << 20)
    f = fit.fit_stream(traceio.open_trace(s, "swapio"), iolog.Remap(10 << 20))
    assert f.rwmixread == 40
    assert f.read.bssplit == ((8192, 50), (32768, 50)) and f.write.bssplit == ((4096, 100),)
    assert f.write.percent_random == round(100 / 6)  # only the first write starts a run
    assert f.read.percent_random == 100
    assert f.zones[0] == 100 and sum(f.zones) == 100
    opts = f.fio_options()
    assert opts["bssplit"] == "8192/50:32768/50,4096/100" and opts["norandommap"] == "1"
    assert opts["random_distribution"].startswith("zoned:100/10:0/10")


def test_write_only_stream_skips_read_mix(tmp_path):
    s = write_stream(tmp_path / "s.parquet", [0.0, 1.0], [1, 1], [0, 4096], [4096, 4096])
    m = jobs.build_jobs(s, tmp_path / "j", sweep_sizes=("4k",)).manifest
    names = [j["name"] for j in m["jobs"]]
    assert "sweep_read_mix" not in names and "sweep_write_mix" in names and "sweep_read_4k" in names
    assert m["fit"]["read"] is None


def test_wrapping_stream_records_remap(tmp_path):
    s = make_stream(tmp_path / "s.parquet", n=200, device_bytes=64 << 20)
    m = jobs.build_jobs(s, tmp_path / "j", size_bytes=8 << 20).manifest
    assert m["remap"]["wrap"] and m["min_target_bytes"] == 8 << 20
    r = iolog.read_iolog(tmp_path / "j" / "replay.iolog")
    assert int((r.offset + r.length).max()) <= 8 << 20


def test_bad_inputs(tmp_path):
    with traceio.TraceWriter(tmp_path / "a.parquet", "access", {"page_bytes": 4096}) as w:
        w.write(step=np.zeros(1, np.uint32), page=np.zeros(1, np.uint64), write=np.zeros(1, bool),
                region=np.zeros(1, np.uint16))
    with pytest.raises(TraceFileError, match="expected 'swapio'"):
        jobs.build_jobs(tmp_path / "a.parquet", tmp_path / "j")
    empty = write_stream(tmp_path / "e.parquet", [], [], [], [])
    with pytest.raises(TraceFileError, match="no read or write"):
        jobs.build_jobs(empty, tmp_path / "j")
    only_discards = write_stream(tmp_path / "d.parquet", [0.0], [traceio.OP_DISCARD], [0], [4096])
    with pytest.raises(TraceFileError, match="no read or write"):
        jobs.build_jobs(only_discards, tmp_path / "j")
    assert not (tmp_path / "j").exists()
    s = make_stream(tmp_path / "s.parquet", n=50)
    jobs.build_jobs(s, tmp_path / "j")
    with pytest.raises(OutputError, match="--force"):
        jobs.build_jobs(s, tmp_path / "j")
    (tmp_path / "j" / "runs" / "r1").mkdir(parents=True)
    jobs.build_jobs(s, tmp_path / "j", force=True)
    assert (tmp_path / "j" / "runs" / "r1").is_dir()  # earlier results survive regeneration
    with pytest.raises(ConfigError, match="multiple of 512"):
        jobs.build_jobs(s, tmp_path / "k", sweep_sizes=("1000",))
    with pytest.raises(ConfigError, match="profile size: '1000' is not a positive multiple of 512"):
        jobs.build_jobs(s, tmp_path / "k", profile_sizes=("1000",))
    with pytest.raises(ConfigError, match="profile depth: must be a whole number of at least 1, got 0"):
        jobs.build_jobs(s, tmp_path / "k", profile_depths=(0,))
    assert not list(tmp_path.glob(".*partial"))


def test_jobs_cli(tmp_path):
    s = make_stream(tmp_path / "s.parquet", n=100)
    runner = CliRunner()
    res = runner.invoke(cli, ["fio", "jobs", str(s), "-o", str(tmp_path / "j"), "--sweep", "4k,128k", "--json"])
    assert res.exit_code == 0, res.output
    profile_jobs = 2 * len(jobs.PROFILE_SIZES) * len(jobs.PROFILE_DEPTHS)
    # replays, synthetic, sweep, device-profile jobs, writes, steady-state rounds, precondition
    assert json.loads(res.output)["jobs"] == 2 + 1 + 2 * 3 + profile_jobs + 3 + 1 + 1
    for args in (["fio", "jobs", str(tmp_path / "missing.parquet"), "-o", str(tmp_path / "x")],
                 ["fio", "jobs", str(s), "-o", str(tmp_path / "j")],
                 ["fio", "jobs", str(s), "-o", str(tmp_path / "y"), "--size", "12 parsecs"]):
        res = runner.invoke(cli, args)
        assert res.exit_code == 2, res.output
        assert len(res.output.strip().splitlines()) == 1 and res.output.startswith("Error:")


def _readme_tables(readme: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """From a job folder's README.md: ``{variable: value to give}`` and ``{job: [variables it reads]}``."""
    import re

    values, reads = {}, {}
    for line in readme.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) == 3 and re.fullmatch(r"`SWAPTRACE_\w+`", cells[0]):
            values[cells[0].strip("`")] = cells[2].strip("`")
        elif len(cells) == 5 and re.fullmatch(r"`\w+`", cells[0]):
            reads[cells[0].strip("`")] = re.findall(r"`(SWAPTRACE_\w+)`", cells[4])
    return values, reads


@pytest.mark.fio
def test_every_job_runs_by_hand_with_the_environment_its_readme_gives(tmp_path, fio_bin):
    """README.md says which variables each job reads and what to give them; with exactly those (and nothing
    else in the environment) fio parses every job, the fill's cap and the steady job's criteria included."""
    s = make_stream(tmp_path / "s.parquet", n=600, device_bytes=32 << 20)
    out = tmp_path / "jobs"
    r = CliRunner().invoke(cli, ["fio", "jobs", str(s), "-o", str(out), "--sweep", "4k,64k"])
    assert r.exit_code == 0, r.output
    values, reads = _readme_tables((out / "README.md").read_text())
    files = sorted(out.glob("*.fio"))
    assert {f.stem for f in files} == set(reads) and {"precondition", "steady_randwrite"} <= set(reads)

    def parse_alone(f):  # each file in a fio of its own, given its own environment and nothing else
        assert reads[f.stem] == list(jobs.job_variables(f.read_text())), f.name  # every variable it reads
        env = {v: values[v].replace("$PWD", str(out)).replace("<job>", f.stem) for v in reads[f.stem]}
        proc = subprocess.run([fio_bin, "--parse-only", f.name], cwd=out, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, f"{f.name} with {env}: {proc.stderr}"

    # a fio start is ~0.2 s of CPU (clock calibration): the 30 fios run on every core at once
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(parse_alone, files))  # list(): the first failure is raised here
    assert not (tmp_path / "swaptrace-fio.dat").exists()
