"""Fit one synthetic fio job to a swap I/O stream.

For drives where exact replay is impractical, a single fio job can mimic the
stream's request-size mix per direction (``bssplit``), its read/write mix
(``rwmixread``, by request count as fio counts it), how often a request
continues where the previous one of the same direction ended
(``percentage_random``) and where on the device requests land
(``random_distribution=zoned:...``, percentages of accesses per equal slice
of the device; fio's ``zoned`` keeps hot areas contiguous, unlike its
zipf/pareto which scatter hot blocks -- fio HOWTO, random_distribution).

fio 3.33 reads the percentages of ``bssplit`` and ``zoned`` as integers that
must add up to 100 (``zoned:60.5/10:39.5/90`` is rejected as "got=99",
verified here), so every fitted distribution is rounded with the largest
remainder method. ``bssplit`` needs ``norandommap=1`` or fio truncates sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from swaptrace.core import traceio

#: fio's BSSPLIT_MAX is 64; keep the job readable with fewer
MAX_BSSPLIT_ENTRIES = 16
DEFAULT_ZONES = 10


def largest_remainder_percent(weights: np.ndarray) -> np.ndarray:
    """Integer percentages proportional to ``weights`` that add up to exactly 100."""
    w = np.asarray(weights, dtype=np.float64)
    if w.sum() <= 0:
        raise ValueError("weights must have a positive sum")
    exact = w / w.sum() * 100.0
    out = np.floor(exact).astype(np.int64)
    short = 100 - int(out.sum())
    order = np.argsort(-(exact - out), kind="stable")
    out[order[:short]] += 1
    return out


@dataclass(frozen=True)
class DirectionFit:
    """Fitted parameters of one direction (read or write)."""

    requests: int
    bytes: int
    #: (request_bytes, percent of requests) pairs, percents sum to 100
    bssplit: tuple[tuple[int, int], ...]
    #: percent of requests that do not continue the previous one of this direction
    percent_random: int

    def bssplit_text(self) -> str:
        return ":".join(f"{size}/{pct}" for size, pct in self.bssplit)


@dataclass(frozen=True)
class StreamFit:
    """A synthetic-job description of a stream (see module docstring)."""

    read: DirectionFit | None
    write: DirectionFit | None
    rwmixread: int
    #: percent of requests per equal slice of the (remapped) device
    zones: tuple[int, ...]
    duration_us: float
    extra: dict = field(default_factory=dict)

    def zoned_text(self) -> str:
        """``zoned:a/s:...`` with integer access and size percents, each summing to 100."""
        sizes = largest_remainder_percent(np.ones(len(self.zones)))
        return "zoned:" + ":".join(f"{a}/{s}" for a, s in zip(self.zones, sizes, strict=True))

    def fio_options(self) -> dict[str, str]:
        """The job options that describe this fit (fio option -> value)."""
        opts: dict[str, str] = {}
        if self.read and self.write:
            opts["rw"] = "randrw"
            opts["rwmixread"] = str(self.rwmixread)
            opts["bssplit"] = f"{self.read.bssplit_text()},{self.write.bssplit_text()}"
            opts["percentage_random"] = f"{self.read.percent_random},{self.write.percent_random}"
        else:
            d = self.read or self.write
            opts["rw"] = "randread" if self.read else "randwrite"
            opts["bssplit"] = d.bssplit_text()
            opts["percentage_random"] = str(d.percent_random)
        opts["norandommap"] = "1"
        opts["random_distribution"] = self.zoned_text()
        return opts


def _bssplit(sizes: np.ndarray, counts: np.ndarray) -> tuple[tuple[int, int], ...]:
    order = np.argsort(-counts, kind="stable")[:MAX_BSSPLIT_ENTRIES]
    sizes, counts = sizes[order], counts[order]
    pct = largest_remainder_percent(counts)
    keep = pct > 0
    pairs = sorted(zip(sizes[keep].tolist(), pct[keep].tolist(), strict=True))
    return tuple((int(s), int(p)) for s, p in pairs)


def fit_stream(stream: traceio.TraceFile, remap, zones: int = DEFAULT_ZONES) -> StreamFit:
    """Fit a :class:`StreamFit` to the read/write requests of ``stream``.

    Parameters
    ----------
    stream : TraceFile
        An opened ``swapio`` file.
    remap : swaptrace.fio.iolog.Remap
        The same remapping the replay uses, so zones refer to the target.
    zones : int
        Number of equal slices for the spatial distribution.

    Returns
    -------
    StreamFit
        ``read``/``write`` are ``None`` for a direction without requests.
    """
    size_counts = [dict(), dict()]
    nbytes = [0, 0]
    nreq = [0, 0]
    seq = [0, 0]
    prev_end = [None, None]
    zone_counts = np.zeros(zones, dtype=np.int64)
    t_first = t_last = None
    zone_bytes = remap.target_bytes / zones
    for batch in stream.iter_batches(columns=["t_us", "op", "offset", "length"]):
        keep = batch["op"] != traceio.OP_DISCARD
        if not keep.any():
            continue
        op = batch["op"][keep]
        t = batch["t_us"][keep]
        t_first = float(t[0]) if t_first is None else t_first
        t_last = float(t[-1])
        offset, length = remap.apply(batch["offset"][keep], batch["length"][keep])
        z = np.minimum((offset.astype(np.float64) / zone_bytes).astype(np.int64), zones - 1)
        zone_counts += np.bincount(z, minlength=zones)
        for d, code in enumerate((traceio.OP_READ, traceio.OP_WRITE)):
            sel = op == code
            if not sel.any():
                continue
            o, ln = offset[sel], length[sel]
            sizes, counts = np.unique(ln, return_counts=True)
            for s, c in zip(sizes.tolist(), counts.tolist(), strict=True):
                size_counts[d][s] = size_counts[d].get(s, 0) + c
            nbytes[d] += int(ln.sum())
            nreq[d] += int(sel.sum())
            ends = o + ln
            prev = np.empty_like(o)
            prev[1:] = ends[:-1]
            prev[0] = prev_end[d] if prev_end[d] is not None else np.uint64(2**63)
            seq[d] += int((o == prev).sum())
            prev_end[d] = ends[-1]
    fits = []
    for d in range(2):
        if nreq[d] == 0:
            fits.append(None)
            continue
        sizes = np.array(list(size_counts[d].keys()), dtype=np.int64)
        counts = np.array(list(size_counts[d].values()), dtype=np.int64)
        pct_random = int(round(100.0 * (nreq[d] - seq[d]) / nreq[d]))
        fits.append(DirectionFit(nreq[d], nbytes[d], _bssplit(sizes, counts), pct_random))
    total = nreq[0] + nreq[1]
    rwmix = int(round(100.0 * nreq[0] / total)) if total else 0
    zone_pct = largest_remainder_percent(zone_counts) if zone_counts.sum() else np.zeros(zones, dtype=np.int64)
    return StreamFit(
        read=fits[0],
        write=fits[1],
        rwmixread=rwmix,
        zones=tuple(int(x) for x in zone_pct),
        duration_us=(t_last - t_first) if t_first is not None else 0.0,
        extra={"sequential_requests": {"read": seq[0], "write": seq[1]}},
    )
