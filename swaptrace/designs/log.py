"""Design 2: aggregated, log-structured swap-out (and, with zone geometry, design 3's host side).

The residency decisions are the ``linux`` run's: this module replays that run's
evictions (:meth:`swaptrace.emulate.Emulator.take_evictions`) and the trace's
accesses onto a log (:mod:`swaptrace.kernels.designs.logswap`) and writes the design's
own ``swapio`` stream. Sources: Rosenblum & Ousterhout, "The Design and
Implementation of a Log-Structured File System", ACM TOCS 10(1), 1992 (segments,
cleaning, the cost-benefit victim policy); docs/designs.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from swaptrace.core.bounds import check_allocation
from swaptrace.core.units import format_bytes
from swaptrace.designs.choices import SWAPIN_NAMES, VICTIM_NAMES
from swaptrace.errors import ConfigError
from swaptrace.kernels.designs import logswap as kl

VICTIMS = dict(zip(VICTIM_NAMES, (kl.VICTIM_GREEDY, kl.VICTIM_COST_BENEFIT), strict=True))
SWAPINS = dict(zip(SWAPIN_NAMES, (kl.SWAPIN_PAGE, kl.SWAPIN_SEGMENT), strict=True))
#: output rows per kernel call before the driver takes them (one access may add many more while cleaning)
OUT_ROWS = 1 << 18


@dataclass(frozen=True)
class LogConfig:
    """Parameters of a log-structured swap area (sizes in bytes).

    Attributes
    ----------
    segment_bytes : int
        The cleaning unit (LFS's segment; a zone's capacity on a zoned device).
    write_bytes : int or None
        Bytes per write request as the head fills (default: ``segment_bytes``,
        one sequential write per segment).
    stride_bytes : int or None
        Distance between segment starts (default ``segment_bytes``; a zone's
        size when its capacity is smaller).
    spare_factor : float
        Log capacity above the footprint, as a fraction of it (the cleaner's room): the log
        has ``ceil(ceil(F * (1 + spare_factor)) / segment_pages)`` segments for a footprint
        of ``F`` pages, and at least ``high_segments + 2`` (room for the cleaner's goal and
        the head).
    victim : str
        ``greedy`` (fewest live pages) or ``cost-benefit`` (LFS 1992, section 3.6).
    swapin : str
        ``page`` (the faulting page, as Linux) or ``segment`` (its segment's
        neighbours on the log too: pages evicted together are read together).
    prefetch_pages : int or None
        Pages the prefetch buffer holds (first in, first out; default 8 segments).
    prefetch_window_bytes : int or None
        With ``swapin="segment"``: the aligned part of the segment around the
        faulting page that is read (default: the whole segment).
    low_segments, high_segments : int
        The cleaner starts when free segments fall below ``low`` and stops at ``high``.
    discard : bool
        Discard a segment when its last live page dies (a zone reset on a zoned device).
    free_at_half : bool
        Free a swapped-in page's slot when more than half the log is live (Linux's
        ``vm_swap_full``, mm/swapfile.c).
    """

    segment_bytes: int = 1 << 20
    write_bytes: int | None = None
    stride_bytes: int | None = None
    spare_factor: float = 0.25
    victim: str = "greedy"
    swapin: str = "page"
    prefetch_pages: int | None = None
    prefetch_window_bytes: int | None = None
    low_segments: int = 4
    high_segments: int = 8
    discard: bool = False
    free_at_half: bool = True

    def check(self, page_bytes: int) -> None:
        """Raise ConfigError for a value the log cannot use with ``page_bytes`` pages."""
        for name, option in _OPTIONS.items():
            v = getattr(self, name)
            if v is not None and (v < page_bytes or v % page_bytes):
                raise ConfigError(f"{option} must be a positive multiple of the page size ({page_bytes} B), got "
                                  f"{format_bytes(v)}")
        if self.stride_bytes is not None and self.stride_bytes < self.segment_bytes:
            raise ConfigError("--zone-size must be at least --zone-capacity (a zone's size holds its capacity)")
        if self.write_bytes is not None and self.write_bytes > self.segment_bytes:
            raise ConfigError("--write-size must not exceed the segment size")
        if self.victim not in VICTIMS:
            raise ConfigError(f"unknown victim policy {self.victim!r}; choose from {', '.join(VICTIMS)}")
        if self.swapin not in SWAPINS:
            raise ConfigError(f"unknown swap-in {self.swapin!r}; choose from {', '.join(SWAPINS)}")
        if not 0.0 <= self.spare_factor <= 10.0:
            raise ConfigError(f"--spare must be in 0..10, got {self.spare_factor}")
        if not 2 <= self.low_segments <= self.high_segments:
            raise ConfigError("the cleaner needs 2 <= low_segments <= high_segments")

    def check_size(self, footprint_pages: int, page_bytes: int) -> None:
        """Refuse a log whose tables would not fit in this machine's memory, before any is allocated (a
        1 TiB segment asks for the slot maps of at least ``high_segments + 2`` such segments)."""
        seg = self.segment_bytes // page_bytes
        stride = (self.stride_bytes or self.segment_bytes) // page_bytes
        nsegs = max(-(-int(np.ceil(footprint_pages * (1.0 + self.spare_factor))) // seg), self.high_segments + 2)
        need = nsegs * stride * 16 + int(footprint_pages) * 41 + 8 * seg * 8 + 4 * (self.high_segments + 2) * seg * 32
        check_allocation(need, f"the log design with {format_bytes(self.segment_bytes)} segments",
                         "give a smaller --segment-size (or --zone-size)")

    def describe(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


#: the options that set each size field (in messages)
_OPTIONS = {"segment_bytes": "--segment-size", "write_bytes": "--write-size", "stride_bytes": "--zone-size",
            "prefetch_window_bytes": "--prefetch-window"}


@dataclass
class LogCounters:
    """What a log run did (pages unless named otherwise)."""

    pages_in: int
    pages_out: int
    clean_drops: int
    read_requests: int
    write_requests: int
    read_pages: int
    write_pages: int
    clean_read_pages: int
    clean_write_pages: int
    segments_cleaned: int
    prefetch_issued: int
    prefetch_hit: int
    prefetch_wasted: int
    buffer_hit: int
    bad_versions: int
    zero_fill: int
    discards: int
    ignored_evictions: int
    fault_reads: int
    slot_frees: int  # slots that died: their page was written again elsewhere, swapped in and freed, or dropped
    live_slots: int

    @property
    def host_write_amplification(self) -> float:
        """Pages written to the device per page evicted dirty (cleaning's moves are the excess)."""
        return self.write_pages / self.pages_out if self.pages_out else float("nan")


_COUNTER_REGS = {
    "pages_in": kl.C_PAGES_IN, "pages_out": kl.C_PAGES_OUT, "clean_drops": kl.C_CLEAN_DROPS,
    "read_requests": kl.C_READ_REQ, "write_requests": kl.C_WRITE_REQ, "read_pages": kl.C_READ_PAGES,
    "write_pages": kl.C_WRITE_PAGES, "clean_read_pages": kl.C_CLEAN_READ_PAGES,
    "clean_write_pages": kl.C_CLEAN_WRITE_PAGES, "segments_cleaned": kl.C_CLEANED,
    "prefetch_issued": kl.C_PF_ISSUED, "prefetch_hit": kl.C_PF_HIT, "prefetch_wasted": kl.C_PF_WASTED,
    "buffer_hit": kl.C_BUF_HIT, "bad_versions": kl.C_BAD_VERSION, "zero_fill": kl.C_ZERO_FILL,
    "discards": kl.C_DISCARDS, "ignored_evictions": kl.C_IGNORED_EVICTIONS, "fault_reads": kl.C_FAULT_READS,
    "slot_frees": kl.C_SLOT_FREES, "live_slots": kl.R_LIVE,
}


class LogSwap:
    """One log-structured swap area fed the ``linux`` run's accesses and evictions chunk by chunk.

    Parameters
    ----------
    cfg : LogConfig
    footprint_pages, page_bytes : int
        The trace's.
    nsteps, first_step : int
        The trace's steps (rows carry ``step`` and the access's index within it).
    """

    def __init__(self, cfg: LogConfig, *, footprint_pages: int, page_bytes: int, nsteps: int, first_step: int = 0):
        cfg.check(page_bytes)
        cfg.check_size(footprint_pages, page_bytes)
        self.cfg = cfg
        self.page_bytes = page_bytes
        seg = cfg.segment_bytes // page_bytes
        stride = (cfg.stride_bytes or cfg.segment_bytes) // page_bytes
        chunk = (cfg.write_bytes or cfg.segment_bytes) // page_bytes
        capacity = int(np.ceil(footprint_pages * (1.0 + cfg.spare_factor)))
        nsegs = max(-(-capacity // seg), cfg.high_segments + 2)
        self.nsegs, self.seg_pages, self.stride_pages = nsegs, seg, stride
        self.device_bytes = nsegs * stride * page_bytes
        F = int(footprint_pages)
        pf_cap = 8 * seg if cfg.prefetch_pages is None else int(cfg.prefetch_pages)
        r = np.zeros(kl.NREGS, np.int64)
        r[kl.R_HEAD] = -1
        r[kl.P_SEG], r[kl.P_STRIDE], r[kl.P_NSEGS], r[kl.P_CHUNK] = seg, stride, nsegs, chunk
        r[kl.P_PAGE_BYTES], r[kl.P_VICTIM], r[kl.P_SWAPIN] = page_bytes, VICTIMS[cfg.victim], SWAPINS[cfg.swapin]
        r[kl.P_PF_CAP], r[kl.P_LOW], r[kl.P_HIGH] = pf_cap, cfg.low_segments, cfg.high_segments
        r[kl.P_DISCARD], r[kl.P_FREE_AT_HALF] = int(cfg.discard), int(cfg.free_at_half)
        r[kl.P_PF_WINDOW] = min(seg, (cfg.prefetch_window_bytes or cfg.segment_bytes) // page_bytes)
        # rows one access may add: its evictions' writes plus a cleaning pass (reads, writes, discards)
        margin = 4 * (cfg.high_segments + 2) * (seg + 2) + 4 * F // max(chunk, 1) + 64
        r[kl.P_OUT_CAP] = OUT_ROWS + margin
        r[kl.R_NFREE] = nsegs
        self.r = r
        self.flags = np.zeros(F, np.uint8)
        self.loc = np.full(F, -1, np.int64)
        self.ver = np.zeros(F, np.int64)
        self.pf_seq = np.full(F, -1, np.int64)
        self.pf_ver = np.zeros(F, np.int64)
        self.pf_ring = np.zeros(max(pf_cap, 1), np.int64)
        self.slot_page = np.full(nsegs * stride, -1, np.int64)
        self.slot_ver = np.zeros(nsegs * stride, np.int64)
        self.seg_live = np.zeros(nsegs, np.int64)
        self.seg_state = np.zeros(nsegs, np.int8)
        self.seg_time = np.zeros(nsegs, np.int64)
        # lowest segment on top: the log starts at offset 0
        self.free_stack = np.arange(nsegs - 1, -1, -1, dtype=np.int64)
        self.out_i, self.out_f = kl.empty_columns(int(r[kl.P_OUT_CAP]))
        self.step_seen = np.zeros(max(int(nsteps), 1), np.int64)
        self.first_step = int(first_step)
        self.base = 0

    def feed(self, pages: np.ndarray, writes: np.ndarray, steps: np.ndarray, ev_at: np.ndarray,
             ev_page: np.ndarray) -> Iterator[dict[str, np.ndarray]]:
        """Replay one chunk (int64 pages and steps, uint8 access codes) and the
        evictions during it; yield swapio row dicts whose ``t_us`` still holds the index within the step."""
        r = self.r
        r[kl.R_EV] = 0
        i = 0
        while i < pages.size:
            i = kl.log_run(r, self.flags, self.loc, self.ver, self.pf_seq, self.pf_ver, self.pf_ring,
                            self.slot_page, self.slot_ver, self.seg_live, self.seg_state, self.seg_time,
                            self.free_stack, self.out_i, self.out_f, self.step_seen, self.first_step, pages, writes,
                            steps, self.base, ev_at, ev_page, i, OUT_ROWS)
            self._check()
            rows = self._take_rows()
            if rows is not None:
                yield rows
        if int(r[kl.R_EV]) != ev_at.size:
            raise RuntimeError("evictions after the chunk's last access (a bug)")
        self.base += pages.size

    def finish(self) -> dict[str, np.ndarray] | None:
        """Write the head's last pages; the final rows, or None."""
        kl.log_finish(self.r, self.out_i, self.out_f)
        self._check()
        return self._take_rows()

    def _check(self) -> None:
        err = int(self.r[kl.R_ERROR])
        if err == kl.ERR_FULL:
            raise ConfigError(
                f"the log is full: {self.nsegs} segments of {format_bytes(self.cfg.segment_bytes)} hold no dead page "
                f"to clean; give a larger --spare")
        if err == kl.ERR_OUT_FULL:
            raise RuntimeError("log output buffer overflow (a bug)")

    def _take_rows(self) -> dict[str, np.ndarray] | None:
        n = int(self.r[kl.R_OUT_N])
        if n == 0:
            return None
        o = self.out_i[:, :n]
        rows = {"t_us": self.out_f[:n].copy(), "step": o[0].astype(np.uint32), "op": o[1].astype(np.int8),
                "offset": o[2].astype(np.uint64), "length": o[3].astype(np.uint32), "cause": o[4].astype(np.int8)}
        self.r[kl.R_OUT_N] = 0
        return rows

    def counters(self) -> LogCounters:
        r = self.r
        return LogCounters(**{k: int(r[i]) for k, i in _COUNTER_REGS.items()})

    def check_invariants(self) -> list[str]:
        """The shadow map's and allocator's invariants now; the list of those broken (empty if none)."""
        bad = []
        live = self.slot_page >= 0
        c = self.counters()
        if c.bad_versions:
            bad.append(f"{c.bad_versions} swap-ins returned a stale version")
        if int(live.sum()) != c.live_slots:
            bad.append(f"live slots {int(live.sum())} != counter {c.live_slots}")
        on_log = np.flatnonzero(self.loc >= 0)
        if on_log.size != c.live_slots:
            bad.append(f"pages with a slot {on_log.size} != live slots {c.live_slots} (a leak)")
        if on_log.size and not np.array_equal(self.slot_page[self.loc[on_log]], on_log):
            bad.append("a page's slot holds another page")
        if on_log.size and not np.array_equal(self.slot_ver[self.loc[on_log]], self.ver[on_log]):
            bad.append("a live slot holds an old version")
        out = (self.flags & kl.IN_MEM) == 0
        touched = self.ver > 0
        lost = np.flatnonzero(out & touched & (self.loc < 0))
        if lost.size:
            bad.append(f"{lost.size} written pages are neither in memory nor on the log (dropped)")
        per_seg = live.reshape(self.nsegs, self.stride_pages).sum(axis=1)
        if not np.array_equal(per_seg, self.seg_live):
            bad.append("per-segment live counts disagree with the slots")
        free = self.free_stack[: int(self.r[kl.R_NFREE])]
        if np.any(self.seg_state[free] != kl.SEG_FREE) or np.any(self.seg_live[free] != 0):
            bad.append("a free segment is in use")
        if int(np.sum(self.seg_state == kl.SEG_FREE)) != free.size:
            bad.append("a segment is neither free nor in use (a segment leak)")
        return bad
