"""The thesis's two ratios on a drive that starts in the steady state of its background (ssd.thesis.thesis_real).

Small drives so each run takes about a second; the checks are physical directions, not fitted values:
a full, randomly overwritten drive amplifies random writes (WAF well above 1) and sequential passes
free whole blocks (WAF far lower), so sequential writes gain; more spare space lowers the gain.
"""

from __future__ import annotations

import json

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
    # random writes into the 256 MiB partition P of the full, randomly overwritten 2 GiB drive (2 partition
    # writes), bracketed by Desnoyers' greedy model (Eq. 12, swaptrace.ssd.analytic):
    # * above, where the drive starts: the whole drive's uniform-random steady state at the effective spare,
    #   8.94, which the model holds to 2 % (test_ssd_op, test_ssd_steady). Writing only P can only leave victims
    #   emptier (the rest is never invalidated, so GC packs it into full blocks it no longer picks). Plus 3 std of
    #   one run: over seeds 0-15 this WAF is 8.60 +- 0.15 (8.31-8.79; `python research/tolerances.py thesis
    #   --first 0 --seeds 16`), 3.8 % below the model: the drift to the bound below is real, not noise;
    # * below, that packing complete: P alone with all the spare, alpha = (T_eff - (U - P)) / P = 1.47, WAF 1.78
    #   (far below: two writes of P are far from that state; seed 0 reads 8.64)
    upper = A.predict_config(cfg) * 1.02 + 3 * 0.15
    rest = cfg.user_units - (256 << 20) // cfg.map_bytes
    lower = A.wa_greedy((cfg.effective_physical_units - rest) / (cfg.user_units - rest), cfg.units_per_block)
    assert lower < p["random_write_waf_steady"] <= upper
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
