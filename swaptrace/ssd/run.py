"""Drive the SSD model with a swap I/O stream or a synthetic pattern; write the timeline.

Output kind ``ssd-timeline``: one row per window of written volume (see
:mod:`swaptrace.ssd.simulate`), with the run summary under ``summary`` in the
file's swaptrace metadata:

==================== ======= ===========================================================
window               uint32  window number
host_written_bytes   uint64  host bytes written from the start to the end of the window
window_write_bytes   uint64  host bytes written in the window
window_read_bytes    uint64  host bytes read in the window
flash_write_bytes    uint64  flash bytes programmed in the window (host + GC moves)
waf                  float64 flash_write_bytes / window_write_bytes
bandwidth_mb_s       float64 host bytes (read + written) / window's simulated time, MB/s
write_mb_s, read_mb_s float64 the same for writes and reads alone
gc_erases            uint64  blocks erased in the window
requests             uint64  requests completed in the window
mean_latency_us      float64 mean request latency (issue to completion)
p99_latency_us       float64 99th percentile request latency
t_end_us             float64 simulated time at the end of the window
==================== ======= ===========================================================

Mapping a stream onto the device: swap byte offsets become 4 KiB map units
from the start of the SSD's user space. If the stream's device (or its largest
offset) is larger than the SSD's user capacity, ``fit="error"`` (default)
refuses, ``fit="modulo"`` wraps units modulo the user space, ``fit="scale"``
multiplies unit numbers by ``user / stream`` (keeps spatial order, merges
neighbours).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from swaptrace.core import traceio
from swaptrace.errors import ConfigError, TraceFileError
from swaptrace.ssd.analytic import predict_config
from swaptrace.ssd.choices import FITS  # noqa: F401  (re-exported)
from swaptrace.ssd.config import SSDConfig
from swaptrace.ssd.simulate import LatencyHistogram, Simulator, WindowCollector, steady_state, steady_waf
from swaptrace.ssd.steady import Background
from swaptrace.ssd.steady import layout as steady_layout
from swaptrace.ssd.workloads import hot_units, synthetic_requests

TIMELINE_SCHEMA = pa.schema(
    [
        ("window", pa.uint32()),
        ("host_written_bytes", pa.uint64()),
        ("window_write_bytes", pa.uint64()),
        ("window_read_bytes", pa.uint64()),
        ("flash_write_bytes", pa.uint64()),
        ("waf", pa.float64()),
        ("bandwidth_mb_s", pa.float64()),
        ("write_mb_s", pa.float64()),
        ("read_mb_s", pa.float64()),
        ("gc_erases", pa.uint64()),
        ("requests", pa.uint64()),
        ("mean_latency_us", pa.float64()),
        ("p99_latency_us", pa.float64()),
        ("t_end_us", pa.float64()),
    ]
)
traceio.register_kind("ssd-timeline", TIMELINE_SCHEMA)



@dataclass(frozen=True)
class SSDResult:
    """What one model run produced.

    Attributes
    ----------
    path : pathlib.Path or None
        The timeline file, if one was written.
    summary : dict
        Run summary (also stored in the file's metadata).
    timeline : dict of numpy arrays
        The timeline columns.
    """

    path: os.PathLike | None
    summary: dict[str, Any]
    timeline: dict[str, np.ndarray]

    @property
    def waf(self) -> float:
        return float(self.summary["waf"])

    @property
    def steady_waf(self) -> float:
        """WAF once steady (or over the second half; see :func:`~swaptrace.ssd.simulate.steady_waf`)."""
        return float((self.summary.get("steady_waf") or {}).get("waf", float("nan")))

    @property
    def throughput_mb_s(self) -> float:
        return float(self.summary["throughput_mb_s"])


def simulate_chunks(sim: Simulator, chunks: Iterable[tuple], *, window_bytes: int,
                    progress: Callable[[int], None] | None = None,
                    progress_bytes: bool = False) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Run request chunks ``(op, lpn, npages[, t_us[, cold]])`` through ``sim``; timeline columns and summary.

    ``progress`` receives the number of requests done (or of host bytes, with ``progress_bytes``).
    """
    cfg = sim.config
    start = sim.counters()
    t0 = sim.now_us
    windows = WindowCollector(window_bytes, cfg.map_bytes, _prev_end_us=t0, _prev_flash=start.flash_write_units,
                              _prev_erases=start.erases, _max_done=t0)
    hist = LatencyHistogram()
    requests = 0
    wall0 = time.perf_counter()
    for chunk in chunks:
        op, lpn, npages = chunk[:3]
        t_us = chunk[3] if len(chunk) > 3 else None
        cold = chunk[4] if len(chunk) > 4 else None
        res = sim.run(op, lpn, npages, t_us, cold=cold)
        windows.add(op, npages, res)
        hist.add(res["latency_us"])
        requests += len(op)
        if progress is not None:
            progress(int(np.sum(npages)) * cfg.map_bytes if progress_bytes else len(op))
    sim.finish()
    wall = time.perf_counter() - wall0
    windows.flush()
    c = sim.counters() - start
    elapsed_us = sim.now_us - t0
    rows = windows.rows
    timeline = {name: np.array([r[name] for r in rows], dtype=TIMELINE_SCHEMA.field(name).type.to_pandas_dtype())
                for name in TIMELINE_SCHEMA.names}
    bw = [r["bandwidth_mb_s"] for r in rows]
    host_w = c.host_write_units * cfg.map_bytes
    host_r = c.host_read_units * cfg.map_bytes
    timed = sim.timing and elapsed_us > 0
    summary = {
        "device": cfg.name,
        "requests": requests,
        "host_write_bytes": host_w,
        "host_read_bytes": host_r,
        "discard_bytes": c.discard_units * cfg.map_bytes,
        "flash_write_bytes": c.flash_write_units * cfg.map_bytes,
        "gc_write_bytes": c.gc_write_units * cfg.map_bytes,
        "gc_erases": c.erases,
        "waf": c.waf if c.host_write_units else None,
        "waf_cumulative": c.waf if c.host_write_units else None,
        "steady_waf": steady_waf(timeline["window_write_bytes"], timeline["flash_write_bytes"])
        if c.host_write_units else None,
        "op": cfg.op_summary(),
        "model_waf_uniform": _finite_or_none(predict_config(cfg)),
        "simulated_time_us": elapsed_us if sim.timing else None,
        "throughput_mb_s": (host_w + host_r) / elapsed_us if timed else None,
        "write_mb_s": host_w / elapsed_us if timed else None,
        "read_mb_s": host_r / elapsed_us if timed else None,
        "latency_us": hist.summary() if timed else None,
        "windows": len(rows),
        "fresh_bandwidth_mb_s": bw[0] if bw and timed else None,
        "steady_state": steady_state(bw) if timed else None,
        "run_wall_s": wall,
        "requests_per_wall_s": requests / wall if wall > 0 else None,
    }
    return timeline, summary


def _region_units(config: SSDConfig, region: tuple[int, int] | None) -> tuple[int, int]:
    if region is None:
        return 0, config.user_units
    off, size = int(region[0]), int(region[1])
    if off < 0 or size <= 0 or off % config.map_bytes or size % config.map_bytes:
        raise ConfigError(f"--swap-offset {off} and --swap-size {size}: must be multiples of {config.map_bytes} "
                          "bytes, the size above 0, the partition inside the drive")
    off_u, size_u = off // config.map_bytes, size // config.map_bytes
    if off_u + size_u > config.user_units:
        raise ConfigError(f"--swap-offset + --swap-size ({off} + {size} bytes) is beyond the drive's "
                          f"{config.user_bytes} user bytes")
    return off_u, size_u


def _describe_start(summary: dict[str, Any], config: SSDConfig, lay, bg: Background, init: dict | None) -> None:
    """Record how the drive started (and, for ``steady``, its partition and background) in ``summary``."""
    start: dict[str, Any] = dict(init or {})
    if lay is not None:
        start.update(background=bg.describe(), **lay.describe(config.map_bytes))
    summary["start"] = start


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _write_timeline(out, timeline, meta, force) -> os.PathLike:
    with traceio.TraceWriter(out, "ssd-timeline", meta, force=force) as w:
        w.write(**timeline)
    return w.path


def _default_window(total_bytes: int, user_bytes: int) -> int:
    # ~64 windows over the run, never below 1 MiB
    return max(1 << 20, int(total_bytes // 64) or user_bytes // 16)


def synth(config: SSDConfig, pattern: str, *, bs_bytes: int = 4096, volume_bytes: int | None = None,
          iodepth: int = 32, precondition: str = "seq", rwmix_read: float = 50.0, hot_writes: float = 0.8,
          hot_fraction: float = 0.2, window_bytes: int | None = None, seed: int = 0, timing: bool = True,
          out: os.PathLike | None = None, force: bool = False,
          progress: Callable[[int], None] | None = None, region: tuple[int, int] | None = None,
          background: Background | None = None) -> SSDResult:
    """Run a synthetic pattern (see :mod:`swaptrace.ssd.workloads`) on a device.

    Parameters
    ----------
    config : SSDConfig
        The device.
    pattern : str
        ``write``, ``read``, ``randwrite``, ``randread``, ``randrw``, ``swap`` or ``hotcold``.
    bs_bytes : int
        Request size.
    volume_bytes : int, optional
        Host bytes to move; default 4x the user capacity.
    iodepth : int
        Outstanding requests.
    precondition : str
        ``none``, ``seq``, ``seq+rand`` (untimed, before the run) or ``steady``
        (the sampled steady state of ``background``, :mod:`swaptrace.ssd.steady`).
    window_bytes : int, optional
        Timeline window; default ~1/64 of the volume.
    region : (offset_bytes, size_bytes), optional
        The partition the pattern runs on (default: the whole user space); with
        ``steady`` it is the swap partition and the rest holds the background.
    background : Background, optional
        With ``steady``: the background (default :class:`~swaptrace.ssd.steady.Background()`).
    timing : bool
        Off: pure FTL (WAF only; bandwidth and latency are not computed).
    out : path, optional
        Timeline Parquet file to write.
    progress : callable, optional
        Called with the host bytes of each finished chunk.
    """
    off_u, size_u = _region_units(config, region)
    if volume_bytes is None:
        volume_bytes = 4 * size_u * config.map_bytes
    sim = Simulator(config, timing=timing, iodepth=iodepth, seed=seed)
    bg = background or Background()
    lay = steady_layout(config, off_u, size_u, bg) if precondition == "steady" else None
    init = sim.precondition(precondition, seed=seed, layout=lay)
    chunks = synthetic_requests(pattern, user_units=size_u, map_bytes=config.map_bytes, bs_bytes=bs_bytes,
                                volume_bytes=volume_bytes, rwmix_read=rwmix_read, hot_writes=hot_writes,
                                hot_fraction=hot_fraction, seed=seed + 1)
    if pattern == "hotcold" and config.hot_cold_streams:  # the host knows which writes are cold
        first_cold = hot_units(size_u, hot_fraction, bs_bytes // config.map_bytes)
        chunks = ((op, lpn, n, None, lpn >= first_cold) for op, lpn, n in chunks)
    if off_u:
        chunks = ((c[0], c[1] + off_u, *c[2:]) for c in chunks)
    window_bytes = window_bytes or _default_window(volume_bytes, config.user_bytes)
    timeline, summary = simulate_chunks(sim, chunks, window_bytes=window_bytes, progress=progress, progress_bytes=True)
    params = {"pattern": pattern, "bs_bytes": bs_bytes, "volume_bytes": volume_bytes, "iodepth": iodepth,
              "precondition": precondition, "rwmix_read": rwmix_read, "hot_writes": hot_writes,
              "hot_fraction": hot_fraction, "window_bytes": window_bytes, "seed": seed, "timing": timing,
              "region_bytes": [off_u * config.map_bytes, size_u * config.map_bytes]}
    summary["precondition"] = precondition
    _describe_start(summary, config, lay, bg, init)
    path = None
    if out is not None:
        meta = {"page_bytes": config.map_bytes, "source": "synthetic", "device": config.describe(),
                "params": params, "summary": summary}
        path = _write_timeline(out, timeline, meta, force)
    return SSDResult(path, summary, timeline)


def map_units(offset: np.ndarray, length: np.ndarray, map_bytes: int, user_units: int, stream_units: int,
              fit: str) -> tuple[np.ndarray, np.ndarray]:
    """The drive's map units a stream's requests cover, as :func:`replay` issues them.

    Parameters
    ----------
    offset, length : numpy.ndarray
        The requests' byte offsets on the swap device and their sizes, bytes.
    map_bytes : int
        Bytes per map unit of the drive (``SSDConfig.map_bytes``).
    user_units : int
        Map units the requests may land in (the drive's user space, or the swap partition's room).
    stream_units : int
        Map units of the stream's swap device.
    fit : {"error", "modulo", "scale"}
        A device larger than ``user_units``: ``scale`` shrinks offsets and sizes by ``user_units /
        stream_units``, ``modulo`` wraps offsets around; ``error`` (checked before) and every rule clamp each
        request into ``0 .. user_units``.

    Returns
    -------
    tuple of numpy.ndarray
        ``(first, count)``: each request's first map unit and its number of units (at least 1), int64.
    """
    first = (offset // map_bytes).astype(np.int64)
    last = -(-(offset.astype(np.int64) + length.astype(np.int64)) // map_bytes)
    npages = np.maximum(last - first, 1)
    if fit == "scale" and stream_units > user_units:
        first = (first * user_units) // stream_units
        npages = np.maximum((npages * user_units) // stream_units, 1)
    elif fit == "modulo":
        first = first % user_units
    npages = np.minimum(npages, user_units)
    first = np.minimum(first, user_units - npages)
    return first, npages


def _partition(tf, stream, config: SSDConfig, swap_offset_bytes: int, fit: str) -> tuple[int, int, int, int]:
    """``(device_bytes, stream_units, offset_units, room_units)``: the stream's swap device as a partition of the
    drive at ``swap_offset_bytes``; :class:`ConfigError` if it does not fit (with ``fit="error"``)."""
    device_bytes = int(tf.meta.get("device_bytes") or 0)
    if device_bytes <= 0:
        # no declared size: the largest byte touched
        device_bytes = 0
        for b in tf.iter_batches(["offset", "length"]):
            if len(b["offset"]):
                device_bytes = max(device_bytes, int((b["offset"].astype(np.int64) + b["length"]).max()))
    stream_units = -(-device_bytes // config.map_bytes)
    if swap_offset_bytes < 0 or swap_offset_bytes % config.map_bytes:
        raise ConfigError(f"swap offset must be a multiple of {config.map_bytes} bytes, got {swap_offset_bytes}")
    off_u = swap_offset_bytes // config.map_bytes
    room = config.user_units - off_u
    if room <= 0:
        raise ConfigError(f"swap offset {swap_offset_bytes} is beyond the drive's {config.user_bytes} user bytes")
    if stream_units > room and fit == "error":
        raise ConfigError(
            f"{stream}: swap device of {device_bytes} bytes is larger than the SSD's user capacity "
            f"({config.user_bytes} bytes) after the swap offset; use --capacity, or --fit modulo|scale")
    return device_bytes, stream_units, off_u, room


def replay(stream: os.PathLike, config: SSDConfig, *, out: os.PathLike | None = None, iodepth: int = 32,
           use_timestamps: bool = False, precondition: str = "seq", fit: str = "error",
           window_bytes: int | None = None, seed: int = 0, force: bool = False,
           progress: Callable[[int], None] | None = None, background: Background | None = None,
           swap_offset_bytes: int = 0) -> SSDResult:
    """Replay a swap I/O stream (kind ``swapio``) on a simulated SSD.

    Parameters
    ----------
    stream : path
        The swapio Parquet file.
    config : SSDConfig
        The device.
    out : path, optional
        Timeline Parquet file (kind ``ssd-timeline``) to write.
    iodepth : int
        Outstanding requests (closed loop); 0 = unlimited with ``use_timestamps``.
    use_timestamps : bool
        Issue requests no earlier than the stream's ``t_us``.
    precondition : str
        ``none``, ``seq`` (default; full drive), ``seq+rand`` or ``steady``: the
        drive keeps its size, the stream's swap device is a partition at
        ``swap_offset_bytes`` and the rest of the drive holds ``background``,
        in its sampled steady state (:mod:`swaptrace.ssd.steady`).
    background : Background, optional
        With ``steady`` (default :class:`~swaptrace.ssd.steady.Background()`).
    swap_offset_bytes : int
        Where the swap partition starts on the drive (stream offsets are shifted by it).
    fit : str
        ``error``, ``modulo`` or ``scale``: what to do when the stream's device
        is larger than the SSD's user capacity (module docstring).
    window_bytes : int, optional
        Timeline window; default ~1/64 of the stream's written bytes.
    progress : callable, optional
        Called with the number of requests of each finished chunk.

    Raises
    ------
    TraceFileError
        Not a swapio file.
    ConfigError
        Stream larger than the device (with ``fit="error"``), bad option.
    """
    if fit not in FITS:
        raise ConfigError(f"unknown --fit {fit!r}; choose from {', '.join(FITS)}")
    tf = traceio.open_trace(stream, "swapio")
    meta = tf.meta
    device_bytes, stream_units, off_u, room = _partition(tf, stream, config, swap_offset_bytes, fit)
    part_units = min(stream_units, room) if stream_units else room
    summ = meta.get("summary") or {}
    written = int(summ.get("bytes_written") or 0)
    window_bytes = window_bytes or _default_window(written or device_bytes, config.user_bytes)
    sim = Simulator(config, timing=True, iodepth=iodepth, use_timestamps=use_timestamps, seed=seed)
    bg = background or Background()
    lay = steady_layout(config, off_u, part_units, bg) if precondition == "steady" else None
    init = sim.precondition(precondition, seed=seed, layout=lay)

    def chunks():
        for b in tf.iter_batches(["t_us", "op", "offset", "length"]):
            lpn, npages = map_units(b["offset"], b["length"], config.map_bytes, room, stream_units, fit)
            yield b["op"].astype(np.int8), lpn + off_u, npages, b["t_us"].astype(np.float64)

    timeline, summary = simulate_chunks(sim, chunks(), window_bytes=window_bytes, progress=progress)
    summary["precondition"] = precondition
    _describe_start(summary, config, lay, bg, init)
    summary["stream"] = str(stream)
    params = {"iodepth": iodepth, "use_timestamps": use_timestamps, "precondition": precondition, "fit": fit,
              "window_bytes": window_bytes, "seed": seed, "swap_offset_bytes": swap_offset_bytes}
    path = None
    if out is not None:
        out_meta = {"page_bytes": config.map_bytes, "source": "swapio", "stream": str(stream),
                    "stream_device_bytes": device_bytes, "device": config.describe(), "params": params,
                    "summary": summary}
        path = _write_timeline(out, timeline, out_meta, force)
    return SSDResult(path, summary, timeline)


def read_timeline(path: os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Columns and metadata of an ``ssd-timeline`` file."""
    tf = traceio.open_trace(path, "ssd-timeline")
    if tf.kind != "ssd-timeline":
        raise TraceFileError(f"{path}: not an ssd-timeline file")
    return tf.read_all(), tf.meta


def request_size_sweep(config: SSDConfig, *, sizes_bytes: Iterable[int] = (4 << 10, 8 << 10, 16 << 10, 32 << 10,
                                                                           64 << 10, 128 << 10, 256 << 10),
                       iodepths: Iterable[int] = (1, 8, 32), pattern: str = "randread",
                       volume_bytes: int = 64 << 20, seed: int = 0) -> dict[str, Any]:
    """Bandwidth of ``pattern`` at each request size and queue depth, on a sequentially filled drive.

    Returns ``{"pattern", "sizes_bytes": [...], "bandwidth_mb_s": {qd: [...]}}`` (JSON-ready;
    the data of :func:`swaptrace.figures.ssd.plot_bandwidth_vs_request_size`).
    """
    sizes = [int(s) for s in sizes_bytes]
    out: dict[str, Any] = {"pattern": pattern.replace("rand", "random "), "sizes_bytes": sizes, "bandwidth_mb_s": {}}
    for qd in iodepths:
        out["bandwidth_mb_s"][str(qd)] = [
            float(synth(config, pattern, bs_bytes=bs, volume_bytes=max(volume_bytes, 8 * bs), iodepth=qd,
                        precondition="seq", seed=seed).summary["throughput_mb_s"])
            for bs in sizes
        ]
    return out
