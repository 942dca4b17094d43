"""Slow, obviously-correct twin of the generator kernels (pure Python integers and floats).

Re-implements SplitMix64 streams, rejection-inversion Zipf, the rank
scrambling bijection and the step order of :mod:`swaptrace.workload.generate`
without calling any kernel; tests compare the two row for row.
"""

from __future__ import annotations

import math

import numpy as np

from swaptrace.workload.layout import build_layout
from swaptrace.workload.spec import ModelSpec, load_spec

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def naive_mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


class NaiveStream:
    """SplitMix64 seeded from (seed, step, table, lane)."""

    def __init__(self, seed: int, step: int, table: int, lane: int):
        h = naive_mix64((seed + GOLDEN) & MASK)
        h = naive_mix64(h ^ step)
        h = naive_mix64((h + table + GOLDEN) & MASK)
        self.state = naive_mix64((h + lane + GOLDEN) & MASK)

    def next_u64(self) -> int:
        self.state = (self.state + GOLDEN) & MASK
        return naive_mix64(self.state)

    def uniform(self) -> float:
        return (self.next_u64() >> 11) * (1.0 / 9007199254740992.0)


def _helper1(x: float) -> float:
    return math.log1p(x) / x if abs(x) > 1e-8 else 1.0 - x * (0.5 - x * (0.3333333333333333 - 0.25 * x))


def _helper2(x: float) -> float:
    return math.expm1(x) / x if abs(x) > 1e-8 else 1.0 + x * 0.5 * (1.0 + x * 0.3333333333333333 * (1.0 + 0.25 * x))


def _hi(x: float, s: float) -> float:
    lx = math.log(x)
    return _helper2((1.0 - s) * lx) * lx


def _hi_inv(x: float, s: float) -> float:
    t = max(x * (1.0 - s), -1.0)
    return math.exp(_helper1(t) * x)


def _h(x: float, s: float) -> float:
    return math.exp(-s * math.log(x))


def naive_zipf_draw(stream: NaiveStream, n: int, s: float) -> int:
    """Hörmann & Derflinger rejection-inversion, one rank in [1, n]."""
    h_x1 = _hi(1.5, s) - 1.0
    h_n = _hi(n + 0.5, s)
    big_s = 2.0 - _hi_inv(_hi(2.5, s) - _h(2.0, s), s)
    while True:
        u = h_n + stream.uniform() * (h_x1 - h_n)
        x = _hi_inv(u, s)
        k = min(max(int(x + 0.5), 1), n)
        if k - x <= big_s or u >= _hi(k + 0.5, s) - _h(float(k), s):
            return k


def naive_zipf_ranks(n: int, s: float, size: int, seed: int = 0) -> list[int]:
    st = NaiveStream(seed, 0, 0, 0)
    return [naive_zipf_draw(st, n, s) for _ in range(size)]


def naive_scramble_params(seed: int, table: int, n: int) -> tuple[int, int]:
    hs = naive_mix64(naive_mix64((seed + GOLDEN) & MASK) ^ 0xA5A5A5A5A5A5A5A5)
    h1 = naive_mix64((hs + 2 * table + 1) & MASK)
    h2 = naive_mix64((hs + 2 * table + 2) & MASK)
    if n <= 1:
        return 1, 0
    a = h1 % (n - 1) + 1
    while math.gcd(a, n) != 1:
        a = a + 1 if a + 1 < n else 1
    return a, h2 % n


BLOCK = 4096  # lookups per random stream, as swaptrace.kernels.generate.draw.BLOCK


def naive_bag_sizes(spec: ModelSpec, seed: int, step: int, t: int) -> list[int]:
    """Each sample's drawn bag size for one (step, table): fixed, from the distribution, or uniform in 1..L."""
    table = spec.tables[t]
    values, probs = table.lookups.values, table.lookups.probs
    if len(values) == 1 and not table.lookups.uniform:
        return [values[0]] * spec.batch_size
    st = NaiveStream(seed, step, t, 0)
    sizes = []
    for _ in range(spec.batch_size):
        u = st.uniform()
        if table.lookups.uniform:
            sizes.append(1 + math.floor(u * values[0]))  # u < 1: one of 1 .. L, each with probability 1/L
            continue
        cdf = list(np.cumsum(probs))
        j = 0
        while j < len(values) - 1 and u >= cdf[j]:
            j += 1
        sizes.append(values[j])
    return sizes


