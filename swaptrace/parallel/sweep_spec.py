"""What a sweep is: its points and how a sweep TOML file or the command's options describe them.

Kept apart from :mod:`swaptrace.parallel.sweep` (which runs them with Dask and writes Parquet) so that reading
and checking a sweep's description loads neither: ``swaptrace sweep`` refuses a bad value before Dask starts.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from swaptrace.core.inputs import read_toml
from swaptrace.core.units import parse_bytes
from swaptrace.errors import ConfigError, TraceFileError

DEFAULT_DEVICE = "nvme-tlc"
#: keys of a sweep TOML file (top level or under ``[sweep]``)
SPEC_KEYS = ("traces", "presets", "steps", "seed", "memory", "memory_fractions", "policies", "devices",
             "step_compute_us")


@dataclass(frozen=True)
class SweepPoint:
    """One point: a trace (a file or dataset path, or a preset generated with ``steps`` and ``seed``),
    a budget (``memory_bytes`` or ``memory_fraction`` of the footprint), a policy and a device; its step
    time is predicted with ``step_compute_us`` of compute per step (:func:`point_step_time_us`)."""

    trace: str | None
    preset: str | None
    steps: int | None
    seed: int
    memory_bytes: int | None
    memory_fraction: float | None
    policy: str
    device: str
    design: str | None = None
    step_compute_us: float = 0.0

    @property
    def key(self) -> str:
        """16 hex digits of SHA-256 over the parameters (the result file's name)."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def input_name(self) -> str:
        """File name of a preset's generated trace under ``_inputs/``."""
        return f"{self.preset}-steps{self.steps}-seed{self.seed}.access.parquet"


@dataclass(frozen=True)
class SweepSpec:
    """The axes of a sweep; :meth:`points` is their product (traces first, then presets)."""

    traces: tuple[str, ...] = ()
    presets: tuple[str, ...] = ()
    steps: int | None = None
    seed: int = 0
    memory: tuple[int, ...] = ()
    memory_fractions: tuple[float, ...] = ()
    policies: tuple[str, ...] = ("linux",)
    devices: tuple[str, ...] = (DEFAULT_DEVICE,)
    #: compute time of every training step without paging, microseconds (0: step time is pure paging time)
    step_compute_us: float = 0.0

    def points(self) -> list[SweepPoint]:
        inputs: list[tuple[str | None, str | None, int | None]] = [(str(Path(t).resolve()), None, None)
                                                                   for t in self.traces]
        inputs += [(None, p, self.steps) for p in self.presets]
        budgets = [(m, None) for m in self.memory] + [(None, f) for f in self.memory_fractions]
        return [SweepPoint(trace=t, preset=p, steps=s, seed=self.seed, memory_bytes=m, memory_fraction=f,
                           policy=pol, device=dev, step_compute_us=self.step_compute_us)
                for (t, p, s), (m, f), pol, dev in itertools.product(inputs, budgets, self.policies, self.devices)]

    def check(self) -> None:
        """Refuse an empty axis, an unknown policy, preset or device, or a bad budget (before any task runs)."""
        from swaptrace.emulate.config import POLICIES
        from swaptrace.ssd.config import load_device
        from swaptrace.workload.spec import load_spec

        if not self.traces and not self.presets:
            raise ConfigError("sweep: give at least one trace or preset")
        if not self.memory and not self.memory_fractions:
            raise ConfigError("sweep: give at least one budget (memory or memory fraction)")
        if not self.policies or not self.devices:
            raise ConfigError("sweep: give at least one policy and one device")
        for f in self.memory_fractions:
            if not 0.0 < f <= 1.0:
                raise ConfigError(f"sweep: memory fraction must be in (0, 1], got {f}")
        for m in self.memory:
            if m <= 0:
                raise ConfigError(f"sweep: memory must be positive, got {m}")
        for pol in self.policies:
            if pol not in POLICIES:
                raise ConfigError(f"sweep: unknown policy {pol!r}; choose from {', '.join(POLICIES)}")
        for dev in self.devices:
            load_device(dev)
        for preset in self.presets:
            load_spec(preset)
        if not (isinstance(self.step_compute_us, int | float) and math.isfinite(self.step_compute_us)
                and self.step_compute_us >= 0):
            raise ConfigError(f"sweep: step compute time must be a number >= 0 (us), got {self.step_compute_us!r}")
        if self.steps is not None and self.steps < 1:
            raise ConfigError(f"sweep: steps must be at least 1, got {self.steps}")
        self._check_budgets()

    def _check_budgets(self) -> None:
        """Every input x budget x policy as the emulator will resolve it (a budget above a trace's footprint is
        refused here in one line, not by a task on a worker after the cluster started)."""
        from swaptrace.core.traceio import open_trace
        from swaptrace.emulate import EmulatorConfig
        from swaptrace.workload.layout import build_layout
        from swaptrace.workload.spec import load_spec

        metas = [(t, open_trace(t, "access").meta) for t in self.traces]
        metas += [(f"preset {p}", {"page_bytes": 4096, "footprint_pages": build_layout(load_spec(p)).footprint_pages})
                  for p in self.presets]
        for where, meta in metas:
            for m in self.memory:
                for pol in self.policies:
                    EmulatorConfig.resolve(meta, memory_bytes=m, policy=pol, source=where)
            for f in self.memory_fractions:
                for pol in self.policies:
                    EmulatorConfig.resolve(meta, memory_fraction=f, policy=pol, source=where)


def load_sweep_spec(path: str | os.PathLike, **overrides: Any) -> SweepSpec:
    """Read a sweep TOML file (docs/sweep.md); non-empty ``overrides`` (CLI options) take precedence."""
    try:
        raw = read_toml(path, "sweep TOML")
    except TraceFileError as exc:
        raise ConfigError(str(exc)) from None
    raw = raw.get("sweep", raw)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: [sweep] is not a table")
    unknown = sorted(set(raw) - set(SPEC_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(SPEC_KEYS)}")
    values = {k: v for k, v in raw.items()}
    values.update({k: v for k, v in overrides.items() if v not in (None, ())})
    return spec_from_values(**values)


def spec_from_values(**values: Any) -> SweepSpec:
    """A :class:`SweepSpec` from plain values (memory sizes as ``"64MiB"`` or bytes)."""
    def tup(name: str, kinds: tuple[type, ...], conv: Callable[[Any], Any]) -> tuple:
        v = values.get(name) or ()
        items = [v] if isinstance(v, str | int | float) else v
        if not isinstance(items, list | tuple) or any(isinstance(x, bool) or not isinstance(x, kinds) for x in items):
            raise ConfigError(f"sweep: {name} must be a list of {' or '.join(k.__name__ for k in kinds)}, "
                              f"got {v!r}")
        return tuple(conv(x) for x in items)

    def whole(name: str, default: int | None) -> int | None:
        v = values.get(name)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"sweep: {name} must be a whole number, got {v!r}")
        return v

    defaults = SweepSpec()
    return SweepSpec(
        traces=tup("traces", (str,), str), presets=tup("presets", (str,), str),
        steps=whole("steps", None), seed=whole("seed", 0) or 0,
        memory=tup("memory", (str, int), lambda x: parse_bytes(x, "memory", positive=True)),
        memory_fractions=tup("memory_fractions", (int, float), float),
        policies=tup("policies", (str,), str) or defaults.policies,
        devices=tup("devices", (str,), str) or defaults.devices,
        step_compute_us=_float(values.get("step_compute_us") or 0.0, "step_compute_us"),
    )


def _float(v: Any, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ConfigError(f"sweep: {name} must be a number, got {v!r}")
    return float(v)
