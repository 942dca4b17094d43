"""Uniform rows, random pooling and de-duplication within a bag (DLRM's random-data generator).

The kernel equals the pure-Python twin (tests/naive_generate.py) lookup for lookup and row for row; the
distributions are checked against their definitions with thresholds derived from the sample size.
"""

from __future__ import annotations

import math

import naive_generate as naive
import numpy as np
import pytest
from test_generate_kernel import assert_same

from swaptrace.errors import SpecError
from swaptrace.workload.generate import draw_rows, generate_arrays
from swaptrace.workload.indices import iter_bags
from swaptrace.workload.spec import spec_from_dict


def bag_spec(tables, batch=6, optimizer="rowwise-adagrad", **model):
    return spec_from_dict({"name": "bags", "batch_size": batch, "optimizer": optimizer, "bottom_mlp": [4, 8],
                           "top_mlp": [3, 1], "tables": tables, **model})


MIXED = [
    {"rows": 500, "dim": 16, "lookups": 7, "distribution": "uniform", "pooling": "random", "unique_in_bag": True},
    {"rows": 5000, "dim": 100, "lookups": 40, "pooling": "random", "unique_in_bag": True},  # bags > 32: np.sort path
    {"rows": 3, "dim": 1500, "lookups": 9, "distribution": "uniform", "unique_in_bag": True},  # repeats in every bag
    {"rows": 800, "dim": 16, "lookups": {"values": [0, 2, 5], "probs": [0.3, 0.5, 0.2]}, "unique_in_bag": True},
    {"rows": 1000, "dim": 16, "lookups": 3},  # today's kind of table beside them
]

