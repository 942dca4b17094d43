"""The same DLRM written as a TorchRec user writes it (``swaptrace train --framework torchrec``).

A second framework for the lookups ``swaptrace generate`` draws, one whose
memory behaviour the emulator was never fitted on. It is TorchRec's own DLRM
(``torchrec.models.dlrm.DLRM`` in ``DLRMTrain``: dense arch, sparse arch on an
``EmbeddingBagCollection``, DLRM's dot interaction, over arch, BCE-with-logits
loss; Naumov et al. 2019, arXiv:1906.00091), built on the ``meta`` device and
sharded by ``DistributedModelParallel`` on a one-rank ``gloo`` process group
(an in-memory ``HashStore``: no socket is opened), the way TorchRec's
examples train (pytorch/torchrec ``examples/golden_training/train_dlrm.py``):

* every table is placed ``table_wise`` with the ``fused`` compute kernel, so
  FBGEMM's ``SplitTableBatchedEmbeddingBagsCodegen`` (fbgemm_gpu, CPU build)
  does the bag lookups: the tables (one dim, in DLRM) live back to back in one flat
  float32 tensor (``weights_host``; table t starts at ``weights_offsets[t]``);
* the tables' optimizer is TorchRec's fused one
  (``apply_optimizer_in_backward``): FBGEMM's backward updates each looked-up
  row, and its optimizer state (``momentum1_host``, laid out as the weights),
  in place, and no sparse gradient is ever materialised. ``sgd`` is
  ``EXACT_SGD``, ``adagrad`` ``EXACT_ADAGRAD`` (one float32 per weight),
  ``rowwise-adagrad`` ``EXACT_ROWWISE_ADAGRAD`` (one float32 per row). FBGEMM's
  CPU kernels have no fused Adam (``Optimizer adam is not supported in CPU
  mode``), so ``adam`` is refused;
* the MLPs (wrapped in ``DistributedDataParallel`` by the sharding) take torch's
  optimizer through ``KeyedOptimizerWrapper``, combined with the fused one in a
  ``CombinedOptimizer``: ``SGD`` for ``sgd``, ``Adagrad`` otherwise, as the
  PyTorch program (:mod:`swaptrace.workload.train`) does.

Inputs are what the PyTorch program feeds: :func:`~swaptrace.workload.indices.iter_bags`'
rows as one ``KeyedJaggedTensor`` per step (a key per table, the table's name),
dense features and labels from :func:`~swaptrace.workload.train.step_inputs`.
The tables are initialised by TorchRec's default, uniform in +-sqrt(1/rows)
(DLRM's), every row written at start-up; each step starts with
:func:`swaptrace.mark_step` and ``swaptrace end`` follows the last.

torch, torchrec and fbgemm_gpu are imported inside the functions: the versions
that load together here are torch 2.13, torchrec 1.8 and fbgemm-gpu-cpu 1.8
(``make torchrec-extra``; docs/train.md).
"""

from __future__ import annotations

import logging
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from swaptrace.errors import ConfigError, ToolError
from swaptrace.markers import check_marker, mark, mark_step
from swaptrace.workload.indices import iter_bags
from swaptrace.workload.spec import ModelSpec
from swaptrace.workload.train import (
    LEARNING_RATES,
    TrainResult,
    allocation_errors,
    check_memory,
    check_trainable,
    marker_errors,
    peak_rss_bytes,
    require_torch,
    set_threads,
    step_inputs,
)

INSTALL_HINT = ("run 'make torchrec-extra' as root (the torchrec extra: fbgemm-gpu-cpu 1.8.0, tensordict, pyre-extensions; "
                "then torchrec 1.8.0 with --no-deps)")
#: spec optimizer -> (the tables' optimizer as TorchRec names it, fused into FBGEMM's backward; the MLPs')
OPTIMIZERS = {"sgd": ("torch.optim.SGD", "SGD"), "adagrad": ("torch.optim.Adagrad", "Adagrad"),
              "rowwise-adagrad": ("torchrec.optim.RowWiseAdagrad", "Adagrad")}
#: where the EmbeddingBagCollection's tables sit in DLRMTrain's state dict (``<prefix><table>.weight``)
TABLES_PREFIX = "model.sparse_arch.embedding_bag_collection.embedding_bags."


