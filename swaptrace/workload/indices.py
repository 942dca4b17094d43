"""Embedding lookups of DLRM training steps: the one place they are drawn.

``swaptrace generate`` turns these lookups into page accesses and
``swaptrace train`` feeds them to ``torch.nn.EmbeddingBag``; both read them
through :func:`draw_batches`, so the two cannot drift apart.

For every step and table (in spec order): one bag per sample of the batch,
its size fixed, drawn from the table's bag-size distribution or uniform in
``1 .. L`` (``pooling = "random"``); each lookup a bounded-Zipf rank
(:mod:`swaptrace.workload.zipf`) or a uniform one (``distribution = "uniform"``),
mapped to a row by a seed-derived bijection (``scatter=False`` keeps rank k at
row k-1); with ``reuse = f`` each position takes, with probability f, the
previous step's freshly drawn row at the same position (FBGEMM's ``--reuse``);
then, for ``unique_in_bag`` tables, each bag's rows are sorted and repeats
dropped (DLRM's ``np.unique`` per bag in ``dlrm_data_pytorch.py``).

Randomness comes from SplitMix64 streams keyed by ``(seed, step, table,
lane)`` (:mod:`swaptrace.kernels.generate.zipf`): lane 0 draws a step's bag sizes,
and each block of 4096 lookups draws its ranks (and reuse decisions) on its
own lane. Hence any step range can be drawn on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from swaptrace.errors import ConfigError
from swaptrace.kernels.generate.draw import draw_steps
from swaptrace.workload.spec import ModelSpec, load_spec
from swaptrace.workload.zipf import scramble_params, zipf_constants

#: lookups drawn per kernel call at most (bounds the index buffers: 3 x 8 bytes each)
DRAW_BUDGET = 1 << 21
MAX_STEP = (1 << 32) - 1


class IndexPlan:
    """The per-table sampler constants the draw kernel reads, as plain arrays (built once per run)."""

    def __init__(self, spec: ModelSpec, seed: int, scatter: bool):
        tables = spec.tables
        self.spec, self.seed, self.scatter = spec, seed, scatter
        self.batch = spec.batch_size
        self.n_tables = len(tables)
        self.n_rows = np.array([t.rows for t in tables], dtype=np.int64)
        consts = [zipf_constants(t.rows, t.alpha) for t in tables]
        self.zs = np.array([t.alpha for t in tables], dtype=np.float64)
        self.zh_x1 = np.array([c[0] for c in consts], dtype=np.float64)
        self.zh_n = np.array([c[1] for c in consts], dtype=np.float64)
        self.zbig_s = np.array([c[2] for c in consts], dtype=np.float64)
        ab = [scramble_params(seed, i, t.rows) for i, t in enumerate(tables)]
        self.sa = np.array([a for a, _ in ab], dtype=np.int64)
        self.sb = np.array([b for _, b in ab], dtype=np.int64)
        self.dist_uniform = np.array([t.distribution == "uniform" for t in tables], dtype=np.bool_)
        self.pool_uniform = np.array([t.lookups.uniform for t in tables], dtype=np.bool_)
        self.bag_unique = np.array([t.unique_in_bag for t in tables], dtype=np.bool_)
        vals: list[int] = []
        cdf: list[float] = []
        off = [0]
        for t in tables:
            vals.extend(t.lookups.values)
            cdf.extend(np.cumsum(t.lookups.probs).tolist())
            off.append(len(vals))
        self.bag_vals = np.array(vals, dtype=np.int64)
        self.bag_cdf = np.array(cdf, dtype=np.float64)
        self.bag_off = np.array(off, dtype=np.int64)
        max_lookups = [self.batch * t.lookups.max for t in tables]
        self.tbl_off = np.concatenate([[0], np.cumsum(max_lookups)]).astype(np.int64)
        self.stride = int(self.tbl_off[-1])


@dataclass(frozen=True)
class DrawnSteps:
    """The lookups of ``nsteps`` consecutive steps from ``step0`` (views into reused buffers).

    Per (step index ``si``, table ``t``), unit ``u = si * n_tables + t``:
    ``idx[si * stride + tbl_off[t]:][:lens[u]]`` are the rows in lookup order,
    ``uniq[...][:ulens[u]]`` the distinct ones ascending, and
    ``bag_lens[u * batch:(u + 1) * batch]`` each sample's bag size.
    """

    step0: int
    nsteps: int
    plan: IndexPlan
    idx: np.ndarray
    uniq: np.ndarray
    lens: np.ndarray
    ulens: np.ndarray
    bag_lens: np.ndarray

    def bag(self, si: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        """``(indices, offsets)`` of step index ``si``, table ``t``: bag b is ``indices[offsets[b]:offsets[b+1]]``."""
        p = self.plan
        u = si * p.n_tables + t
        lo = si * p.stride + int(p.tbl_off[t])
        offsets = np.zeros(p.batch + 1, dtype=np.int64)
        np.cumsum(self.bag_lens[u * p.batch:(u + 1) * p.batch], out=offsets[1:])
        return self.idx[lo:lo + int(self.lens[u])], offsets


def draw_batches(plan: IndexPlan, steps: int, first_step: int = 0, reuse: float = 0.0,
                 budget: int = DRAW_BUDGET) -> Iterator[DrawnSteps]:
    """Draw steps ``[first_step, first_step + steps)`` in batches of at most ``budget`` lookups.

    Each yielded :class:`DrawnSteps` holds views into buffers the next batch
    overwrites. The result does not depend on ``budget`` nor on where a run
    of steps is cut (the step before ``first_step`` is drawn for ``reuse``).
    """
    n_tables, batch = plan.n_tables, plan.batch
    k_max = max(1, min(steps, budget // max(plan.stride, 1)))
    fresh = np.empty(k_max * plan.stride, dtype=np.int64)
    idx = np.empty_like(fresh) if reuse > 0 else fresh
    uniq = np.empty_like(fresh)
    drawn = np.zeros(k_max * n_tables, dtype=np.int64)
    lens = np.zeros_like(drawn)
    ulens = np.zeros_like(drawn)
    bag_lens = np.zeros(k_max * n_tables * batch, dtype=np.int64)
    prev_fresh = np.empty(plan.stride if reuse > 0 else 0, dtype=np.int64)
    prev_drawn = np.zeros(n_tables, dtype=np.int64)
    have_prev = False

    def draw(step0: int, nsteps: int, rf: float, fresh_only: bool, *, fr, ix, dr, bl) -> None:
        p = plan
        draw_steps(np.uint64(p.seed), np.int64(step0), np.int64(nsteps), np.int64(batch), p.n_rows, p.zs, p.zh_x1,
              p.zh_n, p.zbig_s, p.sa, p.sb, p.scatter, p.dist_uniform, p.bag_vals, p.bag_cdf, p.bag_off,
              p.pool_uniform, p.bag_unique, p.tbl_off, np.int64(p.stride), float(rf), prev_fresh, prev_drawn,
              have_prev, fresh_only, fr, ix, uniq, dr, lens, ulens, bl)

    if reuse > 0 and first_step > 0:
        # the step before the range: only its fresh draws are needed
        draw(first_step - 1, 1, 0.0, True, fr=prev_fresh, ix=prev_fresh, dr=prev_drawn,
             bl=np.zeros(n_tables * batch, np.int64))
        have_prev = True
    done = 0
    while done < steps:
        nsteps = min(k_max, steps - done)
        step0 = first_step + done
        draw(step0, nsteps, reuse, False, fr=fresh, ix=idx, dr=drawn, bl=bag_lens)
        yield DrawnSteps(step0, nsteps, plan, idx, uniq, lens, ulens, bag_lens)
        if reuse > 0:
            last = nsteps - 1
            prev_fresh[:] = fresh[last * plan.stride:(last + 1) * plan.stride]
            prev_drawn[:] = drawn[last * n_tables:(last + 1) * n_tables]
            have_prev = True
        done += nsteps


def check_draw_options(steps: int, seed: int, first_step: int, reuse: float) -> list[str]:
    """Problems with the options of a draw, one string each (empty when all are good)."""
    errors = []
    if not isinstance(steps, int | np.integer) or steps < 1:
        errors.append(f"steps: must be a positive integer, got {steps!r}")
    if not isinstance(first_step, int | np.integer) or first_step < 0:
        errors.append(f"first-step: must be an integer >= 0, got {first_step!r}")
    elif isinstance(steps, int | np.integer) and first_step + steps - 1 > MAX_STEP:
        errors.append(f"steps: the last step must be below 2**32, got {first_step + steps - 1}")
    if not isinstance(seed, int | np.integer) or not 0 <= seed < (1 << 64):
        errors.append(f"seed: must be an integer in [0, 2**64), got {seed!r}")
    if not 0.0 <= reuse <= 1.0:
        errors.append(f"reuse: must be a fraction in [0, 1], got {reuse!r}")
    return errors


@dataclass(frozen=True)
class StepLookups:
    """One training step's lookups: per table (spec order) the ``(indices, offsets)`` of its bags.

    ``offsets`` has ``batch + 1`` entries; sample b's bag is
    ``indices[offsets[b]:offsets[b + 1]]`` (``torch.nn.EmbeddingBag`` with
    ``include_last_offset=True`` takes them as they are).
    """

    step: int
    bags: tuple[tuple[np.ndarray, np.ndarray], ...]


def iter_bags(spec: ModelSpec | str, *, steps: int, seed: int = 0, first_step: int = 0, alpha: float | None = None,
              scatter: bool = True, reuse: float = 0.0) -> Iterator[StepLookups]:
    """Yield each step's bags: exactly the lookups ``generate`` turns into the trace's table reads.

    Parameters are those of :func:`swaptrace.workload.generate.generate_trace` that
    decide the lookups; the arrays are fresh copies (int64).
    """
    if not isinstance(spec, ModelSpec):
        spec = load_spec(spec)
    spec = spec.with_overrides(alpha=alpha)
    errors = check_draw_options(steps, seed, first_step, reuse)
    if errors:
        raise ConfigError("; ".join(errors))
    plan = IndexPlan(spec, seed, scatter)
    for drawn in draw_batches(plan, steps, first_step, reuse):
        for si in range(drawn.nsteps):
            bags = tuple((ix.copy(), off) for ix, off in (drawn.bag(si, t) for t in range(plan.n_tables)))
            yield StepLookups(drawn.step0 + si, bags)
