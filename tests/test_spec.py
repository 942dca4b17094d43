"""Model specs: presets load, validation names every bad field, round trips."""

from __future__ import annotations

import pytest

from swaptrace.errors import SpecError
from swaptrace.workload.layout import build_layout
from swaptrace.workload.spec import list_presets, load_spec, mlp_layers, spec_from_dict

GOOD = {
    "name": "m",
    "batch_size": 4,
    "optimizer": "adam",
    "bottom_mlp": [13, 8],
    "top_mlp": [4, 1],
    "alpha": 1.1,
    "tables": [{"name": "a", "rows": 10, "dim": 4}, {"rows": 7, "dim": 2, "lookups": {"values": [1, 3], "probs": [0.25, 0.75]}}],
}


def test_presets_are_all_there():
    names = list_presets()
    for n in ("criteo-kaggle", "criteo-terabyte", "mlperf-dcnv2", "dlrm-benchmark", "rm1", "rm2", "rm3", "demo", "tiny"):
        assert n in names


@pytest.mark.parametrize("name", list_presets())
def test_every_preset_loads_and_round_trips(name):
    spec = load_spec(name)
    assert spec.name == name
    assert spec_from_dict(spec.to_dict(), where="x") == spec


def test_preset_facts_from_reference():
    kaggle = load_spec("criteo-kaggle")
    assert len(kaggle.tables) == 26 and kaggle.tables[2].rows == 10131227 and kaggle.tables[0].dim == 16
    assert kaggle.batch_size == 128 and kaggle.bottom_mlp == (13, 512, 256, 64, 16)
    dcn = load_spec("mlperf-dcnv2")
    assert [t.lookups.values[0] for t in dcn.tables][20] == 100 and dcn.optimizer == "adagrad"
    assert len(load_spec("rm2").tables) == 32 and load_spec("rm1").tables[0].lookups.values == (80,)
    assert load_spec("dlrm-benchmark").tables[7].rows == 1_000_000


def test_demo_and_tiny_sizes():
    tiny = build_layout(load_spec("tiny")).footprint_bytes
    demo = build_layout(load_spec("demo")).footprint_bytes
    assert 32 << 20 <= tiny <= 64 << 20
    assert 512 << 20 <= demo <= 1 << 30


def test_footprint_formula():
    spec = spec_from_dict(GOOD)
    # tables fp32 + adam 2 x rows x dim; MLP (13*8+8)+(F: 8+3*2/2=11 -> 11*4+4)+(4*1+1); state 2x; scratch
    assert spec.interaction_width == 8 + 3
    assert spec.mlp_params == 13 * 8 + 8 + 11 * 4 + 4 + 4 * 1 + 1
    tables = 10 * 4 * 4 * 3 + 7 * 2 * 4 * 3
    assert spec.footprint_bytes == tables + 4 * spec.mlp_params * 3 + spec.scratch_bytes
    assert spec.tables[1].name == "T1" and spec.tables[1].lookups.mean == pytest.approx(2.5)


def test_table_count_expands():
    spec = spec_from_dict({**GOOD, "tables": [{"name": "T", "rows": 5, "dim": 2, "count": 3}]})
    assert [t.name for t in spec.tables] == ["T_0", "T_1", "T_2"]


def test_every_bad_field_is_named():
    bad = {
        "batch_size": 0,
        "optimizer": "rmsprop",
        "bottom_mlp": [13],
        "top_mlp": [],
        "alpha": -1,
        "colour": "red",
        "tables": [
            {"rows": 0, "dim": "x", "dtype": "float8", "lookups": {"values": [1, 2], "probs": [0.5, 0.6]}, "rowz": 3},
            {"rows": 5, "dim": 2, "alpha": 0, "lookups": 0},
        ],
    }
    with pytest.raises(SpecError) as err:
        spec_from_dict(bad, where="my.toml")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("my.toml: ")
    for field in ("batch_size", "optimizer", "bottom_mlp", "top_mlp", "alpha", "colour: unknown key",
                  "tables[0].rows", "tables[0].dim", "tables[0].dtype", "tables[0].lookups.probs",
                  "tables[0].rowz: unknown key", "tables[1].alpha", "tables[1].lookups"):
        assert field in msg, field


def test_lookups_distribution_checks():
    for lookups, field in (
        ({"values": [1, 2], "probs": [1.0]}, "differ in length"),
        ({"values": [1, 1], "probs": [0.5, 0.5]}, "must not repeat"),
        ({"values": [0], "probs": [1.0]}, "at least one bag size"),
        ({"values": [1], "probs": [1.0], "mean": 1}, "unknown key"),
        ("many", "must be an integer"),
    ):
        with pytest.raises(SpecError, match=field):
            spec_from_dict({**GOOD, "tables": [{"rows": 3, "dim": 1, "lookups": lookups}]})


def test_load_from_file_and_errors(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text('batch_size = 2\nbottom_mlp = [3, 4]\ntop_mlp = [1]\n[[tables]]\nrows = 100\ndim = 8\n')
    spec = load_spec(str(p))
    assert spec.name == "mine" and spec.optimizer == "sgd" and spec.default_steps == 100
    p.write_text("batch_size = = 2\n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(p)
    with pytest.raises(SpecError, match="unknown preset 'nope'"):
        load_spec("nope")
    with pytest.raises(SpecError, match="no such spec file"):
        load_spec(str(tmp_path / "missing.toml"))


def test_overrides():
    spec = load_spec("tiny").with_overrides(alpha=0.7, optimizer="adam")
    assert spec.optimizer == "adam" and {t.alpha for t in spec.tables} == {0.7}
    with pytest.raises(SpecError, match="optimizer"):
        spec.with_overrides(optimizer="lion")
    with pytest.raises(SpecError, match="alpha"):
        spec.with_overrides(alpha=0)


def test_bisection_finds_a_crossing_known_in_closed_form():
    """The shared bisection (swaptrace.core.solve) against ``1/x = t`` at ``x = 1/t``: 60 halvings of [0, 8]
    leave a bracket of 8 / 2**60 (below one float step at 1/t), so the answer is within a few float steps:
    ``1/x`` rounds to within half a step, which can move the comparison by a step either side of the root."""
    import math

    from swaptrace.core.solve import bisect_decreasing

    for t in (0.2, 1.0, 3.0):
        assert abs(bisect_decreasing(lambda x: 1.0 / x if x else float("inf"), t, 0.0, 8.0, iterations=60)
                   - 1.0 / t) <= 8.0 / 2**60 + 4 * math.ulp(1.0 / t)
        assert abs(bisect_decreasing(lambda x: 1.0 / x if x else float("inf"), t, 0.0, 8.0, tol=1e-12)
                   - 1.0 / t) <= 1e-12
    with pytest.raises(ValueError):
        bisect_decreasing(lambda x: -x, 0.0, -1.0, 1.0)


def test_mlp_layers_come_from_the_spec_a_trace_stores():
    spec = spec_from_dict(GOOD)
    assert mlp_layers({"spec": spec.to_dict()}) == ([[13, 8], [4, 1]], 4)
    assert mlp_layers({"page_bytes": 4096}) == ([], 128)  # a trace that names no model: no MLP, the default batch
