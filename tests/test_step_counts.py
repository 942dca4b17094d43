"""The emulator's per-step access counts (one numba pass over the step column) against numpy's bincount."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from swaptrace.core.traceio import open_trace
from swaptrace.emulate.engine import step_counts
from swaptrace.errors import ConfigError
from swaptrace.workload.generate import generate_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("counts") / "t.access.parquet"
    generate_trace("tiny", path, steps=5, seed=3, first_step=7)
    return open_trace(path, "access")


def test_counts_equal_bincount_over_small_batches(trace):
    steps = trace.read_all(["step"])["step"].astype(np.int64)
    want = np.bincount(steps - 7)
    assert want.size == 5
    got = step_counts(trace, 7, 1000)  # batches that cut steps in the middle
    assert got.tolist() == want.tolist()


def test_more_steps_than_the_metadata_says_grows_the_counts(trace):
    steps = trace.read_all(["step"])["step"].astype(np.int64)
    short = dataclasses.replace(trace, meta={**trace.meta, "steps": 2})
    assert step_counts(short, 7, 1000).tolist() == np.bincount(steps - 7).tolist()


def test_a_step_before_first_step_is_an_error(trace):
    with pytest.raises(ConfigError, match="before first_step 8"):
        step_counts(trace, 8, 1000)


@pytest.mark.parametrize("ordered", [True, False, "no step count"])
def test_emulate_times_rows_by_their_steps_whatever_the_order(tmp_path, monkeypatch, ordered):
    # emulate() counts each step's rows as it goes; a trace not in step order (here steps 0..3 in the order
    # 2, 0, 3, 1, 0) is run again with its counts taken first. Either way every row's time is the naive
    # emulator's, which counts the steps with bincount before it starts.
    from naive_emulate import NaiveEmulator, write_access_trace

    from swaptrace import emulate_trace as emulate
    from swaptrace.emulate import EmulatorConfig

    rng = np.random.default_rng(11)
    n, footprint, budget = 4000, 200, 40
    pages = (rng.zipf(1.2, n) * 7) % footprint
    writes = rng.random(n) < 0.4
    steps = np.repeat([2, 0, 3, 1, 0] if ordered is False else [0, 1, 2, 3, 4], n // 5)
    path = write_access_trace(tmp_path / "t.access.parquet", pages, writes, steps, footprint)
    if ordered == "no step count":  # a trace whose metadata does not say how many steps it has
        from swaptrace.core.traceio import TraceWriter

        tf = open_trace(path, "access")
        with TraceWriter(path, "access", {k: v for k, v in tf.meta.items() if k != "steps"}, force=True) as w:
            w.write(**tf.read_all(["step", "page", "write", "region"]))
        assert "steps" not in open_trace(path, "access").meta
    out = tmp_path / "t.swapio.parquet"
    from swaptrace.emulate import run as emulate_run

    calls = []
    real = emulate_run._run
    monkeypatch.setattr(emulate_run, "_run", lambda tf, **kw: calls.append(kw["counts"]) or real(tf, **kw))
    res = emulate(path, out, memory_bytes=budget * 4096, policy="lru", readahead="none", chunk_rows=300)
    got = open_trace(out, "swapio").read_all(["t_us", "step", "offset", "length"])
    nslots = EmulatorConfig.resolve({"page_bytes": 4096, "footprint_pages": footprint},
                                    memory_bytes=budget * 4096).nslots
    naive = NaiveEmulator(footprint, budget, nslots=nslots, step_us=res.params["step_us"])
    rows, _ = naive.run(pages, writes, steps)
    assert len(rows) == got["t_us"].size > 100
    assert got["t_us"].tolist() == pytest.approx([r[0] for r in rows])
    assert got["offset"].tolist() == [r[3] for r in rows]
    # the run given up on (out of order) left nothing behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.access.parquet", "t.swapio.parquet"]
    # counted as it went; out of order, the second run had the counts
    assert [c is None for c in calls] == {True: [True], False: [True, False], "no step count": [False]}[ordered]
