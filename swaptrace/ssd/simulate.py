"""Run request streams through the FTL + timing kernel and summarise them per window.

:class:`Simulator` holds one device's state between calls, so a run can be
preconditioned, warmed up and measured in pieces. :func:`ftl_waf` is the
pure-FTL path (no timing) used by the analytic checks and the benchmark.

Timeline windows
----------------
A window closes when it has seen ``window_bytes`` of host writes (or, for
read-mostly streams, of host reads). Per window: host bytes read/written,
flash bytes programmed (host + GC relocations), WAF, bandwidth, GC erases,
mean and 99th-percentile request latency, and the simulated time at its end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from swaptrace.errors import ConfigError, GCStallError
from swaptrace.kernels.ssd import ftl as K
from swaptrace.ssd.choices import PRECONDITIONS  # noqa: F401  (re-exported)
from swaptrace.ssd.config import GC_POLICIES, SSDConfig

_ERRORS = {
    K.ERR_NO_FREE_BLOCK: "the device ran out of free blocks (spare space too small for the GC reserve)",
    K.ERR_NO_PROGRESS: "GC cannot reclaim space: every block is full of valid data (spare factor too small)",
}


def _new_state(cfg: SSDConfig, *, timing: bool, iodepth: int, use_timestamps: bool, seed: int) -> K.FTLState:
    nd, nc, bpd = cfg.dies, cfg.channels, cfg.blocks_per_die
    np_ = cfg.units_per_block
    nb = cfg.blocks
    pu = cfg.program_units
    ip = np.zeros(K.N_IP, dtype=np.int64)
    ip[K.P_NDIES], ip[K.P_NCHAN], ip[K.P_BPD], ip[K.P_NP] = nd, nc, bpd, np_
    ip[K.P_USER], ip[K.P_PU] = cfg.user_units, pu
    ip[K.P_POLICY] = GC_POLICIES[cfg.gc_policy]
    ip[K.P_GC_MIN], ip[K.P_BG_MIN], ip[K.P_GC_D] = cfg.gc_min_free_blocks, cfg.bg_gc_min_free_blocks, cfg.gc_d
    ip[K.P_SEPARATE], ip[K.P_COPYBACK] = int(cfg.separate_gc_stream), int(cfg.gc_copyback)
    ip[K.P_QD], ip[K.P_USE_TS] = iodepth, int(use_timestamps)
    ip[K.P_BUF] = max(cfg.write_buffer_bytes // cfg.map_bytes, 1)
    ip[K.P_TIMING] = int(timing)
    fp = np.zeros(K.N_FP, dtype=np.float64)
    fp[K.F_READ], fp[K.F_PROG], fp[K.F_ERASE] = cfg.read_us, cfg.program_us, cfg.erase_us
    fp[K.F_UNIT_CHAN] = cfg.map_bytes / cfg.channel_mb_s  # bytes / (MB/s) = µs
    fp[K.F_UNIT_HOST] = cfg.map_bytes / cfg.host_mb_s
    free_q = (np.arange(nb, dtype=np.int32).reshape(nd, bpd)).copy()
    rng = np.array([(seed * 0x2545F4914F6CDD1D + 1) & ((1 << 64) - 1)], dtype=np.uint64)
    return K.FTLState(
        ip=ip, fp=fp, sc=np.zeros(K.N_SC, dtype=np.int64), tf=np.zeros(K.N_TF, dtype=np.float64), rng=rng,
        l2p=np.full(cfg.user_units, -1, dtype=np.int32), p2l=np.full(cfg.physical_units, -1, dtype=np.int32),
        valid=np.zeros(nb, dtype=np.int32), wp=np.zeros(nb, dtype=np.int32), bstate=np.zeros(nb, dtype=np.int8),
        close_seq=np.zeros(nb, dtype=np.int64),
        free_q=free_q, free_head=np.zeros(nd, dtype=np.int64), free_n=np.full(nd, bpd, dtype=np.int64),
        open_blk=np.full((nd, 3), -1, dtype=np.int32),
        bhead=np.full((nd, np_ + 1), -1, dtype=np.int32), bnext=np.full(nb, -1, dtype=np.int32),
        bprev=np.full(nb, -1, dtype=np.int32),
        fifo_q=np.zeros((nd, bpd), dtype=np.int32), fifo_head=np.zeros(nd, dtype=np.int64),
        fifo_n=np.zeros(nd, dtype=np.int64),
        closed=np.zeros((nd, bpd), dtype=np.int32), closed_pos=np.zeros(nb, dtype=np.int32),
        closed_n=np.zeros(nd, dtype=np.int64),
        die_free=np.zeros(nd), chan_free=np.zeros(nc), pend_n=np.zeros(nd, dtype=np.int64),
        pend_slot=np.zeros((nd, pu), dtype=np.int64), pend_t=np.zeros(nd), buf_rel=np.zeros(int(ip[K.P_BUF])),
        buf_die=np.zeros(int(ip[K.P_BUF]), dtype=np.int32), qslots=np.zeros(max(iodepth, 1)),
    )


@dataclass(frozen=True)
class Counters:
    """Cumulative FTL counters in map units (and erases)."""

    host_write_units: int
    host_read_units: int
    gc_write_units: int
    erases: int
    discard_units: int
    foreground_gc: int
    background_gc: int

    @property
    def flash_write_units(self) -> int:
        return self.host_write_units + self.gc_write_units

    @property
    def waf(self) -> float:
        """Write amplification: flash units programmed per host unit written."""
        return self.flash_write_units / self.host_write_units if self.host_write_units else float("nan")

    def __sub__(self, other: Counters) -> Counters:
        return Counters(*(getattr(self, f) - getattr(other, f) for f in self.__dataclass_fields__))


class Simulator:
    """One simulated SSD: FTL state, die/channel clocks and counters.

    Parameters
    ----------
    config : SSDConfig
        The device.
    timing : bool
        Simulate die/channel/host timing (off: pure FTL, for WAF only).
    iodepth : int
        Outstanding requests (closed loop); 0 = unlimited (only sensible
        with ``use_timestamps``).
    use_timestamps : bool
        Issue each request no earlier than its ``t_us`` (open loop replay).
    seed : int
        Seed of the random victim policies.
    """

    def __init__(self, config: SSDConfig, *, timing: bool = True, iodepth: int = 32, use_timestamps: bool = False,
                 seed: int = 0):
        if iodepth < 0:
            raise ConfigError(f"iodepth must be >= 0, got {iodepth}")
        if iodepth == 0 and not use_timestamps:
            raise ConfigError("iodepth 0 (unlimited) needs stream timestamps (--timestamps)")
        self.config = config
        self.timing = timing
        self.iodepth = iodepth
        self.use_timestamps = use_timestamps
        self.state = _new_state(config, timing=timing, iodepth=iodepth, use_timestamps=use_timestamps, seed=seed)

    def set_iodepth(self, iodepth: int) -> None:
        """Change the queue depth between runs (all slots free from the latest completion on)."""
        if iodepth < 1:
            raise ConfigError(f"iodepth must be >= 1 here, got {iodepth}")
        self.iodepth = iodepth
        self.state = self.state._replace(qslots=np.full(iodepth, self.now_us))
        self.state.ip[K.P_QD] = iodepth

    # -- counters -------------------------------------------------------------------
    def counters(self) -> Counters:
        sc = self.state.sc
        return Counters(int(sc[K.C_HOST_W]), int(sc[K.C_HOST_R]), int(sc[K.C_GC_UNITS]), int(sc[K.C_ERASES]),
                        int(sc[K.C_DISCARD]), int(sc[K.C_FG_GC]), int(sc[K.C_BG_GC]))

    @property
    def now_us(self) -> float:
        """Latest request completion so far (simulated microseconds)."""
        return float(self.state.tf[K.T_MAX_DONE])

    def _check(self, code: int) -> None:
        if code != K.ERR_NONE:
            stalled = code in (K.ERR_NO_PROGRESS, K.ERR_NO_FREE_BLOCK)
            raise (GCStallError if stalled else ConfigError)(
                f"ssd {self.config.name}: {_ERRORS.get(int(code), f'FTL error {code}')}")

    # -- running --------------------------------------------------------------------
    def write_units(self, lpns: np.ndarray, cold: np.ndarray | None = None) -> None:
        """Pure-FTL single-unit writes (no timing, no per-request output).

        ``cold`` (bool per write) sends tagged writes to the cold frontier
        when the device has ``hot_cold_streams``.
        """
        lpns = np.ascontiguousarray(lpns, dtype=np.int64)
        if lpns.size and (lpns.min() < 0 or lpns.max() >= self.config.user_units):
            raise ConfigError(f"logical unit outside the device's {self.config.user_units} units")
        self._write_untimed(lpns, self._streams(cold, len(lpns)))

    def _write_untimed(self, lpns: np.ndarray, streams: np.ndarray) -> None:
        """Single-unit writes of ``lpns`` (int64) through :func:`~swaptrace.kernels.ssd.ftl.run_requests` with the
        clocks off: every write of the FTL goes through one kernel, so numba compiles its write path and GC
        once. A second kernel for untimed writes cost a fresh install 12 s of CPU to compile and ran them 10 %
        faster (0.87 s against 0.97 s for 6.3 M writes on a 16 GiB drive, the state after them the same)."""
        n = len(lpns)
        f0, i0 = np.zeros(0), np.zeros(0, dtype=np.int64)  # no per-request outputs
        timing = self.state.ip[K.P_TIMING]
        self.state.ip[K.P_TIMING] = 0
        try:
            self._check(K.run_requests(self.state, np.full(n, K.OP_WRITE, dtype=np.int8), lpns,
                                       np.ones(n, dtype=np.int64), np.zeros(n), streams, f0, f0, i0, i0))
        finally:
            self.state.ip[K.P_TIMING] = timing

    def _streams(self, cold: np.ndarray | None, n: int) -> np.ndarray:
        if cold is None or not self.config.hot_cold_streams:
            return np.zeros(0, dtype=np.int8)
        cold = np.asarray(cold, dtype=bool)
        if len(cold) != n:
            raise ConfigError("one cold tag per request is needed")
        return np.where(cold, 2, 0).astype(np.int8)

    def write_sequential(self, first: int, count: int) -> None:
        """Pure-FTL sequential single-unit writes of units [first, first+count)."""
        if first < 0 or first + count > self.config.user_units:
            raise ConfigError("sequential range outside the device")
        step = 1 << 22
        for start in range(first, first + count, step):
            lpns = np.arange(start, min(start + step, first + count), dtype=np.int64)
            self._write_untimed(lpns, np.zeros(0, dtype=np.int8))

    def run(self, op: np.ndarray, lpn: np.ndarray, npages: np.ndarray, t_us: np.ndarray | None = None,
            record: bool = True, cold: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Run requests (op codes ``traceio.OP_*``, first unit, unit count) in order.

        ``t_us`` are arrival times (used with ``use_timestamps``); ``cold`` tags
        writes for the cold frontier (devices with ``hot_cold_streams``).

        Returns per-request ``done_us``, ``latency_us``, cumulative
        ``flash_units`` and ``erases`` (empty arrays when ``record`` is false).
        """
        n = len(op)
        op = np.ascontiguousarray(op, dtype=np.int8)
        lpn = np.ascontiguousarray(lpn, dtype=np.int64)
        npages = np.ascontiguousarray(npages, dtype=np.int64)
        if n:
            if npages.min() < 1:
                raise ConfigError("requests must cover at least one unit")
            if lpn.min() < 0 or (lpn + npages).max() > self.config.user_units:
                raise ConfigError(f"request beyond the device's {self.config.user_bytes} user bytes")
        t = np.zeros(n) if t_us is None else np.ascontiguousarray(t_us, dtype=np.float64)
        m = n if record else 0
        out = {
            "done_us": np.zeros(m), "latency_us": np.zeros(m),
            "flash_units": np.zeros(m, dtype=np.int64), "erases": np.zeros(m, dtype=np.int64),
        }
        code = K.run_requests(self.state, op, lpn, npages, t, self._streams(cold, n), out["done_us"],
                               out["latency_us"], out["flash_units"], out["erases"])
        self._check(code)
        return out

    def finish(self) -> None:
        """Program partly filled buffers (end of a run)."""
        if self.timing:
            K.flush_all(self.state)

    def reset_clocks(self) -> None:
        """Forget time (after untimed preconditioning): all resources idle at t = 0."""
        st = self.state
        for arr in (st.tf, st.die_free, st.chan_free, st.pend_t, st.buf_rel, st.qslots):
            arr[:] = 0.0
        st.pend_n[:] = 0
        st.sc[K.S_BUF_K] = 0

    def start_steady(self, layout, seed: int = 0) -> dict[str, Any]:
        """Start in the sampled steady state of a background (:mod:`swaptrace.ssd.steady`); the drive must be new."""
        from swaptrace.ssd.steady import install

        info = install(self.state, self.config, layout, seed=seed)
        self.reset_clocks()
        return info

    def precondition(self, mode: str, seed: int = 0, chunk_units: int = 1 << 22, layout=None) -> dict[str, Any]:
        """SNIA-style preconditioning, untimed (SNIA Solid State Storage PTS).

        ``seq``: write the whole user space sequentially twice. ``seq+rand``:
        then one user capacity of uniform random single-unit writes.
        ``none``: a fresh (empty) drive. ``steady``: the sampled steady state
        of ``layout`` (a :class:`swaptrace.ssd.steady.Layout`; swap partition
        and background), see :meth:`start_steady`.
        """
        if mode not in PRECONDITIONS:
            raise ConfigError(f"unknown precondition {mode!r}; choose from {', '.join(PRECONDITIONS)}")
        if mode == "steady":
            if layout is None:
                raise ConfigError("precondition steady needs a layout (swap partition and background)")
            return self.start_steady(layout, seed=seed)
        if mode == "none":
            return {"method": "none"}
        # only a drive nothing has touched yet (every counter 0) gives or takes a kept state
        new_drive = not self.state.sc.any()
        key = (self.config, mode, seed, chunk_units, int(self.state.rng[0]))  # rng: random GC victims draw from it
        done = _PRECONDITIONED.pop(key, None) if new_drive else None
        if done is not None:
            self._restore(done)
        else:
            self._precondition_writes(mode, seed, chunk_units)
            if new_drive and self.config.physical_units <= _KEEP_MAX_UNITS:
                done = self._snapshot()
        if done is not None:  # the most recently used last; the oldest dropped beyond _KEEP
            _PRECONDITIONED[key] = done
            while len(_PRECONDITIONED) > _KEEP:
                _PRECONDITIONED.pop(next(iter(_PRECONDITIONED)))
        self.reset_clocks()
        return {"method": mode}

    def _precondition_writes(self, mode: str, seed: int, chunk_units: int) -> None:
        timing = self.state.ip[K.P_TIMING]
        self.state.ip[K.P_TIMING] = 0
        try:
            u = self.config.user_units
            for _ in range(2):
                self.write_sequential(0, u)
            if mode == "seq+rand":
                rng = np.random.default_rng(seed)
                left = u
                while left > 0:
                    n = min(left, chunk_units)
                    self.write_units(rng.integers(0, u, n))
                    left -= n
        finally:
            self.state.ip[K.P_TIMING] = timing

    def _snapshot(self) -> dict[str, np.ndarray]:
        """Copies of the state's arrays that preconditioning writes (not the options: ``ip``, ``fp``, ``qslots``)."""
        return {f: np.copy(getattr(self.state, f)) for f in self.state._fields if f not in _OPTION_FIELDS}

    def _restore(self, snap: dict[str, np.ndarray]) -> None:
        for f, a in snap.items():
            np.copyto(getattr(self.state, f), a)


