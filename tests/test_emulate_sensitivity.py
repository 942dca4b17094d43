"""``emulate --sensitivity``: the run counted at a little less and a little more memory.

Each neighbour is checked against a single run of its own built at that budget from the start (the
neighbours share a prefix and fork, as the ensemble's members do); the budgets against
``floor(budget * (1 -/+ fraction))`` worked out here; the stream written is the same as without the option.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from cli_helpers import run_cli, the_error
from naive_emulate import zipf_access_trace

from swaptrace.core.traceio import open_trace
from swaptrace.emulate import EmulatorConfig, emulate
from swaptrace.errors import ConfigError

FOOTPRINT = 500


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return zipf_access_trace(tmp_path_factory.mktemp("sens") / "t.access.parquet", seed=7, footprint=FOOTPRINT,
                             n=12000, steps=6, write_p=0.4)


@pytest.mark.parametrize(("policy", "fraction"), [("linux", 0.05), ("lru", 0.2), ("linux", 0.5)])
def test_each_neighbour_counts_as_a_run_built_at_its_budget(trace, tmp_path, policy, fraction):
    res = emulate(trace, tmp_path / "s.swapio.parquet", memory_fraction=0.4, policy=policy, ensemble=False,
                  sensitivity=fraction)
    s = res.params["sensitivity"]
    budget = math.floor(FOOTPRINT * 0.4)
    tf = open_trace(trace, kind="access")
    for i, sign in enumerate((-1, 1)):
        pages = math.floor(budget * (1 + sign * fraction))
        cfg = dataclasses.replace(EmulatorConfig.resolve(tf.meta, memory_fraction=0.4, policy=policy), budget_pages=pages)
        alone = emulate(trace, tmp_path / f"n{i}.swapio.parquet", cfg, ensemble=False)
        assert s["memory_bytes"][i] == pages * 4096
        assert (s["major_faults"][i], s["pages_in"][i], s["pages_out"][i]) == (
            alone.major_faults, alone.pages_in, alone.pages_out)
    assert s["pages_in"][0] != s["pages_in"][1]  # the trace swaps at both: the option reached both runs
    # the stream written is the run's own, as without the option
    plain = emulate(trace, tmp_path / "p.swapio.parquet", memory_fraction=0.4, policy=policy, ensemble=False)
    assert plain.summary == res.summary and "sensitivity" not in plain.params
    assert open_trace(res.path, kind="swapio").meta["params"]["sensitivity"] == s


def test_the_ensemble_written_member_is_the_one_varied(trace, tmp_path):
    res = emulate(trace, tmp_path / "e.swapio.parquet", memory_fraction=0.4, ensemble=True, sensitivity=0.1)
    chosen = res.params["ensemble"]["members"][res.params["ensemble"]["chosen"]]
    written = res.summary["memory_pages"]
    assert chosen["memory_bytes"] == written * 4096
    assert res.params["sensitivity"]["memory_bytes"] == [math.floor(written * 0.9) * 4096,
                                                         math.floor(written * 1.1) * 4096]


def test_progress_counts_the_trace_once_over_the_extra_pass(trace, tmp_path):
    seen = []
    res = emulate(trace, tmp_path / "g.swapio.parquet", memory_fraction=0.4, ensemble=False, sensitivity=0.1,
                  progress=seen.append)
    assert sum(seen) == res.accesses == 12000


def test_cli_prints_both_neighbours_and_refuses_a_fraction_outside_it(trace, tmp_path):
    out = tmp_path / "c.swapio.parquet"
    r = run_cli("emulate", trace, "--memory-fraction", 0.4, "--no-ensemble", "--sensitivity", 10, "-o", out)
    assert r.exit_code == 0, r.output
    assert "memory -10 %" in r.output and "memory +10 %" in r.output
    j = run_cli("emulate", trace, "--memory-fraction", 0.4, "--no-ensemble", "--sensitivity", 10, "-o", out,
                "--force", "--json")
    assert json.loads(j.output)["sensitivity"]["fraction"] == 0.1
    for bad in (0, 100, -1, "nan"):
        bad_out = tmp_path / f"bad{bad}.swapio.parquet"
        assert "--sensitivity" in the_error(run_cli("emulate", trace, "--memory-fraction", 0.4, "--sensitivity", bad,
                                                    "-o", bad_out))
        assert not bad_out.exists()
    with pytest.raises(ConfigError, match="sensitivity"):
        emulate(trace, tmp_path / "x.swapio.parquet", memory_fraction=0.4, sensitivity=1.0)
    assert not (tmp_path / "x.swapio.parquet").exists()
