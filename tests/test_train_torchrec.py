"""``swaptrace train --framework torchrec``: TorchRec's DLRM on FBGEMM's CPU kernels, fed ``generate``'s lookups.

Tests that need TorchRec skip with the reason when it does not import (``make torchrec-extra``); the option's
own errors are tested without it. References are :mod:`naive_train` (float64 bag sums, row gradients and
FBGEMM's update rules, written from their definitions).

Error bounds: a float32 sum of k terms, in any order, errs by at most ``gamma_k * sum |terms|`` with
``gamma_k = k u / (1 - k u)``, u = 2^-24 (Higham, "Accuracy and Stability of Numerical Algorithms", 2002,
Eq. 3.5); the float64 references add nothing at that scale (u = 2^-53). Each test says how the bound carries
through its update.
"""

from __future__ import annotations

import json
import math
import sys

import naive_train
import numpy as np
import pytest
from cli_helpers import run_cli, the_error
from marker_helpers import capture_marker
from test_train import small_spec  # the same three small tables as the PyTorch tests

from swaptrace.errors import SwaptraceError


def _torchrec_missing() -> str | None:
    """Why TorchRec cannot be used here, or None."""
    try:
        from swaptrace.workload.train_torchrec import require_torchrec

        require_torchrec()
    except SwaptraceError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def torchrec_here():
    """Skip, with the reason, where TorchRec does not import. A fixture rather than a collection-time check:
    importing TorchRec takes seconds, and every collection of the suite (both passes) would pay them."""
    missing = _torchrec_missing()
    if missing is not None:  # the reason names the fix: "... run 'make torchrec-extra' as root ..."
        pytest.skip(missing)


needs_torchrec = pytest.mark.usefixtures("torchrec_here")
U = 2.0**-24  # float32's unit roundoff
#: FBGEMM's default eps of its Adagrad updates (SplitTableBatchedEmbeddingBagsCodegen(eps=1.0e-8)); TorchRec
#: passes only the learning rate, as a user writes it
FBGEMM_EPS = 1.0e-8


def gamma(k):
    return k * U / (1 - k * U)


def _one_step(spec, seed=0, step=None):
    """Build, then run one training step (``step``, default the product's ``train_step``) on step 0's lookups.

    Returns what the step saw and did: bags, the pooled embeddings (B, T, d) and their gradient, the table
    weights and fused optimizer state before and after, and the MLPs' parameters before and after.
    """
    from swaptrace.workload.indices import iter_bags
    from swaptrace.workload.train import step_inputs
    from swaptrace.workload.train_torchrec import (
        build_model,
        build_optimizer,
        make_batch,
        optimizer_state,
        table_weights,
        train_step,
    )

    model = build_model(spec, seed)
    optimizer = build_optimizer(model, spec.optimizer)
    lookups = next(iter_bags(spec, steps=1, seed=seed))
    dense, labels = step_inputs(spec, seed, 0)
    seen = {}

    def keep(module, inputs, output):
        seen["pooled"] = output.detach().clone()
        output.register_hook(lambda grad: seen.__setitem__("grad", grad.detach().clone()))

    handle = model.module.model.sparse_arch.register_forward_hook(keep)
    names = [t.name for t in spec.tables]

    def snapshot():
        weights = {k: v.detach().clone().numpy() for k, v in table_weights(model).items()}
        state = {k: {s: v.detach().clone().numpy() for s, v in d.items()} for k, d in optimizer_state(model).items()}
        dense_params = {k: p.detach().clone().numpy() for k, p in model.named_parameters()
                        if "sparse_arch" not in k}
        return weights, state, dense_params

    before = snapshot()
    (step or train_step)(model, optimizer, make_batch(names, dense, labels, lookups.bags))
    handle.remove()
    after = snapshot()
    return {"bags": lookups.bags, "pooled": seen["pooled"].numpy(), "grad": seen.get("grad"),
            "before": before, "after": after}


@needs_torchrec
@pytest.mark.parametrize("seed, dim, first", [(0, 8, {}), (1, 4, {"distribution": "uniform", "pooling": "random",
                                                                   "lookups": 6}),
                                               (2, 12, {"unique_in_bag": True, "lookups": 5})])
def test_forward_is_the_bag_sums_of_the_weights(seed, dim, first):
    """Pooled embedding b of table t == sum of that table's rows in bag b, within gamma_L sum |w| (L the bag's
    length; an empty bag is exactly 0)."""
    spec = small_spec(dim=dim, **first)
    out = _one_step(spec, seed)
    weights = out["before"][0]
    for t, (table, (ix, off)) in enumerate(zip(spec.tables, out["bags"], strict=True)):
        want = naive_train.bag_sums(weights[table.name], ix, off)
        scale, lengths = naive_train.bag_sum_scales(weights[table.name], ix, off)
        got = out["pooled"][:, t, :]
        assert got.shape == (spec.batch_size, dim)
        bound = gamma(lengths)[:, None] * scale
        assert np.all(np.abs(got - want) <= bound), table.name
        assert np.all(got[lengths == 0] == 0)


