"""Slow discrete-event reference for the SSD model's timing (``swaptrace.kernels.ssd.ftl`` with timing on).

Written from the model's description (``swaptrace/kernels/ssd/ftl.py``'s docstring, docs/ssd.md "What is
modelled", MQSim: Tavakkol et al., FAST 2018), not from the kernel's code. The mapping and GC decisions are
those of :class:`naive_ssd.NaiveFTL` (itself checked against the kernel); this module adds *time*: every
die, every channel and the host link is a resource that serves one operation at a time, first come first
served in the order operations are booked, so each has a "busy until" time (:class:`Resource`). The rules:

1. **Issue.** Requests issue in order, never before the previous one, never before their arrival time (with
   timestamps) and, at queue depth ``q``, only once fewer than ``q`` earlier requests are incomplete: at the
   ``q``-th largest completion time among the earlier requests.
2. **Background GC** (a positive background threshold): when a request issues at ``t``, each die in turn
   that is idle before ``t`` and has fewer free blocks than the threshold collects victims, one after the
   other, each starting when the die becomes free, until the die is busy past ``t`` or above the threshold.
3. **A GC of one victim** occupies its die, from when it is free (and no earlier than the request that
   caused it), for one read per program unit of the victim holding valid data, one program per started
   program unit of moved units, and one erase; without copyback the die's channel also carries every moved
   unit twice (out and back in), from no earlier than the GC's start.
4. **Writes.** The request's data crosses the host link (from ``max(issue, link free)``, one unit transfer
   per map unit). Unit by unit the FTL maps it (foreground GC may run, rule 3 at the issue time), then the
   unit takes the next slot of a ring of ``write_buffer_bytes / map_bytes`` buffer slots. A slot still holding
   a unit not yet programmed first forces its die to program what it has. The unit is in the buffer when it
   has crossed the link, its slot is free and the unit before it is in. A die programs once it has a full
   program unit of buffered units: the channel moves them (from when the last of them is in), then the die
   programs (tPROG, once the transfer is over); their slots free when the program ends. A write completes
   when its last unit is in the buffer.
5. **Reads.** Consecutive units of a request stored in the same program unit are one flash read: the die
   senses (tR, from ``max(issue, die free)``), then its channel transfers those units; the die is held until
   its transfer ends. A unit never written is read as if it were striped the way host writes are (program
   unit ``lpn // pu`` on die ``(lpn // pu) % dies``). The request also crosses the host link; it completes
   when the link is done and the last flash transfer's unit has crossed it.
6. **Discards** take no device time: done at issue.
7. **End of run**: each die programs its partly filled program unit, die 0 first.
"""

from __future__ import annotations

import heapq

from naive_ssd import NaiveFTL

from swaptrace.ssd.config import SSDConfig

READ, WRITE, DISCARD = 0, 1, 2  # swaptrace.core.traceio's op codes, restated


class Resource:
    """One die, channel or link: serves an operation at a time; ``free_at`` is when it is next idle (us)."""

    def __init__(self, name: str):
        self.name = name
        self.free_at = 0.0

    def book(self, earliest: float, duration: float) -> tuple[float, float]:
        start = max(earliest, self.free_at)
        self.free_at = start + duration
        return start, self.free_at


class _TimedFTL(NaiveFTL):
    """NaiveFTL reporting each GC victim (units moved, program units read) to a callback."""

    def __init__(self, cfg: SSDConfig, seed: int, on_gc):
        super().__init__(cfg, seed=seed)
        self.on_gc = on_gc
        self._victim_cost = (0, 0)

    def _remove_closed(self, d: int, number: int) -> None:
        # called once the victim is chosen, before its units move: measure it here
        units = self.blocks[number].units
        pu = self.cfg.program_units
        moved = sum(u is not None for u in units)
        reads = sum(any(u is not None for u in units[g:g + pu]) for g in range(0, len(units), pu))
        self._victim_cost = (moved, reads)
        super()._remove_closed(d, number)

    def _gc(self, d: int) -> None:
        super()._gc(d)
        self.on_gc(d, *self._victim_cost)


