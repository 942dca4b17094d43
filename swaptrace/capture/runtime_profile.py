"""A runtime profile read off a ``capture -- CMD`` of a training program (its unlimited run).

The capture's baseline run records, from the program's memory cgroup (``memory.stat``) and its
``/proc/PID/smaps`` (``Referenced:`` after ``clear_refs`` at the first mark), the anonymous memory
resident when start-up ends, the peak while training, the anonymous memory referenced during training,
and the page cache the group held. The model's own share of each is known exactly from its spec and from
the access trace ``generate`` draws for the same seed and steps, so the runtime's share is the
difference:

* ``runtime_bytes`` = anonymous resident at the end of start-up − the model's arrays written at start-up
  (tables, dense weights, eagerly allocated optimizer state);
* ``step_bytes`` = training peak − start-up's resident set − the model's arrays first written while
  training (lazily allocated optimizer state, activations);
* ``active_bytes`` = anonymous memory referenced while training − the model's pages the trace touches
  while training − ``step_bytes``, within ``[0, runtime_bytes]``;
* ``file_bytes`` = the most page cache either run's group held while training;
* ``kernel_bytes`` = the group's usage at its peak less anonymous memory and page cache, at least 0.

Readings that contradict the model are refused, not clamped. Each is a reading the model says cannot be:

========================================================  =====================================================
reading                                                   contradiction (the field it would make negative)
========================================================  =====================================================
``unlimited.startup_end.anon``                            below the model's arrays written at start-up
                                                          (``runtime_bytes``): the capture is not of this model
                                                          (``--preset``/``--spec``), or the reading is damaged
``unlimited.peak.training.anon``                          below start-up's reading plus the model's lazily
                                                          written arrays (``step_bytes``)
``unlimited.referenced.anon_referenced_training_bytes``   below the model's pages the trace touches while
                                                          training (each is used in training, so referenced)
========================================================  =====================================================

:func:`derive` raises a one-line :class:`ConfigError` naming the first such reading and why, unless
``allow_clamped``: then each such field is clamped to 0 and the reasons come back, one line each, for the
command to print as warnings (and the TOML notes them). Two bounds are part of the model, not contradictions,
and are stated in the TOML's notes when they apply: ``active_bytes`` is at least 0 (the step buffers may have
been freed before the smaps reading that saw the most) and at most ``runtime_bytes`` (the program may reference
model pages the trace does not touch); ``kernel_bytes`` is at least 0 (usage, anonymous memory and page cache
are each their own peak, of different readings).

``steps`` may not exceed the steps the program marked in the unlimited run (``unlimited.marks``, where the
capture recorded it): the pages the trace touches are counted over those steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from swaptrace.errors import ConfigError
from swaptrace.workload.generate import iter_accesses
from swaptrace.workload.layout import build_layout
from swaptrace.workload.process import EAGER_STATE_OPTIMIZERS, RuntimeProfile
from swaptrace.workload.spec import ModelSpec

#: the write cost a derived profile states: chosen on the fit shapes of the real-training study
#: (analysis/validate_real.py, docs/process.md), where the device keeps up with PyTorch's pace
DEFAULT_WRITE_COST = 1


def model_bytes(spec: ModelSpec, page_bytes: int = 4096) -> dict[str, int]:
    """The model's arrays in bytes, whole pages: ``startup`` (written while it is built) and ``lazy`` (later)."""
    layout = build_layout(spec, page_bytes)
    eager = {"table", "mlp"} | ({"table-state", "mlp-state"} if spec.optimizer in EAGER_STATE_OPTIMIZERS else set())
    startup = sum(r.pages for r in layout.regions if r.kind in eager) * page_bytes
    return {"startup": startup, "lazy": layout.footprint_bytes - startup, "footprint": layout.footprint_bytes}


