"""Slow, obviously-correct twins of the swap designs' kernels (swaptrace/kernels/designs/logswap.py, zns.py).

Plain Python objects and dicts; the same rules as the kernels, written the long way:
the log allocator (append, segments, the head, free stack), the cleaner (victim
choice, moving live pages), swap-in with segment prefetch, and the shadow map.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

OP_READ, OP_WRITE, OP_DISCARD = 0, 1, 2
CAUSE_FAULT, CAUSE_RECLAIM, CAUSE_DISCARD = 0, 2, 3


def log_for(cfg, footprint_pages: int, page_bytes: int) -> NaiveLog:
    """The twin of ``LogSwap(cfg, footprint_pages=...)`` with its sizes from ``LogConfig``'s docstring only."""
    seg = cfg.segment_bytes // page_bytes
    capacity = math.ceil(footprint_pages * (1.0 + cfg.spare_factor))  # pages the log holds at least
    nsegs = max(-(-capacity // seg), cfg.high_segments + 2)
    return NaiveLog(seg=seg, nsegs=nsegs, chunk=(cfg.write_bytes or cfg.segment_bytes) // page_bytes,
                    stride=(cfg.stride_bytes or cfg.segment_bytes) // page_bytes, victim=cfg.victim,
                    swapin=cfg.swapin, pf_cap=8 * seg if cfg.prefetch_pages is None else cfg.prefetch_pages,
                    pf_window=(cfg.prefetch_window_bytes or cfg.segment_bytes) // page_bytes,
                    low=cfg.low_segments, high=cfg.high_segments, discard=cfg.discard,
                    free_at_half=cfg.free_at_half)


@dataclass
class NaiveLog:
    """A log-structured swap area (sizes in pages)."""

    seg: int
    nsegs: int
    chunk: int
    stride: int | None = None
    victim: str = "greedy"
    swapin: str = "page"
    pf_cap: int = 0
    pf_window: int | None = None  # slots of the aligned window a segment swap-in reads (None: the segment)
    low: int = 4
    high: int = 8
    discard: bool = False
    free_at_half: bool = True
    rows: list = field(default_factory=list)  # (access index, op, first slot, pages, cause)
    c: dict = field(default_factory=dict)

    def __post_init__(self):
        self.stride = self.stride or self.seg
        self.in_mem: set[int] = set()
        self.dirty: set[int] = set()
        self.loc: dict[int, int] = {}
        self.ver: dict[int, int] = {}
        self.slot: dict[int, tuple[int, int]] = {}  # slot -> (page, version)
        self.state = ["free"] * self.nsegs
        self.closed_at = [0] * self.nsegs
        self.free = list(range(self.nsegs - 1, -1, -1))  # a stack: the last is taken first
        self.head = None
        self.fill = self.written = 0
        self.prefetched: dict[int, int] = {}  # page -> version read
        self.ring: list[int] = []  # prefetched pages, oldest first (an entry may be stale)
        self.ring_ok: list[bool] = []
        self.now = 0
        for k in ("pages_in pages_out clean_drops read_requests write_requests read_pages write_pages "
                  "clean_read_pages clean_write_pages segments_cleaned prefetch_issued prefetch_hit prefetch_wasted "
                  "buffer_hit bad_versions zero_fill discards ignored_evictions fault_reads slot_frees").split():
            self.c[k] = 0

    # ---- output
    def emit(self, op, slot, n, cause):
        self.rows.append((self.now, op, slot, n, cause))
        if op == OP_READ:
            self.c["read_requests"] += 1
            self.c["read_pages"] += n
        elif op == OP_WRITE:
            self.c["write_requests"] += 1
            self.c["write_pages"] += n
        else:
            self.c["discards"] += 1

    def live(self, s):
        return sum(1 for k in range(s * self.stride, s * self.stride + self.seg) if k in self.slot)

    # ---- the allocator
    def free_segment(self, s):
        self.state[s] = "free"
        self.free.append(s)
        if self.discard:
            self.emit(OP_DISCARD, s * self.stride, self.seg, CAUSE_DISCARD)

    def kill(self, slot):
        del self.slot[slot]
        self.c["slot_frees"] += 1
        s = slot // self.stride
        if self.live(s) == 0 and self.state[s] == "closed":
            self.free_segment(s)

    def write_head(self):
        if self.fill > self.written:
            self.emit(OP_WRITE, self.head * self.stride + self.written, self.fill - self.written, CAUSE_RECLAIM)
            self.written = self.fill

    def append(self, page):
        if self.head is None:
            if not self.free:
                raise OverflowError("log full")
            self.head = self.free.pop()
            self.state[self.head] = "open"
            self.fill = self.written = 0
        s = self.head
        slot = s * self.stride + self.fill
        if page in self.loc:
            self.kill(self.loc.pop(page))
        self.slot[slot] = (page, self.ver.get(page, 0))
        self.loc[page] = slot
        self.fill += 1
        if self.fill - self.written >= self.chunk:
            self.write_head()
        if self.fill == self.seg:
            self.write_head()
            self.state[s] = "closed"
            self.closed_at[s] = self.now
            self.head = None
            if self.live(s) == 0:
                self.free_segment(s)

    # ---- the cleaner
    def pick(self):
        best, score_best = None, -1.0
        for s in range(self.nsegs):
            live = self.live(s)
            if self.state[s] != "closed" or live >= self.seg:
                continue
            if self.victim == "greedy":
                score = float(self.seg - live)
            else:
                u = live / self.seg
                score = (1.0 - u) * float(self.now - self.closed_at[s] + 1) / (1.0 + u)
            if score > score_best:
                best, score_best = s, score
        return best

    def clean(self):
        while len(self.free) < self.high:
            v = self.pick()
            if v is None:
                return
            self.c["segments_cleaned"] += 1
            base = v * self.stride
            live = [k for k in range(base, base + self.seg) if k in self.slot]
            runs = []
            for k in live:
                if runs and runs[-1][1] == k:
                    runs[-1][1] = k + 1
                else:
                    runs.append([k, k + 1])
            for a, b in runs:
                self.emit(OP_READ, a, b - a, CAUSE_RECLAIM)
                self.c["clean_read_pages"] += b - a
            for k in range(base, base + self.seg):
                if self.state[v] != "closed":
                    break
                if k in self.slot:
                    page, version = self.slot[k]
                    if version != self.ver.get(page, 0):
                        self.c["bad_versions"] += 1
                    self.c["clean_write_pages"] += 1
                    self.append(page)

    # ---- the prefetch buffer
    def pf_push(self, q):
        if self.pf_cap == 0:
            return
        if len(self.ring) == self.pf_cap:
            old, ok = self.ring.pop(0), self.ring_ok.pop(0)
            if ok:
                del self.prefetched[old]
                self.c["prefetch_wasted"] += 1
        # an older entry of q (used or dropped) no longer owns q
        self.ring_ok = [ok and p != q for p, ok in zip(self.ring, self.ring_ok, strict=True)]
        self.ring.append(q)
        self.ring_ok.append(True)
        self.prefetched[q] = self.ver.get(q, 0)
        self.c["prefetch_issued"] += 1

    # ---- events
    def evict(self, page):
        if page not in self.in_mem:
            self.c["ignored_evictions"] += 1
            return
        self.in_mem.discard(page)
        if page in self.dirty or page not in self.loc:
            self.dirty.discard(page)
            self.c["pages_out"] += 1
            if self.head is None and len(self.free) < self.low:
                self.clean()
            self.append(page)
        else:
            self.c["clean_drops"] += 1

    def swap_in(self, page):
        self.c["pages_in"] += 1
        slot = self.loc[page]
        if page in self.prefetched:
            self.c["prefetch_hit"] += 1
            if self.prefetched.pop(page) != self.ver.get(page, 0):
                self.c["bad_versions"] += 1
            self.ring_ok = [ok and p != page for p, ok in zip(self.ring, self.ring_ok, strict=True)]
            return
        if self.slot.get(slot) != (page, self.ver.get(page, 0)):
            self.c["bad_versions"] += 1
        s = slot // self.stride
        if s == self.head and slot - s * self.stride >= self.written:
            self.c["buffer_hit"] += 1
            return
        self.c["fault_reads"] += 1
        if self.swapin == "page":
            self.emit(OP_READ, slot, 1, CAUSE_FAULT)
            return
        base = s * self.stride
        end = base + (self.written if s == self.head else self.seg)
        w = min(self.pf_window or self.seg, self.seg)
        base += (slot - base) // w * w
        end = min(end, base + w)
        lo = hi = slot
        for k in range(base, end):
            if k in self.slot:
                q = self.slot[k][0]
                if q != page and q not in self.in_mem and q not in self.prefetched:
                    lo, hi = min(lo, k), max(hi, k)
                    self.pf_push(q)
        self.emit(OP_READ, lo, hi - lo + 1, CAUSE_FAULT)

    def access(self, page, write):
        if page not in self.in_mem:
            if page in self.loc:
                self.swap_in(page)
                self.in_mem.add(page)
                half = 2 * len(self.slot) > self.nsegs * self.seg
                if not write and self.free_at_half and half:
                    self.kill(self.loc.pop(page))
                    self.dirty.add(page)
            else:
                self.c["zero_fill"] += 1
                self.in_mem.add(page)
                self.dirty.add(page)
        if write:
            self.ver[page] = self.ver.get(page, 0) + 1
            if page not in self.dirty:
                self.dirty.add(page)
                if page in self.loc:
                    self.kill(self.loc.pop(page))

    def run(self, pages, writes, evictions):
        """``evictions``: (access index, page) pairs in order; each happens before that access."""
        e = 0
        for i, (page, write) in enumerate(zip(pages, writes, strict=True)):
            self.now = i
            while e < len(evictions) and evictions[e][0] <= i:
                self.evict(evictions[e][1])
                e += 1
            self.access(int(page), bool(write))
        self.write_head()
        return self


class NaiveZNS:
    """A zoned SSD, request by request with Python lists (sizes in map units, times in us)."""

    def __init__(self, *, zone, cap, nzones, prog, dies, dies_per_ch, block_progs, iodepth, max_open,
                 read_us, prog_us, erase_us, xfer_us, host_us):
        self.zone, self.cap, self.nzones, self.prog, self.dies = zone, cap, nzones, prog, dies
        self.dpc, self.block_progs, self.qd, self.max_open = dies_per_ch, block_progs, iodepth, max_open
        self.read_us, self.prog_us, self.erase_us, self.xfer_us, self.host_us = read_us, prog_us, erase_us, xfer_us, host_us
        self.wp = [0] * nzones
        self.die = [0.0] * dies
        self.ch = [0.0] * (dies // dies_per_ch)
        self.host = 0.0
        self.done: list[float] = []
        self.resets = self.erases = 0

    def is_open(self, z):
        return 0 < self.wp[z] < self.cap

    def request(self, op, u0, nu):
        start = self.done[-self.qd] if len(self.done) >= self.qd else 0.0
        z, off = divmod(u0, self.zone)
        if z >= self.nzones:
            raise ValueError("outside")
        self.host = max(self.host, start) + nu * self.host_us
        end = self.host
        if op == OP_DISCARD:
            if off or nu != self.zone:
                raise ValueError("bad reset")
            if self.wp[z]:
                progs = math.ceil(self.wp[z] / self.prog)
                blocks = math.ceil(math.ceil(progs / self.dies) / self.block_progs)
                for j in range(min(progs, self.dies)):
                    d = (z % self.dies + j) % self.dies
                    self.die[d] = max(self.die[d], self.host) + blocks * self.erase_us
                    end = max(end, self.die[d])
                self.erases += blocks * min(progs, self.dies)
            self.wp[z] = 0
            self.resets += 1
        elif op == OP_WRITE:
            if off != self.wp[z] or off + nu > self.cap:
                raise ValueError("not at the write pointer")
            if off == 0 and sum(self.is_open(k) for k in range(self.nzones)) >= self.max_open:
                raise ValueError("open limit")
            for p in range(off // self.prog, (off + nu - 1) // self.prog + 1):
                d = (z + p) % self.dies
                c = d // self.dpc
                n = min(off + nu, (p + 1) * self.prog) - max(off, p * self.prog)
                self.ch[c] = max(self.ch[c], self.host) + n * self.xfer_us
                self.die[d] = max(self.die[d], self.ch[c]) + self.prog_us
                end = max(end, self.die[d])
            self.wp[z] = off + nu
        else:
            if off + nu > self.wp[z]:
                raise ValueError("unwritten")
            for p in range(off // self.prog, (off + nu - 1) // self.prog + 1):
                d = (z + p) % self.dies
                c = d // self.dpc
                n = min(off + nu, (p + 1) * self.prog) - max(off, p * self.prog)
                self.die[d] = max(self.die[d], self.host) + self.read_us
                self.ch[c] = max(self.ch[c], self.die[d]) + n * self.xfer_us
                end = max(end, self.ch[c])
        self.done.append(end)
        return end
