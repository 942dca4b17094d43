"""``swaptrace train``: a real PyTorch DLRM fed exactly the lookups ``generate`` draws.

Tests that need torch skip with the reason when it is missing (``pip install 'swaptrace[torch]'``);
the missing-torch message itself is tested without it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys

import numpy as np
import pytest
from cli_helpers import run_cli, the_error
from marker_helpers import capture_marker

from swaptrace.workload.generate import generate_arrays
from swaptrace.workload.layout import build_layout
from swaptrace.workload.spec import spec_from_dict

# whether torch is installed, without importing it (seconds, paid by every collection of the suite); the tests
# that use it import it themselves
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="needs PyTorch: pip install 'swaptrace[torch]'")


def small_spec(optimizer="sgd", dim=8, **first_table):
    """Three small tables; the first with the given keys (dim = the bottom MLP's output, as DLRM needs)."""
    tables = [{"name": "a", "rows": 50, "dim": dim, "lookups": 2, **first_table},
              {"name": "b", "rows": 3000, "dim": dim, "lookups": {"values": [0, 1, 3], "probs": [0.2, 0.5, 0.3]}},
              {"name": "c", "rows": 7, "dim": dim, "lookups": 1}]
    return spec_from_dict({"name": "small", "batch_size": 16, "optimizer": optimizer, "bottom_mlp": [5, 12, dim],
                           "top_mlp": [6, 1], "tables": tables})


@needs_torch
@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
def test_three_steps_train(optimizer):
    from swaptrace.workload.train import train

    result = train(small_spec(optimizer), steps=3, seed=1)
    assert result.steps == 3 and math.isfinite(result.loss_first) and math.isfinite(result.loss_last)
    # random 0/1 labels: the first loss is near ln 2 for a freshly initialised model (logits near 0)
    assert 0.3 < result.loss_first < 1.5
    assert result.table_bytes == 4 * 8 * (50 + 3000 + 7)


def _one_step(spec, seed=0):
    import torch

    from swaptrace.workload.indices import iter_bags
    from swaptrace.workload.train import build_model, build_optimizers, step_inputs, train_step

    model = build_model(spec, seed)
    optimizers = build_optimizers(model, spec.optimizer)
    lookups = next(iter_bags(spec, steps=1, seed=seed))
    dense, labels = step_inputs(spec, seed, 0)
    bags = [(torch.from_numpy(i), torch.from_numpy(o)) for i, o in lookups.bags]
    before = [t.weight.detach().clone() for t in model["tables"]]
    train_step(model, optimizers, torch.from_numpy(dense), bags, torch.from_numpy(labels))
    return model, optimizers, lookups, before


@needs_torch
@pytest.mark.parametrize("optimizer", ["sgd", "adagrad", "rowwise-adagrad", "adam"])
def test_sparse_gradients_and_optimizer_state(optimizer):
    spec = small_spec(optimizer)
    model, optimizers, lookups, before = _one_step(spec)
    for table, spec_table, (indices, _), old in zip(model["tables"], spec.tables, lookups.bags, before, strict=True):
        assert table.weight.grad.is_sparse
        touched = np.unique(indices)
        assert set(table.weight.grad.coalesce().indices()[0].tolist()) == set(touched.tolist())
        changed = np.flatnonzero((table.weight.detach() != old).any(dim=1).numpy())
        assert set(changed.tolist()) <= set(touched.tolist())  # rows not looked up stay as they were
        del spec_table
    tables = list(model["tables"].parameters())
    if optimizer == "sgd":
        (opt,) = optimizers
        assert type(opt).__name__ == "SGD" and not any(opt.state[p] for p in tables)
    elif optimizer == "adagrad":
        (opt,) = optimizers
        assert all(opt.state[p]["sum"].shape == p.shape for p in tables)  # rows x dim per table
    elif optimizer == "rowwise-adagrad":
        rowwise, dense = optimizers
        assert [s.shape for s in rowwise.state] == [(t.rows,) for t in spec.tables]  # one value per row
        assert type(dense).__name__ == "Adagrad"
    else:
        sparse, dense = optimizers
        assert type(sparse).__name__ == "SparseAdam" and type(dense).__name__ == "Adam"
        touched = [p for p, (ix, _) in zip(tables, lookups.bags, strict=True) if len(ix)]
        assert all(sparse.state[p]["exp_avg"].shape == p.shape and sparse.state[p]["exp_avg_sq"].shape == p.shape
                   for p in touched)


@needs_torch
def test_model_layers_and_initialisation_by_hand():
    """DLRM: the bottom MLP ends in a ReLU, the top MLP in a bare Linear (the logit); every table row uniform in
    +- sqrt(1 / rows) (table a: 50 rows, bound 0.1414; its 400 values span most of it)."""
    from swaptrace.workload.train import build_model

    spec = small_spec()
    model = build_model(spec, seed=3)
    assert [type(m).__name__ for m in model["bottom"]] == ["Linear", "ReLU", "Linear", "ReLU"]
    assert [type(m).__name__ for m in model["top"]] == ["Linear", "ReLU", "Linear"]
    for table, t in zip(model["tables"], spec.tables, strict=True):
        w = table.weight.detach().numpy()
        bound = math.sqrt(1.0 / t.rows)
        assert w.shape == (t.rows, t.dim) and np.abs(w).max() <= bound
    assert np.abs(model["tables"][0].weight.detach().numpy()).max() > 0.9 * math.sqrt(1 / 50)


def test_step_inputs_are_drawn_per_step_by_the_documented_rng():
    """Dense features uniform [0, 1) (B x bottom_mlp[0], float32), then 0/1 labels, from default_rng([seed, step])."""
    from swaptrace.workload.train import step_inputs

    spec = small_spec()
    for step in (0, 1):
        rng = np.random.default_rng([4, step])
        dense, labels = step_inputs(spec, 4, step)
        np.testing.assert_array_equal(dense, rng.random((16, 5), dtype=np.float32))
        np.testing.assert_array_equal(labels, rng.integers(0, 2, 16).astype(np.float32))
    assert not np.array_equal(step_inputs(spec, 4, 0)[0], step_inputs(spec, 4, 1)[0])


@needs_torch
def test_rowwise_adagrad_update_by_hand():
    """One update of a single row: s = mean(g^2); w -= lr g / (sqrt(s) + eps), duplicate rows summed first."""
    import torch

    from swaptrace.workload.train import RowWiseAdagrad

    w = torch.nn.Parameter(torch.ones(4, 2))
    w.grad = torch.sparse_coo_tensor([[1, 1, 3]], torch.tensor([[1.0, 2.0], [1.0, 0.0], [0.0, 3.0]]), (4, 2))
    opt = RowWiseAdagrad([w], lr=0.5, eps=0.0)
    opt.step()
    g1, g3 = np.array([2.0, 2.0]), np.array([0.0, 3.0])
    want = np.ones((4, 2))
    want[1] -= 0.5 * g1 / math.sqrt(np.mean(g1 ** 2))
    want[3] -= 0.5 * g3 / math.sqrt(np.mean(g3 ** 2))
    np.testing.assert_allclose(w.detach().numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(opt.state[0].numpy(), [0, 4, 0, 4.5], rtol=1e-6)


@needs_torch
def test_marks_are_written_in_order(tmp_path, monkeypatch):
    from swaptrace.workload.train import train

    with capture_marker(monkeypatch, tmp_path) as read:
        train(small_spec(), steps=3, seed=0)
        assert read() == ["swaptrace step 0", "swaptrace step 1", "swaptrace step 2", "swaptrace end"]


def _row_pages(layout, t, rows):
    """Pages of each row of table t in lookup order (a row straddling a page boundary gives both), per layout."""
    first, size, shift = int(layout.table_first_byte[t]), int(layout.table_row_bytes[t]), layout.page_shift
    return [p for r in rows for p in range((first + int(r) * size) >> shift, ((first + (int(r) + 1) * size - 1) >> shift) + 1)]


@needs_torch
def test_train_reads_the_rows_generate_traces():
    """Per step and table, the forward reads of the trace are the pages of the rows train feeds, in order;
    and every table page the step touches (backward too) is one of those rows' pages."""
    from swaptrace.workload.train import train

    # dim 100: 400-byte rows straddle 4 KiB pages; uniform rows, random pooling and unique bags on table a
    spec = small_spec("rowwise-adagrad", dim=100, distribution="uniform", pooling="random", lookups=9,
                      unique_in_bag=True)
    fed: dict[int, list] = {}
    train(spec, steps=3, seed=9, observe=lambda step, bags: fed.__setitem__(step, [i.numpy().copy() for i, _ in bags]))
    trace = generate_arrays(spec, steps=3, seed=9)
    layout = build_layout(spec)
    assert sorted(fed) == [0, 1, 2]
    for step, rows in fed.items():
        at = trace["step"] == step
        for t, table_rows in enumerate(rows):
            mine = at & (trace["region"] == layout.table_region[t])
            reads = trace["page"][mine & ~trace["write"]]
            want = _row_pages(layout, t, table_rows)
            # forward reads come first (one per page of each lookup), the backward's read+write of unique rows after
            assert reads[:len(want)].tolist() == want
            assert set(trace["page"][mine].tolist()) == set(want)


@needs_torch
def test_dot_interaction_equals_a_numpy_reference():
    import torch

    from swaptrace.workload.train import dot_interaction

    rng = np.random.default_rng(0)
    b, d, n_tables = 3, 4, 3
    x = rng.standard_normal((b, d)).astype(np.float32)
    embs = [rng.standard_normal((b, d)).astype(np.float32) for _ in range(n_tables)]
    got = dot_interaction(torch.from_numpy(x), [torch.from_numpy(e) for e in embs]).numpy()
    vectors = [x, *embs]
    want = np.empty((b, d + (n_tables + 1) * n_tables // 2))
    scale = np.zeros_like(want)  # sum_k |x_k y_k| of each dot product (0: the dense features, copied exactly)
    for s in range(b):
        row, mag = list(x[s]), [0.0] * d
        for i in range(len(vectors)):
            for j in range(i):  # pairs i > j, row by row of the strict lower triangle
                row.append(sum(float(vectors[i][s, k]) * float(vectors[j][s, k]) for k in range(d)))
                mag.append(sum(abs(float(vectors[i][s, k]) * float(vectors[j][s, k])) for k in range(d)))
        want[s], scale[s] = row, mag
    # a dot product of d terms in floating point, in any order of summation, errs by at most
    # gamma_d * sum_k |x_k y_k|, gamma_d = d u / (1 - d u) (Higham, "Accuracy and Stability of Numerical
    # Algorithms", 2002, Eq. 3.5): u = 2^-24 for torch's float32; the float64 reference (exact products of float32
    # inputs, then d additions) adds gamma_d with u = 2^-53
    def gamma(u):
        return d * u / (1 - d * u)

    assert np.all(np.abs(got - want) <= (gamma(2.0**-24) + gamma(2.0**-53)) * scale)


@needs_torch
def test_cli_json_summary(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('batch_size = 8\noptimizer = "adagrad"\nbottom_mlp = [3, 4]\ntop_mlp = [2, 1]\n'
                    '[[tables]]\nrows = 100\ndim = 4\nlookups = 3\npooling = "random"\n')
    r = run_cli("train", "--spec", spec, "--steps", "2", "--seed", "3", "--threads", "1", "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    assert summary["steps"] == 2 and summary["table_bytes"] == 1600 and summary["peak_rss_bytes"] > 0
    assert summary["need_bytes"] >= summary["table_bytes"]
    assert summary["step_s_median"] > 0 and math.isfinite(summary["loss_last"])


@needs_torch
def test_step_lines_one_per_step_and_off_stdout_with_json(tmp_path):
    """--step-lines prints a training script's line after each step (what capture --record --step-line reads);
    with --json they go to stderr, so stdout stays the summary alone."""
    spec = tmp_path / "s.toml"
    spec.write_text('batch_size = 8\noptimizer = "sgd"\nbottom_mlp = [3, 4]\ntop_mlp = [2, 1]\n'
                    '[[tables]]\nrows = 100\ndim = 4\nlookups = 1\n')
    r = run_cli("train", "--spec", spec, "--steps", "3", "--threads", "1", "--quiet", "--step-lines")
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("Finished")]
    assert [ln.rsplit(" loss ", 1)[0] for ln in lines] == [f"Finished training it {k}/3" for k in (1, 2, 3)]
    r = run_cli("train", "--spec", spec, "--steps", "2", "--threads", "1", "--quiet", "--step-lines", "--json")
    assert json.loads(r.stdout)["steps"] == 2 and r.stderr.count("Finished training it") == 2


def test_missing_torch_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    line = the_error(run_cli("train", "--preset", "tiny", "--steps", "1"))
    assert "pip install 'swaptrace[torch]'" in line


@pytest.mark.parametrize("table, top, words", [
    ({"dim": 4}, [3, 1], "dim 4"),
    ({"dtype": "float16"}, [3, 1], "float16"),
    ({}, [3, 2], "top_mlp"),
])
def test_untrainable_specs_are_one_line(tmp_path, monkeypatch, table, top, words):
    if importlib.util.find_spec("torch") is None:
        monkeypatch.setitem(sys.modules, "torch", type(sys)("torch"))  # the spec check comes after the import
    spec = tmp_path / "s.toml"
    extra = "".join(f'{k} = {json.dumps(v)}\n' for k, v in {"dim": 8, **table}.items())
    spec.write_text(f"batch_size = 2\nbottom_mlp = [3, 8]\ntop_mlp = {top}\n[[tables]]\nrows = 10\n{extra}")
    assert words in the_error(run_cli("train", "--spec", spec, "--steps", "1"))
