"""The numba options of swaptrace.kernels.jit: what ``jit_noref`` gives up, and that this numba honours it."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from swaptrace.kernels.jit import jit_noref


def test_this_numba_compiles_the_kernels_without_reference_counting():
    # the emulator's and the curves' speed depends on it (docs/benchmarks.md); a numba without the option
    # would still run them, slower, and this test says so
    assert jit_noref.keywords.get("_nrt") is False


def test_a_kernel_without_reference_counting_reads_and_writes_its_arrays():
    @numba.njit(cache=False, nogil=True, _nrt=False)
    def _bump(a, b, i):
        a[i] += b[i]
        return a[i]

    a, b = np.arange(4, dtype=np.int64), np.full(4, 10, np.int64)
    assert _bump(a, b, 2) == 12 and a.tolist() == [0, 1, 12, 3]


def test_a_kernel_without_reference_counting_cannot_allocate():
    @numba.njit(cache=False, _nrt=False)
    def _make(n):
        return np.zeros(n)

    with pytest.raises(numba.core.errors.TypingError, match="Only accept returning of array passed into the function"):
        _make(3)
