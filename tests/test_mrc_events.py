"""Miss-ratio curves of traces with alloc and free events: a freed page leaves the LRU stack.

The kernels against their references (naive_emulate.naive_stack_distances, naive_shards), exactly; the curve
against an LRU cache whose freed frames stay empty (a lower bound, equal without frees of cached pages);
a hand-worked case through a file.
"""

from __future__ import annotations

import naive_shards
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as hst
from naive_emulate import naive_lru_misses, naive_stack_distances, write_access_trace

from swaptrace.kernels.mrc.stack import _stack_distances
from swaptrace.mrc import _tree_state, exact_mrc, mrc_from_chunks, shards_from_chunks

RTOL = 1e-9  # as tests/test_mrc_shards.py: the same sums in another order

rows = hst.lists(hst.tuples(hst.integers(0, 59), hst.sampled_from([0, 0, 0, 0, 1, 2])), max_size=400)


def encoded(trace):
    """The kernels' page column: an event row ``(p, 1 or 2)`` as ``-(p + 1)``."""
    return np.array([-p - 1 if ev else p for p, ev in trace], np.int64)


@settings(max_examples=60, deadline=None)
@given(trace=rows, cap=hst.sampled_from([None, 3, 8]))
def test_stack_distances_with_frees_equal_naive(trace, cap):
    pages = encoded(trace)
    last, page_at, tree, reg = _tree_state(60, cap and 60 + cap)  # small capacity: compactions on the way
    out = np.zeros(pages.size, np.int64)
    _stack_distances(pages, last, page_at, tree, reg, out)
    want = naive_stack_distances([p for p, _ in trace], [ev for _, ev in trace])
    np.testing.assert_array_equal(out, want)


@settings(max_examples=40, deadline=None)
@given(trace=rows, rate=hst.sampled_from([0.05, 0.3, 1.0]), adjust=hst.booleans())
def test_fixed_rate_with_frees_equals_reference(trace, rate, adjust):
    pages = encoded(trace)
    got = shards_from_chunks([pages[: pages.size // 2], pages[pages.size // 2:]], 60, sample_rate=rate,
                             adjust=adjust)
    want = naive_shards.shards_fixed_rate(pages.tolist(), 60, max(1, int(round(rate * naive_shards.P))), adjust)
    np.testing.assert_allclose(got.misses, want, rtol=RTOL, atol=1e-9)
    assert got.accesses == sum(1 for _, ev in trace if ev == 0)


@settings(max_examples=40, deadline=None)
@given(trace=rows, s_max=hst.integers(1, 30), adjust=hst.booleans())
def test_fixed_size_with_frees_equals_reference(trace, s_max, adjust):
    pages = encoded(trace)
    got = shards_from_chunks([pages], 60, sample_pages=s_max, adjust=adjust)
    want, rate = naive_shards.shards_fixed_size(pages.tolist(), 60, s_max, adjust)
    assert got.sample_rate == rate
    np.testing.assert_allclose(got.misses, want, rtol=RTOL, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(trace=rows)
def test_curve_bounds_an_lru_cache_with_frees(trace):
    # a cache of c pages holds a recency prefix of the live pages, at most c: every cache hit is a hit of the
    # stack at c, so the curve never exceeds the cache's misses; frees of pages never cached change nothing
    pages = [p for p, _ in trace]
    events = [ev for _, ev in trace]
    curve = mrc_from_chunks([encoded(trace)], 60)
    for c in (0, 1, 2, 5, 13, 60):
        assert curve.misses[c] <= naive_lru_misses(pages, c, events)
    assert curve.accesses == events.count(0)


def test_free_is_a_cold_miss_hand_worked(tmp_path):
    # a b a | free a | a b: distances 0 0 2, (free), 0 2 -> at 1 page: 5 misses; at 2 pages: 3 first
    # accesses (a, b, and a after its free) and no reuse beyond 2 -> 3 misses
    path = write_access_trace(tmp_path / "t.access.parquet", [0, 1, 0, 0, 0, 1], [0] * 6, [0] * 6, 4,
                              events=[0, 0, 0, 2, 0, 0])
    curve = exact_mrc(path)
    assert curve.accesses == 5
    assert curve.misses.tolist()[:3] == [5, 5, 3]
    # the same without the free: a's third access is a reuse at distance 1
    plain = write_access_trace(tmp_path / "p.access.parquet", [0, 1, 0, 0, 1], [0] * 5, [0] * 5, 4)
    assert exact_mrc(plain).misses.tolist()[:3] == [5, 4, 2]
