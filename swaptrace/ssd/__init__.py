"""SSD model: page-mapped FTL with garbage collection, write amplification and die/channel timing.

Library entry points::

    from swaptrace.ssd import load_device, replay, synth
    cfg = load_device("nvme-tlc", capacity_bytes=4 << 30)
    result = synth(cfg, "randwrite", bs_bytes=4096, volume_bytes=16 << 30)
    result.waf, result.summary["throughput_mb_s"]

``swaptrace.ssd.analytic`` holds Desnoyers' closed forms (SYSTOR 2012) that
validate the simulator; ``swaptrace.ssd.thesis`` reproduces the thesis's
three SSD effects.
"""

from swaptrace.core.lazy import lazy_names

#: each module -> the names it defines; each loaded on first use, so importing one light module of the package
#: (its options, its constants) does not load the rest (swaptrace.core.lazy)
_NAMES = {
    "config": ("DEVICES", "GC_POLICIES", "SSDConfig", "load_device", "spare_from_op"),
    "run": ("SSDResult", "read_timeline", "replay", "simulate_chunks", "synth"),
    "simulate": ("Counters", "Simulator", "ftl_waf"),
    "workloads": ("PATTERNS", "synthetic_requests"),
}
__getattr__, __dir__ = lazy_names(globals(), _NAMES)

__all__ = [
    "DEVICES", "GC_POLICIES", "PATTERNS", "Counters", "SSDConfig", "SSDResult", "Simulator", "ftl_waf",
    "load_device", "read_timeline", "replay", "simulate_chunks", "spare_from_op", "synth", "synthetic_requests",
]