#: Preconditioned states kept for reuse within a process: writing a drive twice is deterministic (``seq``; with
#: ``seq+rand`` given its seed), and a device fit replays thousands of short jobs on the same small drive, each
#: preconditioned first. Only drives up to _KEEP_MAX_UNITS physical units (64 MiB of state at most) are kept.
_PRECONDITIONED: dict[tuple, dict[str, np.ndarray]] = {}
_KEEP = 4
_KEEP_MAX_UNITS = 1 << 21
#: state fields set from a Simulator's options rather than by writes
_OPTION_FIELDS = ("ip", "fp", "qslots")


def ftl_waf(config: SSDConfig, lpn_chunks, *, warmup_units: int, fill: bool = True, seed: int = 0,
            cold_units_from: int | None = None) -> tuple[float, Counters]:
    """Steady-state WAF of a stream of single-unit writes (pure FTL).

    The analytic models assume every user page holds data, so by default the
    drive is first filled sequentially; otherwise pages the random stream has
    not yet touched (``exp(-k)`` of them after ``k`` drive writes) act as
    extra spare space and lower the WAF.

    Parameters
    ----------
    config : SSDConfig
        The device.
    lpn_chunks : iterable of int arrays
        Logical units to write, in order.
    warmup_units : int
        Host units written (after the fill) before measuring starts.
    fill : bool
        Write every user unit once, in order, before the stream.
    cold_units_from : int, optional
        Tag writes to units ``>= cold_units_from`` as cold (for devices with
        ``hot_cold_streams``).

    Returns
    -------
    (waf, counters)
        WAF over the measured part and the measured counters.
    """
    sim = Simulator(config, timing=False, iodepth=1, seed=seed)
    if fill:
        sim.write_sequential(0, config.user_units)
    written = 0
    base = None
    for chunk in lpn_chunks:
        chunk = np.asarray(chunk)
        def tags(x):
            return None if cold_units_from is None else x >= cold_units_from

        if base is None and written + len(chunk) > warmup_units:
            cut = max(warmup_units - written, 0)
            sim.write_units(chunk[:cut], tags(chunk[:cut]))
            base = sim.counters()
            chunk = chunk[cut:]
        sim.write_units(chunk, tags(chunk))
        written += len(chunk)
    if base is None:
        raise ConfigError("the stream is shorter than the warm-up")
    measured = sim.counters() - base
    return measured.waf, measured


