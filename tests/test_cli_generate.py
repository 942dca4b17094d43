"""CLI: presets, generate, inspect; every bad input is one line and exit code 2."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from swaptrace.cli import cli
from swaptrace.core.traceio import open_trace


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_presets_list_and_show():
    r = run("presets")
    assert r.exit_code == 0 and "criteo-kaggle" in r.output and "tiny" in r.output
    r = run("presets", "tiny", "--json")
    assert r.exit_code == 0
    d = json.loads(r.output)
    assert d["footprint_pages"] * 4096 == d["footprint_bytes"] and len(d["table_list"]) == 26
    r = run("presets", "criteo-kaggle", "--page-bytes", "2MiB")
    assert r.exit_code == 0 and "footprint_pages" in r.output


def test_generate_then_inspect(tmp_path):
    out = tmp_path / "t.access.parquet"
    r = run("generate", "--preset", "tiny", "--steps", "2", "--seed", "3", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "accesses" in r.output
    f = open_trace(out, "access")
    assert f.meta["steps"] == 2 and f.meta["seed"] == 3
    r = run("inspect", str(out))
    assert r.exit_code == 0, r.output
    for word in ("kind", "access", "footprint", "read/write", "top regions", "metadata"):
        assert word in r.output
    r = run("inspect", str(out), "--json")
    assert json.loads(r.output)["rows"] == f.num_rows


def test_generate_options(tmp_path):
    spec = tmp_path / "m.toml"
    spec.write_text('batch_size = 2\nbottom_mlp = [3, 4]\ntop_mlp = [1]\n[[tables]]\nrows = 100\ndim = 8\n')
    out = tmp_path / "m.access.parquet"
    r = run("generate", "--spec", str(spec), "--steps", "3", "--alpha", "0.9", "--optimizer", "adam", "--page-bytes",
            "2MiB", "--no-scatter", "--reuse", "0.3", "--dedup", "step", "-o", str(out), "--json")
    assert r.exit_code == 0, r.output
    m = open_trace(out).meta
    assert m["page_bytes"] == 2 << 20 and m["spec"]["optimizer"] == "adam" and m["params"]["dedup"] == "step"
    assert m["params"]["scatter"] is False and m["spec"]["tables"][0]["alpha"] == 0.9
    assert m["preset"] == str(spec)


def test_inspect_any_kind(tmp_path):
    import numpy as np

    from swaptrace.core.traceio import TraceWriter

    p = tmp_path / "s.swapio.parquet"
    with TraceWriter(p, "swapio", {"page_bytes": 4096, "source": "emulator"}) as w:
        w.write(t_us=np.zeros(2), step=np.zeros(2, np.uint32), op=np.array([0, 1]), offset=np.zeros(2, np.uint64),
                length=np.full(2, 4096, np.uint32), cause=np.array([0, 2]))
    r = run("inspect", str(p))
    assert r.exit_code == 0 and "swapio" in r.output and "source" in r.output


def _one_line_error(r):
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1, r.output
    assert "Traceback" not in r.output
    return lines[0]


def test_bad_inputs_exit_2_one_line(tmp_path):
    out = str(tmp_path / "x.access.parquet")
    assert "unknown preset" in _one_line_error(run("generate", "--preset", "nope", "-o", out))
    bad = tmp_path / "bad.toml"
    bad.write_text('batch_size = 2\nbottom_mlp = [3, 4]\ntop_mlp = [1]\ncolour = 1\n[[tables]]\nrows = -1\ndim = 8\n')
    line = _one_line_error(run("generate", "--spec", str(bad), "-o", out))
    assert "colour" in line and "tables[0].rows" in line
    assert "steps" in _one_line_error(run("generate", "--preset", "tiny", "--steps", "-3", "-o", out))
    assert run("generate", "--preset", "tiny", "--steps", "1", "-o", out).exit_code == 0
    assert "exists" in _one_line_error(run("generate", "--preset", "tiny", "--steps", "1", "-o", out))
    assert "reuse" in _one_line_error(run("generate", "--preset", "tiny", "--reuse", "2", "-o", out, "--force"))
    assert "optimizer" in _one_line_error(run("generate", "--preset", "tiny", "--optimizer", "x", "-o", out, "--force"))
    assert "page-bytes" in _one_line_error(run("generate", "--preset", "tiny", "--page-bytes", "8k", "-o", out, "--force"))
    assert "dedup" in _one_line_error(run("generate", "--preset", "tiny", "--dedup", "yes", "-o", out, "--force"))
    assert "unknown preset" in _one_line_error(run("presets", "nope"))
    assert "no such file" in _one_line_error(run("inspect", str(tmp_path / "missing.parquet")))


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only folders")
def test_unwritable_folder_as_user(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert "not writable" in _one_line_error(run("generate", "--preset", "tiny", "--steps", "1", "-o", str(ro / "x.parquet")))
    finally:
        ro.chmod(0o700)


def test_unwritable_folder(tmp_path):
    """A folder that cannot be created (its parent is a file) or written (/proc) is one line, exit 2."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert "cannot create folder" in _one_line_error(
        run("generate", "--preset", "tiny", "--steps", "1", "-o", str(blocker / "sub" / "x.parquet")))
    _one_line_error(run("generate", "--preset", "tiny", "--steps", "1", "-o", "/proc/x.access.parquet"))


def test_unwritable_folder_message(tmp_path, monkeypatch):
    """The 'folder is not writable' path, exercised even as root by faking os.access."""
    import swaptrace.core.traceio as traceio

    real_access = os.access
    monkeypatch.setattr(traceio.os, "access", lambda p, mode: False if mode == os.W_OK else real_access(p, mode))
    line = _one_line_error(run("generate", "--preset", "tiny", "--steps", "1", "-o", str(tmp_path / "x.parquet")))
    assert "not writable" in line
    assert list(tmp_path.iterdir()) == []


def test_inspect_minimal_access_file(tmp_path):
    """An access file written by another stage (contract minimum, no summary) is inspected by streaming."""
    import numpy as np

    from swaptrace.core.traceio import TraceWriter

    p = tmp_path / "m.access.parquet"
    regions = [{"name": "a", "kind": "table", "first_page": 0, "pages": 4},
               {"name": "s", "kind": "scratch", "first_page": 4, "pages": 2}]
    with TraceWriter(p, "access", {"page_bytes": 4096, "footprint_pages": 6, "footprint_bytes": 6 * 4096,
                                   "regions": regions, "first_step": 0, "steps": 1}) as w:
        w.write(step=np.zeros(5, np.uint32), page=np.array([0, 1, 4, 5, 1], np.uint64),
                write=np.array([0, 0, 1, 1, 1], bool), region=np.array([0, 0, 1, 1, 0], np.uint16))
    r = run("inspect", str(p), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["writes"] == 3 and d["reads"] == 2
    assert [x["region"] for x in d["top_regions"]] == ["a", "s"] and d["top_regions"][0]["accesses"] == 3