class NaiveTimedSSD:
    """The SSD model's timing, one operation at a time (see the module docstring for the rules)."""

    def __init__(self, cfg: SSDConfig, *, iodepth: int = 1, use_timestamps: bool = False, seed: int = 0):
        self.cfg = cfg
        self.iodepth = iodepth
        self.use_timestamps = use_timestamps
        self.dies = [Resource(f"die {d}") for d in range(cfg.dies)]
        self.channels = [Resource(f"channel {c}") for c in range(cfg.channels)]
        self.link = Resource("host link")
        self.unit_chan_us = cfg.map_bytes / cfg.channel_mb_s  # bytes / (MB/s) = us
        self.unit_host_us = cfg.map_bytes / cfg.host_mb_s
        self.pu = cfg.program_units
        self.slots = max(cfg.write_buffer_bytes // cfg.map_bytes, 1)
        self.slot_free_at = [0.0] * self.slots  # when each buffer slot's unit was programmed
        self.slot_die: list[int | None] = [None] * self.slots  # die a slot's unit waits for (None: programmed)
        self.next_slot = 0
        self.waiting: list[list[int]] = [[] for _ in range(cfg.dies)]  # slots buffered per die
        self.waiting_ready = [0.0] * cfg.dies  # when the last of them was in the buffer
        self.completions: list[float] = []  # min-heap of the iodepth largest completion times so far
        self.last_issue = 0.0
        self.now = 0.0  # issue time of the request being served (foreground GC starts no earlier)
        self.ftl = _TimedFTL(cfg, seed, self._gc_time)
        self.bg_threshold = cfg.bg_gc_min_free_blocks
        self.timed = True  # off while preconditioning: no time passes

    # -- resources ------------------------------------------------------------------------------
    def channel_of(self, die: int) -> Resource:
        return self.channels[die % self.cfg.channels]

    def _gc_time(self, d: int, moved: int, reads: int) -> None:
        if not self.timed:
            return
        cfg = self.cfg
        programs = -(-moved // self.pu)
        busy = reads * cfg.read_us + programs * cfg.program_us + cfg.erase_us
        start, _ = self.dies[d].book(self.now, busy)
        if not cfg.gc_copyback:
            self.channel_of(d).book(start, 2 * moved * self.unit_chan_us)

    def _program(self, d: int) -> None:
        """Program die d's buffered units (rule 4)."""
        slots = self.waiting[d]
        if not slots:
            return
        _, transferred = self.channel_of(d).book(self.waiting_ready[d], len(slots) * self.unit_chan_us)
        _, programmed = self.dies[d].book(transferred, self.cfg.program_us)
        for s in slots:
            self.slot_free_at[s] = programmed
            self.slot_die[s] = None
        self.waiting[d] = []
        self.waiting_ready[d] = 0.0

    # -- rules ------------------------------------------------------------------------------------
    def _issue(self, arrival: float) -> float:
        t = self.last_issue
        if self.use_timestamps:
            t = max(t, arrival)
        if self.iodepth > 0 and len(self.completions) == self.iodepth:
            t = max(t, self.completions[0])  # the q-th largest completion so far
        self.last_issue = t
        return t

    def _complete(self, done: float) -> None:
        if self.iodepth > 0:
            heapq.heappush(self.completions, done)
            if len(self.completions) > self.iodepth:
                heapq.heappop(self.completions)

    def _background_gc(self, t: float) -> None:
        for d, die in enumerate(self.dies):
            while die.free_at < t and len(self.ftl.free[d]) < self.bg_threshold:
                try:
                    self._bg_victim(d, die.free_at)
                except RuntimeError:  # nothing worth collecting
                    break

    def _bg_victim(self, d: int, start: float) -> None:
        saved = self.now
        self.now = start
        try:
            self.ftl._gc(d)
        finally:
            self.now = saved

    def _write(self, lpn0: int, n: int, t: float) -> float:
        link_start, _ = self.link.book(t, n * self.unit_host_us)
        admitted = t
        for k in range(n):
            d = self.ftl.die
            self.ftl.write(lpn0 + k)
            s = self.next_slot
            self.next_slot = (s + 1) % self.slots
            if self.slot_die[s] is not None:  # the slot's unit is not programmed yet: force its die
                self._program(self.slot_die[s])
            admitted = max(link_start + (k + 1) * self.unit_host_us, self.slot_free_at[s], admitted)
            self.slot_die[s] = d
            self.waiting[d].append(s)
            self.waiting_ready[d] = max(self.waiting_ready[d], admitted)
            if len(self.waiting[d]) == self.pu:
                self._program(d)
        return admitted

    def _where(self, lpn: int) -> tuple[int, tuple]:
        """(die, program-unit key) a unit is read from (rule 5)."""
        cfg = self.cfg
        slot = self.ftl.l2p.get(lpn)
        if slot is None:
            virtual = lpn // self.pu
            return virtual % cfg.dies, ("unwritten", virtual)
        return (slot // cfg.units_per_block) // cfg.blocks_per_die, ("flash", slot // self.pu)

    def _read(self, lpn0: int, n: int, t: float) -> float:
        groups: list[list] = []  # [die, key, units]
        for k in range(n):
            d, key = self._where(lpn0 + k)
            if groups and groups[-1][1] == key:
                groups[-1][2] += 1
            else:
                groups.append([d, key, 1])
        last_transfer = t
        for d, _, units in groups:
            _, sensed = self.dies[d].book(t, self.cfg.read_us)
            _, transferred = self.channel_of(d).book(sensed, units * self.unit_chan_us)
            self.dies[d].free_at = transferred  # the die holds its data until the channel has taken it
            last_transfer = max(last_transfer, transferred)
        _, link_done = self.link.book(t, n * self.unit_host_us)
        return max(last_transfer + self.unit_host_us, link_done)

    # -- driver -------------------------------------------------------------------------------------
    def run(self, ops, lpns, npages, t_us=None) -> list[tuple[float, float]]:
        """``(done_us, latency_us)`` of each request."""
        out = []
        for i, (o, lpn0, n) in enumerate(zip(ops, lpns, npages, strict=True)):
            t = self._issue(0.0 if t_us is None else float(t_us[i]))
            self.now = t
            if self.bg_threshold > 0:
                self._background_gc(t)
            if o == WRITE:
                done = self._write(int(lpn0), int(n), t)
            elif o == READ:
                done = self._read(int(lpn0), int(n), t)
            else:
                for k in range(int(n)):
                    self.ftl.discard(int(lpn0) + k)
                done = t
            self._complete(done)
            out.append((done, done - t))
        return out

    def finish(self) -> None:
        for d in range(self.cfg.dies):
            self._program(d)

    def fill_sequential_untimed(self, passes: int = 2) -> None:
        """Precondition ``seq``: write every user unit in order ``passes`` times, with no time passing."""
        self.timed = False
        for _ in range(passes):
            for lpn in range(self.cfg.user_units):
                self.ftl.write(lpn)
        self.timed = True
