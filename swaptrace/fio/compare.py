"""Measured vs modelled ratios: the two claims the fio experiments test.

The thesis (README.md, "The thesis reproduced") reports that 128 KiB requests gave **1.75x**
the bandwidth of the swap pattern and that sequential writes gave **4.37x**
the write bandwidth of the swap pattern. The SSD model (``swaptrace ssd
thesis``, contracts.md) predicts the same two numbers as
``request_size_gain`` and ``sequential_write_gain``.

Measured definitions (from a ``fio-results`` table):

``request_size_gain``
    Time to move the stream's bytes (its read and write volumes ``B_d``) with
    its own size mix, over the time at 128 KiB requests:
    ``sum_d B_d / bw(sweep_d_mix)  /  sum_d B_d / bw(sweep_d_128k)``.
    Directions without both jobs are left out; per-direction gains
    ``bw(sweep_d_128k) / bw(sweep_d_mix)`` are reported too.
``sequential_write_gain``
    ``bw(write_seq) / bw(write_rand)``: the stream's write sizes written
    sequentially vs at random offsets (``sequential_write_gain_128k`` uses
    128 KiB sequential writes instead).
``bandwidth_decline``
    Mean bandwidth of ``write_rand`` over the last quarter of its bandwidth
    log windows / over the first quarter: below 1 when the drive slows as it
    is written (garbage collection on an SSD). Needs the bandwidth log.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from swaptrace.core.inputs import read_json
from swaptrace.errors import ConfigError, TraceFileError

THESIS = {"request_size_gain": 1.75, "sequential_write_gain": 4.37, "bandwidth_decline": None}
GAIN_REQUEST_BYTES = 128 << 10


def _bw(rows: list[dict], job: str, direction: str) -> float | None:
    for r in rows:
        if r["job"] == job and r["direction"] == direction and r["bw_bytes"] > 0:
            return float(r["bw_bytes"])
    return None


def measured_ratios(rows: list[dict], manifest: dict | None = None) -> dict:
    """The ratios measured in a run (keys absent when their jobs did not run)."""
    out: dict = {}
    rp = (manifest or {}).get("replay") or {}
    volume = {"read": float(rp.get("read_bytes") or 0), "write": float(rp.get("write_bytes") or 0)}
    if not any(volume.values()):
        volume = {"read": 1.0, "write": 1.0}
    t_mix = t_big = 0.0
    for d in ("read", "write"):
        mix = _bw(rows, f"sweep_{d}_mix", d)
        big = _bw(rows, f"sweep_{d}_128k", d)
        if mix and big:
            out[f"request_size_gain_{d}"] = big / mix
            t_mix += volume[d] / mix
            t_big += volume[d] / big
    if t_big > 0:
        out["request_size_gain"] = t_mix / t_big
    seq = _bw(rows, "write_seq", "write")
    rand = _bw(rows, "write_rand", "write")
    if seq and rand:
        out["sequential_write_gain"] = seq / rand
    seq_big = _bw(rows, "write_seq_128k", "write")
    if seq_big and rand:
        out["sequential_write_gain_128k"] = seq_big / rand
    for d in ("read", "write"):
        r = next((r for r in rows if r["job"] == "replay" and r["direction"] == d), None)
        if r and r["trace_duration_ms"] and not math.isnan(r["trace_duration_ms"]):
            out["replay_runtime_over_trace"] = r["runtime_ms"] / max(r["trace_duration_ms"], 1e-9)
            break
    return out


def bandwidth_decline(bw_bytes) -> float | None:
    """Mean of the last quarter of a bandwidth series over the mean of its first quarter."""
    import numpy as np

    bw = np.asarray(bw_bytes, dtype=np.float64)
    q = len(bw) // 4
    if q < 1 or bw[:q].mean() <= 0:
        return None
    return float(bw[-q:].mean() / bw[:q].mean())


def load_model(path: str | os.PathLike) -> dict:
    """The SSD model's JSON (``swaptrace ssd thesis --json``), checked for the two ratios."""
    p = Path(path)
    try:
        model = read_json(p, "model JSON", "is not JSON (expected `swaptrace ssd thesis --json` output)")
    except TraceFileError as exc:
        raise ConfigError(f"--model {exc}") from None
    wanted = ("request_size_gain", "sequential_write_gain")
    if not isinstance(model, dict) or not any(k in model for k in wanted):
        raise ConfigError(f"--model {p}: has neither {' nor '.join(wanted)}")
    for k in wanted:
        v = model.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1e6):
            raise ConfigError(f"--model {p}: {k} = {v!r} is not a positive ratio")
    return model


def compare_with_model(rows: list[dict], meta: dict, model: dict | None) -> list[dict]:
    """Rows ``{ratio, measured, modelled, thesis}`` for each ratio (``None`` where unknown)."""
    measured = meta.get("ratios") or measured_ratios(rows)
    out = []
    for key, thesis in THESIS.items():
        m = model.get(key) if model else None
        out.append(
            {
                "ratio": key,
                "measured": measured.get(key),
                "modelled": float(m) if isinstance(m, int | float) else None,
                "thesis": thesis,
            }
        )
    return out


def format_comparison(table: list[dict], target: str | None = None) -> str:
    """Text table of :func:`compare_with_model` rows."""

    def f(v):
        return "-" if v is None else f"{v:.2f}x"

    lines = [f"{'ratio':<24} {'measured':>9} {'modelled':>9} {'thesis':>8}"]
    for r in table:
        lines.append(f"{r['ratio']:<24} {f(r['measured']):>9} {f(r['modelled']):>9} {f(r['thesis']):>8}")
    if target:
        lines.append(f"measured on {target}; a disk that is not an SSD shows its own behaviour, not an SSD's")
    return "\n".join(lines)
