"""The SSD model against the drive on the same swap stream (``swaptrace run`` with fio; issue 31).

The fio run of a pipeline folder measured the drive twice over: the lab jobs (request-size sweep,
sequential and random writes, and -- when asked -- queue depths and steady-state rounds) and the
swap stream itself (``replay``: at the stream's own pace; ``replay_no_stall``: back to back). This
module fits an SSD-model device to the first (:func:`swaptrace.ssd.fit.device.fit_run`) and replays
the stream on it the way fio replayed it on the drive, so the two can be set side by side:

* the same target: the fitted device's user capacity is the bytes fio used (``--fio-size``), the
  stream's offsets wrapped onto it (``fit="modulo"``, fio's remapping in :mod:`swaptrace.fio.iolog`);
* the same state: filled sequentially (fio's ``precondition`` job ran before the sweep groups; the
  replay group follows them on the same target);
* the same engine: one request in flight (the pipeline's fio jobs use ``psync``); ``replay`` issues
  each request no earlier than its ``t_us`` (fio's ``wait`` lines), ``replay_no_stall`` back to back.

The equivalent command is ``swaptrace ssd replay STREAM --device fitted-device.toml --fit modulo
--iodepth 1 --precondition seq [--timestamps]``.

Compared, per replay: read and write bandwidth (bytes of that direction over the run's time, MB/s),
the time the run took, and the mean time per request (run time / requests: at depth 1 the mean
latency plus what fio spends between requests); fio's completion-latency percentiles per direction
are shown beside the model's over all requests (the model's histogram does not split directions).
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

from swaptrace.errors import TraceFileError

#: fio job -> the model's replay options
REPLAYS = {"replay_no_stall": {"use_timestamps": False}, "replay": {"use_timestamps": True}}
#: what the pipeline's fio engine keeps in flight (psync: one request)
DEPTH = 1


def _measured(rows: list[dict], job: str) -> dict[str, Any] | None:
    """fio's numbers for one replay job: per-direction bandwidth and percentiles, run time, requests."""
    mine = [r for r in rows if r["job"] == job and r.get("kind") != "steady"]
    if not mine:
        return None
    out: dict[str, Any] = {"runtime_s": max(float(r["runtime_ms"] or 0.0) for r in mine) / 1e3,
                           "requests": int(sum(int(r["ios"] or 0) for r in mine)),
                           "trace_duration_s": max(float(r.get("trace_duration_ms") or 0.0) for r in mine) / 1e3}
    for r in mine:
        d = r["direction"]
        out[f"{d}_mb_s"] = float(r["io_bytes"]) / 1e6 / out["runtime_s"] if out["runtime_s"] > 0 else math.nan
        out[f"{d}_p50_us"], out[f"{d}_p99_us"] = float(r["clat_p50_us"]), float(r["clat_p99_us"])
    out["mean_request_us"] = out["runtime_s"] * 1e6 / out["requests"] if out["requests"] else math.nan
    return out


def _modelled(stream: os.PathLike, cfg, use_timestamps: bool) -> dict[str, Any]:
    from swaptrace.ssd.run import replay

    s = replay(stream, cfg, iodepth=DEPTH, use_timestamps=use_timestamps, precondition="seq", fit="modulo").summary
    t_s = float(s["simulated_time_us"] or 0.0) / 1e6
    lat = s.get("latency_us") or {}
    return {"runtime_s": t_s, "requests": int(s["requests"]), "read_mb_s": s["read_mb_s"],
            "write_mb_s": s["write_mb_s"], "mean_request_us": t_s * 1e6 / s["requests"] if s["requests"] else math.nan,
            "all_p50_us": lat.get("p50"), "all_p99_us": lat.get("p99"), "waf": s.get("waf")}


def _error(model, measured) -> float | None:
    if model is None or measured is None or not measured or not math.isfinite(measured) or not math.isfinite(model):
        return None
    return model / measured - 1.0


def job_runtimes(rows: list[dict]) -> list[dict[str, Any]]:
    """Every fio job of the run, once, with its group and run time in seconds (the longer direction)."""
    seen: dict[str, dict[str, Any]] = {}
    for r in rows:
        j = seen.setdefault(r["instance"], {"job": r["instance"], "group": r.get("group", ""), "runtime_s": 0.0})
        j["runtime_s"] = max(j["runtime_s"], float(r["runtime_ms"] or 0.0) / 1e3)
    return list(seen.values())