CASES = {
    "mixed": (bag_spec(MIXED), {}),
    "model-wide": (bag_spec([{"rows": 300, "dim": 8, "lookups": 12}, {"rows": 70, "dim": 8, "lookups": 4}],
                            distribution="uniform", pooling="random", unique_in_bag=True), {"seed": 5}),
    "no-scatter-adam": (bag_spec(MIXED, optimizer="adam"), {"scatter": False}),
    "reuse": (bag_spec(MIXED), {"reuse": 0.5, "seed": 2}),
    "reuse-from-step-4": (bag_spec(MIXED), {"reuse": 0.7, "first_step": 4}),
    "dedup-step": (bag_spec(MIXED), {"dedup": "step"}),
    # 1500 x up to 6 lookups: a table's draws span two random-stream blocks (BLOCK = 4096)
    "multi-block": (bag_spec([{"rows": 2000, "dim": 16, "lookups": 6, "pooling": "random", "unique_in_bag": True,
                               "distribution": "uniform"}], batch=1500), {"reuse": 0.3, "first_step": 1}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_equals_naive(name):
    spec, options = CASES[name]
    got = generate_arrays(spec, steps=3, **options)
    want = naive.naive_generate(spec, steps=3, **options)
    assert len(got["page"]) > 0
    assert_same(got, want)


@pytest.mark.parametrize("name", ["mixed", "reuse-from-step-4", "multi-block"])
def test_bags_equal_naive(name):
    """iter_bags: the same rows, cut into the same bags, as the twin's per-sample lists."""
    spec, options = CASES[name]
    options = {k: v for k, v in options.items() if k != "dedup"}
    first = options.get("first_step", 0)
    for lookups in iter_bags(spec, steps=2, **options):
        want = naive.naive_step_bags(spec, options.get("seed", 0), lookups.step, options.get("scatter", True),
                                     options.get("reuse", 0.0))
        for (indices, offsets), bags in zip(lookups.bags, want, strict=True):
            assert offsets[0] == 0 and len(offsets) == spec.batch_size + 1
            got = [indices[offsets[b]:offsets[b + 1]].tolist() for b in range(spec.batch_size)]
            assert got == bags
    assert lookups.step == first + 1


def test_step_ranges_concatenate():
    spec = bag_spec(MIXED)
    whole = generate_arrays(spec, steps=6, seed=4, reuse=0.4)
    parts = [generate_arrays(spec, steps=n, first_step=s, seed=4, reuse=0.4) for s, n in ((0, 2), (2, 4))]
    assert_same({k: np.concatenate([p[k] for p in parts]) for k in whole}, whole)


def _chi2_quantile(df: int, z: float) -> float:
    """Wilson & Hilferty (1931) cube-root normal approximation of the chi-square quantile at normal score z."""
    h = 2.0 / (9.0 * df)
    return df * (1.0 - h + z * math.sqrt(h)) ** 3


#: normal score of a one-sided false-alarm probability of 1e-6 (the seeds are fixed; this bounds how unlucky
#: a correct sampler would have to be to fail)
Z_1E6 = 4.753


def test_uniform_rows_pass_chi_square():
    """200,000 draws over 1000 rows: Pearson's chi-square (999 df) below its 1 - 1e-6 quantile (~1230)."""
    n, batch, steps = 1000, 1000, 10
    spec = bag_spec([{"rows": n, "dim": 4, "lookups": 20, "distribution": "uniform"}], batch=batch)
    rows = draw_rows(spec, 0, steps=steps, seed=7)
    assert rows.size == batch * 20 * steps and rows.min() >= 0 and rows.max() < n
    counts = np.bincount(rows, minlength=n)
    expected = rows.size / n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < _chi2_quantile(n - 1, Z_1E6)
    # and it is not Zipf: a Zipf(1.05) sample of the same size sits orders of magnitude above the bound
    zipf = draw_rows(bag_spec([{"rows": n, "dim": 4, "lookups": 20}], batch=batch), 0, steps=steps, seed=7)
    zc = np.bincount(zipf, minlength=n)
    assert float(((zc - expected) ** 2 / expected).sum()) > 100 * _chi2_quantile(n - 1, Z_1E6)


def test_uniform_rows_pass_ks_on_the_row_cdf():
    """Kolmogorov-Smirnov distance of the rows' empirical CDF from the discrete uniform one.

    Under the null the discrete-uniform KS distance is stochastically below the continuous one, so
    the asymptotic critical value sqrt(-ln(alpha / 2) / 2) / sqrt(N) (alpha = 1e-6) is conservative.
    """
    n = 40_000
    spec = bag_spec([{"rows": n, "dim": 4, "lookups": 50, "distribution": "uniform"}], batch=2000)
    rows = np.sort(draw_rows(spec, 0, steps=2, seed=11))
    ecdf = np.searchsorted(rows, np.arange(n), side="right") / rows.size
    d = float(np.max(np.abs(ecdf - np.arange(1, n + 1) / n)))
    assert d < math.sqrt(-math.log(1e-6 / 2) / 2) / math.sqrt(rows.size)


def test_random_pooling_mean_and_range():
    """Bag sizes uniform on 1..L: mean (L + 1) / 2 within 5 standard errors sqrt((L^2 - 1) / 12 / bags)."""
    big_l, batch, steps = 20, 4000, 3
    spec = bag_spec([{"rows": 10**6, "dim": 4, "lookups": big_l, "pooling": "random"}], batch=batch)
    sizes = np.concatenate([np.diff(s.bags[0][1]) for s in iter_bags(spec, steps=steps, seed=1)])
    assert sizes.size == batch * steps
    assert sizes.min() == 1 and sizes.max() == big_l  # P(a value never drawn) <= 20 (1 - 1/20)^12000 ~ 1e-266
    se = math.sqrt((big_l ** 2 - 1) / 12 / sizes.size)
    assert abs(sizes.mean() - (big_l + 1) / 2) < 5 * se
    counts = np.bincount(sizes, minlength=big_l + 1)[1:]
    expected = sizes.size / big_l
    assert float(((counts - expected) ** 2 / expected).sum()) < _chi2_quantile(big_l - 1, Z_1E6)


def test_random_pooling_is_capped_at_the_rows():
    spec = bag_spec([{"rows": 5, "dim": 4, "lookups": 20, "pooling": "random"}])
    assert spec.tables[0].lookups.values == (5,) and spec.tables[0].lookups.uniform


def test_no_duplicates_within_a_bag_and_the_expected_count():
    """Fixed bags of m uniform draws over n rows keep n (1 - (1 - 1/n)^m) distinct rows on average.

    Each bag's kept count has variance at most m / 4 (a sum of m indicator increments is bounded by m;
    Popoviciu); the mean over B bags is held within 5 sqrt(m / 4 / B).
    """
    n, m, batch, steps = 30, 25, 2000, 2
    spec = bag_spec([{"rows": n, "dim": 4, "lookups": m, "distribution": "uniform", "unique_in_bag": True}],
                    batch=batch)
    kept = []
    for step in iter_bags(spec, steps=steps, seed=3):
        indices, offsets = step.bags[0]
        for b in range(batch):
            bag = indices[offsets[b]:offsets[b + 1]]
            assert np.all(np.diff(bag) > 0)  # sorted, no repeats
            kept.append(bag.size)
    expected = n * (1 - (1 - 1 / n) ** m)
    assert abs(np.mean(kept) - expected) < 5 * math.sqrt(m / 4 / len(kept))


@pytest.mark.parametrize("table, model, field", [
    ({"distribution": "gaussian"}, {}, "tables[0].distribution"),
    ({"pooling": "sometimes"}, {}, "tables[0].pooling"),
    ({"unique_in_bag": "yes"}, {}, "tables[0].unique_in_bag"),
    ({}, {"distribution": 3}, "distribution"),
    ({}, {"pooling": "random", "unique_in_bag": 1}, "unique_in_bag"),
    ({"pooling": "random", "lookups": {"values": [1, 2], "probs": [0.5, 0.5]}}, {}, "tables[0].lookups"),
    ({"pooling": "random", "lookups": 0}, {}, "tables[0].lookups"),
    ({"pooling": "random", "lookups": 1 << 20}, {}, "tables[0].lookups"),
])
def test_bad_fields_are_named(table, model, field):
    with pytest.raises(SpecError, match=field.replace("[", r"\[").replace("]", r"\]")):
        bag_spec([{"rows": 10, "dim": 4, **table}], **model)


def test_table_overrides_the_model_and_round_trips():
    spec = bag_spec([{"rows": 10, "dim": 4, "lookups": 3}, {"rows": 10, "dim": 4, "distribution": "zipf",
                                                            "pooling": "fixed", "unique_in_bag": False}],
                    distribution="uniform", pooling="random", unique_in_bag=True)
    a, b = spec.tables
    assert (a.distribution, a.pooling, a.unique_in_bag) == ("uniform", "random", True)
    assert (b.distribution, b.pooling, b.unique_in_bag) == ("zipf", "fixed", False)
    assert spec_from_dict(spec.to_dict()) == spec
    assert spec.to_dict()["tables"][0] == {"name": "T0", "rows": 10, "dim": 4, "dtype": "float32", "lookups": 3,
                                           "alpha": 1.05, "distribution": "uniform", "pooling": "random",
                                           "unique_in_bag": True}
    assert a.lookups.mean == 2.0 and spec.lookups_per_step == 6 * (2.0 + 1)
    # a table with today's keys writes today's dict (older traces' metadata stays byte-equal)
    assert set(spec.to_dict()["tables"][1]) == {"name", "rows", "dim", "dtype", "lookups", "alpha"}
