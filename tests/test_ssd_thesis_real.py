"""The thesis's two ratios on a drive that starts in the steady state of its background (ssd.thesis.thesis_real).

Small drives so each run takes about a second; the checks are physical directions, not fitted values:
a full, randomly overwritten drive amplifies random writes (WAF well above 1) and sequential passes
free whole blocks (WAF far lower), so sequential writes gain; more spare space lowers the gain.
"""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli, the_error

from swaptrace.ssd import analytic as A
from swaptrace.ssd.config import load_device
from swaptrace.ssd.steady import Background
from swaptrace.ssd.thesis import render_real, sensitivity, thesis_real


def small(op=0.07):
    return load_device("nvme-tlc", {"pages_per_block": 32}, capacity_bytes=2 << 30, op=op)


def run(op=0.07, fill=1.0, overwritten=1.0):
    return thesis_real(small(op), background=Background(fill, overwritten, "pool"), swap_bytes=256 << 20,
                       random_drive_writes=2.0)


def test_full_random_drive_gains_from_sequential_writes():
    r = run()
    p = r["parts"]
    cfg = small()
    # random writes into a small partition of a full, randomly overwritten drive: close to the whole
    # drive's uniform-random steady state (Desnoyers at the effective spare), within 15 %. NOT derived yet: the
    # model holds to 2 % for uniform writes over the whole drive (test_ssd_steady, test_ssd_op); here only the
    # partition is written for 2 drive writes, a drift away from that state no model here bounds (measured
    # -3.4 %: 8.64 vs 8.94). Left for issue 34: bracket it (Desnoyers Eq. 14 with the static rest) or measure a spread
    assert p["random_write_waf_steady"] == pytest.approx(A.predict_config(cfg), rel=0.15)
    # sequential passes free whole blocks but GC still relocates the background it meets (into the same
    # frontier by default), so sequential writes amplify far less than random ones, not 1
    assert p["sequential_write_waf"] < p["random_write_waf_steady"] / 2
    assert r["sequential_write_gain"] > 2.0
    assert r["request_size_gain"] > 1.0
    assert r["inputs"]["background"] == {"fill": 1.0, "overwritten": 1.0, "swap_prior": "pool"}
    text = render_real(r)
    assert "4.37x" in text and "1.75x" in text and "physical OP 7.0%" in text


def test_more_spare_space_lowers_the_gain():
    tight = run(op=0.07)
    loose = run(op=0.28, fill=0.5)
    assert loose["parts"]["random_write_waf_steady"] < tight["parts"]["random_write_waf_steady"]
    assert loose["sequential_write_gain"] < tight["sequential_write_gain"]


def test_sensitivity_grid_and_nearest_cell():
    s = sensitivity(ops=(0.07, 0.28), fills=(1.0,), config=small(), swap_bytes=256 << 20, random_drive_writes=1.0)
    assert [(r["op"], r["fill"]) for r in s["rows"]] == [(0.07, 1.0), (0.28, 1.0)]
    assert s["nearest"] in s["rows"]


def test_cli_real_and_errors(tmp_path):
    args = ["ssd", "thesis", "--real", "--device", "nvme-tlc", "--capacity", "1GiB", "--pages-per-block", "32",
            "--swap-size", "128MiB"]
    r = run_cli(*args, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["inputs"]["swap_bytes"] == 128 << 20 and data["sequential_write_gain"] > 0
    r = run_cli(*args)
    assert "sequential vs swap-pattern writes" in r.output
    assert "--real" in the_error(run_cli("ssd", "thesis", "--sensitivity"))