def touched_bytes(spec: ModelSpec, *, steps: int, seed: int, page_bytes: int = 4096) -> int:
    """Bytes of the model's distinct pages the trace of ``steps`` steps touches."""
    layout = build_layout(spec, page_bytes)
    seen = np.zeros(layout.footprint_pages, dtype=bool)
    for chunk in iter_accesses(spec, steps=steps, seed=seed, page_bytes=page_bytes, copy=False):
        seen[chunk["page"]] = True
    return int(np.count_nonzero(seen)) * page_bytes


def _get(d: dict[str, Any] | None, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict) or d.get(k) is None:
            return None
        d = d[k]
    return d


def _readings(kernel: Any, where: str) -> None:
    """Every memory reading :func:`derive` uses is a number of bytes in range (``swaptrace.core.bounds``), and every
    section holding them an object: a damaged capture is refused in one line naming the reading."""
    from swaptrace.core.bounds import check

    if not isinstance(kernel, dict):
        raise ConfigError(f"{where}: kernel is {kernel!r}, not the readings of a capture")
    for run, section, keys in (("unlimited", ("startup_end",), ("anon", "file", "usage")),
                               ("unlimited", ("peak", "training"), ("anon", "file", "usage")),
                               ("unlimited", ("referenced",), ("anon_referenced_training_bytes",)),
                               ("limited", ("peak", "training"), ("file",))):
        for depth in range(len(section) + 1):  # each level present is an object
            node = _get(kernel, run, *section[:depth])
            if node is not None and not isinstance(node, dict):
                raise ConfigError(f"{where}: kernel {'.'.join((run, *section[:depth]))} is {node!r}, not an object")
        node = _get(kernel, run, *section) or {}
        for key in keys:
            if node.get(key) is not None:
                check("memory_reading_bytes", node[key], f"{where}: kernel {'.'.join((run, *section, key))}")
    marks = _get(kernel, "unlimited", "marks")
    if marks is not None and (isinstance(marks, bool) or not isinstance(marks, int) or marks < 0):
        raise ConfigError(f"{where}: kernel unlimited.marks is {marks!r}, not a count of step marks")


def _contradictions(end: int, peak: int, ref: int | None, mb: dict[str, int], touched: int | None,
                    spec: ModelSpec) -> dict[str, str]:
    """``{field: why}`` for each reading that contradicts the model (the table of the module docstring)."""
    out = {}
    if end < mb["startup"]:
        out["runtime_bytes"] = (f"kernel unlimited.startup_end.anon ({end} B) is below the {mb['startup']} B of "
                                f"{spec.name}'s arrays written at start-up: the capture is not of this model "
                                "(--preset/--spec), or the reading is damaged")
    if peak < end + mb["lazy"]:
        out["step_bytes"] = (f"kernel unlimited.peak.training.anon ({peak} B) is below start-up's {end} B plus the "
                             f"{mb['lazy']} B of {spec.name}'s arrays written while training")
    if ref is not None and touched is not None and ref < touched:
        out["active_bytes"] = (f"kernel unlimited.referenced.anon_referenced_training_bytes ({ref} B) is below the "
                               f"{touched} B of {spec.name}'s pages the trace touches while training")
    return out


