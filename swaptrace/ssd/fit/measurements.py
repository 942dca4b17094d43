"""What a ``fio run`` folder measured, as the device fit reads it, and what one step of the fit found.

A lab run (``swaptrace fio jobs`` then ``fio run``) holds the four kinds of measurement of
:mod:`swaptrace.ssd.labjobs`: random reads by size at depth 1 (``sweep_read_SIZE``), random reads at
deeper queues (``qd_read_SIZE_qdN``), sequential 128 KiB writes (``write_seq_128k``) and steady random
4 KiB writes (``steady_randwrite``, or the sweep's ``sweep_write_4k`` when the run has no steady rounds).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from swaptrace.errors import ConfigError
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.labjobs import STEADY_BS, LabJob

#: engines with one request in flight whatever iodepth says (fio HOWTO, "ioengine")
SYNC_ENGINES = {"psync", "sync", "pvsync", "pvsync2", "vsync"}


@dataclass(frozen=True)
class Measurements:
    """The bandwidths (MB/s) of one lab run, keyed by :class:`~swaptrace.ssd.labjobs.LabJob`.

    Attributes
    ----------
    bw_mb_s : dict
        Bandwidth of each lab job measured, MB/s (10^6 bytes per second).
    size_bytes : int
        Bytes of the target fio used (``fio run --size``): the fitted device's user capacity.
    steady : bool, optional
        Whether the random writes met fio's steady-state criteria (``None``: no random writes).
    steady_source : str
        The fio job instance the random-write bandwidth came from.
    source : str
        The target the run measured.
    """

    bw_mb_s: dict[LabJob, float]
    size_bytes: int
    steady: bool | None = None
    steady_source: str = ""
    source: str = ""

    def reads(self, depth: int) -> dict[int, float]:
        """Request bytes -> bandwidth (MB/s) of the random reads at queue depth ``depth``."""
        return {j.size_bytes: bw for j, bw in self.bw_mb_s.items() if j.kind == "read" and j.depth == depth}

    def of(self, kind: str) -> tuple[LabJob, float] | None:
        """The first job of ``kind`` (``read``, ``seq_write``, ``steady_write``) and its bandwidth (MB/s)."""
        for j, bw in self.bw_mb_s.items():
            if j.kind == kind:
                return j, bw
        return None


@dataclass(frozen=True)
class Identified:
    """What one step of the fit found: the device with it, where each parameter it set came from, notes.

    Attributes
    ----------
    config : SSDConfig
        The device with what the step identified (a new object; the step's input is left as it was).
    sources : dict
        Parameter name -> the measurement (or prior) it came from, for the parameters the step set.
    notes : tuple of str
        Lines for the device TOML's header (bounds, refinements, errors of the fit).
    """

    config: SSDConfig
    sources: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


_NAME = re.compile(r"^(sweep|qd)_read_(\d+)([km])(?:_qd(\d+))?$")


def _job_of(name: str, sweep_depth: int) -> LabJob | None:
    m = _NAME.match(name)
    if m:
        size = int(m.group(2)) << (10 if m.group(3) == "k" else 20)
        return LabJob("read", size, int(m.group(4)) if m.group(4) else sweep_depth)
    if name == "write_seq_128k":
        return LabJob("seq_write", 128 << 10, 1)
    if name in ("steady_randwrite", "sweep_write_4k"):
        return LabJob("steady_write", STEADY_BS, 32 if name == "steady_randwrite" else sweep_depth)
    return None


def measurements_from_rows(rows: list[dict], meta: dict) -> Measurements:
    """The lab measurements in ``fio-results`` rows (and their run metadata).

    Parameters
    ----------
    rows : list of dict
        Rows of a ``results.parquet`` (:func:`swaptrace.fio.results.read_results`): one per job and
        direction, ``bw_bytes`` in bytes per second.
    meta : dict
        Its metadata; ``meta["run"]`` gives the engine (a sweep job's depth), the bytes of the target
        used and fio's steady-state verdicts.

    Raises
    ------
    ConfigError
        The run has none of the jobs the fit needs, or does not record the bytes of its target.
    """
    run = meta.get("run") or {}
    engine = run.get("engine") or {"ioengine": "psync", "iodepth": 1}
    sweep_depth = 1 if engine.get("ioengine", "psync") in SYNC_ENGINES else int(engine.get("iodepth", 1))
    steady_info = ((run.get("preconditioning") or {}).get("steady") or {})
    bw: dict[LabJob, float] = {}
    steady, steady_source = None, ""
    for r in rows:
        job = _job_of(str(r["job"]), sweep_depth)
        if job is None or r["bw_bytes"] <= 0 or r["direction"] != ("read" if job.kind == "read" else "write"):
            continue
        if job.kind == "steady_write":
            if r["job"] == "sweep_write_4k" and any(j.kind == "steady_write" for j in bw):
                continue  # the steady rounds win over the sweep's short random writes
            verdict = steady_info.get(r["instance"]) or {}
            steady = bool(verdict.get("steady")) if r["job"] == "steady_randwrite" else False
            steady_source = r["instance"]
            bw = {j: v for j, v in bw.items() if j.kind != "steady_write"}
        bw[job] = float(r["bw_bytes"]) / 1e6
    if not bw:
        raise ConfigError("ssd fit: the run has none of the jobs the fit reads (sweep_read_*, qd_read_*, "
                          "write_seq_128k, steady_randwrite); run `swaptrace fio run` on a `fio jobs` folder")
    size = int(run.get("size_bytes") or 0)
    if size <= 0:
        raise ConfigError("ssd fit: the run does not record the bytes of the target it used (run.size_bytes)")
    return Measurements(bw, size, steady, steady_source, str(run.get("target", "")))
