"""Slow, obviously-correct reference FTL (no timing) for ``swaptrace.kernels.ssd.ftl``.

Plain Python objects: a block is a list of logical units (None = dead or free)
plus a few fields; decisions are written as ``min``/``max`` over the candidates
with the tie-breaks the kernel documents:

* greedy: fewest valid units, then the block whose valid count changed (or
  which closed) most recently;
* fifo: the block closed first;
* cost-benefit: largest ``(1-u)/(2u) * age`` (age in host writes since the
  block closed, ``inf`` for an empty block), then the lower block number;
* random / d-choices: the same splitmix64 numbers indexing the list of closed
  blocks, which (like the kernel's) appends on close and fills a removed
  entry with the last one.
"""

from __future__ import annotations

from collections import deque

from swaptrace.ssd.config import SSDConfig

_MASK = (1 << 64) - 1


class NaiveRng:
    """splitmix64, as in the kernel."""

    def __init__(self, seed: int):
        self.state = (seed * 0x2545F4914F6CDD1D + 1) & _MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        return self.next() % n


class NaiveBlock:
    def __init__(self, number: int, units: int):
        self.number = number
        self.units: list[int | None] = [None] * units
        self.written = 0
        self.state = "free"
        self.closed_at_clock = 0
        self.close_order = 0
        self.touched = 0

    @property
    def valid(self) -> int:
        return sum(u is not None for u in self.units)


