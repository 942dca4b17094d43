"""Simulated WAF against Desnoyers' analytic models (issue: >= 2^20 pages, >= 4 drive writes of warm-up).

The drive is filled sequentially first (the models assume every user page
holds data), then warmed up with 4 drive writes of the workload, then
measured over 4 more. One die, GC reserve of one block, mixed write stream.

Tolerances: 2 %, the models' accuracy docs/ssd.md states, which covers |bias| + 3 std of the
simulated WAF over seeds 100-107 in every case (``python research/tolerances.py oracle --big``,
table in docs/testing.md): at most 0.59 % for Eq. 4 and 12 (greedy OP 7 %, Np 256: +0.51 % +-
0.03 %), 0.34 % for random victims, 0.27 % for Eq. 14, 0.67 % on 2^16 units.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from swaptrace.ssd import analytic as A
from swaptrace.ssd.config import SSDConfig, spare_from_op
from swaptrace.ssd.simulate import ftl_waf

USER_UNITS = 1 << 20


def oracle_config(op: float, pages_per_block: int, policy: str, user_units: int = USER_UNITS) -> SSDConfig:
    spare = spare_from_op(op)
    blocks = math.ceil(user_units / (1.0 - spare) / pages_per_block)
    return SSDConfig(name="oracle", channels=1, dies_per_channel=1, planes=1, blocks_per_plane=blocks,
                     pages_per_block=pages_per_block, page_bytes=4096, spare_factor=spare, gc_policy=policy,
                     gc_free_fraction=0.0, write_buffer_bytes=1 << 20)


def uniform(user_units: int, total: int, seed: int = 1, chunk: int = 1 << 21):
    rng = np.random.default_rng(seed)
    while total > 0:
        n = min(chunk, total)
        yield rng.integers(0, user_units, n)
        total -= n


def hot_cold(user_units: int, total: int, r: float, f: float, seed: int = 2, chunk: int = 1 << 21):
    rng = np.random.default_rng(seed)
    hot = int(user_units * f)
    while total > 0:
        n = min(chunk, total)
        is_hot = rng.random(n) < r
        yield np.where(is_hot, rng.integers(0, hot, n), rng.integers(hot, user_units, n))
        total -= n


def measured_waf(cfg: SSDConfig, stream) -> float:
    u = cfg.user_units
    waf, counters = ftl_waf(cfg, stream(u, 8 * u), warmup_units=4 * u)
    assert counters.host_write_units == 4 * u
    return waf


def spare_of(cfg: SSDConfig) -> float:
    return (cfg.physical_units - cfg.user_units) / cfg.physical_units


@pytest.mark.slow
@pytest.mark.parametrize("op", [0.07, 0.28])
@pytest.mark.parametrize("pages_per_block", [64, 256])
@pytest.mark.parametrize("policy", ["greedy", "fifo"])
def test_uniform_random_matches_desnoyers(policy, op, pages_per_block):
    cfg = oracle_config(op, pages_per_block, policy)
    assert cfg.user_units >= 1 << 20
    predicted = A.predict_waf(policy, spare_of(cfg), pages_per_block)  # Eq. 12 (greedy) / Eq. 4 (fifo)
    assert measured_waf(cfg, uniform) == pytest.approx(predicted, rel=0.02)  # measured <= 0.59 % (docstring)


@pytest.mark.slow
@pytest.mark.parametrize("op", [0.07, 0.28])
def test_random_victim_is_inverse_spare_factor(op):
    cfg = oracle_config(op, 64, "random")
    assert measured_waf(cfg, uniform) == pytest.approx(1.0 / spare_of(cfg), rel=0.02)  # measured <= 0.34 %


@pytest.mark.slow
def test_hot_cold_80_20_matches_eq14():
    cfg = oracle_config(0.28, 64, "fifo")
    alpha = cfg.physical_units / cfg.user_units
    predicted = A.wa_hot_cold(alpha, 0.8, 0.2)
    waf = measured_waf(cfg, lambda u, n: hot_cold(u, n, 0.8, 0.2))
    assert waf == pytest.approx(predicted, rel=0.02)  # measured +0.20 % +- 0.02 % (docstring)


@pytest.mark.slow
def test_host_separated_hot_cold_is_well_below_uniform():
    # Desnoyers (SYSTOR 2012): separating hot and cold streams lowers WA well below the uniform case.
    # Greedy hardly profits from the separation (it ignores age); cost-benefit does. 2^18 units,
    # because cost-benefit scans every closed block at each GC.
    mixed = oracle_config(0.28, 64, "greedy", user_units=1 << 18)
    separated = SSDConfig(**{**mixed.__dict__, "gc_policy": "cost-benefit", "hot_cold_streams": True,
                             "separate_gc_stream": True})
    u = mixed.user_units
    hot = int(u * 0.2)
    waf, _ = ftl_waf(separated, hot_cold(u, 8 * u, 0.8, 0.2), warmup_units=4 * u, cold_units_from=hot)
    uniform = A.predict_waf("greedy", spare_of(mixed), 64)
    assert waf < 0.9 * uniform
    assert waf < 0.85 * measured_waf(mixed, lambda uu, n: hot_cold(uu, n, 0.8, 0.2))


def test_sequential_overwrite_is_exactly_one():
    cfg = oracle_config(0.07, 64, "greedy")
    u = cfg.user_units

    def sequential(_u, total):
        for start in range(0, total, u):
            yield np.arange(u)[: total - start]

    waf, counters = ftl_waf(cfg, sequential(u, 6 * u), warmup_units=2 * u)
    assert counters.gc_write_units == 0
    assert waf == 1.0


def test_small_device_uniform_is_close_to_greedy_model():
    # fast check on 2^16 units: the 2 % claim holds here too, |bias| + 3 std 0.67 % (+0.41 % +- 0.09 %, seeds 100-107)
    cfg = oracle_config(0.28, 64, "greedy", user_units=1 << 16)
    assert measured_waf(cfg, uniform) == pytest.approx(A.predict_waf("greedy", spare_of(cfg), 64), rel=0.02)
