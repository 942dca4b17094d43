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
* ``kernel_bytes`` = the group's usage at its peak less anonymous memory and page cache.
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


def derive(kernel: dict[str, Any], spec: ModelSpec, *, steps: int, seed: int, name: str,
           measured_on: str = "", page_bytes: int = 4096,
           write_cost: int = DEFAULT_WRITE_COST, where: str = "capture") -> tuple[RuntimeProfile, dict[str, str]]:
    """The runtime profile of a captured program, and a note per field saying how it was measured.

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
    """
    _readings(kernel, where)
    free = _get(kernel, "unlimited")
    if free is None:
        raise ConfigError("the capture has no unlimited run (captured with --no-baseline); capture again with it")
    end = _get(free, "startup_end")
    peak = _get(free, "peak", "training")
    ref = _get(free, "referenced", "anon_referenced_training_bytes")
    if end is None or peak is None:
        raise ConfigError("the capture's program marked no steps: a runtime profile needs its start-up apart "
                          "(swaptrace.mark_step() or 'swaptrace step N' lines)")
    mb = model_bytes(spec, page_bytes)
    runtime = max(0, int(end["anon"]) - mb["startup"])
    step = max(0, int(peak["anon"]) - int(end["anon"]) - mb["lazy"])
    notes = {"runtime_bytes": f"{int(end['anon'])} B anonymous at the end of start-up - {mb['startup']} B of the "
                              "model's arrays written then",
             "step_bytes": f"training peak {int(peak['anon'])} B - start-up {int(end['anon'])} B - {mb['lazy']} B "
                           "of lazily written model arrays"}
    if ref is None:
        active = runtime
        notes["active_bytes"] = "no Referenced reading: the whole runtime counted active (a bound)"
    else:
        model_touched = touched_bytes(spec, steps=steps, seed=seed, page_bytes=page_bytes)
        active = int(min(runtime, max(0, int(ref) - model_touched - step)))
        notes["active_bytes"] = (f"{int(ref)} B referenced while training - {model_touched} B of model pages the "
                                 f"trace touches - step_bytes")
    limited = _get(kernel, "limited")
    files = [v for v in (_get(free, "peak", "training", "file"), _get(limited, "peak", "training", "file"))
             if v is not None]
    file_bytes = int(max(files)) if files else 0
    kernel_bytes = max(0, int(peak.get("usage", 0)) - int(peak["anon"]) - int(peak.get("file", 0)))
    notes["file_bytes"] = "most page cache either run's group held while training"
    notes["kernel_bytes"] = "group usage at the training peak - anonymous - page cache"
    profile = RuntimeProfile(name=name, runtime_bytes=runtime, active_bytes=active, step_bytes=step,
                             file_bytes=file_bytes, kernel_bytes=kernel_bytes, write_cost=write_cost,
                             measured_on=measured_on)
    notes["write_cost"] = ("the device keeps up with a framework's pace: chosen on PyTorch captures "
                           "(docs/process.md), not measured here")
    return profile, notes
