"""Slow, obviously-correct twins of what an embedding-bag training step does to its tables, in float64.

Written from the definitions, never from the product's outputs:

* a ``sum`` bag is the sum of its rows (``torch.nn.EmbeddingBag(mode="sum")``; FBGEMM's
  ``PoolingMode.SUM``), bag b being ``indices[offsets[b]:offsets[b+1]]``;
* the gradient of row r is the sum, over every occurrence of r in a bag b, of the gradient of bag b's
  pooled output (the chain rule through a sum);
* FBGEMM's fused optimizers (fbgemm_gpu ``EmbOptimType``; the update rules of
  ``split_embedding_backward_codegen_*_cpu``), per row r with gradient g_r (a dim-vector):
  ``EXACT_SGD``: ``w_r -= lr g_r``;
  ``EXACT_ADAGRAD``: ``s_r += g_r ** 2`` (elementwise), ``w_r -= lr g_r / (sqrt(s_r) + eps)``;
  ``EXACT_ROWWISE_ADAGRAD``: ``s_r += mean(g_r ** 2)`` (one value per row), ``w_r -= lr g_r / (sqrt(s_r) + eps)``.
  Rows that no bag looks up are not touched.
"""

from __future__ import annotations

import numpy as np


def bag_sums(weights: np.ndarray, indices: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """(B, dim) float64: bag b is the sum of ``weights[r]`` over r in ``indices[offsets[b]:offsets[b+1]]``."""
    out = np.zeros((len(offsets) - 1, weights.shape[1]))
    for b in range(len(offsets) - 1):
        for r in indices[offsets[b]:offsets[b + 1]]:
            out[b] += weights[r].astype(np.float64)
    return out


def bag_sum_scales(weights: np.ndarray, indices: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per bag and column ``sum |w|`` of its terms, and per bag its number of terms (for an error bound)."""
    scale = np.zeros((len(offsets) - 1, weights.shape[1]))
    for b in range(len(offsets) - 1):
        for r in indices[offsets[b]:offsets[b + 1]]:
            scale[b] += np.abs(weights[r].astype(np.float64))
    return scale, np.diff(offsets)


def row_gradients(pooled_grad: np.ndarray, indices: np.ndarray, offsets: np.ndarray, rows: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(g, scale, count)``: per row its gradient (rows, dim) float64, the sum of its terms' magnitudes and how
    many terms it has (occurrences in the bags)."""
    g = np.zeros((rows, pooled_grad.shape[1]))
    scale = np.zeros_like(g)
    count = np.zeros(rows, dtype=np.int64)
    for b in range(len(offsets) - 1):
        for r in indices[offsets[b]:offsets[b + 1]]:
            g[r] += pooled_grad[b].astype(np.float64)
            scale[r] += np.abs(pooled_grad[b].astype(np.float64))
            count[r] += 1
    return g, scale, count


def fused_update(optimizer: str, weights: np.ndarray, state: np.ndarray | None, g: np.ndarray, touched: np.ndarray,
                 lr: float, eps: float) -> tuple[np.ndarray, np.ndarray | None]:
    """New ``(weights, state)`` after one of FBGEMM's fused updates of the rows in ``touched`` (float64)."""
    w = weights.astype(np.float64).copy()
    s = None if state is None else state.astype(np.float64).copy()
    for r in np.flatnonzero(touched):
        if optimizer == "sgd":
            w[r] -= lr * g[r]
        elif optimizer == "adagrad":
            s[r] += g[r] ** 2
            w[r] -= lr * g[r] / (np.sqrt(s[r]) + eps)
        elif optimizer == "rowwise-adagrad":
            s[r] += np.mean(g[r] ** 2)
            w[r] -= lr * g[r] / (np.sqrt(s[r]) + eps)
        else:
            raise ValueError(optimizer)
    return w, s
