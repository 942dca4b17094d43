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
