"""SHARDS against its reference (naive_shards.py, from the FAST'15 paper) exactly, and against the exact MRC
within an error bound derived from the sampling (module docstring of the bound test)."""

from __future__ import annotations

from collections import defaultdict

import naive_shards
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from swaptrace.kernels.mrc.shards import MODULUS, _hash24
from swaptrace.kernels.mrc.stack import _stack_distances
from swaptrace.mrc import _tree_state, mrc_from_chunks, shards_from_chunks

# Kernel and reference add the same counts in another order (rescaling by float factors): 1e-9 relative is
# ~10**7 roundings of 2**-53, more than these few thousand operations can accumulate.
RTOL = 1e-9


def test_hash_is_the_documented_splitmix64_top_24_bits():
    assert MODULUS == naive_shards.P
    for p in [0, 1, 2, 12345, 2**31 + 7, 2**40 + 3]:
        assert _hash24(p) == naive_shards.hash24(p)


def _chunks(pages, cuts):
    bounds = sorted({min(c, len(pages)) for c in cuts})
    return [np.asarray(x, np.int64) for x in np.split(np.asarray(pages, np.int64), bounds)]


@settings(max_examples=40, deadline=None)
@given(pages=hst.lists(hst.integers(0, 199), max_size=400), rate=hst.sampled_from([0.05, 0.2, 0.5, 1.0]),
       adjust=hst.booleans(), cuts=hst.lists(hst.integers(0, 400), max_size=3))
def test_fixed_rate_equals_reference(pages, rate, adjust, cuts):
    got = shards_from_chunks(_chunks(pages, cuts), 200, sample_rate=rate, adjust=adjust)
    threshold = max(1, int(round(rate * naive_shards.P)))
    want = naive_shards.shards_fixed_rate(pages, 200, threshold, adjust)
    np.testing.assert_allclose(got.misses, want, rtol=RTOL, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(pages=hst.lists(hst.integers(0, 199), max_size=400), s_max=hst.integers(1, 60), adjust=hst.booleans())
def test_fixed_size_equals_reference(pages, s_max, adjust):
    got = shards_from_chunks([np.asarray(pages, np.int64)], 200, sample_pages=s_max, adjust=adjust)
    want, rate = naive_shards.shards_fixed_size(pages, 200, s_max, adjust)
    assert got.sample_rate == rate
    np.testing.assert_allclose(got.misses, want, rtol=RTOL, atol=1e-9)


def test_fixed_size_drops_every_page_sharing_the_evicted_hash():
    # 24-bit hashes collide (1100 pairs among the first 200 000 pages); a page left in the sample with the new
    # threshold's hash is never sampled again yet lengthens other pages' distances (a bug found by this test)
    by_hash = defaultdict(list)
    for p in range(200_000):
        by_hash[naive_shards.hash24(p)].append(p)
    pool = np.array([p for v in by_hash.values() if len(v) > 1 for p in v][:400])
    rng = np.random.default_rng(0)
    for s_max in (5, 20, 60):
        pages = rng.choice(pool, 3000)
        got = shards_from_chunks([pages], 200_000, sample_pages=s_max)
        want, rate = naive_shards.shards_fixed_size(pages.tolist(), 200_000, s_max)
        np.testing.assert_allclose(got.misses, want, rtol=RTOL, atol=1e-9)


def _exact_distances(pages, footprint):
    last, page_at, tree, reg = _tree_state(footprint)
    out = np.zeros(pages.size, np.int64)
    _stack_distances(pages, last, page_at, tree, reg, out)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("rate", [0.1, 0.3])
def test_fixed_rate_error_within_the_sampling_bound(seed, rate):
    """|SHARDS - exact| at every size c (1..footprint) is within B(c) = 4 sd_pages(c) + window(c):

    * page sampling: with an ideal hash each page is in the sample independently with probability R, so the
      estimate with exact distances, sum_p I_p m_p(c) / R, has variance (1-R)/R * sum_p m_p(c)**2, m_p(c)
      the misses of page p at size c (first access + reuses at distance > c); 4 standard deviations;
    * distance estimation (the bound's loose part): a reuse at true distance d is seen at 1 + Binomial(d-1, R) sampled pages, scaled
      by 1/R: off by at most 4 sqrt(c (1-R)/R) + 1/R (rounding, the +1) around d ~ c, so only reuses with d
      within that window of c can be counted on the wrong side; their number bounds that error.
    """
    rng = np.random.default_rng(seed)
    footprint, n = 2000, 40_000
    pages = ((rng.zipf(1.1, n) * 2654435761) % footprint).astype(np.int64)
    est = shards_from_chunks([pages], footprint, sample_rate=rate)
    exact = mrc_from_chunks([pages], footprint)
    d = _exact_distances(pages, footprint)
    sizes = np.unique(np.linspace(1, footprint, 60).astype(np.int64))
    order = np.argsort(pages, kind="stable")
    per_page = np.split(d[order], np.flatnonzero(np.diff(pages[order])) + 1)
    sum_sq = np.zeros(sizes.size)
    for dist in per_page:
        reuse = np.sort(dist[dist > 0])
        m = 1 + reuse.size - np.searchsorted(reuse, sizes, side="right")  # first access + reuses beyond c
        sum_sq += m.astype(float) ** 2
    sd = np.sqrt((1 - rate) / rate * sum_sq)
    half = 4 * np.sqrt(sizes * (1 - rate) / rate) + 1 / rate + 1
    reuse_all = np.sort(d[d > 0])
    window = np.searchsorted(reuse_all, sizes + half, side="right") - np.searchsorted(reuse_all, sizes - half)
    err = np.abs(est.misses[sizes] - exact.misses[sizes])
    bound = 4 * sd + window
    assert np.all(err <= bound), list(zip(sizes[err > bound], err[err > bound], bound[err > bound], strict=True))
    # The bound is loose (the window term counts reuses whose errors mostly cancel): it rules out a bias beyond
    # what sampling explains, e.g. a missing 1/R scaling, not small errors; test_mrc.py checks the paper's MAE.
