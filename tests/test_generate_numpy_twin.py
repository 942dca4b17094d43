"""The benchmark's numpy twin is the same generator: given the kernel's ranks it yields the kernel's trace."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import naive_generate as naive
import numpy as np
import pytest

from swaptrace.workload.generate import generate_arrays
from swaptrace.workload.spec import spec_from_dict

_PATH = Path(__file__).parent.parent / "benchmarks" / "bench_generate.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_generate", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_numpy_twin_equals_kernel(bench, monkeypatch, optimizer):
    spec = spec_from_dict({"batch_size": 5, "optimizer": optimizer, "bottom_mlp": [4, 8], "top_mlp": [3, 1],
                           "tables": [{"rows": 300, "dim": 100, "lookups": 2}, {"rows": 5000, "dim": 1500, "lookups": 3},
                                      {"rows": 3, "dim": 16}]})
    ranks = []
    for step in range(2):
        for t, table in enumerate(spec.tables):
            stream = naive.NaiveStream(0, step, t, 1)
            ranks.append(np.array([naive.naive_zipf_draw(stream, table.rows, table.alpha)
                                   for _ in range(spec.batch_size * table.lookups.values[0])]))
    monkeypatch.setattr(bench, "numpy_zipf", lambda rng, n, s, size: ranks.pop(0))
    twin = list(bench.numpy_generate(spec, 2))
    kernel = generate_arrays(spec, steps=2)
    for i, key in enumerate(("step", "page", "write", "region")):
        np.testing.assert_array_equal(np.concatenate([c[i] for c in twin]), kernel[key])


def test_numpy_zipf_fits(bench):
    from swaptrace.workload.zipf import fit_exponent

    ranks = bench.numpy_zipf(np.random.default_rng(0), 10_000, 1.1, 200_000)
    assert abs(fit_exponent(ranks, 10_000) - 1.1) < 0.02
