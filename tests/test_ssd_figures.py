"""SSD figures render with the Agg backend from every accepted kind of data."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from swaptrace.figures import ssd as fig  # noqa: E402
from swaptrace.ssd import load_device, synth  # noqa: E402
from swaptrace.ssd.run import request_size_sweep  # noqa: E402


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fig") / "t.ssd.parquet"
    return synth(load_device("tiny"), "randwrite", volume_bytes=2 * load_device("tiny").user_bytes,
                 precondition="none", out=out)


def test_timeline_plots_from_path_and_result(tiny_run, tmp_path):
    for data in (tiny_run.path, tiny_run, tiny_run.timeline):
        f, (a, b) = plt.subplots(1, 2)
        assert fig.plot_bandwidth_vs_written(data, ax=a) is a
        assert fig.plot_waf_vs_written(data, ax=b) is b
        assert "GB" in a.get_xlabel() and "MB/s" in a.get_ylabel()
        assert len(b.lines[0].get_xdata()) == len(tiny_run.timeline["waf"])
        f.savefig(tmp_path / "t.png")
        plt.close(f)


def test_request_size_plot(tmp_path):
    sweep = request_size_sweep(load_device("tiny"), sizes_bytes=(4096, 32768, 131072), iodepths=(1, 4),
                               volume_bytes=4 << 20)
    assert sweep["bandwidth_mb_s"]["1"][0] < sweep["bandwidth_mb_s"]["1"][-1]
    ax = fig.plot_bandwidth_vs_request_size({"request_size_sweep": sweep})
    assert len(ax.lines) == 3  # two queue depths and the 32 KiB marker
    ax.figure.savefig(tmp_path / "rs.png")
    plt.close(ax.figure)
