"""The whole-process trace (swaptrace.workload.process, generate --runtime) against a plain-Python twin, and the
runtime profile read off a capture (swaptrace.capture.runtime_profile) against numbers worked out by hand."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from swaptrace.capture.runtime_profile import derive, model_bytes
from swaptrace.cli import cli
from swaptrace.errors import ConfigError
from swaptrace.workload.generate import generate_trace, iter_accesses
from swaptrace.workload.layout import build_layout
from swaptrace.workload.process import (
    RuntimeProfile,
    list_runtime_profiles,
    load_runtime_profile,
    process_layout,
    profile_from_dict,
    to_toml,
)
from swaptrace.workload.spec import load_spec

PAGE = 4096
#: byte counts off whole pages where it matters: the runtime (41 pages) and its active part (8 pages) round up
PROFILE = RuntimeProfile(name="t", runtime_bytes=40 * PAGE + 100, active_bytes=7 * PAGE + 1, step_bytes=3 * PAGE,
                         file_bytes=5 * PAGE, kernel_bytes=PAGE)


def twin_process_rows(model_rows, regions, optimizer, profile):
    """The process's rows, written from the module docstring with lists, one row at a time.

    Start-up (step 0): a store to each runtime page, then to each page of every table, then the dense
    weights, then (Adagrad-family optimizers) table and dense optimizer state, each in address order,
    then the runtime's active pages again. The state's stores write zeros (torch's Adagrad starts its sums at
    0, the row-wise one is ``torch.zeros``): the fifth element of a row says so; every other row's is False.
    Model step k becomes k + 1 and begins with stores to ``active_bytes`` of runtime pages spread evenly
    (page i of n active is runtime page floor(i * R / n)), then the step buffers.
    """
    def pages_of(kind):
        return [p for r in regions if r["kind"] == kind for p in range(r["first_page"], r["first_page"] + r["pages"])]

    def region_of(page):
        return max(i for i, r in enumerate(regions) if r["first_page"] <= page)

    rows = [(0, p, True, region_of(p), False) for kind in ("runtime", "table", "mlp") for p in pages_of(kind)]
    if optimizer in ("adagrad", "rowwise-adagrad"):
        rows += [(0, p, True, region_of(p), True) for kind in ("table-state", "mlp-state") for p in pages_of(kind)]
    runtime = pages_of("runtime")
    n_active = min(len(runtime), -(-profile.active_bytes // PAGE))
    active = [runtime[i * len(runtime) // n_active] for i in range(n_active)]
    rows += [(0, p, True, region_of(p), False) for p in active]
    every = active + pages_of("step-buffers")
    current = None
    for step, page, write, region in model_rows:
        if step != current:
            rows += [(step + 1, p, True, region_of(p), False) for p in every]
            current = step
        rows.append((step + 1, page, write, region, False))
    return rows


def _model_rows(spec, steps, seed):
    rows = []
    for c in iter_accesses(spec, steps=steps, seed=seed):
        rows += list(zip(c["step"].tolist(), c["page"].tolist(), c["write"].tolist(), c["region"].tolist(),
                         strict=True))
    return rows


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad", "adam"])  # none, eager, lazy optimizer state
def test_process_trace_equals_twin(tmp_path, optimizer):
    spec = load_spec("tiny").with_overrides(optimizer=optimizer)
    out = generate_trace(spec, tmp_path / "p.access.parquet", steps=3, seed=5, runtime=PROFILE)
    t = pq.read_table(out)
    got = list(zip(t["step"].to_pylist(), t["page"].to_pylist(), t["write"].to_pylist(), t["region"].to_pylist(),
                   t["zero"].to_pylist(), strict=True))
    layout = build_layout(spec, PAGE)
    regions, footprint = process_layout(layout.region_dicts(), layout.footprint_pages, PAGE, PROFILE)
    want = twin_process_rows(_model_rows(spec, 3, 5), regions, optimizer, PROFILE)
    assert got == want
    meta = json.loads(pq.read_schema(out).metadata[b"swaptrace"])
    assert meta["footprint_pages"] == footprint == layout.footprint_pages + 41 + 3  # 40 pages + 100 B, 3 pages
    assert meta["steps"] == 4 and meta["step_offset"] == 1 and meta["startup_step"] == 0
    assert meta["process"]["file_bytes"] == 5 * PAGE


def test_process_chunks_split_steps(tmp_path):
    """A step split over chunks gets its runtime stores once (small row groups force the split)."""
    import swaptrace.workload.generate as gen
    spec = load_spec("tiny")
    ref = generate_trace(spec, tmp_path / "a.access.parquet", steps=2, seed=1, runtime=PROFILE)
    old = gen.DEFAULT_ROW_GROUP
    try:
        gen.DEFAULT_ROW_GROUP = 1000
        small = generate_trace(spec, tmp_path / "b.access.parquet", steps=2, seed=1, runtime=PROFILE)
    finally:
        gen.DEFAULT_ROW_GROUP = old
    a, b = pq.read_table(ref), pq.read_table(small)
    for col in ("step", "page", "write", "region"):
        assert a[col].to_pylist() == b[col].to_pylist()


def test_emulate_takes_whole_process_limit(tmp_path):
    """--memory of a process trace is the group's limit: the budget is it less page cache and kernel memory."""
    trace = generate_trace("tiny", tmp_path / "p.access.parquet", steps=2, seed=0, runtime=PROFILE)
    r = CliRunner().invoke(cli, ["emulate", str(trace), "--memory", str(64 * PAGE), "--no-ensemble",
                                 "-o", str(tmp_path / "s.swapio.parquet"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["memory_pages"] == 64 - 6  # 5 pages of page cache, 1 of kernel memory
    r = CliRunner().invoke(cli, ["emulate", str(trace), "--memory", str(6 * PAGE), "-o",
                                 str(tmp_path / "t.swapio.parquet")])
    assert r.exit_code == 2 and "page cache and kernel memory" in r.output


def test_profile_bounds_and_round_trip(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text(to_toml(PROFILE))
    assert load_runtime_profile(path).runtime_bytes == PROFILE.runtime_bytes
    for bad, word in (({"active_bytes": 10 ** 9}, "above runtime_bytes"), ({"step_bytes": -1}, "step_bytes"),
                      ({"file_bytes": True}, "file_bytes"), ({"bogus": 1}, "unknown key")):
        d = {**{k: v for k, v in PROFILE.to_dict().items() if k != "source"}, **bad}
        with pytest.raises(ConfigError, match=word):
            profile_from_dict(d, "x.toml")
    assert "pytorch-cpu" in list_runtime_profiles()
    with pytest.raises(ConfigError, match="no runtime profile"):
        load_runtime_profile("no-such")


def test_derive_from_capture_numbers():
    """Each field from the capture's readings, with the model's share worked out from the spec by hand."""
    spec = load_spec("tiny").with_overrides(optimizer="sgd")
    mb = model_bytes(spec)
    layout = build_layout(spec)
    tables_mlp = sum(r.pages for r in layout.regions if r.kind in ("table", "mlp")) * PAGE
    assert mb["startup"] == tables_mlp and mb["footprint"] == layout.footprint_bytes
    end_anon, peak_anon = tables_mlp + (300 << 20), tables_mlp + (300 << 20) + mb["lazy"] + (20 << 20)
    kernel = {"unlimited": {"startup_end": {"anon": end_anon, "file": 0, "usage": end_anon},
                            "peak": {"training": {"anon": peak_anon, "file": 1 << 20, "usage": peak_anon + (3 << 20)}},
                            "referenced": {"anon_referenced_training_bytes": 10 ** 12}},
              "limited": {"peak": {"training": {"file": 2 << 20}}}}
    prof, notes, clamped = derive(kernel, spec, steps=2, seed=0, name="x")
    assert prof.runtime_bytes == 300 << 20
    assert prof.step_bytes == 20 << 20
    assert prof.active_bytes == prof.runtime_bytes  # referenced beyond everything: bounded by the runtime
    assert "bounded to runtime_bytes" in notes["active_bytes"] and clamped == []
    assert prof.file_bytes == 2 << 20 and prof.kernel_bytes == 2 << 20
    assert set(notes) == {"runtime_bytes", "step_bytes", "active_bytes", "file_bytes", "kernel_bytes", "write_cost"}
    assert prof.write_cost == 1
    # nothing referenced while training, though the trace reads model pages: a contradiction, refused ...
    kernel["unlimited"]["referenced"] = {"anon_referenced_training_bytes": 0}
    with pytest.raises(ConfigError, match="anon_referenced_training_bytes"):
        derive(kernel, spec, steps=2, seed=0, name="x")
    # ... or clamped when asked, and said so
    prof, notes, clamped = derive(kernel, spec, steps=2, seed=0, name="x", allow_clamped=True)
    assert prof.active_bytes == 0 and notes["active_bytes"].startswith("CLAMPED") and len(clamped) == 1
    with pytest.raises(ConfigError, match="no unlimited run"):
        derive({"limited": {}}, spec, steps=2, seed=0, name="x")


def test_generate_runtime_cli(tmp_path):
    out = tmp_path / "p.access.parquet"
    r = CliRunner().invoke(cli, ["generate", "--preset", "tiny", "--steps", "2", "--runtime", "pytorch-cpu",
                                 "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["steps"] == 3
    r = CliRunner().invoke(cli, ["generate", "--preset", "tiny", "--steps", "2", "--runtime", "pytorch-cpu",
                                 "--first-step", "4", "-o", str(tmp_path / "q.access.parquet")])
    assert r.exit_code == 2 and "--runtime" in r.output and not (tmp_path / "q.access.parquet").exists()


def test_derive_active_part_and_lazy_state_by_hand():
    """Adam allocates its state at the first step (lazy): start-up holds tables and dense weights only, and the
    state is part of the step's growth, not of the runtime. Referenced while training: the model's touched pages
    + the step buffers + 5 runtime pages, so ``active_bytes`` is those 5 pages (within [0, runtime_bytes])."""
    import numpy as np

    spec = load_spec("tiny").with_overrides(optimizer="adam")
    layout = build_layout(spec)
    tables_mlp = sum(r.pages for r in layout.regions if r.kind in ("table", "mlp")) * PAGE
    state = sum(r.pages for r in layout.regions if r.kind in ("table-state", "mlp-state")) * PAGE
    assert state > 0
    mb = model_bytes(spec)
    assert mb["startup"] == tables_mlp and mb["lazy"] == layout.footprint_bytes - tables_mlp
    seen = np.zeros(layout.footprint_pages, dtype=bool)
    for c in iter_accesses(spec, steps=2, seed=0):
        seen[c["page"]] = True
    touched = int(seen.sum()) * PAGE
    end = tables_mlp + (300 << 20)
    peak = end + mb["lazy"] + (20 << 20)
    kernel = {"unlimited": {"startup_end": {"anon": end, "file": 0, "usage": end},
                            "peak": {"training": {"anon": peak, "file": 0, "usage": peak}},
                            "referenced": {"anon_referenced_training_bytes": touched + (20 << 20) + 5 * PAGE}}}
    prof, notes, clamped = derive(kernel, spec, steps=2, seed=0, name="x")
    assert (prof.runtime_bytes, prof.step_bytes, prof.active_bytes) == (300 << 20, 20 << 20, 5 * PAGE)
    assert prof.file_bytes == 0 and prof.kernel_bytes == 0 and clamped == []
    assert "bounded" not in notes["active_bytes"]
