"""``emulate``'s default ensemble: the profile's runs over device speed and room, the stream of the run nearest
their mean.

Each member is checked against a single run (``ensemble=False``) at its own write cost and budget, and the
run written against :func:`nearest_member` of the members' counts, worked out here independently. The members
share one run until the smallest budget could reclaim, then fork: checked against members run from the start.
"""

from __future__ import annotations

import dataclasses

import pytest
from cli_helpers import run_cli, the_error
from naive_emulate import zipf_access_trace

import swaptrace.emulate as pagecache
from swaptrace.core.traceio import open_trace
from swaptrace.emulate import (
    Emulator,
    EmulatorConfig,
    emulate,
    ensemble_configs,
    load_profile,
    member_budget_pages,
    nearest_member,
    run_members,
)

FOOTPRINT = 400
ENSEMBLE = load_profile().ensemble


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return zipf_access_trace(tmp_path_factory.mktemp("ens") / "t.access.parquet", seed=4, footprint=FOOTPRINT,
                             n=12000, steps=6, write_p=0.5)


def test_members_are_every_room_offset_with_every_write_cost_within_the_footprint():
    meta = {"page_bytes": 4096, "footprint_pages": FOOTPRINT}
    cfg = EmulatorConfig.resolve(meta, memory_bytes=200 * 4096)
    members = ensemble_configs(cfg, FOOTPRINT, ENSEMBLE)
    assert len(members) == len(ENSEMBLE.room_offsets) * len(ENSEMBLE.write_costs) == ENSEMBLE.size == 15
    assert [(m.budget_pages, m.write_cost) for m in members[:6]] == [(199, 3), (199, 4), (199, 5), (199, 6), (199, 8),
                                                                      (200, 3)]
    assert {m.budget_pages for m in members} == {199, 200, 201}  # 200 x (1 -+ 0.005), rounded down
    assert all(m.fill_write_credit == cfg.fill_write_credit and m.policy == cfg.policy for m in members)
    # a budget at the footprint or at one page stays inside 1 .. footprint
    assert member_budget_pages(FOOTPRINT, 0.005, FOOTPRINT) == FOOTPRINT
    assert member_budget_pages(1, -0.005, FOOTPRINT) == 1


def test_nearest_member_is_the_run_nearest_the_mean_in_relative_pages_in_and_out():
    # mean (20, 200): (18, 200) is 0.1 away, the others 0.2
    assert nearest_member([(21, 230), (18, 200), (21, 170)]) == 1
    assert nearest_member([(5, 5), (5, 5)]) == 0  # the first of equals
    assert nearest_member([(0, 0), (0, 0)]) == 0  # no division by a zero mean


def test_the_default_writes_the_stream_of_the_member_nearest_the_mean(trace, tmp_path):
    res = emulate(trace, tmp_path / "e.swapio.parquet", memory_fraction=0.4, ensemble=None)
    ens = res.params["ensemble"]
    members = ens["members"]
    assert len(members) == 15 and ens["write_costs"] == list(ENSEMBLE.write_costs)
    counts = [(m["pages_in"], m["pages_out"]) for m in members]
    assert len(set(counts)) > 1  # the members differ, so choosing one is a real choice
    assert ens["chosen"] == nearest_member(counts)
    chosen = members[ens["chosen"]]
    assert (res.pages_in, res.pages_out) == (chosen["pages_in"], chosen["pages_out"])
    assert res.params["write_cost"] == chosen["write_cost"]
    assert ens["mean_pages_in"] == pytest.approx(sum(c[0] for c in counts) / 15)
    # the stream reports the budget of the run written; the one asked for is beside it
    meta = open_trace(res.path, kind="swapio").meta
    budget = int(FOOTPRINT * 0.4) * 4096
    assert meta["memory_bytes"] == chosen["memory_bytes"] == meta["params"]["memory_bytes"]
    assert meta["summary"]["memory_pages"] == chosen["memory_bytes"] // 4096 == res.memory_pages
    assert meta["params"]["requested_memory_bytes"] == budget
    assert meta["params"]["profile"]["name"] == "linux-6.x-cgroup1"
    assert meta["params"]["ensemble"]["chosen"] == ens["chosen"]
    # every third member against a single run at its own write cost and budget
    for m in members[::3]:
        one = emulate(trace, tmp_path / "one.swapio.parquet", memory_bytes=m["memory_bytes"],
                      write_cost=m["write_cost"], force=True)
        assert one.params["ensemble"] is None  # a given write cost: one run
        assert (one.pages_in, one.pages_out) == (m["pages_in"], m["pages_out"])
    # and the stream written is that single run's, request for request
    one = emulate(trace, tmp_path / "c.swapio.parquet", memory_bytes=chosen["memory_bytes"],
                  write_cost=chosen["write_cost"], ensemble=False)
    a = open_trace(res.path, kind="swapio").read_all()
    b = open_trace(one.path, kind="swapio").read_all()
    assert all((a[c] == b[c]).all() and len(a[c]) == len(b[c]) for c in ("t_us", "op", "offset", "length", "cause"))


