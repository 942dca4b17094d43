"""A DLRM trained in PyTorch on exactly the lookups ``swaptrace generate`` draws (``swaptrace train``).

The model is DLRM (Naumov et al. 2019, "Deep Learning Recommendation Model
for Personalization and Recommendation Systems", arXiv:1906.00091; the
reference code is facebookresearch/dlrm ``dlrm_s_pytorch.py``)::

    dense features (B x bottom_mlp[0]) --bottom MLP (Linear+ReLU)--> x (B x d)
    table t: the bags of the step --EmbeddingBag(mode="sum")--> e_t (B x d)
    dot interaction: x, then <v_i, v_j> for every pair i > j of (x, e_1 .. e_T)
    --top MLP (Linear+ReLU, last layer linear)--> one logit per sample
    loss: binary cross-entropy with logits against 0/1 labels

Every table's ``dim`` must equal the bottom MLP's output width (the dot
interaction multiplies them), tables are float32 and the top MLP ends in one
output, as in DLRM. The spec's optimizer is built from torch's own where it
has one: ``sgd`` is ``torch.optim.SGD``, ``adagrad`` ``torch.optim.Adagrad``
(both accept the tables' sparse gradients), ``adam`` ``SparseAdam`` for the
tables and ``Adam`` for the MLPs; ``rowwise-adagrad`` (FBGEMM's
``EXACT_ROWWISE_ADAGRAD``: one float32 per row) is :class:`RowWiseAdagrad`
below for the tables and ``Adagrad`` for the MLPs -- the optimizer state
:mod:`swaptrace.workload.spec` describes.

Lookups come from :func:`swaptrace.workload.indices.iter_bags`, the code that draws
``generate``'s lookups, so for the same spec, seed and steps the rows this
program reads are the rows in the trace. Dense features and labels are random
from ``numpy.random.default_rng([seed, step])``. The tables are allocated and
every row written at start-up (uniform in +-sqrt(1/rows), DLRM's
initialisation), as a real program does; each step starts with
:func:`swaptrace.mark_step`, and ``swaptrace end`` follows the last one, so
``swaptrace capture -- swaptrace train ...`` attributes block I/O to steps.
A ``SWAPTRACE_MARKER`` that is not a capture's own marker file is refused
before anything is allocated (:mod:`swaptrace.markers`).

Before it allocates, :func:`train` compares :func:`memory_need` (what the
model, its optimizer, one batch and its activations take; the formula is
there) with :func:`swaptrace.core.memory.memory_room` (the machine's
available memory and free swap, and the process's memory cgroup's room) and
refuses in one line a model that cannot fit. An allocation that fails anyway
(numpy's ``MemoryError``, torch's ``RuntimeError`` saying it could not
allocate) is one line too (:class:`~swaptrace.errors.ConfigError`).

torch is imported inside the functions: it is an optional extra
(``pip install 'swaptrace[torch]'``). To adapt this to a model of your own,
change :func:`build_model` and :func:`forward`; the loop in :func:`train`
stays as it is.
"""

from __future__ import annotations

import math
import re
import resource
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from swaptrace.core.units import format_bytes
from swaptrace.errors import ConfigError, ToolError
from swaptrace.markers import MarkerError, check_marker, mark, mark_step
from swaptrace.workload.indices import iter_bags
from swaptrace.workload.spec import ModelSpec, load_spec

#: learning rate per optimizer: DLRM's default ``--learning-rate=0.01``; Adam takes torch's default 0.001
LEARNING_RATES = {"sgd": 0.01, "rowwise-adagrad": 0.01, "adagrad": 0.01, "adam": 0.001}
INSTALL_HINT = "pip install 'swaptrace[torch]'"


def require_torch():
    """The ``torch`` module, or a one-line :class:`ToolError` naming the extra that installs it."""
    try:
        import torch
    except ImportError:
        raise ToolError(f"swaptrace train needs PyTorch, which is not installed: {INSTALL_HINT}") from None
    return torch


def check_trainable(spec: ModelSpec | str) -> ModelSpec:
    """The spec, if DLRM can train it: float32 tables of the bottom MLP's output width, one output."""
    if not isinstance(spec, ModelSpec):
        spec = load_spec(spec)
    d = spec.bottom_mlp[-1]
    problems = [f"table {t.name} is {t.dtype} (train keeps tables in float32)" for t in spec.tables
                if t.dtype != "float32"]
    problems += [f"table {t.name} has dim {t.dim}, but the dot interaction needs the bottom MLP's output "
                 f"width {d}" for t in spec.tables if t.dim != d]
    if spec.top_mlp[-1] != 1:
        problems.append(f"top_mlp must end in 1 output (a click logit), got {spec.top_mlp[-1]}")
    if problems:
        raise ConfigError(f"{spec.source or spec.name}: cannot train: " + "; ".join(problems[:3])
                          + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""))
    return spec


