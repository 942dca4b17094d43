"""Each swap design's stream priced by the time model: predicted step time and slowdown per design."""

from __future__ import annotations

from dataclasses import replace

from swaptrace.timing import model as timing


def with_step_times(cmp, step_compute_us: float = 0.0):
    """A design comparison with each design's predicted step time and slowdown (``step_time_ms``, ``slowdown``).

    Each design's stream is priced by the time model (:func:`swaptrace.timing.model.simulate`) on the
    SSD model's latency table (:func:`swaptrace.timing.model.device_from_ssd`) of the drive the streams
    were replayed on, with the write amplification the model measured on that stream (``device_waf``;
    1 on the zoned device), so a design that spares the drive its GC is credited with it; None
    (nothing written) keeps the model's steady-state prediction. The costs are given, as in
    ``swaptrace sweep``: every step computes ``step_compute_us`` (0: the step time is paging time
    alone and there is no slowdown) and the kernel CPU costs are :class:`~swaptrace.timing.model.CpuCosts`'
    defaults. Without a device model (``cmp.ssd`` None) the comparison is returned unchanged.
    """
    if cmp.ssd is None:
        return cmp
    for row in cmp.rows:
        name = row["design"]
        req = timing.read_stream(cmp.runs[name].path)
        waf = cmp.devices[name].get("waf")
        dev = timing.device_from_ssd(cmp.ssd, waf=None if waf is None else max(float(waf), 1.0))
        res = timing.simulate(req, dev, timing.given_compute(req.nsteps, step_compute_us), timing.CpuCosts())
        row.update(step_time_ms=res.total_us / 1e3 / max(req.nsteps, 1), slowdown=res.slowdown)
    return replace(cmp, step_compute_us=float(step_compute_us))
