"""Rank-frequency figure and the row draws behind it."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import naive_generate as naive  # noqa: E402
import numpy as np  # noqa: E402

from swaptrace.figures.generate import plot_rank_frequency, rank_frequency, trace_page_counts  # noqa: E402
from swaptrace.workload.generate import draw_rows, generate_arrays, generate_trace  # noqa: E402
from swaptrace.workload.layout import build_layout  # noqa: E402
from swaptrace.workload.spec import load_spec  # noqa: E402


def test_draw_rows_are_the_trace_rows():
    spec = load_spec("tiny")
    rows = draw_rows(spec, "C3", steps=2, seed=1, reuse=0.3, first_step=4)
    want = []
    for step in (4, 5):
        fresh = naive.naive_fresh(spec, 1, step, 2, True)
        prev = naive.naive_fresh(spec, 1, step - 1, 2, True)
        st = naive.NaiveStream(1, step, 2, 2)
        want += [p if (st.uniform() < 0.3) else f for f, p in zip(fresh, prev, strict=True)]
    np.testing.assert_array_equal(rows, want)
    # forward reads of C3 in the trace are exactly these rows' pages (16 fp32 = 64 B rows)
    lay = build_layout(spec)
    tr = generate_arrays(spec, steps=2, seed=1, reuse=0.3, first_step=4)
    fwd = (tr["region"] == lay.table_region[2]) & ~tr["write"]
    first = lay.regions[lay.table_region[2]].first_page
    pages_fwd = tr["page"][fwd].astype(np.int64) - first
    step_rows = len(rows) // 2
    np.testing.assert_array_equal(pages_fwd[:step_rows], rows[:step_rows] * 64 // 4096)


def test_rank_frequency_plot(tmp_path):
    trace = generate_trace("tiny", tmp_path / "t.access.parquet", steps=2)
    counts = trace_page_counts(trace)
    tr = generate_arrays("tiny", steps=2)
    table_regions = build_layout(load_spec("tiny")).table_region
    assert counts.sum() == np.count_nonzero(np.isin(tr["region"], table_regions) & ~tr["write"])
    rows = draw_rows("tiny", 2, steps=2)
    assert list(rank_frequency(np.array([3, 1, 3, 3, 1, 7]))) == [3, 2, 1]
    ax = plot_rank_frequency({"rows": rows, "pages (counts)": counts})
    ax.figure.savefig(tmp_path / "rf.png")
    ax2 = plot_rank_frequency(trace)
    assert ax2.get_xscale() == "log" and ax2.get_ylabel() == "accesses"
    assert (tmp_path / "rf.png").stat().st_size > 1000
