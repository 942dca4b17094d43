"""``swaptrace emulate / mrc / export`` through click's CliRunner: outputs, summaries, bad inputs."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from naive_emulate import zipf_access_trace

from swaptrace.cli import cli
from swaptrace.core.traceio import open_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return zipf_access_trace(tmp_path_factory.mktemp("cli") / "t.access.parquet", seed=5, footprint=500, n=8000,
                             steps=8, write_p=0.3)


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.mark.parametrize("policy", ["linux", "lru", "clock"])
def test_emulate_writes_a_valid_stream(trace, tmp_path, policy):
    out = tmp_path / f"{policy}.swapio.parquet"
    r = run("emulate", trace, "--memory-fraction", 0.3, "--policy", policy, "-o", out, "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    tf = open_trace(out, kind="swapio")
    assert tf.meta["summary"]["faults"] == summary["faults"]
    assert tf.meta["source"] == "emulator" and tf.meta["params"]["policy"] == policy
    per_step = tf.meta["step_faults"]  # faults per step, for `compare` against a capture's
    assert per_step["first_step"] == tf.meta["first_step"] and len(per_step["major"]) == tf.meta["steps"]
    assert sum(per_step["major"]) + sum(per_step["minor"]) == summary["faults"]
    rows = tf.read_all()
    assert rows["op"].size == sum(summary["requests"].values())
    hist = summary["request_size_hist"]
    assert sum(hist["read"].values()) == summary["requests"]["read"]
    assert set(rows["cause"].tolist()) <= {0, 1, 2}
    # refuses to overwrite without --force
    again = run("emulate", trace, "--memory", "400KiB", "-o", out)
    assert again.exit_code == 2 and "exists" in again.output


def test_emulate_human_summary_and_memory_bytes(trace, tmp_path):
    r = run("emulate", trace, "--memory", "1MiB", "--readahead", "cluster", "--max-request", "64k", "-o",
            tmp_path / "x.swapio.parquet")
    assert r.exit_code == 0, r.output
    assert "faults" in r.output and "writes < 32 KiB" in r.output


@pytest.mark.parametrize(
    "args",
    [
        ["--memory", "0"],
        ["--memory", "10GiB"],
        ["--memory", "-4k"],
        ["--memory-fraction", "0"],
        ["--memory", "1MiB", "--memory-fraction", "0.5"],
        [],
        ["--memory", "1MiB", "--policy", "fifo"],
        ["--memory", "1MiB", "--swap-bytes", "-1"],
        ["--memory", "1MiB", "--swap-bytes", "8k"],
    ],
)
def test_emulate_bad_inputs(trace, tmp_path, args):
    out = tmp_path / "bad.swapio.parquet"
    r = run("emulate", trace, *args, "-o", out)
    assert r.exit_code == 2
    assert "Traceback" not in r.output
    assert len([line for line in r.output.splitlines() if line.startswith("Error")]) == 1
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_emulate_rejects_a_swapio_file(trace, tmp_path):
    stream = tmp_path / "s.swapio.parquet"
    assert run("emulate", trace, "--memory", "1MiB", "-o", stream).exit_code == 0
    r = run("emulate", stream, "--memory", "1MiB", "-o", tmp_path / "y.parquet")
    assert r.exit_code == 2 and "expected 'access'" in r.output
    assert not (tmp_path / "y.parquet").exists()
    r = run("mrc", stream, "-o", tmp_path / "m.csv")
    assert r.exit_code == 2 and not (tmp_path / "m.csv").exists()
    r = run("export", stream, "-o", tmp_path / "e.bin")
    assert r.exit_code == 2 and not (tmp_path / "e.bin").exists()


def test_mrc_and_export_commands(trace, tmp_path):
    r = run("mrc", trace, "-o", tmp_path / "m.csv", "--plot", tmp_path / "m.png", "--budget", "1MiB", "--json")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "m.png").stat().st_size > 1000
    assert json.loads(r.output)["method"] == "exact"
    r = run("mrc", trace, "-o", tmp_path / "s.csv", "--sample-rate", "0.5", "--points", "0")
    assert r.exit_code == 0, r.output
    assert len((tmp_path / "s.csv").read_text().splitlines()) == 502
    r = run("mrc", trace, "-o", tmp_path / "x.csv", "--sample-rate", "2")
    assert r.exit_code == 2 and not (tmp_path / "x.csv").exists()
    r = run("export", trace, "-o", tmp_path / "e.bin")
    assert r.exit_code == 0 and (tmp_path / "e.bin").stat().st_size == 24 * 8000
    r = run("export", trace, "--format", "csv", "-o", tmp_path / "e.csv")
    assert r.exit_code == 0 and len((tmp_path / "e.csv").read_text().splitlines()) == 8001


def test_figures(trace, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from swaptrace.emulate import emulate
    from swaptrace.figures.emulate import plot_mrc, plot_request_size_cdf, plot_swap_traffic
    from swaptrace.mrc import exact_mrc

    res = emulate(trace, tmp_path / "f.swapio.parquet", memory_fraction=0.3)
    fig, axes = plt.subplots(1, 3)
    plot_mrc(exact_mrc(trace), ax=axes[0], budget_bytes=res.memory_pages * 4096)
    plot_request_size_cdf(res.path, ax=axes[1])
    plot_request_size_cdf(res, ax=axes[1])
    plot_swap_traffic(res.path, ax=axes[2])
    fig.savefig(tmp_path / "f.png")
    plt.close(fig)
    assert axes[1].get_xlabel() == "request size (KiB)"
    assert (tmp_path / "f.png").exists()