@dataclass
class WindowCollector:
    """Cut per-request results into windows of written (or read) volume."""

    window_bytes: int
    map_bytes: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    _parts: list[dict[str, np.ndarray]] = field(default_factory=list)
    _w_bytes: int = 0
    _r_bytes: int = 0
    _total_written: int = 0
    _prev_end_us: float = 0.0
    _prev_flash: int = 0
    _prev_erases: int = 0
    _max_done: float = 0.0

    def add(self, op: np.ndarray, npages: np.ndarray, res: dict[str, np.ndarray]) -> None:
        """Feed one chunk of requests and their results."""
        if len(op) == 0:
            return
        wbytes = np.where(op == K.OP_WRITE, npages, 0).astype(np.int64) * self.map_bytes
        rbytes = np.where(op == K.OP_READ, npages, 0).astype(np.int64) * self.map_bytes
        cw = np.cumsum(wbytes) + self._w_bytes
        cr = np.cumsum(rbytes) + self._r_bytes
        start = 0
        while True:
            # first request at which the open window is full
            iw = int(np.searchsorted(cw[start:], self.window_bytes, side="left")) + start
            ir = int(np.searchsorted(cr[start:], self.window_bytes, side="left")) + start
            end = min(iw, ir)
            if end >= len(op):
                break
            self._parts.append(self._slice(op, wbytes, rbytes, res, start, end + 1))
            self._emit()
            cw = cw - cw[end]
            cr = cr - cr[end]
            start = end + 1
        if start < len(op):
            self._parts.append(self._slice(op, wbytes, rbytes, res, start, len(op)))
            self._w_bytes = int(cw[-1])
            self._r_bytes = int(cr[-1])
        else:
            self._w_bytes = self._r_bytes = 0

    @staticmethod
    def _slice(op, wbytes, rbytes, res, a, b):
        return {"w": wbytes[a:b], "r": rbytes[a:b], "done": res["done_us"][a:b], "lat": res["latency_us"][a:b],
                "flash": res["flash_units"][a:b], "erases": res["erases"][a:b]}

    def flush(self) -> None:
        """Emit the last, partial window (if it holds any request)."""
        if self._parts:
            self._emit()

    def _emit(self) -> None:
        parts = self._parts
        self._parts = []
        self._w_bytes = self._r_bytes = 0
        w = int(sum(int(p["w"].sum()) for p in parts))
        r = int(sum(int(p["r"].sum()) for p in parts))
        lat = np.concatenate([p["lat"] for p in parts])
        done = max(float(p["done"].max()) for p in parts if len(p["done"]))
        self._max_done = max(self._max_done, done)
        flash = int(parts[-1]["flash"][-1])
        erases = int(parts[-1]["erases"][-1])
        d_flash = (flash - self._prev_flash) * self.map_bytes
        d_erase = erases - self._prev_erases
        span = self._max_done - self._prev_end_us
        self._total_written += w
        self.rows.append({
            "window": len(self.rows),
            "host_written_bytes": self._total_written,
            "window_write_bytes": w,
            "window_read_bytes": r,
            "flash_write_bytes": d_flash,
            "waf": d_flash / w if w else float("nan"),
            "bandwidth_mb_s": (w + r) / span if span > 0 else float("nan"),
            "write_mb_s": w / span if span > 0 else float("nan"),
            "read_mb_s": r / span if span > 0 else float("nan"),
            "gc_erases": d_erase,
            "requests": len(lat),
            "mean_latency_us": float(lat.mean()) if len(lat) else float("nan"),
            "p99_latency_us": percentile_linear(lat, 99.0) if len(lat) else float("nan"),
            "t_end_us": self._max_done,
        })
        self._prev_end_us = self._max_done
        self._prev_flash = flash
        self._prev_erases = erases


