"""research/vary_in_time.py: how a trace is cut into pieces and the order the settings are cycled in."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from research_scripts import load

sys.path.insert(0, str(Path(__file__).parents[1]))
vary = load("vary_in_time")


def test_pieces_follow_steps_or_a_period():
    step = np.array([3, 3, 3, 4, 4, 7])
    assert vary.pieces(step, 0) == [(0, 3), (3, 5), (5, 6)]
    assert vary.pieces(step, 4) == [(0, 4), (4, 6)]
    assert vary.pieces(np.array([], dtype=int), 0) == []


def test_interleaved_schedule_visits_every_setting_once_and_changes_both():
    costs, budgets = [3, 4, 5, 6, 8], [99, 100, 101]
    sched = vary.schedule(costs, budgets, "interleaved")
    assert sorted(sched) == sorted((c, b) for c in costs for b in budgets)
    assert all(a[0] != b[0] and a[1] != b[1] for a, b in zip(sched, sched[1:], strict=False))
    inner = vary.schedule(costs, budgets, "costs-inner")
    assert inner[:5] == [(c, 99) for c in costs]