#: float32, the dtype of everything train allocates in floating point (tables, MLPs, state, activations)
FLOAT_BYTES = 4
#: int64, the dtype of the lookups' rows and offsets (``iter_bags``) and of a sparse gradient's row indices
INDEX_BYTES = 8


def rows_fed(spec: ModelSpec) -> list[float]:
    """Rows each table is fed in one step: ``batch x`` the mean bag size as drawn; for ``unique_in_bag``
    tables, ``batch x`` the chance a bag is not empty (repeats are dropped; a non-empty bag keeps one row)."""
    out = []
    for t in spec.tables:
        lk = t.lookups
        if t.unique_in_bag:
            per_bag = 1.0 if lk.uniform else sum(p for v, p in zip(lk.values, lk.probs, strict=True) if v >= 1)
        else:
            per_bag = lk.mean
        out.append(spec.batch_size * per_bag)
    return out


def memory_need(spec: ModelSpec, framework: str = "pytorch") -> dict[str, int]:
    """What training the spec's DLRM holds at its peak, by term, in bytes, and their sum ``need``.

    B is ``batch_size``, T the tables, d the bottom MLP's output (every table's ``dim``), F = T + 1,
    ``iw = d + F(F-1)/2`` the interaction's width, P the MLPs' weights and biases (``spec.mlp_params``), n_t the
    rows table t is fed in a step (:func:`rows_fed`). Floating-point values are float32 (4 bytes, ``FLOAT_BYTES``:
    train refuses other table dtypes), row indices int64 (8 bytes, ``INDEX_BYTES``).

    * ``tables``: ``sum rows_t x dim_t x 4``, every row written at start-up;
    * ``optimizer_state``: per table row ``sgd`` nothing, ``rowwise-adagrad`` one float32, ``adagrad`` one copy
      of the row (``dim`` float32), ``adam`` two (both moments, full size, as ``SparseAdam`` allocates them); per
      MLP parameter ``sgd`` nothing, ``adagrad``/``rowwise-adagrad`` one float32 (torch's ``Adagrad``), ``adam``
      two (the spec's memory model, :class:`~swaptrace.workload.spec.ModelSpec`);
    * ``mlp``: ``4 P``, the MLPs' weights and biases;
    * ``batch``: the dense features ``4 B bottom_mlp[0]``, the labels ``4 B``, and per table the rows fed
      ``8 n_t`` and the offsets ``8 (B + 1)``;
    * ``activations``: what the forward pass keeps for the backward, held at once when the loss is computed:
      ``4 B (sum bottom_mlp[1:] + F d + iw + sum top_mlp)``, one float32 per sample for each bottom MLP layer's
      output, the interaction's F stacked d-vectors and its output, and each top MLP layer's output;
    * ``gradients``: what the optimizer step reads, held at once: the MLPs' ``4 P`` and each table's sparse
      gradient, one row and one row index per row fed, ``n_t (4 d + 8)``. With ``framework="torchrec"``
      (:mod:`swaptrace.workload.train_torchrec`) no table gradient is materialised (FBGEMM's backward updates
      the rows in place), but the gradient of the pooled outputs, ``4 B sum dim_t``, is (TorchRec's
      ``DistributedDataParallel`` keeps the MLPs' gradients as views of its buckets, no second copy):
      ``4 P + 4 B sum dim_t``.

    Activations and gradients are not held at the same time (backward frees the activations it has used;
    ``zero_grad`` drops the gradients before the next forward), so ``need = tables + optimizer_state + mlp +
    batch + max(activations, gradients)``. It leaves out what torch and the interpreter add around them
    (allocator slack, autograd's bookkeeping, libraries loaded on first use), so it is a floor: a run it
    refuses cannot fit.
    """
    b, d = spec.batch_size, spec.bottom_mlp[-1]
    f = len(spec.tables) + 1
    fed = rows_fed(spec)
    if framework == "torchrec":
        gradients = FLOAT_BYTES * (spec.mlp_params + b * sum(t.dim for t in spec.tables))
    else:
        gradients = FLOAT_BYTES * spec.mlp_params + sum(math.ceil(n * (FLOAT_BYTES * t.dim + INDEX_BYTES))
                                                        for n, t in zip(fed, spec.tables, strict=True))
    terms = {
        "tables": sum(t.rows * t.dim * FLOAT_BYTES for t in spec.tables),
        "optimizer_state": sum(t.rows * spec.state_row_bytes(t) * spec.state_arrays for t in spec.tables)
        + spec.mlp_state_bytes,
        "mlp": FLOAT_BYTES * spec.mlp_params,
        "batch": FLOAT_BYTES * b * (spec.bottom_mlp[0] + 1)
        + sum(math.ceil(INDEX_BYTES * n) + INDEX_BYTES * (b + 1) for n in fed),
        "activations": FLOAT_BYTES * b * (sum(spec.bottom_mlp[1:]) + f * d + spec.interaction_width
                                          + sum(spec.top_mlp)),
        "gradients": gradients,
    }
    fixed = terms["tables"] + terms["optimizer_state"] + terms["mlp"] + terms["batch"]
    return {**terms, "need": fixed + max(terms["activations"], terms["gradients"])}


