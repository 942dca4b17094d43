"""Access traces read the same in every reader, under the fast encoding and the one files had before.

The expected rows come from :func:`swaptrace.workload.generate.generate_arrays` (the kernels' arrays in memory, no
Parquet involved); each reader's rows must equal them exactly. pandas is a test extra; DuckDB and Polars
are checked where installed (they are large wheels, not test extras) and skip with the reason otherwise.
"""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from swaptrace.core import traceio
from swaptrace.workload.generate import generate_arrays, generate_trace

COLUMNS = ("step", "page", "write", "region")


@pytest.fixture(scope="module")
def expected():
    return generate_arrays("tiny", steps=3, seed=5)


@pytest.fixture(scope="module", params=["fast", "before"])
def trace(request, tmp_path_factory, expected):  # expected compiles the kernels first
    """A tiny trace under today's access encoding ("fast") and under the zstd/dictionary one of older files."""
    path = tmp_path_factory.mktemp(request.param) / "t.access.parquet"
    saved = traceio.ENCODINGS.pop("access") if request.param == "before" else None
    try:
        generate_trace("tiny", path, steps=3, seed=5)
    finally:
        if saved is not None:
            traceio.ENCODINGS["access"] = saved
    return request.param, path


def _check(expected, columns) -> None:
    for name in COLUMNS:
        got = np.asarray(columns[name])
        assert got.shape == expected[name].shape, name
        assert np.array_equal(got.astype(expected[name].dtype), expected[name]), name


def test_swaptrace_reader(trace, expected):
    _check(expected, traceio.open_trace(trace[1], "access").read_all())


def test_pyarrow_and_pandas(trace, expected):
    pd = pytest.importorskip("pandas", reason="pandas is a test extra: pip install -e '.[test]'")
    table = pq.read_table(trace[1])
    assert [table.schema.field(n).type for n in COLUMNS] == [traceio.ACCESS_SCHEMA.field(n).type for n in COLUMNS]
    frame = pd.read_parquet(trace[1])
    _check(expected, {n: frame[n].to_numpy() for n in COLUMNS})


def test_duckdb(trace, expected):
    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed (not a test extra: a 20 MB wheel)")
    rows = duckdb.sql(f"SELECT step, page, write, region FROM '{trace[1]}'").fetchnumpy()
    _check(expected, rows)
    count = duckdb.execute(f"SELECT count(*) FROM '{trace[1]}' WHERE step = 1").fetchall()[0][0]
    assert count == int(np.count_nonzero(expected["step"] == 1))


def test_polars(trace, expected):
    pl = pytest.importorskip("polars", reason="Polars is not installed (not a test extra: a 50 MB wheel)")
    frame = pl.read_parquet(trace[1])
    _check(expected, {n: frame[n].to_numpy() for n in COLUMNS})


def test_fast_encoding_is_the_one_written(trace):
    """The access writer uses the measured choice (docs/benchmarks.md): LZ4, page delta-coded, no dictionary."""
    kind, path = trace
    column = {pq.ParquetFile(path).metadata.row_group(0).column(i).path_in_schema:
              pq.ParquetFile(path).metadata.row_group(0).column(i) for i in range(len(COLUMNS))}
    if kind == "fast":
        assert column["page"].compression in ("LZ4", "LZ4_RAW")
        assert "DELTA_BINARY_PACKED" in column["page"].encodings
        assert not any("DICTIONARY" in e for c in column.values() for e in c.encodings)
        assert column["step"].is_stats_set and not column["page"].is_stats_set
    else:
        assert column["page"].compression == "ZSTD"
