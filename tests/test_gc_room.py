"""A fitted device of few blocks per die gets the blocks its GC needs (fitwrites.with_gc_room).

The case is one the pipeline's quick fit produced from a 32 MiB fio file: 32 dies of about 21 blocks
(16 map units each) and an effective spare found by bisection. Host writes stripe over the dies while
overwrites land anywhere, so one die fills with valid data first and its greedy GC stalls although
the device has 4-5 spare blocks per die. These tests check the stall is real on that device, that
the fewest added blocks are found (one fewer still stalls), that the user capacity does not move,
and that the spare search no longer calls a stalled bracket "matched".
"""

from __future__ import annotations

import dataclasses

import pytest

from swaptrace.errors import ConfigError, GCStallError
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.fit import device as devicefit
from swaptrace.ssd.fit import writes as fitwrites
from swaptrace.ssd.labjobs import LabJob, run_job

STEADY = LabJob("steady_write", 4096, 1)


def stalling_device() -> SSDConfig:
    return SSDConfig(name="fitted", channels=16, dies_per_channel=2, planes=1, blocks_per_plane=21,
                     pages_per_block=8, page_bytes=8192, map_bytes=4096, read_us=115.0, program_us=50.0,
                     erase_us=125.0, channel_mb_s=216.0, host_mb_s=875.0, spare_factor=0.2202, gc_policy="greedy",
                     gc_free_fraction=0.0, bg_gc_free_fraction=0.0, write_buffer_bytes=64 << 20)


def test_the_fewest_added_blocks_that_let_gc_run_keep_the_capacity():
    cfg = stalling_device()
    with pytest.raises(GCStallError):
        run_job(cfg, STEADY)
    roomy, out, note = fitwrites.with_gc_room(cfg, lambda c: run_job(c, STEADY), "random writes")
    added = roomy.blocks_per_plane - cfg.blocks_per_plane
    assert added >= 1 and roomy.user_units == cfg.user_units
    assert roomy.effective_op > cfg.effective_op and out["bw_mb_s"] > 0
    if added > 1:  # the fewest: one block fewer still stalls
        fewer = dataclasses.replace(roomy, blocks_per_plane=roomy.blocks_per_plane - 1,
                                    spare_factor=1.0 - (cfg.user_units + 0.5) / (roomy.physical_units
                                                                                  - roomy.units_per_block * roomy.dies))
        assert fewer.user_units == cfg.user_units
        with pytest.raises(GCStallError):
            run_job(fewer, STEADY)
    assert note is not None and f"{added} block(s) per plane added" in note and "random writes" in note


def test_a_device_that_runs_is_returned_unchanged_with_no_note():
    cfg = dataclasses.replace(stalling_device(), blocks_per_plane=30, spare_factor=0.45)
    same, _, note = fitwrites.with_gc_room(cfg, lambda c: run_job(c, STEADY))
    assert same is cfg and note is None


def test_gives_up_after_its_cap_and_passes_other_errors_through(monkeypatch):
    monkeypatch.setattr(fitwrites, "MAX_ROOM_BLOCKS", 2)
    calls = []

    def always_stalls(c):
        calls.append(c.blocks_per_plane)
        raise GCStallError("stall")

    with pytest.raises(GCStallError):
        fitwrites.with_gc_room(stalling_device(), always_stalls)
    assert calls == [21, 22, 23]

    def bad(c):
        raise ConfigError("not a stall")

    with pytest.raises(ConfigError, match="not a stall"):
        fitwrites.with_gc_room(stalling_device(), bad)


def test_spare_search_far_from_the_measurement_is_not_called_matched():
    cfg = stalling_device()
    # 1 MB/s of 4 KiB random writes: slower than this device at any spare its GC can run with
    _, how = fitwrites.search_spare(cfg, STEADY, 1.0, cfg.user_bytes, rel=0.03, iterations=6)
    assert how == "below"


def test_the_device_file_written_is_the_device_fitted_to_the_bit(tmp_path):
    """The model-vs-fio stage replays on the fitted config in memory; the TOML must load back equal.

    GC and die choice can turn on a microsecond's rounding, so a TOML that rounds tR or tPROG would
    be a slightly different device from the one whose numbers the report shows.
    """
    from swaptrace.ssd.config import load_device

    cfg = dataclasses.replace(stalling_device(), read_us=76.8041483692498, program_us=1418.6656985485158,
                              channel_mb_s=2394.6963360093773, spare_factor=0.23804873511904767)
    path = tmp_path / "fitted.toml"
    devicefit.save_fit(devicefit.FitResult(cfg, {"read_us": "a test"}, ["a note"]), "a run", path)
    assert load_device(str(path)) == cfg