def check_memory(spec: ModelSpec, room=None, framework: str = "pytorch") -> dict[str, int]:
    """:func:`memory_need` of the spec (for ``framework``), or a one-line :class:`ConfigError` when it is above
    what this process can get (``room``: a :class:`~swaptrace.core.memory.MemoryRoom`, by default read now)."""
    from swaptrace.core.memory import memory_room

    need = memory_need(spec, framework)
    room = memory_room() if room is None else room
    if need["need"] > room.bytes:
        terms = ", ".join(f"{k.replace('_', ' ')} {format_bytes(v)}" for k, v in need.items() if k != "need")
        raise ConfigError(f"training {spec.name} would need at least {format_bytes(need['need'])} ({terms}; "
                          f"activations and gradients are not held at once), more than the "
                          f"{format_bytes(room.bytes)} this process can get ({room.why}); give a smaller model: "
                          "fewer or smaller tables, a smaller batch_size or narrower MLPs")
    return need


@contextmanager
def marker_errors() -> Iterator[None]:
    """A :class:`~swaptrace.markers.MarkerError` (a ``ValueError`` for a library caller) as a one-line
    :class:`ConfigError`: for ``train``, a stray ``SWAPTRACE_MARKER`` is the user's environment, not a bug."""
    try:
        yield
    except MarkerError as exc:
        raise ConfigError(str(exc)) from None


#: how torch and numpy say an allocation failed (c10's DefaultCPUAllocator, numpy's _ArrayMemoryError, C++)
_ALLOCATION_FAILED = re.compile(r"can't allocate memory|not enough memory|cannot allocate memory|could not allocate"
                                r"|unable to allocate|out of memory|bad_alloc", re.IGNORECASE)


@contextmanager
def allocation_errors(spec: ModelSpec, need: int) -> Iterator[None]:
    """Turn an allocation that fails inside the block (``MemoryError``; a ``RuntimeError`` whose text says it
    could not allocate) into a one-line :class:`ConfigError`; any other error passes through as it is."""
    try:
        yield
    except (MemoryError, RuntimeError) as exc:
        text = " ".join((str(exc).strip().splitlines() or [type(exc).__name__])[0].split())
        if not isinstance(exc, MemoryError) and _ALLOCATION_FAILED.search(str(exc)) is None:
            raise
        raise ConfigError(f"training {spec.name} ran out of memory ({text[:200]}); it needs at least "
                          f"{format_bytes(need)} besides torch itself: give a smaller model or more memory") from exc


def _mlp(torch, widths: Sequence[int], last_relu: bool):
    layers = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        layers.append(torch.nn.Linear(a, b))
        if last_relu or i < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def build_model(spec: ModelSpec, seed: int = 0):
    """The DLRM as a ``torch.nn.ModuleDict``: ``bottom``, ``tables`` (EmbeddingBags) and ``top``.

    Each table's weights are allocated and written here (every row), with
    DLRM's uniform initialisation; the MLPs use torch's default ``Linear``
    initialisation, seeded.
    """
    torch = require_torch()
    torch.manual_seed(seed)
    tables = []
    for t in spec.tables:
        bound = math.sqrt(1.0 / t.rows)
        weight = torch.empty(t.rows, t.dim, dtype=torch.float32).uniform_(-bound, bound)
        tables.append(torch.nn.EmbeddingBag.from_pretrained(weight, freeze=False, mode="sum", sparse=True,
                                                            include_last_offset=True))
    return torch.nn.ModuleDict({
        "bottom": _mlp(torch, spec.bottom_mlp, last_relu=True),
        "tables": torch.nn.ModuleList(tables),
        "top": _mlp(torch, [spec.interaction_width, *spec.top_mlp], last_relu=False),
    })


