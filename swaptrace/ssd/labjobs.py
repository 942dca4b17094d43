"""The fio jobs a lab run measures, run on the SSD model instead of a drive.

``swaptrace ssd fit`` (:mod:`swaptrace.ssd.fit.device`) reads four kinds of measurement from a ``fio run``
folder; this module runs the same four on a simulated device, so a fitted device can be scored
against the drive it was fitted to, and the fit itself can be tested on devices whose parameters are
known (:mod:`swaptrace.ssd.fit.roundtrip`):

``read``
    Random reads of one fixed size at queue depth ``depth`` on a sequentially filled drive (the
    ``sweep_read_SIZE`` jobs at depth 1, ``qd_read_SIZE_qdN`` above). Bandwidth over the whole run.
``seq_write``
    Sequential 128 KiB writes at depth 1 over a sequentially filled drive (``write_seq_128k``), two
    user capacities, so the write buffer is full and GC erases the blocks the previous pass left
    invalid. Bandwidth over the second capacity.
``steady_write``
    Random 4 KiB writes at depth 32 after the sequential fill, until the window bandwidth is steady
    for 8 drive writes (``steady_randwrite``, the SNIA-style rounds of ``fio run --steady``). Bandwidth
    over the last 4, and whether its five rounds meet SNIA's criteria (:func:`steady_rounds`).

A device too large to simulate quickly is replaced by a **twin** (:func:`twin`): the same dies,
channels, pages and timings with fewer blocks, the same effective spare (what GC sees), and for reads
the same user capacity modulo one stripe (``program unit x dies``), because where the second fill pass
starts on the stripe decides whether a small read spans one die or two.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from swaptrace.errors import ConfigError
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.run import synth
from swaptrace.ssd.simulate import steady_state

#: largest user capacity simulated as it is; larger devices are run on a twin
TWIN_MAX_BYTES = 256 << 20
#: requests per read job (enough for the queue to reach its steady occupancy many times over)
READ_REQUESTS = {1: 600, 4: 1500, 16: 3000}
SEQ_BS = 128 << 10
STEADY_BS = 4096
STEADY_DEPTH = 32
#: random-write volume of ``steady_write``, in user capacities (drive writes) ...
STEADY_MAX_DRIVE_WRITES = 8.0
#: ... of which the last ones are measured: greedy GC on a small device swings by +-20 % over a quarter
#: of a drive write (dies' GC phases drifting in and out of step), so the mean needs several
STEADY_MEASURED_WRITES = 4.0
#: timeline windows per user capacity in ``steady_write``
STEADY_WINDOWS = 5


@dataclass(frozen=True)
class LabJob:
    """One measurement: ``kind`` (read, seq_write, steady_write), request size (bytes) and queue depth."""

    kind: str
    size_bytes: int
    depth: int

    @property
    def name(self) -> str:
        """The fio job's name in a ``fio jobs`` folder."""
        label = f"{self.size_bytes >> 20}m" if self.size_bytes >= 1 << 20 else f"{self.size_bytes >> 10}k"
        if self.kind == "read":
            return f"sweep_read_{label}" if self.depth == 1 else f"qd_read_{label}_qd{self.depth}"
        return "write_seq_128k" if self.kind == "seq_write" else "steady_randwrite"


#: the measurements of a lab run, as ``fio jobs`` names them
LAB_JOBS = (
    *[LabJob("read", s << 10, 1) for s in (4, 8, 16, 32, 64, 128, 256, 512, 1024)],
    *[LabJob("read", s << 10, q) for s in (4, 16, 64, 256) for q in (4, 16)],
    LabJob("seq_write", SEQ_BS, 1),
    LabJob("steady_write", STEADY_BS, STEADY_DEPTH),
)


def with_effective_spare(cfg: SSDConfig, effective_spare: float, **changes) -> SSDConfig:
    """``cfg`` (with ``changes``) and the physical spare that leaves GC ``effective_spare`` after its reserve.

    Bisection on the spare factor; ``changes`` are applied together with it, so a geometry that is
    only valid with more spare can be asked for.
    """
    lo, hi = 1e-4, 0.95
    best = None
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        try:
            c = dataclasses.replace(cfg, spare_factor=mid, **changes)
        except ConfigError:  # too little spare for the reserve: more is needed
            lo = mid
            continue
        best = c
        if c.effective_spare_factor < effective_spare:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-9:
            break
    if best is None:
        raise ConfigError(f"ssd fit: no spare factor gives an effective spare of {effective_spare:.4f} on {cfg.name}")
    return best