def test_no_ensemble_is_one_run_at_the_default_write_cost(trace, tmp_path):
    res = emulate(trace, tmp_path / "s.swapio.parquet", memory_fraction=0.4, ensemble=False)
    assert res.params["ensemble"] is None and res.params["write_cost"] == pagecache.DEFAULT_WRITE_COST
    # the library's default is that one run: emulate() == emulate(write_cost=DEFAULT_WRITE_COST)
    plain = emulate(trace, tmp_path / "d.swapio.parquet", memory_fraction=0.4)
    given = emulate(trace, tmp_path / "g.swapio.parquet", memory_fraction=0.4, write_cost=pagecache.DEFAULT_WRITE_COST)
    a, b = (open_trace(r.path, kind="swapio").read_all() for r in (plain, given))
    assert plain.params["ensemble"] is None and plain.summary == given.summary == res.summary
    assert all((a[c] == b[c]).all() for c in ("t_us", "op", "offset", "length", "cause"))
    assert res.params["fill_write_credit"] == pagecache.DEFAULT_FILL_WRITE_CREDIT
    lag = emulate(trace, tmp_path / "l.swapio.parquet", memory_fraction=0.4, writeback_completion="level")
    assert lag.params["ensemble"] is None and lag.params["fill_write_credit"] is None


def test_progress_counts_the_trace_once_over_all_passes(trace, tmp_path):
    seen = []
    res = emulate(trace, tmp_path / "p.swapio.parquet", memory_fraction=0.4, progress=seen.append, ensemble=None)
    assert res.params["ensemble"] is not None
    assert sum(seen) == res.accesses == 12000 and all(n > 0 for n in seen)


def test_cli_summarises_the_ensemble_and_rejects_what_it_cannot_vary(trace, tmp_path):
    r = run_cli("emulate", trace, "--memory-fraction", 0.4, "-o", tmp_path / "c.swapio.parquet")
    assert r.exit_code == 0, r.output
    assert "ensemble" in r.output and "15 runs" in r.output
    assert "--ensemble varies the write cost" in the_error(
        run_cli("emulate", trace, "--memory-fraction", 0.4, "--ensemble", "--write-cost", 3, "-o", tmp_path / "x.swapio.parquet"))
    assert "needs --writeback-completes device" in the_error(
        run_cli("emulate", trace, "--memory-fraction", 0.4, "--ensemble", "--writeback-completes", "level",
                "-o", tmp_path / "y.swapio.parquet"))
    assert "--fill-write-credit applies to --writeback-completes device" in the_error(
        run_cli("emulate", trace, "--memory-fraction", 0.4, "--policy", "lru", "--fill-write-credit", 2,
                "-o", tmp_path / "z.swapio.parquet"))
    assert not any((tmp_path / n).exists() for n in ("x.swapio.parquet", "y.swapio.parquet", "z.swapio.parquet"))


@pytest.mark.parametrize("fraction", [0.1, 0.4, 0.9])
def test_members_forked_from_the_shared_prefix_count_as_runs_from_the_start(trace, fraction):
    tf = open_trace(trace, kind="access")
    cfg = EmulatorConfig.resolve(tf.meta, memory_fraction=fraction)
    members = ensemble_configs(cfg, FOOTPRINT, ENSEMBLE)
    for workers in (1, 2):
        runs = run_members(tf, members, nsteps=6, first_step=0, chunk_rows=1000, workers=workers)
        assert runs.prefix.counters().reclaim_calls == 0  # the prefix never reclaimed
        assert 0 < runs.prefix_accesses <= 12000
        for m, found in zip(members, runs.counters, strict=True):
            alone = Emulator(m, FOOTPRINT, None, nsteps=6)
            for batch in tf.iter_batches(columns=["step", "page", "write"], batch_rows=777):
                alone.count(batch["page"], batch["write"], batch["step"])
            assert alone.counters() == found