def dot_interaction(x, embeddings: Sequence):
    """DLRM's dot interaction: ``x`` then ``<v_i, v_j>`` for i > j over ``v = (x, e_1 .. e_T)``.

    Shapes: ``x`` and each ``e_t`` are (B, d); the result is (B, d + F(F-1)/2)
    with F = T + 1, pairs in row-major order of the strictly lower triangle
    (``interact_features`` of ``dlrm_s_pytorch.py`` without self-interaction).
    """
    torch = require_torch()
    v = torch.stack([x, *embeddings], dim=1)          # (B, F, d)
    z = torch.bmm(v, v.transpose(1, 2))               # (B, F, F): every pairwise dot product
    f = v.shape[1]
    i, j = torch.tril_indices(f, f, offset=-1)
    return torch.cat([x, z[:, i, j]], dim=1)


def forward(model, dense, bags: Sequence[tuple]):
    """Logits (B,) of one batch: ``bags[t] = (indices, offsets)`` with ``batch + 1`` offsets per table."""
    x = model["bottom"](dense)
    embeddings = [table(indices, offsets) for table, (indices, offsets) in zip(model["tables"], bags, strict=True)]
    return model["top"](dot_interaction(x, embeddings)).squeeze(1)


class RowWiseAdagrad:
    """Row-wise Adagrad for embedding tables with sparse gradients (FBGEMM's ``EXACT_ROWWISE_ADAGRAD``).

    One float32 per row, ``s_r``, allocated (and zeroed) here. For each row
    ``r`` in a step's gradient ``g_r`` (duplicates summed first):
    ``s_r += mean(g_r ** 2)`` then ``w_r -= lr * g_r / (sqrt(s_r) + eps)``.
    """

    def __init__(self, params, lr: float, eps: float = 1e-10):
        torch = require_torch()
        self.params = list(params)
        self.lr, self.eps = lr, eps
        self.state = [torch.zeros(p.shape[0], dtype=torch.float32) for p in self.params]

    def zero_grad(self, set_to_none: bool = True) -> None:  # (torch's signature)
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        torch = require_torch()
        with torch.no_grad():
            for p, s in zip(self.params, self.state, strict=True):
                if p.grad is None:
                    continue
                g = p.grad.coalesce()
                rows, values = g.indices()[0], g.values()
                s.index_add_(0, rows, values.pow(2).mean(dim=1))
                p.index_add_(0, rows, values * (-self.lr / (s[rows].sqrt() + self.eps)).unsqueeze(1))


def build_optimizers(model, optimizer: str) -> list:
    """The spec's optimizer over the model: one or two optimizer objects (tables apart where torch needs it)."""
    torch = require_torch()
    # torch >= 2.6 warns on every sparse Adagrad step that sparse-tensor invariant checks are "implicitly"
    # off; saying so explicitly keeps the same behaviour (no checks) without the warning
    torch.sparse.check_sparse_tensor_invariants.disable()
    lr = LEARNING_RATES[optimizer]
    tables = list(model["tables"].parameters())
    dense = list(model["bottom"].parameters()) + list(model["top"].parameters())
    if optimizer == "sgd":
        return [torch.optim.SGD(tables + dense, lr=lr)]
    if optimizer == "adagrad":
        return [torch.optim.Adagrad(tables + dense, lr=lr)]
    if optimizer == "adam":
        return [torch.optim.SparseAdam(tables, lr=lr), torch.optim.Adam(dense, lr=lr)]
    if optimizer == "rowwise-adagrad":
        return [RowWiseAdagrad(tables, lr=lr), torch.optim.Adagrad(dense, lr=lr)]
    raise ConfigError(f"optimizer: train has no {optimizer!r}")


