"""SNIA-style preconditioning for ``fio run --steady``: purge, fill, rounds until steady state.

The SNIA Solid State Storage Performance Test Specification (PTS) prepares a drive in three steps,
which ``fio run --steady`` follows:

1. **Purge** (``--purge``, optional): the whole device is discarded (``BLKDISCARD`` on the
   descriptor ``fio run`` already holds with ``O_EXCL``, so nothing can mount or claim it meanwhile);
   a file target gets its blocks punched out (``fallocate(PUNCH_HOLE)``, which a file system passes
   on as TRIM where it can).
2. **Workload-independent fill**: the capacity used written sequentially twice at 128 KiB (the
   ``precondition`` job), capped at ``fill_cap_s``.
3. **Workload-dependent rounds**: random 4 KiB writes at depth 32 (``steady_randwrite``) until fio's
   own steady-state detection stops the job, or the time cap. fio samples IOPS once a second into a
   window of ``ss_dur`` seconds and ends the job when the least-squares slope, as a percentage of the
   window's mean, falls below the limit (fio ``steadystate.c``). The window here is ``rounds`` rounds
   of ``round_s`` seconds, and the limit is SNIA's: the best-fit line may move at most
   ``slope_pct`` % of the mean across the window, so fio's per-second limit is
   ``slope_pct / (ss_dur - 1)``. SNIA's second criterion -- the range of the round averages at most
   ``range_pct`` % of their mean -- fio does not check together with the first, so it is checked here
   on the window fio reports (its samples averaged per round). **Steady** = fio attained *and* the
   range holds; anything else is labelled *not steady* with the reason, and the job's bandwidth (the
   window's mean) is never reported as steady.

fio's JSON (``jobs[0].steadystate``; fio ``stat.c``): ``ss`` (the criterion as set), ``duration``,
``attained`` (0/1), ``criterion`` (the last value, a string with ``%``), ``max_deviation``, ``slope``
(IOPS per second) and ``data`` with ``iops``/``bw`` (the window's samples, oldest first; unfilled
slots are 0 when the job ended before the window filled) and their means ``iops_mean``/``bw_mean``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import os
import struct
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from swaptrace.errors import ConfigError, ToolError

#: SNIA PTS steady-state criteria: over the window, best-fit excursion <= 10 % and range <= 20 % of the mean
SNIA_SLOPE_PCT = 10.0
SNIA_RANGE_PCT = 20.0
SNIA_ROUNDS = 5
#: linux/fs.h: _IO(0x12, 119)
BLKDISCARD = 0x1277
#: linux/falloc.h
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 0x01, 0x02


@dataclass(frozen=True)
class SteadyOptions:
    """The preconditioning of ``fio run --steady`` (module docstring).

    Parameters
    ----------
    round_s : int
        Seconds per round; fio's window is ``rounds * round_s`` seconds.
    rounds : int
        Rounds in the window (SNIA: 5).
    cap_s : int
        Time cap of the random-write rounds, seconds (the job's ``runtime``).
    ramp_s : int
        Seconds fio waits before it starts collecting (``ss_ramp``).
    fill_cap_s : int
        Time cap of the sequential fill, seconds.
    purge : bool
        Discard the whole device / punch the file before the fill.
    slope_pct, range_pct : float
        The SNIA criteria, percent of the window's mean.
    """

    round_s: int = 60
    rounds: int = SNIA_ROUNDS
    cap_s: int = 4 * 3600
    ramp_s: int = 0
    fill_cap_s: int = 4 * 3600
    purge: bool = False
    slope_pct: float = SNIA_SLOPE_PCT
    range_pct: float = SNIA_RANGE_PCT

    def __post_init__(self) -> None:
        for name in ("round_s", "rounds", "cap_s", "fill_cap_s"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"steady state: {name} must be at least 1, got {getattr(self, name)}")
        if self.rounds * self.round_s < 2:
            raise ConfigError("steady state: the window must span at least 2 seconds")
        if self.cap_s < self.round_s:  # capped before one round ends: no round measured, the verdict meaningless
            raise ConfigError(f"--steady-cap {self.cap_s} s is shorter than one round (--round {self.round_s} s); "
                              "give a cap of at least one round (fio's window is "
                              f"{self.rounds} rounds, {self.rounds * self.round_s} s)")
        if self.ramp_s < 0 or not 0 < self.slope_pct < 100 or not 0 < self.range_pct < 100:
            raise ConfigError("steady state: ramp >= 0 and criteria in (0, 100) percent")
        if self.ramp_s + self.round_s > self.cap_s:  # the cap ends the job before one round past the ramp is measured
            raise ConfigError(f"--ss-ramp {self.ramp_s} s leaves less than one round (--round {self.round_s} s) before "
                              f"--steady-cap {self.cap_s} s; give a longer cap or a shorter ramp")

    @property
    def window_s(self) -> int:
        return self.rounds * self.round_s

    @property
    def fio_limit_pct(self) -> float:
        """fio's per-sample slope limit: SNIA's excursion spread over the window's ``ss_dur - 1`` steps."""
        return self.slope_pct / (self.window_s - 1)

    def env(self) -> dict[str, str]:
        """The job-file variables of the steady job and the fill."""
        return {"SWAPTRACE_SS": f"iops_slope:{self.fio_limit_pct:.6f}%", "SWAPTRACE_SS_DUR": str(self.window_s),
                "SWAPTRACE_SS_RAMP": str(self.ramp_s), "SWAPTRACE_FILL_CAP": str(self.fill_cap_s)}

    def describe(self) -> dict:
        return {**asdict(self), "window_s": self.window_s, "fio_steadystate": self.env()["SWAPTRACE_SS"],
                "criteria": f"over {self.rounds} rounds of {self.round_s} s: best-fit excursion <= "
                            f"{self.slope_pct:g}% and range <= {self.range_pct:g}% of the mean (SNIA PTS)"}


#: environment of runs without steady-state preconditioning (the fill uncapped in practice)
NO_STEADY_ENV = {"SWAPTRACE_SS": "iops_slope:1%", "SWAPTRACE_SS_DUR": "60", "SWAPTRACE_SS_RAMP": "0",
                 "SWAPTRACE_FILL_CAP": str(7 * 24 * 3600)}


def _percent(text) -> float | None:
    try:
        return float(str(text).rstrip("%"))
    except ValueError:
        return None


def verdict(job_json: dict, opts: SteadyOptions) -> dict:
    """What fio's ``steadystate`` block of one job says, checked against SNIA's two criteria.

    Parameters
    ----------
    job_json : dict
        One element of fio's ``jobs`` array.
    opts : SteadyOptions
        The criteria the job ran with.

    Returns
    -------
    dict
        ``steady`` (bool), ``reason``, ``attained`` (fio's flag), ``rounds_iops`` (round means of the
        window), ``range_pct``, ``excursion_pct``, ``window_iops_mean``, ``window_bw_bytes``,
        ``fio_criterion_pct``, ``runtime_s`` (the job's; when attained, the time to steady state).

    Raises
    ------
    ConfigError
        The job has no ``steadystate`` block (it did not run with fio's steady-state options).
    """
    ss = job_json.get("steadystate")
    if not ss:
        raise ConfigError(f"fio job {job_json.get('jobname')!r}: no steadystate block in fio's output")
    data = ss.get("data") or {}
    iops = np.asarray(data.get("iops") or [], dtype=float)
    bw = np.asarray(data.get("bw") or [], dtype=float)
    attained = bool(ss.get("attained"))
    # fio's means divide by the whole window, counting the empty slots of a window that never filled
    seen = iops > 0
    runtime_s = float(job_json.get("job_runtime", 0)) / 1000.0
    out = {"attained": attained, "fio_ss": ss.get("ss"), "fio_criterion_pct": _percent(ss.get("criterion")),
           "fio_slope_iops_per_s": ss.get("slope"), "window_s": int(ss.get("duration") or len(iops)),
           "window_iops_mean": float(iops[seen].mean()) if seen.any() else float(data.get("iops_mean") or 0),
           "window_bw_bytes": float(bw[bw > 0].mean()) if (bw > 0).any() else float(data.get("bw_mean") or 0),
           "runtime_s": runtime_s, "rounds_iops": [], "range_pct": None, "excursion_pct": None}
    full = len(iops) >= 2 and (attained or seen.all())
    if full:
        rounds = np.array([part.mean() for part in np.array_split(iops, opts.rounds) if len(part)])
        mean = float(rounds.mean())
        x = np.arange(len(rounds))
        slope = float(np.polyfit(x, rounds, 1)[0]) if len(rounds) > 1 else 0.0
        out.update(rounds_iops=rounds.tolist(), range_pct=100.0 * float(np.ptp(rounds)) / mean if mean else None,
                   excursion_pct=100.0 * abs(slope) * (len(rounds) - 1) / mean if mean else None)
    if not attained:
        reason = f"not steady: fio's slope criterion not met within the {runtime_s:.0f} s cap"
    elif out["range_pct"] is None or out["range_pct"] > opts.range_pct:
        reason = (f"not steady: range of the round averages {out['range_pct'] or float('nan'):.1f}% > "
                  f"{opts.range_pct:g}% of their mean")
    else:
        reason = f"steady after {runtime_s:.0f} s (excursion {out['excursion_pct']:.1f}%, range {out['range_pct']:.1f}%)"
    out.update(steady=reason.startswith("steady"), reason=reason)
    return out


def rounds_from_bw_log(t_ms: np.ndarray, bw_bytes: np.ndarray, round_s: int) -> list[float]:
    """Mean bandwidth (bytes/s) of each round of ``round_s`` seconds over a whole job's bandwidth log."""
    t = np.asarray(t_ms, dtype=float)
    bw = np.asarray(bw_bytes, dtype=float)
    if len(t) == 0:
        return []
    idx = np.minimum((np.maximum(t - 1e-9, 0) // (round_s * 1000.0)).astype(np.int64), 10**9)
    return [float(bw[idx == k].mean()) for k in range(int(idx.max()) + 1) if (idx == k).any()]


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def purge(path: str | os.PathLike, *, is_device: bool, fd: int | None, size_bytes: int) -> str:
    """Discard a whole block device (on the caller's ``O_EXCL`` descriptor) or punch out a file target.

    The caller has already checked the target (``runner.check_target``: a device needs
    ``--allow-device`` and must be unused). Returns what was done, for the run's record.

    Raises
    ------
    ToolError
        The device does not support discard, or the file system cannot punch holes.
    """
    if is_device:
        if fd is None:
            raise ConfigError(f"{path}: purge of a device needs the run's exclusive descriptor")
        try:
            fcntl.ioctl(fd, BLKDISCARD, struct.pack("QQ", 0, size_bytes))
        except OSError as exc:
            raise ToolError(f"{path}: cannot discard the device ({exc.strerror}); run without --purge") from None
        return f"BLKDISCARD of the whole device ({size_bytes} bytes)"
    if not Path(path).exists():
        return "nothing to purge (new file)"
    libc = _libc()
    fdf = os.open(path, os.O_WRONLY)
    try:
        length = os.fstat(fdf).st_size
        rc = libc.fallocate(fdf, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, ctypes.c_long(0), ctypes.c_long(length))
        if rc != 0:
            err = ctypes.get_errno()
            if err in (errno.EOPNOTSUPP, errno.ENOSYS):
                raise ToolError(f"{path}: the file system cannot punch holes; run without --purge")
            raise ToolError(f"{path}: fallocate(PUNCH_HOLE) failed: {os.strerror(err)}")
    finally:
        os.close(fdf)
    return f"fallocate(PUNCH_HOLE) of the whole file ({length} bytes)"