def naive_fresh(spec: ModelSpec, seed: int, step: int, t: int, scatter: bool) -> list[int]:
    """Fresh row ids of one (step, table), in bag order."""
    table = spec.tables[t]
    total = sum(naive_bag_sizes(spec, seed, step, t))
    a, b = naive_scramble_params(seed, t, table.rows)
    rows = []
    for i in range(total):
        if i % BLOCK == 0:
            st = NaiveStream(seed, step, t, 1 + 2 * (i // BLOCK))
        if table.distribution == "uniform":
            k = 1 + math.floor(st.uniform() * table.rows)
        else:
            k = naive_zipf_draw(st, table.rows, table.alpha)
        rows.append((a * (k - 1) + b) % table.rows if scatter else k - 1)
    return rows


def naive_step_bags(spec: ModelSpec, seed: int, step: int, scatter: bool = True,
                    reuse: float = 0.0) -> list[list[list[int]]]:
    """One step's bags: per table, per sample, the row ids looked up (after reuse and in-bag de-duplication)."""
    out = []
    for t, table in enumerate(spec.tables):
        rows = naive_fresh(spec, seed, step, t, scatter)
        if reuse > 0 and step > 0:
            prev = naive_fresh(spec, seed, step - 1, t, scatter)
            mixed = []
            for i, v in enumerate(rows):
                if i % BLOCK == 0:
                    st = NaiveStream(seed, step, t, 2 + 2 * (i // BLOCK))
                u = st.uniform()
                mixed.append(prev[i] if (u < reuse and i < len(prev)) else v)
            rows = mixed
        bags, start = [], 0
        for size in naive_bag_sizes(spec, seed, step, t):
            bag = rows[start:start + size]
            start += size
            bags.append(sorted(set(bag)) if table.unique_in_bag else bag)
        out.append(bags)
    return out


def naive_generate(spec: ModelSpec | str, *, steps: int, seed: int = 0, first_step: int = 0, page_bytes: int = 4096,
                   alpha: float | None = None, optimizer: str | None = None, scatter: bool = True,
                   reuse: float = 0.0, dedup: str | None = None) -> dict[str, np.ndarray]:
    """The access trace as the generate module docstring defines it, one Python tuple at a time."""
    if not isinstance(spec, ModelSpec):
        spec = load_spec(spec)
    spec = spec.with_overrides(alpha=alpha, optimizer=optimizer)
    lay = build_layout(spec, page_bytes)
    regions = lay.regions
    out: list[tuple[int, int, bool, int]] = []
    seen: set[tuple[int, int]] = set()

    def touch(step: int, first_byte: int, nbytes: int, write: bool, region: int) -> None:
        for p in range(first_byte // page_bytes, (first_byte + nbytes - 1) // page_bytes + 1):
            if dedup == "step":
                if (p, write) in seen:
                    continue
                seen.add((p, write))
            out.append((step, p, write, region))

    def pages(step: int, region: int, write: bool) -> None:
        if region < 0:
            return
        r = regions[region]
        for p in range(r.first_page, r.first_page + r.pages):
            touch(step, p * page_bytes, page_bytes, write, region)

    for step in range(first_step, first_step + steps):
        seen.clear()
        index_lists = [[r for bag in bags for r in bag] for bags in naive_step_bags(spec, seed, step, scatter, reuse)]
        # forward
        for t, rows in enumerate(index_lists):
            rb = spec.tables[t].row_bytes
            base = regions[lay.table_region[t]].first_page * page_bytes
            for r in rows:
                touch(step, base + r * rb, rb, False, int(lay.table_region[t]))
        # dense
        pages(step, lay.mlp_region, False)
        pages(step, lay.scratch_region, True)
        # backward + optimizer
        for t, rows in enumerate(index_lists):
            table = spec.tables[t]
            rb = table.row_bytes
            base = regions[lay.table_region[t]].first_page * page_bytes
            srb = spec.state_row_bytes(table)
            sreg = int(lay.state_region[t])
            for r in sorted(set(rows)):
                for c in range(spec.state_arrays):
                    sbase = regions[sreg].first_page * page_bytes + c * table.rows * srb
                    touch(step, sbase + r * srb, srb, False, sreg)
                    touch(step, sbase + r * srb, srb, True, sreg)
                touch(step, base + r * rb, rb, False, int(lay.table_region[t]))
                touch(step, base + r * rb, rb, True, int(lay.table_region[t]))
        pages(step, lay.mlp_region, True)
        pages(step, lay.mlp_state_region, True)
    return {
        "step": np.array([o[0] for o in out], dtype=np.uint32),
        "page": np.array([o[1] for o in out], dtype=np.uint64),
        "write": np.array([o[2] for o in out], dtype=np.bool_),
        "region": np.array([o[3] for o in out], dtype=np.uint16),
    }
