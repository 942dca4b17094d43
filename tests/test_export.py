"""Export to libCacheSim's oracleGeneral format and CSV; cross-check LRU misses with libcachesim."""

from __future__ import annotations

import numpy as np
import pytest
from naive_emulate import write_access_trace

from swaptrace.mrc import exact_mrc
from swaptrace.workload.export import ORACLE_GENERAL_DTYPE, export_trace, libcachesim_lru_misses, next_access_vtimes


def naive_next(pages):
    out = []
    for i, p in enumerate(pages):
        later = [j for j in range(i + 1, len(pages)) if pages[j] == p]
        out.append(later[0] + 1 if later else -1)  # 1-based, as libCacheSim's traceConv
    return np.array(out)


def test_next_access_vtimes():
    rng = np.random.default_rng(0)
    pages = rng.integers(0, 20, 300)
    np.testing.assert_array_equal(next_access_vtimes(pages), naive_next(pages.tolist()))


def test_oracle_general_records(tmp_path):
    rng = np.random.default_rng(1)
    pages = rng.integers(0, 50, 1000)
    steps = np.repeat(np.arange(4), 250)
    trace = write_access_trace(tmp_path / "t.access.parquet", pages, pages % 2 == 0, steps, 50, row_group_rows=130)
    out = export_trace(trace, tmp_path / "t.bin")
    raw = np.fromfile(out, dtype=ORACLE_GENERAL_DTYPE)
    assert out.stat().st_size == 24 * 1000
    np.testing.assert_array_equal(raw["obj_id"], pages)
    np.testing.assert_array_equal(raw["clock_time"], steps)
    assert np.all(raw["obj_size"] == 4096)
    np.testing.assert_array_equal(raw["next_access_vtime"], naive_next(pages.tolist()))
    csv = export_trace(trace, tmp_path / "t.csv", fmt="csv")
    rows = np.genfromtxt(csv, delimiter=",", names=True, dtype=None, encoding="utf-8")
    assert rows.dtype.names == ("time", "obj_id", "obj_size", "op", "next_access_vtime")
    np.testing.assert_array_equal(rows["next_access_vtime"], raw["next_access_vtime"])
    assert set(rows["op"][pages % 2 == 0]) == {"write"}


@pytest.fixture(scope="module")
def generated_trace(tmp_path_factory):
    from swaptrace.workload.generate import generate_trace

    return generate_trace("tiny", tmp_path_factory.mktemp("gen") / "tiny.access.parquet", steps=3, seed=1)


def test_libcachesim_lru_equals_ours(generated_trace, tmp_path):
    pytest.importorskip("libcachesim")

    out = export_trace(generated_trace, tmp_path / "tiny.oracleGeneral.bin")
    curve = exact_mrc(generated_trace)
    footprint = curve.sizes_pages.size - 1
    for size in (16, footprint // 8, footprint // 2, footprint):
        assert libcachesim_lru_misses(out, size) == curve.misses_at(size)


def test_events_are_left_out(tmp_path):
    # alloc and free rows are not in either format, and next-access times count access rows only
    rng = np.random.default_rng(2)
    pages = rng.integers(0, 30, 600)
    events = rng.choice([0, 0, 0, 1, 2], 600)
    steps = np.repeat(np.arange(3), 200)
    trace = write_access_trace(tmp_path / "t.access.parquet", pages, pages % 3 == 0, steps, 30, row_group_rows=70,
                               events=events)
    keep = events == 0
    raw = np.fromfile(export_trace(trace, tmp_path / "t.bin"), dtype=ORACLE_GENERAL_DTYPE)
    assert raw.size == keep.sum()
    np.testing.assert_array_equal(raw["obj_id"], pages[keep])
    np.testing.assert_array_equal(raw["clock_time"], steps[keep])
    np.testing.assert_array_equal(raw["next_access_vtime"], naive_next(pages[keep].tolist()))
    rows = np.genfromtxt(export_trace(trace, tmp_path / "t.csv", fmt="csv"), delimiter=",", names=True, dtype=None,
                         encoding="utf-8")
    np.testing.assert_array_equal(rows["obj_id"], pages[keep])
    np.testing.assert_array_equal(rows["next_access_vtime"], raw["next_access_vtime"])