def derive(kernel: dict[str, Any], spec: ModelSpec, *, steps: int, seed: int, name: str,
           measured_on: str = "", page_bytes: int = 4096, write_cost: int = DEFAULT_WRITE_COST,
           where: str = "capture", allow_clamped: bool = False) -> tuple[RuntimeProfile, dict[str, str], list[str]]:
    """The runtime profile of a captured program, a note per field saying how it was measured, and the clamps.

    Parameters
    ----------
    kernel : dict
        The ``kernel`` metadata of a ``capture -- CMD`` stream (needs its unlimited run).
    spec, steps, seed
        The model the program trained, for how many steps, with which seed (as given to ``train``).
    name, measured_on
        The profile's name and provenance.
    where : str
        The capture, named in the error when a reading is damaged.
    write_cost : int
        The emulator's write cost for the program (:class:`~swaptrace.workload.process.RuntimeProfile`).
    allow_clamped : bool
        Clamp a field whose reading contradicts the model to 0 instead of refusing it (module docstring).

    Returns
    -------
    profile, notes, clamped
        ``clamped`` holds one line per field clamped (empty unless ``allow_clamped``).
    """
    _readings(kernel, where)
    free = _get(kernel, "unlimited")
    if free is None:
        raise ConfigError("the capture has no unlimited run (captured with --no-baseline); capture again with it")
    end_r, peak_r = _get(free, "startup_end"), _get(free, "peak", "training")
    if end_r is None or peak_r is None or end_r.get("anon") is None or peak_r.get("anon") is None:
        raise ConfigError("the capture's program marked no steps: a runtime profile needs its start-up apart "
                          "(swaptrace.mark_step() or 'swaptrace step N' lines)")
    marks = _get(free, "marks")
    if marks is not None and steps > marks:
        raise ConfigError(f"{where}: {steps} steps asked, but its program marked {marks} in the unlimited run; "
                          f"give --steps {marks} or fewer")
    end, peak = int(end_r["anon"]), int(peak_r["anon"])
    ref = _get(free, "referenced", "anon_referenced_training_bytes")
    ref = None if ref is None else int(ref)
    mb = model_bytes(spec, page_bytes)
    touched = None if ref is None else touched_bytes(spec, steps=steps, seed=seed, page_bytes=page_bytes)
    bad = _contradictions(end, peak, ref, mb, touched, spec)
    if bad and not allow_clamped:
        field, why = next(iter(bad.items()))
        raise ConfigError(f"{where}: {why} ({field} would be negative); pass --allow-clamped to write the profile "
                          "with it clamped to 0")
    runtime = max(0, end - mb["startup"])
    step = max(0, peak - end - mb["lazy"])
    notes = {"runtime_bytes": f"{end} B anonymous at the end of start-up - {mb['startup']} B of the model's arrays "
                              "written then",
             "step_bytes": f"training peak {peak} B - start-up {end} B - {mb['lazy']} B of lazily written model arrays"}
    if ref is None:
        active = runtime
        notes["active_bytes"] = "no Referenced reading: the whole runtime counted active (a bound)"
    else:
        raw = ref - touched - step
        active = min(runtime, max(0, raw))
        notes["active_bytes"] = (f"{ref} B referenced while training - {touched} B of model pages the trace touches "
                                 "- step_bytes" + _bounded(raw, active, "runtime_bytes"))
    limited = _get(kernel, "limited")
    files = [v for v in (_get(peak_r, "file"), _get(limited, "peak", "training", "file")) if v is not None]
    file_bytes = int(max(files)) if files else 0
    raw_kernel = int(peak_r.get("usage") or 0) - peak - int(peak_r.get("file") or 0)
    kernel_bytes = max(0, raw_kernel)
    notes["file_bytes"] = "most page cache either run's group held while training"
    notes["kernel_bytes"] = "group usage at the training peak - anonymous - page cache" + _bounded(raw_kernel,
                                                                                                  kernel_bytes, "")
    for field, why in bad.items():
        notes[field] = f"CLAMPED to 0 (--allow-clamped): {why}; " + notes[field]
    profile = RuntimeProfile(name=name, runtime_bytes=runtime, active_bytes=active, step_bytes=step,
                             file_bytes=file_bytes, kernel_bytes=kernel_bytes, write_cost=write_cost,
                             measured_on=measured_on)
    notes["write_cost"] = ("the device keeps up with a framework's pace: chosen on PyTorch captures "
                           "(docs/process.md), not measured here")
    return profile, notes, [f"{field} clamped to 0: {why}" for field, why in bad.items()]


def _bounded(raw: int, kept: int, upper: str) -> str:
    """The note's words when a field's formula gave ``raw`` but its bound kept ``kept``."""
    if raw == kept:
        return ""
    return f" = {raw} B, bounded to {'0' if raw < kept else upper} ({kept} B)"