def compare(run_dir: os.PathLike, stream: os.PathLike, device_out: os.PathLike, *, quick: bool = True,
            say=None) -> dict[str, Any]:
    """Fit the device of ``run_dir``, write it to ``device_out`` and compare the stream's replays.

    Returns the JSON-able comparison (module docstring): the fitted device, each parameter's source,
    the fit's notes, the fio jobs that ran, and per replay job the measured, modelled and relative
    error of each quantity.
    """
    from swaptrace.fio import results as resmod
    from swaptrace.ssd.fit.device import fit_run, residuals, save_fit
    from swaptrace.ssd.fit.writes import with_gc_room

    say = say or (lambda _m: None)
    rows, _meta = resmod.read_results(Path(run_dir))
    res = fit_run(run_dir, name="fitted", say=say, quick=quick)
    wanted = {job: _measured(rows, job) for job in REPLAYS}
    wanted = {job: meas for job, meas in wanted.items() if meas is not None}
    if not wanted:
        raise TraceFileError(f"{run_dir}: the fio run has no replay job to compare the model with")
    roomy, modelled, room = with_gc_room(
        res.config, lambda c: {job: _modelled(stream, c, REPLAYS[job]["use_timestamps"]) for job in wanted},
        "the swap stream's replay")
    if room is not None:  # blocks were added: the residuals are those of the device written
        res = dataclasses.replace(res, config=roomy, notes=[*res.notes, room],
                                  residuals=residuals(roomy, res.measurements))
    save_fit(res, run_dir, device_out, force=True)
    replays = []
    for job, meas in wanted.items():
        opts, model = REPLAYS[job], modelled[job]
        quantities = []
        for key, label in (("read_mb_s", "read MB/s"), ("write_mb_s", "write MB/s"), ("runtime_s", "run time, s"),
                           ("mean_request_us", "mean time per request, us")):
            m, p = meas.get(key), model.get(key)
            quantities.append({"quantity": label, "measured": m, "model": p, "error": _error(p, m)})
        for d in ("read", "write"):
            for q in ("p50", "p99"):
                if f"{d}_{q}_us" in meas:
                    quantities.append({"quantity": f"{d} {q} latency, us (model: all requests)",
                                       "measured": meas[f"{d}_{q}_us"], "model": model[f"all_{q}_us"],
                                       "error": _error(model[f"all_{q}_us"], meas[f"{d}_{q}_us"])})
        replays.append({"job": job, "use_timestamps": opts["use_timestamps"], "requests": meas["requests"],
                        "quantities": quantities, "model_waf": model["waf"]})
        say(f"{job}: " + ", ".join(f"{q['quantity'].split(',')[0]} {q['error']:+.0%}" for q in quantities[:2]
                                   if q["error"] is not None))
    cfg = res.config
    return {"device": str(device_out), "quick": quick, "sources": res.sources, "notes": res.notes,
            "residuals": res.residuals, "steady": res.measurements.steady if res.measurements else None,
            "fitted": {"channels": cfg.channels, "dies_per_channel": cfg.dies_per_channel,
                       "program_unit_bytes": cfg.page_bytes * cfg.planes, "read_us": cfg.read_us,
                       "program_us": cfg.program_us, "channel_mb_s": cfg.channel_mb_s, "host_mb_s": cfg.host_mb_s,
                       "effective_op": cfg.effective_op, "user_bytes": cfg.user_bytes},
            "jobs": job_runtimes(rows), "replays": replays}


def _num(v, fmt: str = ".1f") -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def load_summary(path: str | os.PathLike) -> dict[str, Any] | None:
    """A ``model-vs-fio.json`` (:func:`compare`'s summary, or ``{"error": ...}``), checked by rendering it: a
    damaged or hand-edited one is a one-line error naming the file, never a TypeError in the report."""
    from swaptrace.core.inputs import read_json

    data = read_json(path, "model-vs-fio summary")
    try:
        if data is not None and not isinstance(data, dict):
            raise TypeError("not an object")
        markdown_lines(data)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        raise TraceFileError(f"{path}: damaged or not a model-vs-fio summary ({type(exc).__name__}: {exc})") from None
    return data


def markdown_lines(data: dict[str, Any] | None) -> list[str]:
    """The report's section: the fitted device, the fio jobs that ran, and model vs fio on the stream."""
    if not data:
        return []
    lines = ["## The SSD model fitted to this drive, against fio on the same stream", ""]
    if "error" in data:
        return lines + [f"No device was fitted: {data['error']}", ""]
    f = data["fitted"]
    lines += [f"Device fitted to the fio run (`{Path(data['device']).name}`"
              f"{', quick fit' if data.get('quick') else ''}): {f['channels']} channels x {f['dies_per_channel']} "
              f"dies, program unit {f['program_unit_bytes'] >> 10} KiB, tR {f['read_us']:.0f} us, tPROG "
              f"{f['program_us']:.0f} us, channel {f['channel_mb_s']:.0f} MB/s, link {f['host_mb_s']:.0f} MB/s, "
              f"effective OP {f['effective_op']:.1%} on {f['user_bytes'] / 2**20:.0f} MiB.", "",
              "What identified each parameter (the rest are priors; `swaptrace ssd fit`, docs/ssd.md):", ""]
    for key in ("channels", "dies_per_channel", "page_bytes", "read_us", "channel_mb_s", "host_mb_s", "program_us",
                "spare_factor"):
        lines.append(f"- {key}: {data['sources'].get(key, 'prior')}")
    if data.get("steady") is False:
        lines.append("- the random writes were NOT in steady state: the spare is an upper bound")
    lines += ["", "| fio job | group | run time, s |", "|---|---|---:|"]
    lines += [f"| {j['job']} | {j['group']} | {j['runtime_s']:.2f} |" for j in data["jobs"]]
    lines += ["", "| replay | quantity | fio on the drive | fitted model | error |", "|---|---|---:|---:|---:|"]
    for r in data["replays"]:
        for q in r["quantities"]:
            err = "n/a" if q["error"] is None else f"{q['error']:+.0%}"
            lines.append(f"| {r['job']} | {q['quantity']} | {_num(q['measured'])} | {_num(q['model'])} | {err} |")
    lines += ["", "`replay` issues each request at the stream's time, `replay_no_stall` back to back; both with "
              "one request in flight, on the fio target filled sequentially, offsets wrapped onto it "
              "(swaptrace/ssd/fit/check.py). The model's residuals on the fio jobs it was fitted to: "
              + ", ".join(f"{k} {v:+.0%}" for k, v in data.get("residuals", {}).items()) + ".", ""]
    return lines
