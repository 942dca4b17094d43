"""compare_streams, stream_summary, ks_distance, the compare CLI and its figure."""

from __future__ import annotations

import json

import matplotlib
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from naive_capture import naive_ks

from swaptrace.cli import cli
from swaptrace.compare import (
    compare_streams,
    ks_distance,
    relative_error,
    render_comparison,
    stream_profile,
    stream_summary,
)
from swaptrace.core.traceio import OP_READ, OP_WRITE, TraceWriter

matplotlib.use("Agg")

SIZES = st.sampled_from([4096, 8192, 12288, 16384, 32768, 131072, 524288])


def _hist(samples):
    values, counts = np.unique(np.asarray(samples, dtype=np.int64), return_counts=True)
    return {str(int(v)): int(c) for v, c in zip(values, counts, strict=True)}


@settings(max_examples=80, deadline=None)
@given(st.lists(SIZES, max_size=30), st.lists(SIZES, max_size=30))
def test_ks_matches_definition(a, b):
    d = ks_distance(_hist(a), _hist(b))
    assert d == pytest.approx(naive_ks(a, b), abs=1e-12)
    assert d == pytest.approx(ks_distance(_hist(b), _hist(a)))
    assert 0.0 <= d <= 1.0


def test_ks_edges():
    assert ks_distance({}, {}) == 0.0
    assert ks_distance({"4096": 3}, {}) == 1.0
    assert ks_distance({"4096": 3}, {"8192": 1}) == 1.0
    assert ks_distance({"4096": 1, "8192": 1}, {"4096": 1}) == 0.5


def test_relative_error():
    assert relative_error(100, 115) == pytest.approx(0.15)
    assert relative_error(0, 0) == 0.0 and relative_error(0, 1) == float("inf")


def _write_stream(path, steps, ops, lengths, source="emulator", n_steps=None, extra_meta=None):
    n = len(ops)
    meta = {"source": source, "page_bytes": 4096, "first_step": 0, "steps": n_steps or (max(steps, default=0) + 1),
            **(extra_meta or {})}
    with TraceWriter(path, "swapio", meta) as w:
        w.write(t_us=np.arange(n, dtype=np.float64), step=np.asarray(steps, np.uint32), op=np.asarray(ops, np.int8),
                offset=np.arange(n, dtype=np.uint64) * 4096, length=np.asarray(lengths, np.uint32),
                cause=np.zeros(n, np.int8))
    return path


@pytest.fixture
def pair(tmp_path):
    rng = np.random.default_rng(1)
    n = 400
    steps = np.sort(rng.integers(0, 10, n))
    ops = rng.choice([OP_READ, OP_WRITE], n)
    lengths = rng.choice([4096, 8192, 16384], n)
    a = _write_stream(tmp_path / "a.swapio.parquet", steps, ops, lengths, "kernel")
    lengths_b = lengths.copy()
    lengths_b[ops == OP_WRITE] *= 2  # twice the pages written, same reads
    b = _write_stream(tmp_path / "b.swapio.parquet", steps, ops, lengths_b, "emulator")
    return a, b, steps, ops, lengths


def test_identical_streams_match(pair):
    a, _, _, _, _ = pair
    c = compare_streams(a, a)
    assert c.ok and c.verdict.startswith("match")
    assert all(v == 0 for v in c.rel_error.values()) and c.ks == {"read": 0.0, "write": 0.0}


def test_doubled_writes_differ(pair):
    a, b, _, ops, lengths = pair
    c = compare_streams(a, b)
    assert not c.ok and c.verdict.startswith("differ")
    assert c.rel_error["pages_in"] == 0.0
    assert c.rel_error["pages_out"] == pytest.approx(1.0)
    assert c.ks["read"] == 0.0 and c.ks["write"] > 0.2
    assert compare_streams(a, b, tolerance=1.5, ks_tolerance=1.0).ok


