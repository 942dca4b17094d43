"""The ``linux`` policy with flushed memcg statistics (``stats_flush_steps``): reclaim reads stale list sizes.

The kernel's ``inactive_is_low``, ``workingset_test_recent`` and the
``may_deactivate`` check in ``prepare_scan_control`` read the memory cgroup's
statistics, which are folded together only at a flush (every 2 s, and at each
``memory.stat`` read). These tests pin what that means on small traces: within
one flush interval the emulator must act on the sizes of the last flush, not
on the lists as they are.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_pagecache_props import run_arrays

from swaptrace.errors import ConfigError
from swaptrace.kernels.emulate import state as ks

FOOTPRINT, BUDGET = 400, 100


def hot_cold(steps: int, n: int = 6000, seed: int = 3):
    """Stores: 60 % to 60 hot pages, the rest spread over 340 cold ones; ``steps`` equal steps."""
    rng = np.random.default_rng(seed)
    pages = np.where(rng.random(n) < 0.6, rng.integers(0, 60, n), rng.integers(60, FOOTPRINT, n)).astype(np.int64)
    return pages, np.ones(n, bool), np.repeat(np.arange(steps), n // steps).astype(np.int64)


def run(pages, writes, steps, flush):
    emu, _ = run_arrays(pages, writes, steps, FOOTPRINT, BUDGET, policy="linux", readahead="none",
                        writeback_lag=0, stats_flush_steps=flush, scan_priorities=False)
    return emu.state.reg, emu.summary()


def test_one_interval_sees_the_lists_as_they_were_at_its_start():
    # one step = one flush interval that began with empty lists: the refault test compares against an
    # active list of 0 pages (never recent), inactive_is_low compares 0 with 0 (never low), and no
    # refault was counted at the last flush (no may_deactivate) -- so nothing is deactivated, and pages
    # activated by a second reference stay active
    reg, _ = run(*hot_cold(1), flush=1)
    assert reg[ks.C_REFAULT_ACTIVATIONS] == 0
    assert reg[ks.C_DEACTIVATIONS] == 0
    assert reg[ks.R_N_ACTIVE] == reg[ks.C_ACTIVATIONS] > 0
    assert reg[ks.R_STAT_ACTIVE] == reg[ks.R_STAT_INACTIVE] == 0


def test_exact_statistics_deactivate_and_activate_refaults():
    reg, _ = run(*hot_cold(1), flush=0)
    assert reg[ks.C_REFAULT_ACTIVATIONS] > 0
    assert reg[ks.C_DEACTIVATIONS] > 0


def test_a_flush_at_each_step_lets_reclaim_see_the_growth():
    reg, _ = run(*hot_cold(6), flush=1)
    # flushed as step 5's first fault came: the snapshot is the lists of that moment, within one list's
    # size of the present, and refault activations resume once a flush shows an active list
    assert reg[ks.R_STAT_STEP] == 5
    assert 0 < reg[ks.R_STAT_ACTIVE] + reg[ks.R_STAT_INACTIVE] <= BUDGET
    assert reg[ks.C_REFAULT_ACTIVATIONS] > 0


def test_longer_interval_flushes_less_often():
    pages, writes, steps = hot_cold(6)
    regs = {n: run(pages, writes, steps, flush=n)[0] for n in (1, 2, 4)}
    assert [regs[n][ks.R_STAT_STEP] for n in (1, 2, 4)] == [5, 4, 4]


def test_hot_set_protected_by_stale_statistics_reads_less():
    # the active list that stale statistics let grow holds the hot pages: fewer major faults than with
    # exact statistics, which keep deactivating them
    pages, writes, steps = hot_cold(1)
    assert run(pages, writes, steps, flush=1)[1]["pages_in"] < run(pages, writes, steps, flush=0)[1]["pages_in"]


@pytest.mark.parametrize("policy", ["lru", "clock"])
def test_other_policies_reject_it(policy):
    with pytest.raises(ConfigError, match="linux policy only"):
        run_arrays(*hot_cold(1), FOOTPRINT, BUDGET, policy=policy, stats_flush_steps=1)


def test_negative_is_rejected():
    with pytest.raises(ConfigError, match="must not be negative"):
        run_arrays(*hot_cold(1), FOOTPRINT, BUDGET, policy="linux", stats_flush_steps=-1)
