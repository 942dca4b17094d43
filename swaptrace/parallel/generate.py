"""Generate one access trace as a partitioned dataset, one step range per Dask task.

The generator draws every random number from streams keyed by ``(seed,
step, table, lane)`` (:mod:`swaptrace.workload.generate`), so steps ``[a, b)`` made on
one worker and ``[b, c)`` on another concatenate to exactly the rows of
``[a, c)`` made in one process. Each task writes one part file of the
dataset; the client merges the parts' summaries (``unique_pages`` from the
union of the parts' touched-page bitmaps) and commits the folder atomically
(:class:`swaptrace.core.traceio.DatasetWriter`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from swaptrace.core.traceio import SCHEMA_VERSION, DatasetWriter
from swaptrace.core.version import __version__
from swaptrace.errors import ConfigError
from swaptrace.parallel.cluster import connect, require_dask, single_threaded
from swaptrace.workload.generate import generate_part, trace_metadata
from swaptrace.workload.spec import ModelSpec, load_spec

#: parts per worker by default: a few, so a worker slowed by other load does not hold up the end
PARTS_PER_WORKER = 4


def step_ranges(first_step: int, steps: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``(first_step, steps)`` ranges covering the steps, sizes differing by at most one."""
    parts = max(1, min(parts, steps)) if steps > 0 else 1
    base, extra = divmod(steps, parts)
    out, start = [], first_step
    for i in range(parts):
        n = base + (1 if i < extra else 0)
        out.append((start, n))
        start += n
    return out


def _part_task(spec: ModelSpec, path: str, first_step: int, steps: int, options: dict[str, Any]):
    with single_threaded():
        _, summary, seen = generate_part(spec, path, steps=steps, first_step=first_step, **options)
    return summary, seen


def merge_summaries(summaries: list[dict[str, Any]], seen_packed: np.ndarray | None) -> dict[str, Any]:
    """The whole trace's summary from its parts' (sums; ``unique_pages`` from the OR of the packed bitmaps)."""
    regions = np.sum([np.asarray(s["region_accesses"], dtype=np.int64) for s in summaries], axis=0)
    return {
        "accesses": sum(int(s["accesses"]) for s in summaries),
        "reads": sum(int(s["reads"]) for s in summaries),
        "writes": sum(int(s["writes"]) for s in summaries),
        "unique_pages": int(np.unpackbits(seen_packed).sum()) if seen_packed is not None else 0,
        "region_accesses": regions.tolist(),
    }


def generate_dataset(spec: ModelSpec | str, out: str | os.PathLike, *, steps: int | None = None, seed: int = 0,
                     first_step: int = 0, parts: int | None = None, workers: int | None = None,
                     scheduler: str | None = None, force: bool = False,
                     progress: Callable[[int], Any] | None = None, **options: Any) -> Path:
    """Generate an access trace on a Dask cluster as a dataset folder (one part per step range).

    Parameters
    ----------
    spec : ModelSpec or str
        A spec, a preset name or a TOML path (read here, sent to the workers).
    out : path-like
        The dataset folder to create; it and its parent must be on a path every
        worker sees (the parts are written into a temporary sibling first).
    steps, seed, first_step
        As :func:`swaptrace.workload.generate.generate_trace`.
    parts : int, optional
        Step ranges (tasks); default four per worker.
    workers : int, optional
        Worker processes of the local cluster (default: one per CPU).
    scheduler : str, optional
        Address of an existing scheduler (or ``$DASK_SCHEDULER_ADDRESS``).
    force : bool
        Replace an existing output.
    progress : callable, optional
        Called with the steps of each part as it finishes.
    **options
        ``page_bytes``, ``alpha``, ``optimizer``, ``scatter``, ``reuse``, ``dedup``.

    Returns
    -------
    pathlib.Path
        The dataset folder; :func:`swaptrace.core.traceio.open_trace` reads it as one trace.
    """
    require_dask()
    if not isinstance(spec, ModelSpec):
        spec = load_spec(spec)
    steps = spec.default_steps if steps is None else steps
    meta = trace_metadata(spec, steps=steps, seed=seed, first_step=first_step, **options)  # checks every option
    if parts is not None and parts < 1:
        raise ConfigError(f"--parts must be at least 1, got {parts}")
    options = {**options, "seed": seed}
    with DatasetWriter(out, force=force) as dw, connect(workers, scheduler) as client:
        from distributed import as_completed

        n_workers = max(1, len(client.nthreads()))
        ranges = step_ranges(first_step, steps, parts or PARTS_PER_WORKER * n_workers)
        names = [DatasetWriter.part_name(i, a, n) for i, (a, n) in enumerate(ranges)]
        futures = {client.submit(_part_task, spec, str(dw.tmp / name), a, n, options, pure=False): i
                   for i, (name, (a, n)) in enumerate(zip(names, ranges, strict=True))}
        summaries: list[dict[str, Any] | None] = [None] * len(ranges)
        seen = None
        for fut in as_completed(futures):
            i = futures[fut]
            summary, part_seen = fut.result()
            summaries[i] = summary
            seen = part_seen if seen is None else np.bitwise_or(seen, part_seen)
            fut.release()
            if progress is not None:
                progress(ranges[i][1])
        summary = merge_summaries(summaries, seen)
        meta.update({"kind": "access", "schema_version": SCHEMA_VERSION, "swaptrace_version": __version__,
                     "rows": summary["accesses"], "summary": summary, "partitioned": True})
        part_list = [{"file": name, "rows": int(s["accesses"]), "first_step": a, "steps": n}
                     for name, s, (a, n) in zip(names, summaries, ranges, strict=True)]
        return dw.commit(meta, part_list)
