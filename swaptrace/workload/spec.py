"""Model specs: what a DLRM training job keeps in memory, as frozen dataclasses.

A spec is a TOML file; the shipped presets (``swaptrace/presets/*.toml``) and
a user's own files share the format. Every field is checked on load, unknown
keys are errors (they are usually typos), and the error names every bad field.

Format
------
::

    name = "criteo-kaggle"            # optional; defaults to the file name
    description = "..."               # optional, one line
    batch_size = 128                  # samples per training step
    optimizer = "rowwise-adagrad"     # sgd | rowwise-adagrad | adagrad | adam
    bottom_mlp = [13, 512, 256, 64, 16]   # widths, dense input first
    top_mlp = [512, 256, 1]           # output widths; input = interaction size
    alpha = 1.05                      # default Zipf exponent (> 0) of the tables
    distribution = "zipf"             # optional default of the tables: zipf | uniform
    pooling = "fixed"                 # optional default of the tables: fixed | random
    unique_in_bag = false             # optional default of the tables
    default_steps = 100               # optional; steps when the user gives none

    [[tables]]
    name = "C1"                       # optional; default "T<index>"
    rows = 1460                       # 1 .. 2**31
    dim = 16                          # elements per row
    dtype = "float32"                 # optional: float32 | float16 | bfloat16 | int8
    lookups = 1                       # per sample (bag size); or a distribution:
    # lookups = { values = [1, 2, 3], probs = [0.5, 0.3, 0.2] }
    alpha = 1.1                       # optional override of the model's alpha
    distribution = "uniform"          # optional override: zipf | uniform
    pooling = "random"                # optional override: fixed | random
    unique_in_bag = true              # optional override
    count = 1                         # optional: repeat this table `count` times

``lookups`` is either a positive integer (every bag has that many lookups) or
a table ``{values = [...], probs = [...]}`` of non-negative bag sizes and their
probabilities (probabilities are positive and sum to 1 within 1e-6); the
generator draws one bag size per sample and table. ``count`` expands into
``count`` tables named ``<name>_0 .. <name>_<count-1>``.

Index distribution and pooling (model-wide defaults, per-table overrides):

* ``distribution``: ``zipf`` (default) draws bounded-Zipf ranks with the
  table's ``alpha``; ``uniform`` draws every row with probability ``1/rows``
  (``alpha`` is then unused), as DLRM's random-data generator does
  (``dlrm_data_pytorch.py``, ``--data-generation=random``).
* ``pooling``: ``fixed`` (default) takes the bag size from ``lookups`` as
  above; ``random`` needs an integer ``lookups = L`` and draws each bag's size
  uniformly from ``1 .. min(L, rows)`` (DLRM's ``--num-indices-per-lookup=L``
  without ``--num-indices-per-lookup-fixed``; DLRM caps at the table's rows
  too). The cap is applied on load: the spec keeps ``min(L, rows)``.
* ``unique_in_bag``: ``true`` removes repeated rows within a bag and sorts
  the rest (DLRM's generator passes every bag through ``np.unique``), so a bag
  may hold fewer rows than drawn; ``false`` (default) keeps every draw.

Memory model (docs/generate.md, "Your own model (TOML)")
---------------------------------------------------------
* Embedding table: ``rows x dim`` elements of ``dtype``.
* Optimizer state per table, always float32: ``sgd`` none, ``rowwise-adagrad``
  one value per row, ``adagrad`` ``rows x dim``, ``adam`` two arrays of
  ``rows x dim`` (first and second moments).
* MLP parameters (float32): weights and biases of the bottom MLP and of the
  top MLP, whose input width is the DLRM dot-interaction size
  ``d + F(F-1)/2`` with ``d`` the bottom MLP output and ``F = tables + 1``
  (Naumov et al. 2019, "Deep Learning Recommendation Model for
  Personalization and Recommendation Systems", ``dlrm_s_pytorch.py``).
  Optimizer state of the MLP: ``sgd`` none, ``rowwise-adagrad`` and
  ``adagrad`` one float32 per parameter, ``adam`` two.
* Scratch (activations and their gradients, reused every step): per sample,
  the pooled embeddings (``tables x dim``) plus every MLP layer's width plus
  the interaction, float32, twice (forward value and gradient).
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from swaptrace.core.inputs import check_named_file
from swaptrace.errors import SpecError

OPTIMIZERS = ("sgd", "rowwise-adagrad", "adagrad", "adam")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1}
#: float32 optimizer-state values per table row, as (per-row scalars, per-element arrays)
_STATE_PER_ROW = {"sgd": (0, 0), "rowwise-adagrad": (1, 0), "adagrad": (0, 1), "adam": (0, 2)}
#: float32 optimizer-state values per dense (MLP) parameter
_STATE_PER_PARAM = {"sgd": 0, "rowwise-adagrad": 1, "adagrad": 1, "adam": 2}
MAX_ROWS = 1 << 31
DEFAULT_STEPS = 100
#: Upper bounds that keep a typo (``dim = 1e12``) a one-line error instead of a MemoryError: far above any
#: published DLRM (MLPerf DCNv2: dim 128, batch 65,536, bags up to 100; Naumov et al. 2019, arXiv:1906.00091).
MAX_DIM = 1 << 16
MAX_BATCH = 1 << 22
MAX_LOOKUPS = 1 << 16
MAX_COUNT = 1 << 12
MAX_WIDTH = 1 << 20
#: steps are uint32 in the access trace
MAX_STEPS = (1 << 32) - 1
#: a Zipf exponent this large already puts every draw on rank 1 (float64 underflows past ~1e3)
MAX_ALPHA = 100.0
#: lookups of one step (batch x bag sizes): the generator holds a step's indices in memory
MAX_LOOKUPS_PER_STEP = 1 << 28

DISTRIBUTIONS = ("zipf", "uniform")
POOLINGS = ("fixed", "random")

_BAG_KEYS = {"distribution", "pooling", "unique_in_bag"}
_MODEL_KEYS = {"name", "description", "batch_size", "optimizer", "bottom_mlp", "top_mlp", "alpha", "default_steps",
               "tables"} | _BAG_KEYS
_TABLE_KEYS = {"name", "rows", "dim", "dtype", "lookups", "alpha", "count"} | _BAG_KEYS


@dataclass(frozen=True)
class Lookups:
    """Bag size (lookups per sample) distribution of one table.

    A fixed bag size ``k`` is ``Lookups(values=(k,), probs=(1.0,))``; with
    ``uniform=True`` (``pooling = "random"``) every bag's size is drawn
    uniformly from ``1 .. values[0]``.
    """

    values: tuple[int, ...]
    probs: tuple[float, ...]
    uniform: bool = False

    @property
    def fixed(self) -> bool:
        return len(self.values) == 1 and not self.uniform

    @property
    def max(self) -> int:
        return max(self.values)

    @property
    def mean(self) -> float:
        """Mean bag size as drawn (before ``unique_in_bag`` removes repeats)."""
        if self.uniform:
            return (1 + self.values[0]) / 2
        return sum(v * p for v, p in zip(self.values, self.probs, strict=True))

    def to_toml_value(self) -> Any:
        if len(self.values) == 1:  # a fixed size, or the largest of random pooling (its key says which)
            return self.values[0]
        return {"values": list(self.values), "probs": list(self.probs)}


@dataclass(frozen=True)
class TableSpec:
    """One embedding table."""

    name: str
    rows: int
    dim: int
    dtype: str
    lookups: Lookups
    alpha: float
    distribution: str = "zipf"
    unique_in_bag: bool = False

    @property
    def pooling(self) -> str:
        """``random`` (bag size uniform in ``1 .. lookups``) or ``fixed``."""
        return "random" if self.lookups.uniform else "fixed"

    def to_dict(self) -> dict[str, Any]:
        """The table as TOML keys; the index keys only when not the default (older files stay byte-equal)."""
        d = {"name": self.name, "rows": self.rows, "dim": self.dim, "dtype": self.dtype,
             "lookups": self.lookups.to_toml_value(), "alpha": self.alpha}
        if self.distribution != "zipf":
            d["distribution"] = self.distribution
        if self.lookups.uniform:
            d["pooling"] = "random"
        if self.unique_in_bag:
            d["unique_in_bag"] = True
        return d

    @property
    def row_bytes(self) -> int:
        return self.dim * DTYPE_BYTES[self.dtype]

    @property
    def weight_bytes(self) -> int:
        return self.rows * self.row_bytes


@dataclass(frozen=True)
class ModelSpec:
    """A DLRM-style model and its training setup (see the module docstring)."""

    name: str
    batch_size: int
    optimizer: str
    bottom_mlp: tuple[int, ...]
    top_mlp: tuple[int, ...]
    alpha: float
    tables: tuple[TableSpec, ...]
    default_steps: int = DEFAULT_STEPS
    description: str = ""
    source: str = field(default="", compare=False)

    # -- derived sizes (bytes) ------------------------------------------------
    @property
    def interaction_width(self) -> int:
        """DLRM dot interaction output: bottom output + F(F-1)/2 with F = tables + 1."""
        f = len(self.tables) + 1
        return self.bottom_mlp[-1] + f * (f - 1) // 2

    @property
    def mlp_params(self) -> int:
        """Weights and biases of bottom and top MLPs."""
        widths_bottom = list(self.bottom_mlp)
        widths_top = [self.interaction_width, *self.top_mlp]
        n = 0
        for widths in (widths_bottom, widths_top):
            for a, b in zip(widths[:-1], widths[1:], strict=False):
                n += a * b + b
        return n

    @property
    def mlp_bytes(self) -> int:
        return 4 * self.mlp_params

    @property
    def mlp_state_bytes(self) -> int:
        return 4 * self.mlp_params * _STATE_PER_PARAM[self.optimizer]

    def state_row_bytes(self, table: TableSpec) -> int:
        """Optimizer-state bytes per row of one state array (0 for sgd)."""
        scalars, arrays = _STATE_PER_ROW[self.optimizer]
        return 4 * scalars if scalars else (4 * table.dim if arrays else 0)

    @property
    def state_arrays(self) -> int:
        """Optimizer-state arrays per table (adam: 2 moments)."""
        scalars, arrays = _STATE_PER_ROW[self.optimizer]
        return 1 if scalars else arrays

    @property
    def scratch_bytes(self) -> int:
        """Activations and their gradients of one step (float32)."""
        per_sample = sum(t.dim for t in self.tables) + sum(self.bottom_mlp) + self.interaction_width + sum(self.top_mlp)
        return 2 * 4 * self.batch_size * per_sample

    @property
    def footprint_bytes(self) -> int:
        """Unaligned total; :func:`swaptrace.workload.layout.build_layout` gives the page-aligned one."""
        tables = sum(t.weight_bytes + t.rows * self.state_row_bytes(t) * self.state_arrays for t in self.tables)
        return tables + self.mlp_bytes + self.mlp_state_bytes + self.scratch_bytes

    @property
    def lookups_per_step(self) -> float:
        """Mean embedding lookups of one step (batch x sum of mean bag sizes)."""
        return self.batch_size * sum(t.lookups.mean for t in self.tables)

    # -- conversions -----------------------------------------------------------
    def with_overrides(self, *, alpha: float | None = None, optimizer: str | None = None) -> ModelSpec:
        """A copy with every table's Zipf exponent and/or the optimizer replaced."""
        spec = self
        if optimizer is not None:
            if optimizer not in OPTIMIZERS:
                raise SpecError(f"optimizer: must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
            spec = replace(spec, optimizer=optimizer)
        if alpha is not None:
            if not (isinstance(alpha, int | float) and math.isfinite(alpha) and 0 < alpha <= MAX_ALPHA):
                raise SpecError(f"alpha: must be a number in (0, {MAX_ALPHA:g}], got {alpha!r}")
            spec = replace(spec, alpha=float(alpha), tables=tuple(replace(t, alpha=float(alpha)) for t in spec.tables))
        return spec

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-able) that :func:`spec_from_dict` reads back to an equal spec."""
        d = asdict(self)
        d.pop("source")
        d["bottom_mlp"] = list(self.bottom_mlp)
        d["top_mlp"] = list(self.top_mlp)
        d["tables"] = [t.to_dict() for t in self.tables]
        return d


def mlp_layers(meta: dict[str, Any]) -> tuple[list[list[int]], int]:
    """The dense MLPs and batch size of the model a trace was made of, from the trace's metadata.

    Parameters
    ----------
    meta : dict
        A trace's metadata; its ``spec`` entry is the model's :meth:`ModelSpec.to_dict`.

    Returns
    -------
    layers : list of list of int
        The widths (features) of the bottom MLP, then of the top MLP, each as written in the spec; an
        MLP the spec leaves empty is left out, and a trace without a spec has none.
    batch_size : int
        Samples per step; 128 when the metadata names no spec.
    """
    spec = meta.get("spec") or {}
    layers = [list(spec[k]) for k in ("bottom_mlp", "top_mlp") if spec.get(k)]
    return layers, int(spec.get("batch_size", 128))


# -- validation -----------------------------------------------------------------


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _check_widths(value: Any, key: str, errors: list[str], min_len: int) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) < min_len or not all(_is_int(w) and 0 < w <= MAX_WIDTH for w in value):
        errors.append(f"{key}: must be a list of at least {min_len} integers in [1, {MAX_WIDTH}], got {value!r}")
        return (1,) * max(min_len, 1)
    return tuple(value)


def _parse_lookups(value: Any, key: str, errors: list[str]) -> Lookups:
    if _is_int(value):
        if not 1 <= value <= MAX_LOOKUPS:
            errors.append(f"{key}: must be in [1, {MAX_LOOKUPS}], got {value}")
            return Lookups((1,), (1.0,))
        return Lookups((value,), (1.0,))
    if isinstance(value, dict):
        unknown = set(value) - {"values", "probs"}
        if unknown:
            errors.append(f"{key}: unknown key(s) {', '.join(sorted(unknown))} (expected values, probs)")
        values, probs = value.get("values"), value.get("probs")
        ok = True
        if not isinstance(values, list) or not values or not all(_is_int(v) and 0 <= v <= MAX_LOOKUPS for v in values):
            errors.append(f"{key}.values: must be a non-empty list of integers in [0, {MAX_LOOKUPS}], got {values!r}")
            ok = False
        if not isinstance(probs, list) or not all(_is_number(p) and p > 0 for p in probs):
            errors.append(f"{key}.probs: must be a list of positive numbers, got {probs!r}")
            ok = False
        if ok and len(values) != len(probs):
            errors.append(f"{key}: values and probs differ in length ({len(values)} vs {len(probs)})")
            ok = False
        if ok and abs(sum(probs) - 1.0) > 1e-6:
            errors.append(f"{key}.probs: must sum to 1, got {sum(probs):.9g}")
            ok = False
        if ok and len(set(values)) != len(values):
            errors.append(f"{key}.values: must not repeat a value")
            ok = False
        if ok and max(values) == 0:
            errors.append(f"{key}.values: at least one bag size must be > 0")
            ok = False
        if not ok:
            return Lookups((1,), (1.0,))
        total = float(sum(probs))
        return Lookups(tuple(values), tuple(float(p) / total for p in probs))
    errors.append(f"{key}: must be an integer >= 1 or {{values=[...], probs=[...]}}, got {value!r}")
    return Lookups((1,), (1.0,))


def _bag_options(src: dict, prefix: str, defaults: tuple[str, str, bool], errors: list[str]) -> tuple[str, str, bool]:
    """``(distribution, pooling, unique_in_bag)`` of a model or table entry, ``defaults`` where absent."""
    distribution = src.get("distribution", defaults[0])
    if distribution not in DISTRIBUTIONS:
        errors.append(f"{prefix}distribution: must be one of {', '.join(DISTRIBUTIONS)}, got {distribution!r}")
        distribution = defaults[0]
    pooling = src.get("pooling", defaults[1])
    if pooling not in POOLINGS:
        errors.append(f"{prefix}pooling: must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        pooling = defaults[1]
    unique = src.get("unique_in_bag", defaults[2])
    if not isinstance(unique, bool):
        errors.append(f"{prefix}unique_in_bag: must be true or false, got {unique!r}")
        unique = defaults[2]
    return distribution, pooling, unique


def _random_pooling(lookups: Lookups, rows: int, key: str, errors: list[str]) -> Lookups:
    """``pooling = "random"``: bag sizes uniform in ``1 .. min(L, rows)`` (DLRM caps at the table's rows)."""
    if not lookups.fixed:
        errors.append(f"{key}.lookups: pooling = \"random\" needs an integer (the largest bag), "
                      f"got a distribution")
        return lookups
    return Lookups((min(lookups.values[0], rows),), (1.0,), uniform=True)


def _tables_from_entry(t: Any, i: int, alpha: float, errors: list[str],
                       bag_defaults: tuple[str, str, bool] = ("zipf", "fixed", False)) -> list[TableSpec]:
    """The tables of one ``[[tables]]`` entry (``count`` copies); problems are appended to ``errors``."""
    key = f"tables[{i}]"
    if not isinstance(t, dict):
        errors.append(f"{key}: must be a table")
        return []
    for k in sorted(set(t) - _TABLE_KEYS):
        errors.append(f"{key}.{k}: unknown key")
    tname = t.get("name", f"T{i}")
    if not isinstance(tname, str) or not tname:
        errors.append(f"{key}.name: must be a non-empty string, got {tname!r}")
        tname = f"T{i}"
    rows = _count(t.get("rows"), f"{key}.rows", MAX_ROWS, "2**31", errors)
    dim = _count(t.get("dim"), f"{key}.dim", MAX_DIM, str(MAX_DIM), errors)
    dtype = _one_of(t.get("dtype", "float32"), f"{key}.dtype", DTYPE_BYTES, "float32", errors)
    if "lookups" not in t:
        lookups = Lookups((1,), (1.0,))
    else:
        lookups = _parse_lookups(t["lookups"], f"{key}.lookups", errors)
    talpha = t.get("alpha", alpha)
    if not _is_number(talpha) or not 0 < talpha <= MAX_ALPHA:
        errors.append(f"{key}.alpha: must be a number in (0, {MAX_ALPHA:g}], got {talpha!r}")
        talpha = 1.0
    count = t.get("count", 1)
    if not _is_int(count) or not 1 <= count <= MAX_COUNT:
        errors.append(f"{key}.count: must be an integer in [1, {MAX_COUNT}], got {count!r}")
        count = 1
    distribution, pooling, unique = _bag_options(t, f"{key}.", bag_defaults, errors)
    if pooling == "random":
        lookups = _random_pooling(lookups, rows, key, errors)
    names = [tname] if count == 1 else [f"{tname}_{j}" for j in range(count)]
    return [TableSpec(n, rows, dim, dtype, lookups, float(talpha), distribution, unique) for n in names]


def spec_from_dict(data: dict[str, Any], *, where: str = "spec", default_name: str = "custom") -> ModelSpec:
    """Validate a parsed TOML document into a :class:`ModelSpec`.

    Raises
    ------
    SpecError
        Naming ``where`` and every bad field, ``; ``-separated on one line.
    """
    errors: list[str] = []
    if not isinstance(data, dict):
        raise SpecError(f"{where}: must be a TOML table")
    unknown = sorted(set(data) - _MODEL_KEYS)
    for key in unknown:
        errors.append(f"{key}: unknown key")

    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        errors.append(f"name: must be a non-empty string, got {name!r}")
        name = default_name
    description = data.get("description", "")
    if not isinstance(description, str):
        errors.append(f"description: must be a string, got {description!r}")
        description = ""

    batch_size = _count(data.get("batch_size"), "batch_size", MAX_BATCH, str(MAX_BATCH), errors)
    optimizer = _one_of(data.get("optimizer", "sgd"), "optimizer", OPTIMIZERS, "sgd", errors)
    bottom = _check_widths(data.get("bottom_mlp"), "bottom_mlp", errors, 2)
    top = _check_widths(data.get("top_mlp"), "top_mlp", errors, 1)
    alpha = data.get("alpha", 1.05)
    if not _is_number(alpha) or not 0 < alpha <= MAX_ALPHA:
        errors.append(f"alpha: must be a number in (0, {MAX_ALPHA:g}], got {alpha!r}")
        alpha = 1.0
    default_steps = data.get("default_steps", DEFAULT_STEPS)
    if not _is_int(default_steps) or not 1 <= default_steps <= MAX_STEPS:
        errors.append(f"default_steps: must be an integer in [1, {MAX_STEPS}], got {default_steps!r}")
        default_steps = DEFAULT_STEPS

    tables: list[TableSpec] = []
    raw_tables = data.get("tables")
    if not isinstance(raw_tables, list) or not raw_tables:
        errors.append("tables: need at least one [[tables]] entry")
        raw_tables = []
    bag_defaults = _bag_options(data, "", ("zipf", "fixed", False), errors)
    for i, t in enumerate(raw_tables):
        tables += _tables_from_entry(t, i, alpha, errors, bag_defaults)

    seen: set[str] = set()
    for t in tables:
        if t.name in seen:
            errors.append(f"tables: name {t.name!r} is used twice")
        seen.add(t.name)
    if not errors and batch_size * sum(t.lookups.mean for t in tables) > MAX_LOOKUPS_PER_STEP:
        errors.append(f"batch_size x lookups: {batch_size * sum(t.lookups.mean for t in tables):.3g} lookups per "
                      f"step is above {MAX_LOOKUPS_PER_STEP}")
    if errors:
        raise SpecError(f"{where}: " + "; ".join(errors))
    return ModelSpec(
        name=name,
        batch_size=batch_size,
        optimizer=optimizer,
        bottom_mlp=bottom,
        top_mlp=top,
        alpha=float(alpha),
        tables=tuple(tables),
        default_steps=default_steps,
        description=description,
        source=where,
    )


# -- loading --------------------------------------------------------------------


def _preset_dir():
    return resources.files("swaptrace") / "presets"


def list_presets() -> list[str]:
    """Names of the shipped presets, sorted."""
    return sorted(p.name[: -len(".toml")] for p in _preset_dir().iterdir() if p.name.endswith(".toml"))


def _count(value: Any, label: str, hi: int, shown: str, errors: list[str]) -> int:
    """``value`` if it is a whole number in ``[1, hi]``; else 1, with an error naming ``label`` (``hi`` shown as
    ``shown``)."""
    if not _is_int(value) or not 1 <= value <= hi:
        errors.append(f"{label}: must be an integer in [1, {shown}], got {value!r}")
        return 1
    return value


def _one_of(value: Any, label: str, choices, default: str, errors: list[str]) -> str:
    """``value`` if it is one of ``choices``; else ``default``, with an error naming ``label``."""
    if value not in choices:
        errors.append(f"{label}: must be one of {', '.join(choices)}, got {value!r}")
        return default
    return value


def load_spec(name_or_path: str | os.PathLike) -> ModelSpec:
    """Load a preset by name, or a user's TOML file by path.

    Parameters
    ----------
    name_or_path : str or path-like
        A preset name (``swaptrace presets`` lists them) or a path to a
        ``.toml`` file in the same format.

    Raises
    ------
    SpecError
        Unknown preset, unreadable file, TOML syntax error or invalid fields.
    """
    text = str(name_or_path)
    path = Path(text)
    if text.endswith(".toml") or os.sep in text or path.is_file():
        check_named_file(path, "model spec (TOML)", "spec file", SpecError)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise SpecError(f"{path}: cannot read ({exc.strerror})") from None
        return _parse(raw, str(path), path.stem)
    names = list_presets()
    if text not in names:
        raise SpecError(f"unknown preset {text!r}; choose one of {', '.join(names)} or give a .toml file")
    raw = (_preset_dir() / f"{text}.toml").read_bytes()
    return _parse(raw, f"preset {text}", text)


def _parse(raw: bytes, where: str, default_name: str) -> ModelSpec:
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"{where}: not valid TOML ({exc})") from None
    return spec_from_dict(data, where=where, default_name=default_name)
