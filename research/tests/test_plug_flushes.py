"""research/plug_flushes.py: requests issued together grouped into runs, and the rotated share of writes."""

from __future__ import annotations

import math

import numpy as np
from research_scripts import load

plug_flushes = load("plug_flushes")


def test_a_plug_of_thirty_one_writes_is_one_run_and_a_gap_starts_the_next():
    # a fault's read, then 31 writes of 128 pages 0.7 us apart (one flush), 850 us later one write of 90 pages
    # (the plug's end), then 20 one-page writes 30 us apart: each its own run, as a gap of exactly 30 us splits
    t = np.r_[0.0, 15 + 0.7 * np.arange(31), 865.0, 2000 + 30.0 * np.arange(20)]
    op = np.array(["read"] + ["write"] * 31 + ["write"] + ["write"] * 20)
    pages = np.r_[3, [128] * 31, 90, [1] * 20]
    fl = plug_flushes.flushes(t, op, pages, gap_us=30.0, min_requests=16)
    assert fl.write_pages == 31 * 128 + 90 + 20
    assert fl.runs == ((31, 31 * 128),)  # the read is in the run but is not a write
    assert math.isclose(fl.share, 31 * 128 / (31 * 128 + 90 + 20))
    # with a gap just above 30 us the twenty one-page writes are one run too
    assert plug_flushes.flushes(t, op, pages, gap_us=30.5, min_requests=16).runs == ((31, 31 * 128), (20, 20))


def test_no_requests_no_runs():
    fl = plug_flushes.flushes(np.zeros(0), np.zeros(0, dtype=object), np.zeros(0, np.int64))
    assert fl.runs == () and fl.write_pages == 0 and fl.share == 0.0


def test_rotation_is_the_counters_delta_and_their_ratio():
    keys = plug_flushes.VMSTAT_KEYS
    a = dict.fromkeys(keys, 1000)
    b = {**a, "pgrotated": 1000 + 997, "pswpout": 1000 + 1000}
    r = plug_flushes.rotation([(0.0, a), (0.5, {**a, "pswpout": 1500}), (1.0, b)])
    assert r["pgrotated"] == 997 and r["pswpout"] == 1000 and r["pswpin"] == 0
    assert math.isclose(r["rotated_share"], 0.997)
    assert math.isnan(plug_flushes.rotation([(0.0, a), (1.0, a)])["rotated_share"])
