"""Parquet I/O: data and metadata survive a round trip; writes are atomic."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swaptrace.core.traceio import OPS, TraceWriter, open_trace
from swaptrace.errors import OutputError, TraceFileError
from swaptrace.workload.generate import generate_arrays, generate_trace


def test_generated_trace_round_trip(tmp_path):
    out = generate_trace("tiny", tmp_path / "t.access.parquet", steps=3, seed=4, reuse=0.2)
    f = open_trace(out, "access")
    data = f.read_all()
    want = generate_arrays("tiny", steps=3, seed=4, reuse=0.2)
    for k in want:
        assert data[k].dtype == want[k].dtype
        np.testing.assert_array_equal(data[k], want[k])
    m = f.meta
    assert m["kind"] == "access" and m["rows"] == len(want["page"]) == f.num_rows
    assert m["steps"] == 3 and m["first_step"] == 0 and m["seed"] == 4 and m["preset"] == "tiny"
    assert m["footprint_bytes"] == m["footprint_pages"] * m["page_bytes"]
    assert int(data["page"].max()) < m["footprint_pages"]
    s = m["summary"]
    assert s["accesses"] == len(want["page"]) and s["writes"] == int(want["write"].sum())
    assert s["reads"] + s["writes"] == s["accesses"]
    assert s["unique_pages"] == len(np.unique(want["page"]))
    assert s["region_accesses"] == np.bincount(want["region"], minlength=len(m["regions"])).tolist()
    assert m["params"]["reuse"] == 0.2 and m["spec"]["name"] == "tiny"
    for r in m["regions"]:
        assert set(r) == {"name", "kind", "first_page", "pages"}


@settings(max_examples=10, deadline=None)
@given(n=st.integers(0, 3000), meta=st.dictionaries(st.text(min_size=1, max_size=5), st.integers() | st.text(), max_size=3))
def test_writer_round_trip(tmp_path_factory, n, meta):
    path = tmp_path_factory.mktemp("rt") / "x.access.parquet"
    rng = np.random.default_rng(n)
    cols = {"step": rng.integers(0, 2**32, n, dtype=np.uint32), "page": rng.integers(0, 2**63, n, dtype=np.uint64),
            "write": rng.random(n) < 0.5, "region": rng.integers(0, 2**16, n, dtype=np.uint16)}
    meta = {f"u_{k}": v for k, v in meta.items()}
    with TraceWriter(path, "access", meta, row_group_rows=700) as w:
        for lo in range(0, max(n, 1), 1000):
            w.write(**{k: v[lo:lo + 1000] for k, v in cols.items()})
    f = open_trace(path, "access")
    got = f.read_all()
    for k, v in cols.items():
        np.testing.assert_array_equal(got[k], v)
    for k, v in meta.items():
        assert f.meta[k] == v
    assert f.meta["rows"] == n


def test_exception_inside_writer_leaves_no_file(tmp_path):
    path = tmp_path / "x.access.parquet"
    with pytest.raises(RuntimeError):
        with TraceWriter(path, "access", {}) as w:
            w.write(step=np.zeros(5, np.uint32), page=np.arange(5, dtype=np.uint64), write=np.zeros(5, bool),
                    region=np.zeros(5, np.uint16))
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_interrupted_generation_leaves_no_file(tmp_path):
    path = tmp_path / "x.access.parquet"

    def stop(_n):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        generate_trace("tiny", path, steps=3, progress=stop)
    assert list(tmp_path.iterdir()) == []


def test_existing_output_needs_force(tmp_path):
    path = tmp_path / "x.access.parquet"
    generate_trace("tiny", path, steps=1)
    with pytest.raises(OutputError, match="exists"):
        generate_trace("tiny", path, steps=1)
    generate_trace("tiny", path, steps=2, force=True)
    assert open_trace(path).meta["steps"] == 2


def test_reader_rejects_wrong_kind(tmp_path):
    path = generate_trace("tiny", tmp_path / "x.parquet", steps=1)
    with pytest.raises(TraceFileError, match="expected 'swapio'"):
        open_trace(path, "swapio")


def test_the_metadata_is_in_the_arrow_schema_too(tmp_path):
    import json

    import pyarrow.parquet as pq

    with TraceWriter(tmp_path / "a.access.parquet", "access", {"page_bytes": 4096, "footprint_pages": 3}) as w:
        w.write(step=np.array([0, 0]), page=np.array([1, 2]), write=np.array([True, False]), region=np.array([0, 0]))
        w.metadata["summary"] = {"late": 1}  # added before close: in both places
    table = pq.read_table(tmp_path / "a.access.parquet")
    from_schema = json.loads(table.schema.metadata[b"swaptrace"])
    from_footer = json.loads(pq.read_metadata(tmp_path / "a.access.parquet").metadata[b"swaptrace"])
    assert from_schema == from_footer and from_schema["summary"] == {"late": 1} and from_schema["rows"] == 2
    assert table.column("page").to_pylist() == [1, 2]


@pytest.mark.parametrize("batch_rows", [1, 7, 100, 333, 1000, 5000])
def test_iter_batches_cuts_batches_as_pyarrow_does(tmp_path, batch_rows):
    # row groups of uneven sizes (one per write call), read back in batches that cross them
    rng = np.random.default_rng(3)
    path = tmp_path / "x.swapio.parquet"
    with TraceWriter(path, "swapio", {"page_bytes": 4096}) as w:
        for n in (5, 0, 300, 1, 977, 64):
            w.write(t_us=rng.random(n), step=np.zeros(n, np.uint32), op=rng.integers(0, 3, n),
                    offset=rng.integers(0, 1 << 30, n, dtype=np.uint64), length=np.full(n, 4096, np.uint32),
                    cause=rng.integers(0, 5, n))
    tf = open_trace(path, "swapio")
    ours = list(tf.iter_batches(["offset", "op"], batch_rows=batch_rows))
    theirs = list(pq.ParquetFile(path).iter_batches(batch_size=batch_rows, columns=["offset", "op"]))
    assert [len(b["offset"]) for b in ours] == [b.num_rows for b in theirs]
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a["offset"], b.column("offset").to_numpy())
        assert list(np.asarray(OPS)[a["op"]]) == b.column("op").to_pylist()


# Columns go to and from Arrow through their buffers (traceio._plain_array, _plain_numpy), not pa.array and
# to_numpy, which import pandas; pyarrow's own conversions are the twin, on slices that start inside a byte of
# a boolean bitmap and inside a number buffer
_TYPES = [(np.uint8, "uint8"), (np.uint16, "uint16"), (np.uint32, "uint32"), (np.uint64, "uint64"),
          (np.int8, "int8"), (np.int64, "int64"), (np.float32, "float"), (np.float64, "double"), (np.bool_, "bool")]


@pytest.mark.parametrize(("dtype", "arrow"), _TYPES, ids=[a for _, a in _TYPES])
@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 70), cut=st.tuples(st.integers(0, 70), st.integers(0, 70)), seed=st.integers(0, 2**32 - 1))
def test_columns_cross_to_arrow_and_back_as_pyarrow_converts_them(dtype, arrow, n, cut, seed):
    import pyarrow as pa

    from swaptrace.core.traceio import _plain_array, _plain_numpy

    rng = np.random.default_rng(seed)
    values = (rng.random(n) < 0.5) if dtype is np.bool_ else rng.integers(0, 100, n).astype(dtype)
    ours = _plain_array(values, pa.type_for_alias(arrow))
    theirs = pa.array(values, type=pa.type_for_alias(arrow))
    assert ours.equals(theirs)
    start, length = min(cut[0], n), cut[1]
    part = theirs.slice(start, length)
    back = _plain_numpy(part)
    assert back.dtype == part.to_numpy(zero_copy_only=False).dtype
    assert np.array_equal(back, part.to_numpy(zero_copy_only=False))


def test_a_written_and_read_trace_never_loads_pandas(tmp_path):
    """pandas (installed with the test extras) costs a command 0.17 s to import: the chain never needs it,
    neither writing nor reading a stream's dictionary columns."""
    import subprocess
    import sys

    code = f"""
import sys
from swaptrace.cli import cli
for args in (["generate", "--preset", "tiny", "--steps", "3", "-o", "{tmp_path}/t.access.parquet"],
             ["emulate", "{tmp_path}/t.access.parquet", "--memory-fraction", "0.2", "-o", "{tmp_path}/t.swapio.parquet"],
             ["mrc", "{tmp_path}/t.access.parquet", "-o", "{tmp_path}/t.mrc.csv"],
             ["time", "{tmp_path}/t.swapio.parquet", "--device", "nvme-tlc"]):
    cli.main(args=args, standalone_mode=False)
print("pandas" in sys.modules)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False"
    # the stream has rows, so its dictionary columns (op, cause) were written too
    stream = open_trace(tmp_path / "t.swapio.parquet", kind="swapio")
    assert stream.num_rows > 0 and set(stream.read_all(["op"])["op"].tolist()) >= {0, 1}


@pytest.mark.parametrize("names", [OPS, ("a",), ("", "x", "yz"), ("lecture", "écriture", "ü")])
def test_dictionary_names_built_from_buffers_equal_pyarrows(names):
    """The twin is pyarrow's own list conversion (which imports pandas, hence the buffers)."""
    from swaptrace.core.traceio import _string_array

    ours = _string_array(names)
    assert ours.equals(pa.array(list(names), pa.string())) and ours.to_pylist() == list(names)
