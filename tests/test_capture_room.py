"""The capture's check that the model got its budget: resident-page probe and room arithmetic (no root needed)."""

from __future__ import annotations

import mmap

import numpy as np

from swaptrace.capture.child import ResidencyProbe
from swaptrace.capture.replay import room_gain_bytes

PAGE = mmap.PAGESIZE


def test_probe_counts_written_pages_and_not_the_zero_page():
    region = mmap.mmap(-1, 64 * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    mem = np.frombuffer(region, dtype=np.uint8)
    probe = ResidencyProbe(PAGE)
    assert probe.resident_bytes(mem) == 0  # mapped, never touched
    for p in (0, 5, 6, 40, 63):
        mem[p * PAGE + 7] = 1  # a store: a page of our own
    loaded = int(sum(int(mem[p * PAGE]) for p in (10, 11, 12)))  # loads: the shared zero page
    assert loaded == 0
    got = probe.resident_bytes(mem)
    if probe.zero_pfn is not None:  # frame numbers visible (root): zero-page mappings are told apart
        assert got == 5 * PAGE
    else:  # mincore alone cannot tell a zero-page mapping from a page of ours
        assert got == 8 * PAGE
    del mem
    region.close()


def test_probe_works_in_chunks_across_a_large_mapping():
    n = ResidencyProbe.CHUNK * 2 + 3  # three mincore calls, the last one short
    region = mmap.mmap(-1, n * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    mem = np.frombuffer(region, dtype=np.uint8)
    touched = [0, ResidencyProbe.CHUNK - 1, ResidencyProbe.CHUNK, 2 * ResidencyProbe.CHUNK + 2]
    for p in touched:
        mem[p * PAGE] = 3
    assert ResidencyProbe(PAGE).resident_bytes(mem) == len(touched) * PAGE
    del mem
    region.close()


def test_room_gain_is_what_the_rest_of_the_process_gave_back():
    mib = 1 << 20
    # baseline 60 MiB + page tables 1 MiB; at the end the cgroup holds 90 MiB of which 30 are the model's
    assert room_gain_bytes(60 * mib, 1 * mib, 90 * mib, 30 * mib) == 1 * mib  # the rest holds 60, not 61
    assert room_gain_bytes(60 * mib, 1 * mib, 91 * mib, 30 * mib) == 0
    assert room_gain_bytes(60 * mib, 1 * mib, 92 * mib, 30 * mib) == -mib  # the rest grew: the model had less
    assert room_gain_bytes(60 * mib, 1 * mib, None, 30 * mib) is None
    assert room_gain_bytes(60 * mib, 1 * mib, 90 * mib, None) is None