def step_inputs(spec: ModelSpec, seed: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Random dense features (B x bottom_mlp[0], uniform [0, 1)) and 0/1 labels of one step, from (seed, step)."""
    rng = np.random.default_rng([seed, step])
    dense = rng.random((spec.batch_size, spec.bottom_mlp[0]), dtype=np.float32)
    labels = rng.integers(0, 2, spec.batch_size).astype(np.float32)
    return dense, labels


def train_step(model, optimizers: list, dense, bags: Sequence[tuple], labels) -> float:
    """One step: forward, BCE-with-logits loss, backward (sparse table gradients), optimizer step; the loss."""
    torch = require_torch()
    for opt in optimizers:
        opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(forward(model, dense, bags), labels)
    loss.backward()
    for opt in optimizers:
        opt.step()
    return float(loss.detach())


@dataclass(frozen=True)
class TrainResult:
    """What a run measured. Times in seconds, sizes in bytes; peak RSS is the process's ``ru_maxrss``."""

    spec: str
    optimizer: str
    steps: int
    seed: int
    threads: int
    startup_s: float
    wall_s: float
    step_s_median: float
    loss_first: float
    loss_last: float
    table_bytes: int
    need_bytes: int
    peak_rss_bytes: int
    #: ``pytorch`` (this module) or ``torchrec`` (:mod:`swaptrace.workload.train_torchrec`)
    framework: str = "pytorch"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def peak_rss_bytes() -> int:
    """The process's peak resident set (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def set_threads(torch, threads: int | None) -> int:
    """Set torch's threads (and numba's, which draw the lookups) when ``threads`` is given; torch's count."""
    if threads is not None:
        import numba

        torch.set_num_threads(threads)
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    return torch.get_num_threads()


def train(spec: ModelSpec | str, *, steps: int, seed: int = 0, threads: int | None = None,
          observe: Callable[[int, list], Any] | None = None,
          progress: Callable[[int, float, float], Any] | None = None) -> TrainResult:
    """Train the spec's DLRM for ``steps`` steps on ``generate``'s lookups for this seed.

    Parameters
    ----------
    spec : ModelSpec or str
        A spec, preset name or TOML path (see :func:`check_trainable`).
    steps : int
        Training steps (numbered from 0, as ``generate``'s).
    seed : int
        Seed in [0, 2**64): lookups, dense features, labels and initial weights.
    threads : int, optional
        Threads for torch and for drawing the lookups (default: torch's).
    observe : callable, optional
        ``observe(step, bags)`` with the exact ``(indices, offsets)`` tensors fed to each table.
    progress : callable, optional
        ``progress(steps_done, seconds_since_start_of_training, loss)`` after every step.

    Raises
    ------
    ConfigError
        Before anything is allocated: the spec cannot be trained, it needs more memory than this process can
        get (:func:`check_memory`), or ``SWAPTRACE_MARKER`` is not a capture's marker file
        (:class:`swaptrace.markers.MarkerError`); later: an allocation failed (:func:`allocation_errors`).
    """
    torch = require_torch()
    spec = check_trainable(spec)
    with marker_errors():
        check_marker()
    need = check_memory(spec)["need"]
    n_threads = set_threads(torch, threads)
    started = time.perf_counter()
    with marker_errors(), allocation_errors(spec, need):
        model = build_model(spec, seed)
        optimizers = build_optimizers(model, spec.optimizer)
        startup = time.perf_counter() - started
        losses, step_times = _loop(torch, spec, model, optimizers, steps=steps, seed=seed, observe=observe,
                                   progress=progress)
        mark("end")  # training is over: a capture takes its last reading of the program here, not at exit
    return TrainResult(
        spec=spec.name, optimizer=spec.optimizer, steps=steps, seed=seed, threads=n_threads,
        startup_s=startup, wall_s=time.perf_counter() - started, step_s_median=statistics.median(step_times),
        loss_first=losses[0], loss_last=losses[-1], table_bytes=sum(t.weight_bytes for t in spec.tables),
        need_bytes=need, peak_rss_bytes=peak_rss_bytes(),
    )


def _loop(torch, spec: ModelSpec, model, optimizers: list, *, steps: int, seed: int, observe, progress
          ) -> tuple[list[float], list[float]]:
    """The training loop of :func:`train`: each step marked, timed (drawing its lookups included), observed."""
    losses: list[float] = []
    step_times: list[float] = []
    loop_start = last = time.perf_counter()
    for lookups in iter_bags(spec, steps=steps, seed=seed):  # a step's time includes drawing its lookups
        mark_step(lookups.step)
        dense, labels = step_inputs(spec, seed, lookups.step)
        bags = [(torch.from_numpy(ix), torch.from_numpy(off)) for ix, off in lookups.bags]
        if observe is not None:
            observe(lookups.step, bags)
        losses.append(train_step(model, optimizers, torch.from_numpy(dense), bags, torch.from_numpy(labels)))
        now = time.perf_counter()
        step_times.append(now - last)
        last = now
        if progress is not None:
            progress(len(losses), time.perf_counter() - loop_start, losses[-1])
    return losses, step_times