def test_profile_per_step(pair):
    a, _, steps, ops, lengths = pair
    p = stream_profile(a)
    assert p.reads_per_step.tolist() == np.bincount(steps[ops == OP_READ], minlength=10).tolist()
    pages = np.bincount(steps[ops == OP_WRITE], weights=lengths[ops == OP_WRITE] // 4096, minlength=10)
    assert p.pages_out_per_step.tolist() == pages.astype(int).tolist()
    s = stream_summary(a)
    assert s["requests"]["read"] == int((ops == OP_READ).sum())
    assert sum(int(k) * v for k, v in s["request_size_hist"]["write"].items()) == s["bytes_written"]


def test_faults_per_step_from_either_producer(tmp_path, pair):
    _, _, steps, ops, lengths = pair
    # a capture keeps them under "kernel" from its first step; the emulator under "step_faults", here from step 2
    kmeta = {"kernel": {"step_major_faults": [5, 0, 7, 1, 0, 0, 0, 0, 0, 9],
                        "step_minor_faults": [50, 40, 30, 20, 10, 0, 0, 0, 0, 1]}}
    emeta = {"step_faults": {"first_step": 2, "major": [7, 4, 0, 0, 0, 0, 0, 9], "minor": [30, 20, 10, 0, 0, 0, 0, 1]}}
    a = _write_stream(tmp_path / "k.swapio.parquet", steps, ops, lengths, "kernel", extra_meta=kmeta)
    b = _write_stream(tmp_path / "e.swapio.parquet", steps, ops, lengths, "emulator", extra_meta=emeta)
    c = compare_streams(a, b)
    assert c.a.major_faults_per_step.tolist() == kmeta["kernel"]["step_major_faults"]
    assert c.b.major_faults_per_step.tolist() == [0, 0, 7, 4, 0, 0, 0, 0, 0, 9]
    assert c.rel_error["major_faults"] == pytest.approx((20 - 22) / 22)
    assert c.rel_error["minor_faults"] == pytest.approx((61 - 151) / 151)
    per = c.faults_per_step()
    assert per["major"]["a"][3] == 1 and per["major"]["b"][3] == 4
    text = render_comparison(c)
    assert "major step 0: 5/0, step 3: 1/4" in text  # the largest differences, in step order
    assert c.to_dict()["faults_per_step"] == per
    # without them in either file: no fault rows, no per-step section
    plain = _write_stream(tmp_path / "p.swapio.parquet", steps, ops, lengths)
    c = compare_streams(a, plain)
    assert "major_faults" not in c.rel_error and c.faults_per_step() is None
    assert "faults per step" not in render_comparison(c)


def test_empty_stream(tmp_path, pair):
    a = pair[0]
    e = _write_stream(tmp_path / "e.swapio.parquet", [], [], [], n_steps=3)
    c = compare_streams(e, e)
    assert c.ok and c.a.summary["pages_in"] == 0 and len(c.a.reads_per_step) == 3
    c = compare_streams(a, e)
    assert not c.ok and c.rel_error["pages_in"] == -1.0


def test_cli_compare(pair, tmp_path):
    a, b, _, _, _ = pair
    runner = CliRunner()
    res = runner.invoke(cli, ["compare", str(a), str(b), "--plot", str(tmp_path / "c.png")])
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1].startswith("differ")
    assert "pages_out" in res.output and (tmp_path / "c.png").stat().st_size > 10_000
    res = runner.invoke(cli, ["compare", str(a), str(b), "--plot", str(tmp_path / "c.png")])
    assert res.exit_code == 2 and "exists" in res.output  # refuses to overwrite without --force
    res = runner.invoke(cli, ["compare", str(a), str(a), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["ok"] is True
    res = runner.invoke(cli, ["compare", str(a), str(tmp_path / "missing.parquet")])
    assert res.exit_code == 2 and "no such file" in res.output


def test_figure_functions(pair):
    import matplotlib.pyplot as plt

    from swaptrace.figures.compare import plot_compare, plot_compare_figure, plot_request_sizes

    c = compare_streams(*pair[:2])
    ax = plot_compare(c)
    assert ax.get_xlabel() == "training step" and "pages" in ax.get_ylabel()
    ax2 = plot_request_sizes(c, op="write")
    assert "KiB" in ax2.get_xlabel()
    fig = plot_compare_figure(c)
    assert len(fig.axes) == 3
    plt.close("all")
