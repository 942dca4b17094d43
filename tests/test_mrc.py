"""Miss-ratio curves: exact one-pass curve against slow references and the emulator; SHARDS error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst
from naive_emulate import naive_lru_misses, naive_stack_distances, write_access_trace

from swaptrace.emulate import emulate
from swaptrace.errors import ConfigError
from swaptrace.kernels.mrc.stack import _stack_distances
from swaptrace.mrc import _tree_state, exact_mrc, mean_absolute_error, shards_mrc, write_csv


@settings(max_examples=30, deadline=None)
@given(pages=hst.lists(hst.integers(0, 15), max_size=200), cap=hst.integers(16, 40))
def test_stack_distances_equal_naive_with_compaction(pages, cap):
    pages = np.array(pages, np.int64)
    last, page_at, tree, reg = _tree_state(16, cap)  # small capacity: compaction happens often
    out = np.zeros(pages.size, np.int64)
    _stack_distances(pages, last, page_at, tree, reg, out)
    np.testing.assert_array_equal(out, naive_stack_distances(pages))


@pytest.fixture(scope="module")
def zipf_trace(tmp_path_factory):
    rng = np.random.default_rng(11)
    footprint, n = 2000, 60_000
    pages = (rng.zipf(1.1, n) * 2654435761) % footprint
    steps = np.repeat(np.arange(10), n // 10)
    path = tmp_path_factory.mktemp("mrc") / "z.access.parquet"
    return write_access_trace(path, pages, rng.random(n) < 0.3, steps, footprint, row_group_rows=7000), pages


def test_exact_mrc_equals_separate_lru_runs(zipf_trace, tmp_path):
    trace, pages = zipf_trace
    curve = exact_mrc(trace, batch_rows=5000)
    assert curve.accesses == pages.size
    assert curve.misses[0] == pages.size
    assert curve.misses[-1] == len(np.unique(pages))
    assert np.all(np.diff(curve.misses) <= 0)
    for size in (1, 10, 100, 700, 1999):
        assert curve.misses_at(size) == naive_lru_misses(pages, size)
        res = emulate(trace, tmp_path / f"{size}.swapio.parquet", memory_bytes=size * 4096, policy="lru",
                      readahead="none")
        assert res.faults == curve.misses_at(size)


@pytest.fixture(scope="module")
def generated_trace(tmp_path_factory):
    from swaptrace.workload.generate import generate_trace

    return generate_trace("tiny", tmp_path_factory.mktemp("gen") / "tiny.access.parquet", steps=6, seed=0)


def test_shards_error_small(generated_trace):
    # stated tolerance: mean absolute error over 100 sizes below 0.02 at R = 0.1 (measured ~0.011 on seeds 0-2)
    exact = exact_mrc(generated_trace)
    fixed = shards_mrc(generated_trace, 0.1)
    assert mean_absolute_error(exact, fixed) < 0.02
    sized = shards_mrc(generated_trace, sample_pages=2000)  # ends near R = 0.35
    assert sized.sample_rate < 0.5
    assert mean_absolute_error(exact, sized) < 0.02
    assert np.all(np.diff(fixed.misses) <= 1e-6)


def test_shards_full_rate_is_exact(zipf_trace):
    trace, _ = zipf_trace
    exact = exact_mrc(trace)
    full = shards_mrc(trace, 1.0)
    np.testing.assert_allclose(full.misses, exact.misses)
    big = shards_mrc(trace, sample_pages=10_000)  # never has to lower the rate
    np.testing.assert_allclose(big.misses, exact.misses)


def test_csv(zipf_trace, tmp_path):
    trace, _ = zipf_trace
    curve = exact_mrc(trace)
    out = write_csv(curve, tmp_path / "m.csv", points=0)
    rows = np.genfromtxt(out, delimiter=",", names=True)
    assert rows.dtype.names == ("memory_bytes", "pages", "miss_ratio", "misses")
    assert rows.size == 2001 and rows["memory_bytes"][5] == 5 * 4096
    np.testing.assert_allclose(rows["misses"], curve.misses)
    few = np.genfromtxt(write_csv(curve, tmp_path / "f.csv", points=50), delimiter=",", names=True)
    assert few.size == 50 and few["pages"][0] == 0 and few["pages"][-1] == 2000


def test_bad_inputs(zipf_trace, tmp_path):
    trace, _ = zipf_trace
    with pytest.raises(ConfigError):
        shards_mrc(trace, 0.0)
    with pytest.raises(ConfigError):
        shards_mrc(trace, sample_pages=0)