def _blocks_for(cfg: SSDConfig, user_bytes: int) -> int:
    row = cfg.dies * cfg.planes * cfg.pages_per_block * cfg.page_bytes
    return max(1, -(-int(user_bytes / (1.0 - cfg.spare_factor)) // row))


def twin(cfg: SSDConfig, *, for_reads: bool) -> SSDConfig:
    """A device small enough to simulate quickly that behaves like ``cfg`` (module docstring)."""
    if cfg.user_bytes <= TWIN_MAX_BYTES:
        return cfg
    eff = cfg.effective_spare_factor
    small = None
    for blocks in range(_blocks_for(cfg, TWIN_MAX_BYTES), cfg.blocks_per_plane + 1):
        try:
            small = with_effective_spare(cfg, eff, blocks_per_plane=blocks)
            break
        except ConfigError:
            continue
    if small is None:
        return cfg
    if not for_reads:
        return small
    # the same user capacity modulo one stripe: a read then meets the same layout of program units
    stripe = cfg.program_units * cfg.dies
    want = small.user_units - small.user_units % stripe + cfg.user_units % stripe
    if want > small.user_units:
        want -= stripe
    spare = 1.0 - (want + 0.5) / small.physical_units
    try:
        return dataclasses.replace(small, spare_factor=spare)
    except ConfigError:
        return small


def steady_rounds(timeline: dict, rounds: int = 5) -> tuple[float, bool]:
    """Bandwidth (MB/s) over the last :data:`STEADY_MEASURED_WRITES` drive writes, and SNIA's verdict in ``rounds``.

    Those windows are split into ``rounds`` rounds; each
    round's bandwidth is its bytes over its time, and the result is the bytes over the time of all of
    them (a mean of window bandwidths would weight a window by its bytes, not its time, and a small
    window of a bursty GC swings by tens of per cent). Steady per
    :func:`swaptrace.ssd.simulate.steady_state` (range <= 20 %, best-fit excursion <= 10 % of the mean).
    """
    t_end = np.asarray(timeline["t_end_us"], dtype=float)
    nbytes = np.asarray(timeline["window_write_bytes"], dtype=float)
    k = min(int(STEADY_WINDOWS * STEADY_MEASURED_WRITES), len(t_end) - 1)
    t = t_end[-k - 1:]
    b = nbytes[-k:]
    bw = float(b.sum() / (t[-1] - t[0]))
    parts = np.array_split(np.arange(k), rounds)
    per_round = [float(b[p].sum() / (t[p[-1] + 1] - t[p[0]])) for p in parts if len(p)]
    return bw, bool(steady_state(per_round, rounds=len(per_round))["steady"])


def run_job(cfg: SSDConfig, job: LabJob, *, seed: int = 0) -> dict:
    """Simulate one lab job; ``{"bw_mb_s", "iops", "steady"}`` (bandwidth in MB/s, 10^6 bytes/s)."""
    if job.kind == "read":
        dev = twin(cfg, for_reads=True)
        n = READ_REQUESTS.get(job.depth, 3000)
        r = synth(dev, "randread", bs_bytes=job.size_bytes, volume_bytes=n * job.size_bytes, iodepth=job.depth,
                  precondition="seq", seed=seed)
        bw = float(r.summary["throughput_mb_s"])
        return {"bw_mb_s": bw, "iops": bw * 1e6 / job.size_bytes, "steady": None}
    dev = twin(cfg, for_reads=False)
    if job.kind == "seq_write":
        r = synth(dev, "write", bs_bytes=job.size_bytes, volume_bytes=2 * dev.user_bytes, iodepth=job.depth,
                  precondition="seq", seed=seed, window_bytes=max(dev.user_bytes // 8, 1 << 20))
        tl = r.timeline
        half = len(tl["window_write_bytes"]) // 2
        span = tl["t_end_us"][-1] - tl["t_end_us"][half - 1] if half >= 1 else tl["t_end_us"][-1]
        bw = float(tl["window_write_bytes"][half:].sum() / span)
        return {"bw_mb_s": bw, "iops": bw * 1e6 / job.size_bytes, "steady": None}
    if job.kind == "steady_write":
        r = synth(dev, "randwrite", bs_bytes=job.size_bytes,
                  volume_bytes=int(STEADY_MAX_DRIVE_WRITES * dev.user_bytes), iodepth=job.depth,
                  precondition="seq", seed=seed, window_bytes=max(dev.user_bytes // STEADY_WINDOWS, 1 << 16))
        bw, steady = steady_rounds(r.timeline)
        return {"bw_mb_s": bw, "iops": bw * 1e6 / job.size_bytes, "steady": steady,
                "waf": r.summary["steady_waf"]["waf"]}
    raise ConfigError(f"unknown lab job kind {job.kind!r}")