def percentile_linear(a: np.ndarray, q: float) -> float:
    """``np.percentile(a, q)`` (its default, linear method) of a non-empty array, bit for bit.

    A window holds a few hundred requests and a fit replays tens of thousands of windows, where
    ``np.percentile``'s fixed cost per call (~60 µs) was a sixth of the fit; two order statistics from
    ``np.partition`` and numpy's own interpolation rule (``numpy.lib._function_base_impl._lerp``: from the
    upper neighbour when the fraction is at least 1/2) give the same value.
    """
    n = len(a)
    pos = q / 100.0 * (n - 1)
    lo = int(np.floor(pos))
    hi = min(lo + 1, n - 1)
    part = np.partition(a, (lo, hi))
    x, y = float(part[lo]), float(part[hi])
    t = pos - lo
    diff = y - x
    return y - diff * (1.0 - t) if t >= 0.5 else x + diff * t


class LatencyHistogram:
    """Log-spaced latency histogram (0.1 µs .. 1e9 µs, 0.2 % bins) for run-wide percentiles."""

    def __init__(self) -> None:
        self.edges = np.logspace(-1, 9, 10 * 1150 + 1)
        self.counts = np.zeros(len(self.edges) + 1, dtype=np.int64)
        self.n = 0
        self.total = 0.0
        self.max = 0.0

    def add(self, lat_us: np.ndarray) -> None:
        if len(lat_us) == 0:
            return
        idx = np.searchsorted(self.edges, lat_us)
        self.counts += np.bincount(idx, minlength=len(self.counts))
        self.n += len(lat_us)
        self.total += float(lat_us.sum())
        self.max = max(self.max, float(lat_us.max()))

    def percentile(self, q: float) -> float:
        if self.n == 0:
            return float("nan")
        k = int(np.searchsorted(np.cumsum(self.counts), q / 100.0 * self.n, side="left"))
        k = min(max(k, 1), len(self.edges) - 1)
        return float(np.sqrt(self.edges[k - 1] * self.edges[k]))

    def summary(self) -> dict[str, float]:
        return {
            "mean": self.total / self.n if self.n else float("nan"),
            "p50": self.percentile(50), "p90": self.percentile(90), "p99": self.percentile(99),
            "p99.9": self.percentile(99.9), "max": self.max,
        }