def require_torchrec():
    """The ``torchrec`` module (fbgemm_gpu loaded), or a one-line :class:`ToolError` saying how to install it.

    fbgemm_gpu's CPU build warns (``DeprecationWarning``) at import that its SSD-offload modules, which it does
    not ship, failed to import, and that a module torchrec imports is deprecated; ``torch.distributed.optim``
    (where ``_apply_optimizer_in_backward`` lives) warns that the ``torch.jit`` decorators of its modules are
    deprecated. All are about the libraries' own code, so they are silenced here, for the imports only.
    """
    require_torch()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"fbgemm_gpu(\..*)?$")
            warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", DeprecationWarning)
            import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm, the kernels)
            import torch.distributed.optim  # noqa: F401
            import torchrec
            import torchrec.distributed.model_parallel  # noqa: F401  (loads the sharders, FBGEMM's TBE)
    except ImportError as exc:
        raise ToolError(f"swaptrace train --framework torchrec needs TorchRec and FBGEMM's CPU kernels ({exc}): "
                        f"{INSTALL_HINT}") from None
    except OSError as exc:  # torch.ops.load_library: an fbgemm_gpu built for another torch
        raise ToolError(f"FBGEMM's kernels do not load with this torch ({' '.join(str(exc).split())[:200]}): "
                        f"{INSTALL_HINT}") from None
    return torchrec


def check_torchrec_trainable(spec: ModelSpec | str) -> ModelSpec:
    """The spec, if TorchRec's DLRM on FBGEMM's CPU kernels can train it (:func:`check_trainable` and more)."""
    spec = check_trainable(spec)
    where = spec.source or spec.name
    if spec.optimizer not in OPTIMIZERS:
        raise ConfigError(f"{where}: --framework torchrec cannot train with {spec.optimizer!r}: FBGEMM's CPU "
                          f"kernels fuse only {', '.join(OPTIMIZERS)} into the backward")
    odd = [f"{t.name} ({t.dim})" for t in spec.tables if t.dim % 4]
    if odd:
        raise ConfigError(f"{where}: --framework torchrec needs every table's dim to be a multiple of 4 (TorchRec's "
                          f"fused FBGEMM kernel asserts it), not " + ", ".join(odd[:3])
                          + (f" and {len(odd) - 3} more" if len(odd) > 3 else ""))
    if len(spec.top_mlp) < 2:
        raise ConfigError(f"{where}: --framework torchrec needs a top_mlp of at least 2 layers (TorchRec's "
                          f"OverArch), got {list(spec.top_mlp)}")
    return spec


def process_group():
    """The default process group: one rank over ``gloo``, made here (in-memory store) unless one exists."""
    torch = require_torch()
    dist = torch.distributed
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    elif dist.get_world_size() != 1:
        raise ConfigError(f"--framework torchrec trains on one rank; this process's group has "
                          f"{dist.get_world_size()}")
    return dist.group.WORLD


