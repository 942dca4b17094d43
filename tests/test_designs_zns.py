"""The zoned SSD model: kernel vs naive twin, its zone rules, and the zoned design's stream on it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive_designs import OP_DISCARD, OP_READ, OP_WRITE, NaiveZNS

from swaptrace.errors import ConfigError
from swaptrace.ssd.config import load_device
from swaptrace.ssd.zns import ZNSConfig, ZNSDevice

DEV = load_device("tiny")
MB = DEV.map_bytes


def _naive(zcfg: ZNSConfig, nzones: int) -> NaiveZNS:
    return NaiveZNS(zone=zcfg.zone_bytes // MB, cap=zcfg.capacity_bytes // MB, nzones=nzones, prog=DEV.program_units,
                    dies=DEV.dies, dies_per_ch=DEV.dies_per_channel, block_progs=DEV.pages_per_block,
                    iodepth=zcfg.iodepth, max_open=zcfg.max_open_zones, read_us=DEV.read_us, prog_us=DEV.program_us,
                    erase_us=DEV.erase_us, xfer_us=MB / DEV.channel_mb_s, host_us=MB / DEV.host_mb_s)


@st.composite
def sequences(draw):
    """Legal request sequences: appends at write pointers, reads below them, resets of whole zones."""
    zone_units = draw(st.sampled_from([8, 16, 40]))
    cap_units = draw(st.integers(max(1, zone_units // 2), zone_units))
    nzones = draw(st.integers(1, 5))
    zcfg = ZNSConfig(zone_bytes=zone_units * MB, zone_capacity_bytes=cap_units * MB, max_open_zones=nzones,
                     iodepth=draw(st.integers(1, 4)))
    wp = [0] * nzones
    reqs = []
    for _ in range(draw(st.integers(0, 60))):
        z = draw(st.integers(0, nzones - 1))
        kind = draw(st.sampled_from(["w", "w", "r", "x"]))
        if kind == "w" and wp[z] < cap_units:
            n = draw(st.integers(1, cap_units - wp[z]))
            reqs.append((OP_WRITE, z * zone_units + wp[z], n))
            wp[z] += n
        elif kind == "r" and wp[z] > 0:
            a = draw(st.integers(0, wp[z] - 1))
            reqs.append((OP_READ, z * zone_units + a, draw(st.integers(1, wp[z] - a))))
        elif kind == "x":
            reqs.append((OP_DISCARD, z * zone_units, zone_units))
            wp[z] = 0
    return zcfg, nzones, reqs


@settings(max_examples=120, deadline=None)
@given(sequences(), st.integers(1, 3))
def test_kernel_matches_naive_twin(case, chunks):
    zcfg, nzones, reqs = case
    dev = ZNSDevice(DEV, zcfg, nzones)
    naive = _naive(zcfg, nzones)
    want = [naive.request(*r) for r in reqs]
    got = []
    arr = np.array(reqs, np.int64).reshape(-1, 3)
    for part in np.array_split(arr, chunks):
        if len(part):
            got.extend(dev.run(part[:, 0], part[:, 1] * MB, part[:, 2] * MB).tolist())
    assert got == want
    s = dev.summary()
    assert s["zone_resets"] == naive.resets and s["gc_erases"] == naive.erases
    assert s["host_write_bytes"] == sum(n for op, _, n in reqs if op == OP_WRITE) * MB
    assert s["waf"] in (None, 1.0) and s["gc_write_bytes"] == 0


@pytest.mark.parametrize("reqs, message", [
    ([(OP_WRITE, 1, 1)], "write pointer"),
    ([(OP_WRITE, 0, 9)], "capacity"),
    ([(OP_READ, 0, 1)], "unwritten"),
    ([(OP_WRITE, 0, 1), (OP_WRITE, 8, 1)], "open-zone limit"),
    ([(OP_DISCARD, 0, 4)], "whole zone"),
    ([(OP_WRITE, 80, 1)], "outside"),
])
def test_zone_rules_are_enforced(reqs, message):
    dev = ZNSDevice(DEV, ZNSConfig(zone_bytes=8 * MB, max_open_zones=1), 2)
    a = np.array(reqs, np.int64)
    with pytest.raises(ConfigError, match=message):
        dev.run(a[:, 0], a[:, 1] * MB, a[:, 2] * MB)


def test_reset_reopens_a_zone_and_writes_stripe_over_dies():
    """A full zone's worth of writes spread over every die: 8x the dies' program units take about
    8 program times (not 8 x dies), the parallelism a striped zone gives."""
    zone = DEV.program_units * DEV.dies * 8
    dev = ZNSDevice(DEV, ZNSConfig(zone_bytes=zone * MB, max_open_zones=1, iodepth=1), 1)
    done = dev.run(np.array([OP_WRITE, OP_DISCARD, OP_WRITE]), np.array([0, 0, 0]) * MB,
                   np.array([zone, zone, DEV.program_units]) * MB)
    assert done[0] < 8 * DEV.program_us + zone * MB / DEV.channel_mb_s + zone * MB / DEV.host_mb_s + 1
    assert done[0] >= 8 * DEV.program_us
    assert dev.summary()["zone_resets"] == 1 and done[2] > done[1]