def steady_state(bandwidths: list[float], rounds: int = 5) -> dict[str, Any]:
    """SNIA PTS steady-state check over the last ``rounds`` windows (SNIA Solid State Storage PTS).

    Steady when max - min <= 20 % of the mean and the linear fit's excursion
    over the rounds is <= 10 % of the mean.
    """
    y = np.asarray([b for b in bandwidths if np.isfinite(b)], dtype=float)
    if len(y) < rounds:
        return {"steady": False, "bandwidth_mb_s": float(y.mean()) if len(y) else float("nan")}
    last = y[-rounds:]
    mean = float(last.mean())
    slope = float(np.polyfit(np.arange(rounds), last, 1)[0])
    steady = (last.max() - last.min()) <= 0.2 * mean and abs(slope * (rounds - 1)) <= 0.1 * mean
    return {"steady": bool(steady), "bandwidth_mb_s": mean}


def steady_waf(window_write_bytes, flash_write_bytes, rounds: int = 5) -> dict[str, Any]:
    """Steady-state WAF of a run, apart from the cumulative (transient-including) one.

    SNIA PTS-style check on the per-window WAF: if the last ``rounds``
    windows are steady (range <= 20 % of their mean, linear-fit excursion
    <= 10 %), the steady WAF is flash bytes over host bytes across those
    windows; otherwise it is taken over the second half of the windows and
    flagged ``steady: False``.

    Parameters
    ----------
    window_write_bytes, flash_write_bytes : array of int
        Host and flash bytes written per timeline window.

    Returns
    -------
    dict
        ``waf`` (nan without writes), ``steady`` (bool), ``over`` (which
        windows), ``windows`` (how many).
    """
    w = np.asarray(window_write_bytes, dtype=float)
    f = np.asarray(flash_write_bytes, dtype=float)
    keep = w > 0
    w, f = w[keep], f[keep]
    if len(w) == 0:
        return {"waf": float("nan"), "steady": False, "over": "no writes", "windows": 0}
    steady = False
    if len(w) >= rounds:
        last = f[-rounds:] / w[-rounds:]
        mean = float(last.mean())
        slope = float(np.polyfit(np.arange(rounds), last, 1)[0])
        steady = bool((last.max() - last.min()) <= 0.2 * mean and abs(slope * (rounds - 1)) <= 0.1 * mean)
    if steady:
        return {"waf": float(f[-rounds:].sum() / w[-rounds:].sum()), "steady": True,
                "over": f"last {rounds} windows", "windows": rounds}
    half = len(w) // 2
    return {"waf": float(f[half:].sum() / w[half:].sum()), "steady": False, "over": "second half",
            "windows": len(w) - half}