def _check_one_step(spec, step=None):
    """The step updated exactly the looked-up rows as FBGEMM's fused optimizer does, and the MLPs too."""
    from swaptrace.workload.train import LEARNING_RATES

    out = _one_step(spec, step=step)
    assert out["grad"] is not None, "no backward: the pooled embeddings got no gradient"
    (w0, s0, d0), (w1, s1, d1) = out["before"], out["after"]
    lr = float(np.float32(LEARNING_RATES[spec.optimizer]))  # FBGEMM keeps the learning rate in float32
    for t, (table, (ix, off)) in enumerate(zip(spec.tables, out["bags"], strict=True)):
        g, scale, count = naive_train.row_gradients(out["grad"][:, t, :].numpy(), ix, off, table.rows)
        touched = count > 0
        changed = (w1[table.name] != w0[table.name]).any(axis=1)
        assert np.array_equal(changed, touched), f"{table.name}: the rows changed are not the rows looked up"
        state0 = s0.get(table.name, {}).get("momentum1")
        want_w, want_s = naive_train.fused_update(spec.optimizer, w0[table.name], state0, g, touched, lr, FBGEMM_EPS)
        # FBGEMM's row gradient g^ errs from g by at most delta = gamma_count * sum |terms| (the bound above)
        delta = gamma(count)[:, None] * scale
        if spec.optimizer == "sgd":
            # w' = fl(w - fl(lr g^)): lr delta from g^, then two roundings of at most u each (2u: first order
            # plus what is left of the second)
            bound = lr * delta + 2 * U * (lr * (np.abs(g) + delta) + np.abs(want_w))
        else:  # adagrad from zero state: s = g^2, w' = w - lr g / (|g| + eps)
            s_bound = (2 * np.abs(g) + delta) * delta + 2 * U * (np.abs(g) + delta) ** 2
            assert np.all(np.abs(s1[table.name]["momentum1"] - want_s) <= s_bound), table.name
            # r(g) = g / (|g| + eps) moves by at most delta eps / (|g| - delta + eps)^2 (its slope, eps / (|g| +
            # eps)^2, at the worst point); sqrt, add, divide and multiply round by u each
            ratio = np.abs(g) / (np.abs(g) + FBGEMM_EPS)
            slope = delta * FBGEMM_EPS / (np.maximum(np.abs(g) - delta, 0) + FBGEMM_EPS) ** 2
            bound = lr * (slope + 5 * U * ratio) + 2 * U * np.abs(want_w)
        assert np.all(np.abs(w1[table.name] - want_w) <= bound), table.name
    # the MLPs: their optimizer is torch's, stepped by optimizer.step()
    assert all(not np.array_equal(d0[k], d1[k]) for k in d0 if k.endswith("weight")), "the MLPs did not change"
    return out


@needs_torchrec
@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
def test_one_step_updates_exactly_the_looked_up_rows(optimizer):
    _check_one_step(small_spec(optimizer))


def _step_without_optimizer(model, optimizer, batch):
    """A broken train_step: forward and backward, but the optimizer never steps."""
    optimizer.zero_grad()
    loss, _ = model(batch)
    loss.backward()
    return float(loss.detach())


def _step_without_backward(model, optimizer, batch):
    """A broken train_step: forward and the optimizer's step, but no backward (so nothing fused runs)."""
    optimizer.zero_grad()
    loss, _ = model(batch)
    optimizer.step()
    return float(loss.detach())


@needs_torchrec
@pytest.mark.parametrize("broken", [_step_without_optimizer, _step_without_backward])
def test_the_step_check_fails_a_step_that_skips_the_optimizer(broken):
    """The check above is able to fail: with the tables' update fused into the backward, a step that never
    calls optimizer.step() still moves the looked-up rows, but not the MLPs."""
    with pytest.raises(AssertionError):
        _check_one_step(small_spec("sgd"), step=broken)


@needs_torchrec
def test_adagrad_state_accumulates():
    """FBGEMM's Adagrad state (momentum1, rows x dim) starts at 0, becomes g^2 on the looked-up rows only (the
    bound is checked in the step test), and a second step adds to it: never less, more on rows looked up again."""
    from swaptrace.workload.indices import iter_bags
    from swaptrace.workload.train import step_inputs
    from swaptrace.workload.train_torchrec import build_model, build_optimizer, make_batch, optimizer_state, train_step

    spec = small_spec("adagrad")
    model = build_model(spec, 0)
    optimizer = build_optimizer(model, spec.optimizer)
    names = [t.name for t in spec.tables]
    states, fed = [], []
    assert all(not d["momentum1"].any() for d in optimizer_state(model).values())
    for lookups in iter_bags(spec, steps=2, seed=0):
        dense, labels = step_inputs(spec, 0, lookups.step)
        train_step(model, optimizer, make_batch(names, dense, labels, lookups.bags))
        states.append({k: d["momentum1"].detach().clone().numpy() for k, d in optimizer_state(model).items()})
        fed.append([np.unique(ix) for ix, _ in lookups.bags])
    for t, table in enumerate(spec.tables):
        s1, s2 = states[0][table.name], states[1][table.name]
        assert s1.shape == (table.rows, table.dim)
        assert np.array_equal(np.flatnonzero(s1.any(axis=1)), fed[0][t])
        assert np.all(s2 >= s1)
        grew = np.flatnonzero((s2 > s1).any(axis=1))
        assert np.array_equal(grew, fed[1][t])


