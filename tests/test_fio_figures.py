"""fio figures render from results and bandwidth logs (Agg, into tmp_path)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from swaptrace.core import traceio  # noqa: E402
from swaptrace.figures import fio as figs  # noqa: E402
from swaptrace.fio import results  # noqa: E402


def _rows():
    rows = []
    for d, base in (("read", 80e6), ("write", 60e6)):
        for i, size in enumerate([0, 4096, 16384, 131072, 1 << 20]):
            rows.append({
                "instance": f"sweep_{d}_{size}", "job": f"sweep_{d}_{size}", "group": "sweep", "kind": "sweep",
                "direction": d, "request_bytes": size, "pattern": "random", "io_bytes": 10 * max(size, 4096), "ios": 10,
                "bw_bytes": base * (1 + i), "iops": 1.0, "clat_p50_us": 1.0, "clat_p99_us": 2.0, "clat_p999_us": 3.0,
                "runtime_ms": 1000.0, "trace_duration_ms": float("nan"), "expected_ios": float("nan"),
            })
    return rows


def test_bandwidth_vs_request_size_from_file(tmp_path):
    path = tmp_path / "results.parquet"
    with traceio.TraceWriter(path, "fio-results", {"ratios": {}}) as w:
        w.write_table(results.rows_to_table(_rows()))
    ax = figs.plot_bandwidth_vs_request_size(tmp_path)
    assert ax.get_xlabel() == "request size (KiB)" and "MB/s" in ax.get_ylabel()
    assert len(ax.get_lines()) == 4  # two curves, two mix lines
    ax.figure.savefig(tmp_path / "size.png")
    plt.close(ax.figure)
    assert (tmp_path / "size.png").stat().st_size > 0


def test_bandwidth_vs_written_from_columns(tmp_path):
    t = np.arange(1, 9) * 250.0
    bw = np.full(8, 100e6)
    data = {
        "instance": ["precondition@write_rand"] * 4 + ["write_rand"] * 4,
        "job": ["precondition"] * 4 + ["write_rand"] * 4,
        "direction": ["write"] * 8,
        "t_ms": t,
        "bw_bytes": bw,
        "job_bytes": np.cumsum(bw * 0.25),
        "run_written_bytes": np.cumsum(bw * 0.25),
    }
    fig, ax = plt.subplots()
    out = figs.plot_bandwidth_vs_written(data, ax=ax)
    assert out is ax and "GB written" in ax.get_xlabel()
    assert len(ax.get_lines()) == 2
    fig.savefig(tmp_path / "written.png")
    plt.close(fig)


def test_empty_inputs_still_give_axes():
    ax = figs.plot_bandwidth_vs_request_size([])
    ax2 = figs.plot_bandwidth_vs_written([])
    assert ax.get_ylabel() and ax2.get_ylabel()
    plt.close("all")
