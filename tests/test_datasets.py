"""Partitioned access traces: a dataset folder reads as the file it was split from, and
``generate --workers`` writes one equal row for row to the single-process file."""

from __future__ import annotations

import os
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from cli_helpers import run_cli, the_error

from swaptrace.core.traceio import DATASET_SIDECAR, DatasetWriter, open_trace
from swaptrace.emulate import emulate
from swaptrace.errors import OutputError, TraceFileError
from swaptrace.mrc import exact_mrc
from swaptrace.parallel.generate import merge_summaries, step_ranges
from swaptrace.workload.export import export_trace
from swaptrace.workload.generate import generate_part, generate_trace, trace_metadata

PRESET, STEPS = "tiny", 7


def _serial_dataset(out, ranges, steps=STEPS, seed=3):
    """A dataset made without Dask, by the same part function the workers run."""
    meta = trace_metadata(PRESET, steps=steps, seed=seed)
    parts, summaries, seen = [], [], None
    with DatasetWriter(out) as dw:
        for i, (a, n) in enumerate(ranges):
            name = DatasetWriter.part_name(i, a, n)
            _, summary, part_seen = generate_part(PRESET, dw.tmp / name, steps=n, first_step=a, seed=seed)
            summaries.append(summary)
            seen = part_seen if seen is None else np.bitwise_or(seen, part_seen)
            parts.append({"file": name, "rows": summary["accesses"], "first_step": a, "steps": n})
        meta.update(kind="access", summary=merge_summaries(summaries, seen))
        return dw.commit(meta, parts)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds")
    single = generate_trace(PRESET, d / "one.access.parquet", steps=STEPS, seed=3)
    dataset = _serial_dataset(d / "many.access.parquet", step_ranges(0, STEPS, 3))
    return single, dataset


@pytest.mark.parametrize("first, steps, parts", [(0, 7, 3), (5, 10, 4), (0, 3, 8), (2, 1, 1)])
def test_step_ranges_cover_the_steps_in_order(first, steps, parts):
    ranges = step_ranges(first, steps, parts)
    assert ranges[0][0] == first and sum(n for _, n in ranges) == steps
    assert all(a + n == b for (a, n), (b, _) in zip(ranges, ranges[1:], strict=False))
    assert max(n for _, n in ranges) - min(n for _, n in ranges) <= 1


def test_dataset_reads_as_the_single_file(pair):
    single, dataset = pair
    a, b = open_trace(single, "access"), open_trace(dataset, "access")
    assert b.num_rows == a.num_rows and len(b.parts) == 3
    for name, col in a.read_all().items():
        np.testing.assert_array_equal(b.read_all()[name], col, err_msg=name)
    assert b.meta["summary"] == a.meta["summary"]
    # chunked reads cross part boundaries in order, whatever the batch size
    got = np.concatenate([x["page"] for x in b.iter_batches(["page"], batch_rows=1000)])
    np.testing.assert_array_equal(got, a.read_all(["page"])["page"])
    # other tools read the folder as one table (they skip the sidecar)
    assert pq.read_table(dataset).num_rows == a.num_rows


def test_mrc_emulate_and_export_read_a_dataset_as_a_file(pair, tmp_path):
    single, dataset = pair
    np.testing.assert_array_equal(exact_mrc(dataset).misses, exact_mrc(single).misses)
    r1 = emulate(single, tmp_path / "a.swapio.parquet", memory_fraction=0.4, workers=1)
    r2 = emulate(dataset, tmp_path / "b.swapio.parquet", memory_fraction=0.4, workers=1)
    assert (r1.pages_in, r1.pages_out, r1.faults) == (r2.pages_in, r2.pages_out, r2.faults)
    s1, s2 = open_trace(r1.path).read_all(), open_trace(r2.path).read_all()
    for name in s1:
        np.testing.assert_array_equal(s1[name], s2[name], err_msg=name)
    for fmt in ("libcachesim", "csv"):
        e1 = export_trace(single, tmp_path / f"a.{fmt}", fmt=fmt)
        e2 = export_trace(dataset, tmp_path / f"b.{fmt}", fmt=fmt)
        assert e1.read_bytes() == e2.read_bytes(), fmt


def test_inspect_shows_the_parts(pair):
    _, dataset = pair
    r = run_cli("inspect", dataset)
    assert r.exit_code == 0, r.output
    assert "parts       3" in r.output


def test_a_folder_without_sidecar_or_with_a_missing_part_is_refused(pair, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceFileError, match="without _swaptrace.json"):
        open_trace(tmp_path / "empty")
    broken = _serial_dataset(tmp_path / "broken", step_ranges(0, 2, 2), steps=2)
    os.remove(open_trace(broken).parts[1])
    with pytest.raises(TraceFileError, match="is missing"):
        open_trace(broken)


def test_dataset_writer_leaves_nothing_on_error_and_refuses_without_force(tmp_path):
    with pytest.raises(RuntimeError), DatasetWriter(tmp_path / "d") as dw:
        (dw.tmp / "part-0.parquet").write_bytes(b"x")
        raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []
    done = _serial_dataset(tmp_path / "d", [(0, 1)], steps=1)
    with pytest.raises(OutputError, match="exists"):
        DatasetWriter(done)
    again = _serial_dataset_forced(done)
    assert open_trace(again).num_rows == open_trace(done).num_rows
    assert sorted(os.listdir(tmp_path)) == ["d"]


def _serial_dataset_forced(out):
    meta = trace_metadata(PRESET, steps=1, seed=3)
    with DatasetWriter(out, force=True) as dw:
        _, summary, _ = generate_part(PRESET, dw.tmp / "p.parquet", steps=1, first_step=0, seed=3)
        meta.update(kind="access", summary=summary)
        return dw.commit(meta, [{"file": "p.parquet", "rows": summary["accesses"]}])


def test_generate_workers_writes_a_dataset_equal_to_the_single_file(tmp_path, pair):
    pytest.importorskip("distributed", reason="the dask extra is not installed")
    single, _ = pair
    out = tmp_path / "w.access.parquet"
    r = run_cli("generate", "--preset", PRESET, "--steps", STEPS, "--seed", 3, "--workers", 2, "--parts", 3, "-o", out)
    assert r.exit_code == 0, r.output
    assert (out / DATASET_SIDECAR).is_file() and len(open_trace(out).parts) == 3
    a, b = open_trace(single).read_all(), open_trace(out).read_all()
    for name in a:
        np.testing.assert_array_equal(b[name], a[name], err_msg=name)
    assert open_trace(out).meta["summary"] == open_trace(single).meta["summary"]
    assert sorted(os.listdir(tmp_path)) == ["w.access.parquet"]  # no temporary folder left


def test_without_dask_the_commands_say_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # ``import distributed`` now raises ImportError
    r = run_cli("generate", "--preset", PRESET, "--steps", 2, "--workers", 2, "-o", tmp_path / "x")
    assert "pip install 'swaptrace[dask]'" in the_error(r)
    r = run_cli("generate", "--preset", PRESET, "--steps", 2, "--scheduler", "tcp://127.0.0.1:1", "-o", tmp_path / "y")
    assert "Dask is not installed" in the_error(r)
    r = run_cli("sweep", "--preset", PRESET, "--memory-fraction", 0.5, "-o", tmp_path / "s")
    assert "Dask is not installed" in the_error(r)
    assert os.listdir(tmp_path) == []


def test_parts_without_workers_is_refused(tmp_path):
    r = run_cli("generate", "--preset", PRESET, "--steps", 2, "--parts", 2, "-o", tmp_path / "x")
    assert "--parts goes only with --workers" in the_error(r)