def test_a_fork_may_change_only_budget_and_write_cost_and_only_before_reclaim(trace):
    tf = open_trace(trace, kind="access")
    cfg = EmulatorConfig.resolve(tf.meta, memory_fraction=0.4)
    emu = Emulator(cfg, FOOTPRINT, None, nsteps=6)
    with pytest.raises(ValueError, match="only the budget and the write cost"):
        emu.fork(EmulatorConfig.resolve(tf.meta, memory_fraction=0.4, readahead="none"))
    batch = next(tf.iter_batches(columns=["step", "page", "write"], batch_rows=12000))
    emu.count(batch["page"], batch["write"], batch["step"])
    assert emu.counters().reclaim_calls > 0
    with pytest.raises(ValueError, match="before its first reclaim call"):
        emu.fork(cfg)


@pytest.mark.parametrize("policy, readahead", [("linux", "vma"), ("linux", "cluster"), ("lru", "none")])
def test_a_counting_fork_counts_as_a_full_fork_in_less_memory(trace, policy, readahead):
    tf = open_trace(trace, kind="access")
    cfg = EmulatorConfig.resolve(tf.meta, memory_fraction=0.3, policy=policy, readahead=readahead)
    columns = tf.read_all(["page", "write", "step"])
    columns = [columns[k] for k in ("page", "write", "step")]
    other = dataclasses.replace(cfg, budget_pages=cfg.budget_pages * 5 // 6)
    parent = Emulator(cfg, FOOTPRINT, None, nsteps=6)
    taken = parent.count_prefix(*columns, budget_pages=other.budget_pages)
    assert taken > 0 and parent.counters().reclaim_calls == 0
    full, counting = parent.fork(other), parent.fork(other, counting=True)
    for i in range(taken, columns[0].size, 500):
        full.count(*(c[i:i + 500] for c in columns))
        counting.count(*(c[i:i + 500] for c in columns))
    assert counting.counters() == full.counters()
    assert full.counters().read_requests + full.counters().write_requests > 0  # requests were counted
    assert counting.state.take_rows() is None  # ... and none written
    assert counting.state.m.nbytes + counting.state.f.nbytes < (full.state.m.nbytes + full.state.f.nbytes) / 2
    with pytest.raises(ValueError, match="writes no rows"):
        next(counting.feed(*(c[:10] for c in columns)))


def test_retune_before_any_access_runs_as_a_run_built_at_that_budget_and_write_cost(trace):
    tf = open_trace(trace, kind="access")
    cfg = EmulatorConfig.resolve(tf.meta, memory_fraction=0.4)
    other = dataclasses.replace(cfg, budget_pages=cfg.budget_pages * 3 // 4, write_cost=cfg.write_cost + 3)
    built, retuned = Emulator(other, FOOTPRINT, None, nsteps=6), Emulator(cfg, FOOTPRINT, None, nsteps=6)
    retuned.retune(budget_pages=other.budget_pages, write_cost=other.write_cost)
    for batch in tf.iter_batches(columns=["step", "page", "write"], batch_rows=777):
        built.count(batch["page"], batch["write"], batch["step"])
        retuned.count(batch["page"], batch["write"], batch["step"])
    assert retuned.counters() == built.counters() and built.counters().reclaim_calls > 0


def test_retune_mid_run_sets_the_budget_and_write_cost_registers_and_refuses_a_larger_budget(trace):
    from swaptrace.kernels.emulate import state as ks

    tf = open_trace(trace, kind="access")
    cfg = EmulatorConfig.resolve(tf.meta, memory_fraction=0.5)
    columns = tf.read_all(["page", "write", "step"])
    columns = [columns[k] for k in ("page", "write", "step")]
    runs = [Emulator(cfg, FOOTPRINT, None, nsteps=6) for _ in range(3)]
    half = columns[0].size // 2
    for emu in runs:
        emu.count(*(c[:half] for c in columns))
    assert runs[0].counters().reclaim_calls > 0  # mid-run: a fork could not do this
    runs[0].retune(budget_pages=cfg.budget_pages // 2, write_cost=cfg.write_cost * 2)
    runs[1].state.m[ks.P_BUDGET], runs[1].state.m[ks.P_WB_COST] = cfg.budget_pages // 2, cfg.write_cost * 2
    for emu in runs:
        emu.count(*(c[half:] for c in columns))
    assert runs[0].counters() == runs[1].counters() != runs[2].counters()
    runs[0].retune()  # nothing given: nothing changes
    assert runs[0].state.m[ks.P_BUDGET] == cfg.budget_pages // 2 and runs[0].cfg == cfg
    for bad in ({"budget_pages": cfg.budget_pages + 1}, {"budget_pages": 0}, {"write_cost": 0}):
        with pytest.raises(ValueError, match="budget_pages|write_cost"):
            runs[0].retune(**bad)