class NaiveFTL:
    """Reference FTL with the kernel's GC decisions (pure mapping, no timing)."""

    def __init__(self, cfg: SSDConfig, seed: int = 0):
        self.cfg = cfg
        self.np = cfg.units_per_block
        self.bpd = cfg.blocks_per_die
        self.blocks = [NaiveBlock(b, self.np) for b in range(cfg.blocks)]
        self.free = [deque(range(d * self.bpd, (d + 1) * self.bpd)) for d in range(cfg.dies)]
        self.frontier = [[None, None, None] for _ in range(cfg.dies)]
        self.closed_list: list[list[int]] = [[] for _ in range(cfg.dies)]
        self.l2p: dict[int, int] = {}
        self.rng = NaiveRng(seed)
        self.clock = 0
        self.events = 0
        self.closes = 0
        self.die = 0
        self.die_count = 0
        self.host_writes = 0
        self.gc_writes = 0
        self.erases = 0

    # -- helpers ----------------------------------------------------------------
    def _touch(self, blk: NaiveBlock) -> None:
        self.events += 1
        blk.touched = self.events

    def _close(self, d: int, blk: NaiveBlock) -> None:
        blk.state = "closed"
        blk.closed_at_clock = self.clock
        self.closes += 1
        blk.close_order = self.closes
        self.closed_list[d].append(blk.number)
        self._touch(blk)

    def _victim(self, d: int) -> NaiveBlock | None:
        cands = [self.blocks[b] for b in self.closed_list[d]]
        if not cands:
            return None
        policy = self.cfg.gc_policy
        if policy == "greedy":
            return min(cands, key=lambda b: (b.valid, -b.touched))
        if policy == "fifo":
            return min(cands, key=lambda b: b.close_order)
        if policy == "random":
            return self.blocks[self.closed_list[d][self.rng.below(len(cands))]]
        if policy == "d-choices":
            best = None
            for _ in range(self.cfg.gc_d):
                b = self.blocks[self.closed_list[d][self.rng.below(len(cands))]]
                if best is None or b.valid < best.valid:
                    best = b
            return best

        def score(b: NaiveBlock) -> float:
            if b.valid == 0:
                return float("inf")
            u = b.valid / self.np
            return (1.0 - u) / (2.0 * u) * (self.clock - b.closed_at_clock)

        return max(cands, key=lambda b: (score(b), -b.number))

    def _remove_closed(self, d: int, number: int) -> None:
        lst = self.closed_list[d]
        i = lst.index(number)
        lst[i] = lst[-1]
        lst.pop()

    def _alloc_nogc(self, d: int, stream: int) -> int:
        b = self.frontier[d][stream]
        if b is not None and self.blocks[b].written < self.np:
            blk = self.blocks[b]
            blk.written += 1
            return b * self.np + blk.written - 1
        if b is not None:
            self._close(d, self.blocks[b])
            self.frontier[d][stream] = None
        if not self.free[d]:
            raise RuntimeError("no free block")
        b = self.free[d].popleft()
        blk = self.blocks[b]
        blk.state = "open"
        blk.written = 1
        self.frontier[d][stream] = b
        return b * self.np

    def _gc(self, d: int) -> None:
        victim = self._victim(d)
        if victim is None or (victim.valid == self.np and self.cfg.gc_policy == "greedy"):
            raise RuntimeError("no progress")
        self._remove_closed(d, victim.number)
        victim.state = "victim"
        stream = 1 if self.cfg.separate_gc_stream else 0
        for i, lpn in enumerate(victim.units):
            if lpn is None:
                continue
            slot = self._alloc_nogc(d, stream)
            self.blocks[slot // self.np].units[slot % self.np] = lpn
            self.l2p[lpn] = slot
            victim.units[i] = None
            self.gc_writes += 1
        victim.written = 0
        victim.state = "free"
        self.free[d].append(victim.number)
        self.erases += 1

    def _invalidate(self, slot: int) -> None:
        blk = self.blocks[slot // self.np]
        blk.units[slot % self.np] = None
        if blk.state == "closed" and self.cfg.gc_policy == "greedy":
            self._touch(blk)

    # -- host operations ---------------------------------------------------------
    def write(self, lpn: int, cold: bool = False) -> None:
        old = self.l2p.get(lpn)
        if old is not None:
            self._invalidate(old)
        d = self.die
        stream = 2 if (cold and self.cfg.hot_cold_streams) else 0
        b = self.frontier[d][stream]
        if b is None or self.blocks[b].written == self.np:
            if b is not None:
                self._close(d, self.blocks[b])
                self.frontier[d][stream] = None
            while len(self.free[d]) <= self.cfg.gc_min_free_blocks:
                self._gc(d)
        slot = self._alloc_nogc(d, stream)
        self.blocks[slot // self.np].units[slot % self.np] = lpn
        self.l2p[lpn] = slot
        self.host_writes += 1
        self.clock += 1
        self.die_count += 1
        if self.die_count == self.cfg.program_units:
            self.die_count = 0
            self.die = (d + 1) % self.cfg.dies

    def discard(self, lpn: int) -> None:
        old = self.l2p.pop(lpn, None)
        if old is not None:
            self._invalidate(old)

    def l2p_array(self):
        import numpy as np

        out = np.full(self.cfg.user_units, -1, dtype=np.int64)
        for lpn, slot in self.l2p.items():
            out[lpn] = slot
        return out


# -- steady-state install (twin of swaptrace/kernels/ssd/ftl_steady.py) -----------------------------------

def naive_steady_install(cfg: SSDConfig, n_static, p_dyn, static_lbas, pool_lbas, closed_order, seed_state: int):
    """Unit by unit, as ``fill_slots`` / ``adjust_pool`` / ``assign_lbas`` / ``install_blocks`` do.

    Returns ``(l2p, p2l, valid, closed)`` with ``closed[d]`` the die's data
    blocks oldest first. ``seed_state`` is the splitmix64 state the kernels start from.
    """
    rng = NaiveRng(0)
    rng.state = seed_state
    np_ = cfg.units_per_block
    nb = cfg.blocks
    marks = [None] * (nb * np_)  # "s", "p" or None
    valid = [0] * nb
    drawn = 0
    for b in range(nb):
        for i in range(np_):
            if i < n_static[b]:
                marks[b * np_ + i] = "s"
                valid[b] += 1
            elif p_dyn[b] > 0 and (rng.next() >> 11) / 2.0**53 < p_dyn[b]:
                marks[b * np_ + i] = "p"
                valid[b] += 1
                drawn += 1
    blocks = [b for b in range(nb) if n_static[b] < np_ and p_dyn[b] > 0]
    delta = len(pool_lbas) - drawn
    while delta != 0:
        b = blocks[rng.next() % len(blocks)]
        slot = b * np_ + rng.next() % np_
        if delta > 0 and marks[slot] is None:
            marks[slot] = "p"
            valid[b] += 1
            delta -= 1
        elif delta < 0 and marks[slot] == "p":
            marks[slot] = None
            valid[b] -= 1
            delta += 1
    static_iter, pool_iter = iter(static_lbas), iter(pool_lbas)
    p2l = [-1] * (nb * np_)
    l2p = [-1] * cfg.user_units
    for slot, m in enumerate(marks):
        if m is None:
            continue
        lpn = int(next(static_iter) if m == "s" else next(pool_iter))
        p2l[slot] = lpn
        l2p[lpn] = slot
    closed: list[list[int]] = [[] for _ in range(cfg.dies)]
    for b in closed_order:
        closed[int(b) // cfg.blocks_per_die].append(int(b))
    return l2p, p2l, valid, closed