def _optimizer_class(name: str):
    """``torch.optim.SGD`` and the like, from its dotted name."""
    import importlib

    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def build_model(spec: ModelSpec, seed: int = 0):
    """TorchRec's DLRM of the spec, the tables' optimizer fused, sharded on this rank: a
    ``DistributedModelParallel`` around ``DLRMTrain``, whose forward takes a ``torchrec.datasets.utils.Batch``
    and returns ``(loss, (loss, logits, labels))``.

    The MLPs are initialised (seeded) on the CPU, the tables on the ``meta`` device, then allocated and every
    row written by the sharding (FBGEMM's weights, uniform in +-sqrt(1/rows)).
    """
    torch = require_torch()
    require_torchrec()
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
    from torchrec.distributed.embedding_types import EmbeddingComputeKernel
    from torchrec.distributed.model_parallel import DistributedModelParallel, get_default_sharders
    from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints
    from torchrec.distributed.planner.storage_reservations import FixedPercentageStorageReservation
    from torchrec.distributed.planner.types import KernelConfig, TopologyFactory, TrainerConfig
    from torchrec.distributed.types import ShardingType
    from torchrec.models.dlrm import DLRM, DLRMTrain
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward

    torch.manual_seed(seed)
    tables = [EmbeddingBagConfig(name=t.name, embedding_dim=t.dim, num_embeddings=t.rows, feature_names=[t.name])
              for t in spec.tables]
    ebc = EmbeddingBagCollection(tables=tables, device=torch.device("meta"))
    model = DLRMTrain(DLRM(embedding_bag_collection=ebc, dense_in_features=spec.bottom_mlp[0],
                           dense_arch_layer_sizes=list(spec.bottom_mlp[1:]), over_arch_layer_sizes=list(spec.top_mlp)))
    with warnings.catch_warnings():
        # TorchRec's public call says to use torch's, which it calls: a private name (_apply_optimizer_in_backward)
        warnings.filterwarnings("ignore", "This API is deprecated", DeprecationWarning)
        apply_optimizer_in_backward(_optimizer_class(OPTIMIZERS[spec.optimizer][0]),
                                    model.model.sparse_arch.parameters(), {"lr": LEARNING_RATES[spec.optimizer]})
    # the planner alone would make small tables data-parallel (a dense copy, torch's optimizer): every table goes
    # to FBGEMM's fused kernel instead, as one rank holding them all
    constraints = {t.name: ParameterConstraints(sharding_types=[ShardingType.TABLE_WISE.value],
                                                compute_kernels=[EmbeddingComputeKernel.FUSED.value])
                   for t in spec.tables}
    group = process_group()
    topology = TopologyFactory.create_topology(trainer_config=TrainerConfig(world_size=1),
                                               kernel_config=KernelConfig(compute_device="cpu"))
    # the planner's default reservation (heuristic, 15 %) warns that it over-estimates; a fixed 15 % says the same
    planner = EmbeddingShardingPlanner(topology=topology, constraints=constraints,
                                       storage_reservation=FixedPercentageStorageReservation(percentage=0.15))
    plan = planner.collective_plan(model, get_default_sharders(), group)
    with warnings.catch_warnings():
        # DMP wraps the MLPs in DDP with broadcast_buffers=False, which torch >= 2.13 says it will rename
        warnings.filterwarnings("ignore", "`broadcast_buffers` is deprecated", FutureWarning)
        return DistributedModelParallel(model, device=torch.device("cpu"), plan=plan)


def build_optimizer(model, optimizer: str):
    """The ``CombinedOptimizer`` of the model's fused table optimizer and torch's for the MLPs (the rest)."""
    require_torchrec()
    from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper
    from torchrec.optim.optimizers import in_backward_optimizer_filter

    dense_class = _optimizer_class(f"torch.optim.{OPTIMIZERS[optimizer][1]}")
    lr = LEARNING_RATES[optimizer]
    dense = KeyedOptimizerWrapper(dict(in_backward_optimizer_filter(model.named_parameters())),
                                  lambda params: dense_class(params, lr=lr))
    return CombinedOptimizer([model.fused_optimizer, dense])


def make_batch(keys: Sequence[str], dense, labels, bags: Sequence[tuple]):
    """A ``Batch`` of one step: dense features (B x bottom_mlp[0]), labels (B,) and the bags as one
    ``KeyedJaggedTensor``, a key per table, lengths ``diff(offsets)`` (``bags[t] = (indices, offsets)``)."""
    torch = require_torch()
    from torchrec import KeyedJaggedTensor
    from torchrec.datasets.utils import Batch

    values = np.concatenate([np.asarray(ix, dtype=np.int64) for ix, _ in bags])
    lengths = np.concatenate([np.diff(np.asarray(off, dtype=np.int64)) for _, off in bags])
    kjt = KeyedJaggedTensor(keys=list(keys), values=torch.from_numpy(values), lengths=torch.from_numpy(lengths))
    return Batch(dense_features=torch.as_tensor(dense), sparse_features=kjt, labels=torch.as_tensor(labels))


def train_step(model, optimizer, batch) -> float:
    """One step, as TorchRec's examples write it; the loss.

    ``backward`` runs FBGEMM's fused update of the looked-up rows (and their optimizer state); ``step`` updates
    the MLPs (the fused optimizer's own ``step`` does nothing).
    """
    optimizer.zero_grad()
    loss, _ = model(batch)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def _sharded_local(value):
    """This rank's tensor of a ``ShardedTensor`` (one shard: a view into FBGEMM's flat tensor)."""
    (shard,) = value.local_shards()
    return shard.tensor


