"""SNIA-style preconditioning of ``fio run --steady``: fio's verdict parsed, the plan, a real run, the purge refused.

The stored fixtures are fio 3.33's own JSON (``tests/data/fio_steady``): a 4 KiB random-write job on a
64 MiB file that reached ``iops_slope:10%`` over a 4 s window, and one capped at 3 s whose 5 s window
never filled. Expected numbers are computed here from the samples in those files, not from the parser.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from fio_helpers import make_stream
from safety_helpers import invoke, snapshot, special_file

from swaptrace.errors import ConfigError
from swaptrace.fio import jobs, results, runner
from swaptrace.fio import steady as ss

DATA = Path(__file__).parent / "data" / "fio_steady"


def _job(name: str) -> dict:
    return json.loads((DATA / name).read_text())["jobs"][0]


def test_attained_window_is_steady_and_its_range_checked_by_hand():
    job = _job("attained.json")
    samples = job["steadystate"]["data"]["iops"]  # four 1 s samples, one per round here
    mean = sum(samples) / len(samples)
    want_range = 100 * (max(samples) - min(samples)) / mean
    v = ss.verdict(job, ss.SteadyOptions(round_s=1, rounds=4))
    assert v["attained"] and v["steady"] and v["reason"].startswith("steady")
    assert v["rounds_iops"] == pytest.approx(samples)
    assert v["range_pct"] == pytest.approx(want_range)  # 15.9 % <= 20 %
    assert v["window_iops_mean"] == pytest.approx(mean)
    assert v["runtime_s"] == pytest.approx(job["job_runtime"] / 1000)
    # the same window under a tighter range criterion: fio attained, SNIA's range says no
    strict = ss.verdict(job, ss.SteadyOptions(round_s=1, rounds=4, range_pct=10.0))
    assert not strict["steady"] and "range" in strict["reason"]


def test_capped_window_is_labelled_not_steady_and_its_mean_ignores_empty_slots():
    job = _job("not_attained.json")
    samples = [x for x in job["steadystate"]["data"]["iops"] if x > 0]
    v = ss.verdict(job, ss.SteadyOptions(round_s=1, rounds=5))
    assert not v["attained"] and not v["steady"]
    assert v["reason"].startswith("not steady") and "cap" in v["reason"]
    assert v["window_iops_mean"] == pytest.approx(sum(samples) / len(samples))
    assert v["range_pct"] is None  # a window that never filled is not judged


def test_verdict_refuses_a_job_without_steady_state_options():
    with pytest.raises(ConfigError, match="no steadystate"):
        ss.verdict({"jobname": "x"}, ss.SteadyOptions())


def test_fio_limit_is_snia_excursion_spread_over_the_window():
    o = ss.SteadyOptions(round_s=60, rounds=5)
    # SNIA: the fit line moves <= 10 % of the mean across 300 s; fio's slope is per 1 s sample
    assert o.fio_limit_pct * (o.window_s - 1) == pytest.approx(10.0)
    assert o.env()["SWAPTRACE_SS_DUR"] == "300"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("ssjobs")
    s = make_stream(d / "s.parquet", n=200, device_bytes=4 << 20, duration_us=2e5)
    return jobs.build_jobs(s, d / "jobs", sweep_sizes=("4k",))


def test_plan_puts_rounds_after_a_fill_and_before_write_rand(folder):
    m = folder.manifest
    plain = [s.instance for s in runner.plan_steps(m, None, 1)]
    assert "steady_randwrite" not in plain  # only with --steady
    steps = [s.instance for s in runner.plan_steps(m, None, 1, steady=ss.SteadyOptions(round_s=1, cap_s=7))]
    i = steps.index("steady_randwrite")
    assert steps[i - 1] == "precondition@steady" and steps[i + 1] == "write_rand"
    assert "precondition@write_rand" not in steps  # write_rand is measured in the rounds' state
    cap = next(s for s in runner.plan_steps(m, None, 1, steady=ss.SteadyOptions(round_s=1, cap_s=7)) if s.job["kind"] == "steady")
    assert cap.runtime_s == 7


@pytest.mark.fio
def test_steady_rounds_on_a_small_file(tmp_path, folder):
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    opts = ss.SteadyOptions(round_s=1, rounds=3, cap_s=6, fill_cap_s=20, purge=True)
    out = runner.run_jobs(folder.path, tmp_path / "t.dat", size_bytes=64 << 20, runtime_s=1,
                          only=["steady_randwrite"], out_dir=tmp_path / "run", steady=opts, echo=lambda _l: None)
    rows, meta = results.read_results(out.out_dir)
    pre = meta["run"]["preconditioning"]
    assert pre["mode"] == "steady" and pre["purge"].startswith("fallocate(PUNCH_HOLE)")
    assert pre["fill"]["precondition@steady"]["complete"]
    v = pre["steady"]["steady_randwrite"]
    assert v["runtime_s"] <= opts.cap_s + 1  # the cap bounds the rounds (fio's runtime, 1 s of start-up slack)
    assert v["steady"] == (v["attained"] and v["range_pct"] is not None and v["range_pct"] <= opts.range_pct)
    assert v["reason"].startswith("steady" if v["steady"] else "not steady")
    assert len(v["rounds_bw_bytes"]) >= 1 and all(b > 0 for b in v["rounds_bw_bytes"])
    row = next(r for r in rows if r["job"] == "steady_randwrite")
    assert row["bw_bytes"] == pytest.approx(v["window_bw_bytes"])
    assert v["reason"] in (out.out_dir / "results.txt").read_text()


def test_purge_refused_on_a_device_without_allow_device(tmp_path, folder):
    node = special_file("blockdev", tmp_path / "dev")
    before = snapshot(tmp_path)
    r = invoke("fio", "run", folder.path, "--target", node, "--size", "8MiB", "--steady", "--purge",
               "-o", tmp_path / "run")
    assert r.exit_code == 2 and "--allow-device" in r.output
    assert snapshot(tmp_path) == before


def test_purge_needs_steady(tmp_path, folder):
    r = invoke("fio", "run", folder.path, "--target", tmp_path / "t.dat", "--size", "8MiB", "--purge")
    assert r.exit_code == 2 and "--steady" in r.output


def test_a_ramp_that_leaves_no_round_before_the_cap_is_refused():
    """fio collects steady-state samples only after ``ss_ramp``: a cap that ends the job before one round past
    the ramp would give a verdict on nothing (the hostile pass's ``cap 60 <= ramp 120``)."""
    from swaptrace.errors import ConfigError
    from swaptrace.fio.steady import SteadyOptions

    with pytest.raises(ConfigError, match="--ss-ramp 120 s leaves less than one round"):
        SteadyOptions(round_s=10, cap_s=60, ramp_s=120)
    SteadyOptions(round_s=10, cap_s=60, ramp_s=50)  # one round fits after the ramp


def test_the_excursion_is_the_fitted_line_across_the_window_by_hand():
    """SNIA PTS: the excursion is the best-fit line's rise from the first round to the last, as a share of the
    rounds' mean. Rounds 100, 102, 104, 106, 108 (two 1 s samples each): slope 2 a round over 4 rounds = 8,
    mean 104, so 7.69 %; range (108 - 100) / 104 = 7.69 % too."""
    iops = [100, 100, 102, 102, 104, 104, 106, 106, 108, 108]
    job = {"jobname": "hand", "job_runtime": 10_000,
           "steadystate": {"attained": 1, "ss": "iops_slope:2%", "criterion": "1.5%", "duration": 10,
                           "data": {"iops": iops, "bw": [4096 * x for x in iops]}}}
    v = ss.verdict(job, ss.SteadyOptions(round_s=2, rounds=5))
    assert v["rounds_iops"] == pytest.approx([100, 102, 104, 106, 108])
    assert v["excursion_pct"] == pytest.approx(100 * 8 / 104)
    assert v["range_pct"] == pytest.approx(100 * 8 / 104)


def test_a_bandwidth_sample_belongs_to_the_round_it_ends():
    """fio logs a sample at the end of its interval: the sample at 2000 ms closes the first 2 s round."""
    rounds = ss.rounds_from_bw_log(np.array([1000, 2000, 3000, 4000]), np.array([1.0, 2.0, 3.0, 4.0]), round_s=2)
    assert rounds == pytest.approx([1.5, 3.5])
