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

from swaptrace.ssd.config import DEVICES, GC_POLICIES, SSDConfig, load_device, spare_from_op
from swaptrace.ssd.run import SSDResult, read_timeline, replay, simulate_chunks, synth
from swaptrace.ssd.simulate import Counters, Simulator, ftl_waf
from swaptrace.ssd.workloads import PATTERNS, synthetic_requests

__all__ = [
    "DEVICES", "GC_POLICIES", "PATTERNS", "Counters", "SSDConfig", "SSDResult", "Simulator", "ftl_waf",
    "load_device", "read_timeline", "replay", "simulate_chunks", "spare_from_op", "synth", "synthetic_requests",
]