def table_weights(model) -> dict[str, Any]:
    """Each table's weights (rows x dim) by name: views into FBGEMM's ``weights_host``, current as it trains."""
    with warnings.catch_warnings():  # ShardedTensor says it is being deprecated for DTensor; TorchRec still uses it
        warnings.filterwarnings("ignore", "Please use DTensor instead", FutureWarning)
        return {k[len(TABLES_PREFIX):-len(".weight")]: _sharded_local(v) for k, v in model.state_dict().items()
                if k.startswith(TABLES_PREFIX)}


def optimizer_state(model) -> dict[str, dict[str, Any]]:
    """The fused optimizer's state of each table by name (``{"momentum1": tensor}`` for Adagrad: rows x dim;
    row-wise: one value per row; SGD: none), views into FBGEMM's ``momentum1_host``."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Please use DTensor instead", FutureWarning)
        state = model.fused_optimizer.state_dict()["state"]
        out = {}
        for key, entries in state.items():
            name = key[len(TABLES_PREFIX):-len(".weight")]
            out[name] = {k.removeprefix(f"{name}."): _sharded_local(v) for k, v in entries.items()}
        return out


def train(spec: ModelSpec | str, *, steps: int, seed: int = 0, threads: int | None = None,
          observe: Callable[[int, list], Any] | None = None,
          progress: Callable[[int, float, float], Any] | None = None) -> TrainResult:
    """Train the spec's DLRM in TorchRec for ``steps`` steps on ``generate``'s lookups for this seed.

    Parameters and errors are those of :func:`swaptrace.workload.train.train`; ``observe(step, bags)`` sees the
    ``(indices, offsets)`` of each table that make up the step's ``KeyedJaggedTensor``. The memory check counts
    no sparse table gradients (the update is fused) but the pooled outputs' gradient and DDP's gradient buckets
    (:func:`~swaptrace.workload.train.memory_need` with ``framework="torchrec"``).
    """
    torch = require_torch()
    require_torchrec()
    spec = check_torchrec_trainable(spec)
    with marker_errors():
        check_marker()
    need = check_memory(spec, framework="torchrec")["need"]
    # torch logs, on the first KeyedJaggedTensor, that is_fx_tracing() will change meaning: a note to TorchRec's
    # developers, not to whoever runs this program
    logging.getLogger("torch.fx._symbolic_trace").setLevel(logging.ERROR)
    n_threads = set_threads(torch, threads)
    started = time.perf_counter()
    with marker_errors(), allocation_errors(spec, need):
        model = build_model(spec, seed)
        optimizer = build_optimizer(model, spec.optimizer)
        startup = time.perf_counter() - started
        losses, step_times = _loop(spec, model, optimizer, steps=steps, seed=seed, observe=observe,
                                   progress=progress)
        mark("end")
    return TrainResult(
        spec=spec.name, optimizer=spec.optimizer, steps=steps, seed=seed, threads=n_threads,
        startup_s=startup, wall_s=time.perf_counter() - started, step_s_median=statistics.median(step_times),
        loss_first=losses[0], loss_last=losses[-1], table_bytes=sum(t.weight_bytes for t in spec.tables),
        need_bytes=need, peak_rss_bytes=peak_rss_bytes(), framework="torchrec",
    )


def _loop(spec: ModelSpec, model, optimizer, *, steps: int, seed: int, observe, progress
          ) -> tuple[list[float], list[float]]:
    """Each step marked, its batch made (drawing its lookups included in its time), trained and timed."""
    torch = require_torch()
    keys = [t.name for t in spec.tables]
    losses: list[float] = []
    step_times: list[float] = []
    loop_start = last = time.perf_counter()
    for lookups in iter_bags(spec, steps=steps, seed=seed):
        mark_step(lookups.step)
        dense, labels = step_inputs(spec, seed, lookups.step)
        if observe is not None:
            observe(lookups.step, [(torch.from_numpy(ix), torch.from_numpy(off)) for ix, off in lookups.bags])
        losses.append(train_step(model, optimizer, make_batch(keys, dense, labels, lookups.bags)))
        now = time.perf_counter()
        step_times.append(now - last)
        last = now
        if progress is not None:
            progress(len(losses), now - loop_start, losses[-1])
    return losses, step_times
