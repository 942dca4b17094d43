"""The capture child's MLP step: the same arithmetic as a plain numpy twin, and no allocation per step."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from swaptrace.capture.child import MLP

LAYERS = [[13, 64, 16], [40, 32, 8, 1]]


def naive_step(nets, lr=1e-3):
    """The textbook step, a new array for every intermediate (what MLP.step must equal)."""
    loss = 0.0
    for ws, x in nets:
        acts = [x]
        for w in ws:
            acts.append(np.maximum(acts[-1] @ w, 0.0))
        grad = acts[-1] / acts[-1].shape[0]
        loss += float(np.square(acts[-1]).mean())
        for i in range(len(ws) - 1, -1, -1):
            gw = acts[i].T @ grad
            grad = (grad @ ws[i].T) * (acts[i] > 0)
            ws[i] -= lr * gw
    return loss


def test_step_matches_the_naive_twin():
    mlp = MLP(LAYERS, batch_size=32, seed=3)
    twin = [([w.copy() for w in ws], acts[0].copy()) for ws, acts, *_ in mlp.nets]
    for _ in range(4):
        got, want = mlp.step(lr=0.05), naive_step(twin, lr=0.05)
        assert got == pytest.approx(want, rel=1e-5)
    for (ws, *_), (tws, _) in zip(mlp.nets, twin, strict=True):
        for w, tw in zip(ws, tws, strict=True):
            np.testing.assert_allclose(w, tw, rtol=1e-5, atol=1e-6)


def test_step_allocates_nothing_after_construction():
    # numpy reports its data buffers to tracemalloc; the naive twin allocates ~100 KiB per step here
    mlp = MLP([[256, 512, 256]], batch_size=256)
    mlp.step()
    tracemalloc.start()
    try:
        mlp.step()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4096, f"MLP.step allocated {peak} bytes"
    twin = [([w.copy() for w in ws], acts[0].copy()) for ws, acts, *_ in mlp.nets]
    tracemalloc.start()
    try:
        naive_step(twin)
        _, naive_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert naive_peak > 100 * peak + 65536  # the check can see an allocating step


def _result(gain: int):
    from types import SimpleNamespace

    summary = {"pages_in": 1, "pages_out": 1, "pswpin": 1, "pswpout": 1, "major_faults": 1,
               "requests": {"read": 1, "write": 1, "discard": 0}}
    kernel = {"page_table_bytes": 4096, "total_us": 1e6, "room_gain_bytes": gain}
    return SimpleNamespace(summary=summary, kernel=kernel, path="x", memory_bytes=8 << 20, baseline_bytes=1 << 20,
                           limit_bytes=9 << 20, slowdown=None, lost_events=0, malformed_lines=0,
                           removed_leftovers=[])


@pytest.mark.parametrize(("gain", "warning"), [(0, None), (3 << 20, "larger budget than asked"),
                                               (-(3 << 20), "less than its budget")])
def test_capture_warns_when_the_model_had_other_room_than_its_budget(gain, warning):
    from swaptrace.commands.capture import _render

    text = _render(_result(gain))
    if warning is None:
        assert "WARNING" not in text
    else:
        assert warning in text