@needs_torchrec
def test_rowwise_adagrad_keeps_one_value_per_row():
    out = _one_step(small_spec("rowwise-adagrad"))
    for table, (ix, _) in zip(small_spec().tables, out["bags"], strict=True):
        state = out["after"][1][table.name]["momentum1"]
        assert state.shape == (table.rows,)
        assert np.array_equal(np.flatnonzero(state), np.unique(ix))


@needs_torchrec
def test_the_batch_holds_the_lookups_of_iter_bags():
    """The KeyedJaggedTensor of a step is iter_bags' (indices, offsets) per table, keyed by table name."""
    from swaptrace.workload.indices import iter_bags
    from swaptrace.workload.train import step_inputs
    from swaptrace.workload.train_torchrec import make_batch

    spec = small_spec(distribution="uniform", pooling="random", lookups=4)
    lookups = next(iter_bags(spec, steps=1, seed=3))
    dense, labels = step_inputs(spec, 3, 0)
    batch = make_batch([t.name for t in spec.tables], dense, labels, lookups.bags)
    jagged = batch.sparse_features.to_dict()
    assert list(jagged) == ["a", "b", "c"]
    for table, (ix, off) in zip(spec.tables, lookups.bags, strict=True):
        assert np.array_equal(jagged[table.name].values().numpy(), ix)
        assert np.array_equal(jagged[table.name].offsets().numpy(), off)
    assert np.array_equal(batch.dense_features.numpy(), dense) and np.array_equal(batch.labels.numpy(), labels)


@needs_torchrec
def test_marks_are_written_in_order(tmp_path, monkeypatch):
    from swaptrace.workload.train_torchrec import train

    with capture_marker(monkeypatch, tmp_path) as read:
        result = train(small_spec("adagrad"), steps=3, seed=0)
        assert read() == ["swaptrace step 0", "swaptrace step 1", "swaptrace step 2", "swaptrace end"]
    assert result.framework == "torchrec" and result.steps == 3
    assert 0.3 < result.loss_first < 1.5 and math.isfinite(result.loss_last)


@needs_torchrec
def test_cli_short_run(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('batch_size = 8\noptimizer = "adagrad"\nbottom_mlp = [3, 4]\ntop_mlp = [2, 1]\n'
                    '[[tables]]\nrows = 100\ndim = 4\nlookups = 3\npooling = "random"\n')
    r = run_cli("train", "--spec", spec, "--steps", "2", "--seed", "3", "--threads", "1", "--framework", "torchrec",
                "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    assert summary["framework"] == "torchrec" and summary["steps"] == 2 and summary["table_bytes"] == 1600
    assert summary["need_bytes"] >= summary["table_bytes"] and math.isfinite(summary["loss_last"])


@needs_torchrec
@pytest.mark.parametrize("optimizer, top, dim, words", [("adam", [2, 1], 4, "'adam'"), ("sgd", [1], 4, "top_mlp"),
                                                        ("sgd", [2, 1], 6, "multiple of 4")])
def test_what_torchrec_cannot_train_is_one_line(tmp_path, optimizer, top, dim, words):
    spec = tmp_path / "s.toml"
    spec.write_text(f'batch_size = 2\noptimizer = "{optimizer}"\nbottom_mlp = [3, {dim}]\ntop_mlp = {top}\n'
                    f'[[tables]]\nrows = 10\ndim = {dim}\n')
    assert words in the_error(run_cli("train", "--spec", spec, "--steps", "1", "--framework", "torchrec"))


def test_unknown_framework_is_one_line():
    line = the_error(run_cli("train", "--preset", "tiny", "--steps", "1", "--framework", "nope"))
    assert "'nope'" in line and "torchrec" in line


def test_missing_torchrec_is_one_line(monkeypatch):
    pytest.importorskip("torch", reason="the torch extra comes first: pip install 'swaptrace[torch]'")
    monkeypatch.setitem(sys.modules, "torchrec", None)  # `import torchrec` now raises ImportError
    line = the_error(run_cli("train", "--preset", "tiny", "--steps", "1", "--framework", "torchrec"))
    assert "make torchrec-extra" in line


def test_memory_need_counts_no_table_gradient_for_torchrec():
    """Fused: no sparse table gradient, but the pooled outputs' gradient 4 B sum(dim) and the MLPs' 4 P."""
    from swaptrace.workload.train import memory_need

    spec = small_spec("adagrad")
    pytorch, torchrec = memory_need(spec), memory_need(spec, "torchrec")
    assert torchrec["gradients"] == 4 * spec.mlp_params + 4 * spec.batch_size * 3 * 8
    assert {k: v for k, v in torchrec.items() if k not in ("gradients", "need")} == \
        {k: v for k, v in pytorch.items() if k not in ("gradients", "need")}
