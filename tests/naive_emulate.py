"""Slow, obviously-correct references for the page-cache emulator and miss-ratio curves.

Plain Python objects (an ``OrderedDict`` LRU, a list CLOCK, two Python lists
for Linux's active/inactive reclaim, a dict-of-lists slot allocator) that
follow the same rules as ``swaptrace.kernels`` -- see the docstrings of
``swaptrace.emulate`` and the kernel modules for the rules and their
sources. Tests compare counters, request rows and final state.

The swap zero map (``linux``, Linux >= 6.12, mm/page_io.c) is written here from the kernel's rules, not the
kernel module's code: ``NaiveEmulator.zeros`` holds the pages whose contents are all zeros (zero-filled by a
load, or last stored to with zeros: access code 4); reclaim gives such a page that must be written a slot but
no write and frees it at once (``swap_writeout``: ``swpout_zero``), and a swap-in of it reads nothing
(``swap_read_folio``: ``swpin_zero``), faulting or read ahead.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque

import numpy as np

from swaptrace.emulate import (
    DEFAULT_FILL_WRITE_CREDIT,
    DEFAULT_SCAN_PRIORITIES,
    DEFAULT_STATS_FLUSH_STEPS,
    DEFAULT_WRITE_COST,
    DEFAULT_WRITE_LATENCY,
    DEFAULT_WRITEBACK_COMPLETION,
    DEFAULT_WRITEBACK_LAG,
)

SWAP_CLUSTER_MAX = 32


def naive_swapin_nr_pages(prev_offset, offset, hits, max_pages, prev_win):
    """``__swapin_nr_pages`` of mm/swap_state.c, written out."""
    if hits == 0:
        pages = 2 if abs(offset - prev_offset) == 1 else 1
    else:
        pages = 4
        while pages < hits + 2:
            pages *= 2
    pages = min(pages, max_pages)
    return max(pages, prev_win // 2)


class NaiveLRU:
    def __init__(self):
        self.order = OrderedDict()  # oldest first

    def hit(self, page, flags):
        self.order.move_to_end(page)

    def insert(self, page, target, flags):
        self.order[page] = True

    def reclaim(self, n, emu):
        done = 0
        while done < n and self.order and not emu.error:
            page, _ = self.order.popitem(last=False)
            emu.evict(page)
            done += 1

    def remove(self, page):
        """The program freed ``page``: it leaves the list."""
        del self.order[page]

    def resident_order(self):
        return list(self.order)[::-1]  # most recent first


class NaiveClock:
    def __init__(self):
        self.queue = []  # oldest first (index 0 is the hand)
        self.ref = {}

    def hit(self, page, flags):
        self.ref[page] = True

    def insert(self, page, target, flags):
        self.queue.append(page)
        self.ref[page] = False

    def reclaim(self, n, emu):
        done = 0
        while done < n and self.queue and not emu.error:
            page = self.queue.pop(0)
            if self.ref[page]:
                self.ref[page] = False
                self.queue.append(page)
            else:
                del self.ref[page]
                emu.evict(page)
                done += 1

    def remove(self, page):
        self.queue.remove(page)
        del self.ref[page]

    def resident_order(self):
        return self.queue[::-1]


class NaiveLinux:
    """Two lists, oldest first; bits young / referenced per page."""

    def __init__(self, page_bytes):
        self.active = []
        self.inactive = []
        self.young = {}
        self.referenced = {}
        self.page_bytes = page_bytes
        self.shadow = {}  # page -> nonresident age at its eviction
        self.age = 0  # nonresident_age: evictions + activations
        self.refault_activations = 0
        self.refault_snap = 0
        self.flush_steps = 0  # 0: reclaim reads exact list sizes and counters
        self.scan_priorities = False  # True: reclaim walks priority levels (reclaim_levels)
        self.stat_step = 0  # step of the last statistics flush
        self.stat = (0, 0, 0)  # active, inactive, refault activations as of that flush

    def stats_tick(self, step):
        """Flush the memcg statistics when ``flush_steps`` steps have passed since the last flush."""
        if self.flush_steps and step >= self.stat_step + self.flush_steps:
            self.stat_step = step
            self.stat = (len(self.active), len(self.inactive), self.refault_activations)

    def stat_active(self):
        return self.stat[0] if self.flush_steps else len(self.active)

    def stat_refaults(self):
        return self.stat[2] if self.flush_steps else self.refault_activations

    def hit(self, page, flags):
        self.young[page] = True

    def insert(self, page, target, flags):
        self.young[page] = bool(target)
        self.referenced[page] = False
        shadow = self.shadow.pop(page, None)
        if shadow is not None and self.age - shadow <= self.stat_active():  # refault activation
            self.active.append(page)
            self.age += 1
            self.refault_activations += 1
        else:
            self.inactive.append(page)

    def inactive_is_low(self):
        active = self.stat_active()
        inactive = self.stat[1] if self.flush_steps else len(self.inactive)
        gb = (active + inactive) * self.page_bytes // (1 << 30)
        ratio = math.isqrt(10 * gb) if gb else 1
        return inactive * ratio < active

    def deactivate(self, n):
        for _ in range(n):
            if not self.active:
                break
            page = self.active.pop(0)
            self.young[page] = False
            self.inactive.append(page)

    def rotate_to_tail(self, page):
        """``folio_rotate_reclaimable``: a written page whose write completed goes to the inactive tail."""
        if page in self.inactive:
            self.inactive.remove(page)
            self.inactive.insert(0, page)

    def shrink_batch(self, take, emu, written):
        """``take`` pages from the inactive tail; returns (pages freed, pages written by the call so far)."""
        lag = emu.writeback_lag
        freed = 0
        if lag > 0 and written >= lag + emu.writeback_throttle:  # throttled: waits for all its writes
            emu.flush()  # a task that sleeps submits its plug (schedule -> blk_flush_plug)
            emu.complete_writes(None)
            emu.c["writeback_waits"] += 1
            written = 0
        elif emu.writeback_completion == "device":  # what the device has written by the end of this isolation
            emu.complete_writes(emu.wb_clock + take)
        elif lag > 0:  # writes issued at least lag isolated pages ago are complete
            emu.complete_writes(emu.wb_clock + take - lag)
        emu.wb_clock += take
        batch = self.inactive[:take]
        del self.inactive[:take]
        for page in batch:
            if page in emu.wb_pages:  # memcg reclaim (cgroup v1) waits; writes complete in order
                emu.flush()  # waiting is sleeping: the plug is submitted first, so nothing merges across it
                emu.complete_writes(None)
                emu.c["writeback_waits"] += 1
            if page not in emu.resident:  # the program freed it under writeback: gone as the write completed
                continue
            if self.young[page]:
                self.young[page] = False
                if self.referenced[page]:
                    self.active.append(page)
                    self.age += 1
                    if emu.slot_of.get(page) is not None and emu.swap_full():
                        emu.free_slot(page)
                        emu.c["slot_frees"] += 1
                else:
                    self.referenced[page] = True
                    self.inactive.append(page)
            elif lag > 0 and (page in emu.dirty or page not in emu.slot_of) and not emu.skips_io(page):
                # pageout: unmapped, written, back at the inactive head until the write completes
                if page not in emu.slot_of and emu.alloc_slot(page) is None:
                    break
                if emu.plug_rules:
                    emu.plug_add(1, emu.slot_of[page], 2)
                    emu.nested_writes += emu.in_swapin
                else:
                    emu.submit(1, emu.slot_of[page], 2)
                emu.c["pages_out"] += 1
                emu.mapped.discard(page)
                emu.dirty.discard(page)
                self.young[page] = False
                self.referenced[page] = False
                self.inactive.append(page)
                if emu.writeback_completion == "device":  # in the level's plug: no completion time yet
                    emu.writes_in_flight.append([page, math.inf])
                    emu.plugged += 1
                else:
                    emu.writes_in_flight.append([page, emu.wb_clock])
                emu.wb_pages.add(page)
                written += 1
            else:
                self.referenced[page] = False
                del self.young[page]
                del self.referenced[page]
                emu.evict(page)
                self.shadow[page] = self.age
                self.age += 1
                freed += 1
        return freed, written

    def reclaim(self, n, emu):
        if self.scan_priorities:
            return self.reclaim_levels(n, emu)
        done = 0
        written = 0  # since this call last waited
        refaulted = self.stat_refaults() != self.refault_snap
        while done < n and (self.active or self.inactive) and not emu.error:
            if self.inactive_is_low() or not self.inactive:
                self.deactivate(SWAP_CLUSTER_MAX)
            elif refaulted:
                self.deactivate(min(SWAP_CLUSTER_MAX, SWAP_CLUSTER_MAX * len(self.active) // len(self.inactive)))
            freed, written = self.shrink_batch(min(SWAP_CLUSTER_MAX, len(self.inactive)), emu, written)
            done += freed
        self.refault_snap = self.stat_refaults()
        return done

    def reclaim_levels(self, n, emu):
        """Priority levels 12 .. 0, each scanning (size >> priority) * 90 // 510 of both lists."""
        done = 0
        written = 0
        if emu.fill_write_credit and emu.c["major_faults"] == 0:
            units = (emu.c["zero_fill"] - emu.fill_seen) * emu.fill_write_credit // 8
            emu.wb_clock += units
            emu.fill_seen += units * 8 // emu.fill_write_credit
        refaulted = self.stat_refaults() != self.refault_snap
        prio = 12
        while prio >= 0 and done < n and (self.active or self.inactive) and not emu.error:
            deactivate = refaulted or self.inactive_is_low()
            nr_in = (len(self.inactive) >> prio) * 90 // 510
            nr_act = (len(self.active) >> prio) * 90 // 510 if deactivate else 0
            if prio == 0 and nr_in == 0:
                nr_in = min(SWAP_CLUSTER_MAX, len(self.inactive))
            while nr_in > 0 and self.inactive and not emu.error:
                take = min(SWAP_CLUSTER_MAX, nr_in, len(self.inactive))
                nr_in -= take
                freed, written = self.shrink_batch(take, emu, written)
                done += freed
                if nr_act > 0:
                    d = min(SWAP_CLUSTER_MAX, nr_act)
                    nr_act -= d
                    self.deactivate(d)
                if done >= n:
                    break
            if self.inactive_is_low() or not self.inactive:
                self.deactivate(SWAP_CLUSTER_MAX)
            if emu.in_swapin:  # the swap-in's plug is the task's: this level's plug was never its own
                prio -= 1
                continue
            emu.flush()  # shrink_lruvec's blk_finish_plug: one level's requests never merge with the next's
            if emu.writeback_completion == "level":  # the level's plug is finished: its writes are done
                emu.complete_writes(None)
            elif emu.writeback_completion == "next-level":  # done while the next level scans
                emu.complete_writes(emu.wb_mark)
                emu.wb_mark = emu.wb_clock
            elif emu.writeback_completion == "device":  # the plug goes to the device
                emu.unplug()
            prio -= 1
        if emu.writeback_completion == "call":
            emu.complete_writes(None)
        self.refault_snap = self.stat_refaults()
        return done

    def remove(self, page):
        """Off whichever list holds it (a page isolated by reclaim is on neither), no shadow left."""
        for lst in (self.active, self.inactive):
            if page in lst:
                lst.remove(page)
        self.young.pop(page, None)
        self.referenced.pop(page, None)
        self.shadow.pop(page, None)

    def resident_order(self):
        return self.active[::-1] + self.inactive[::-1]


class NaiveEmulator:
    """The emulator's rules on Python containers; ``run`` returns request rows and counters."""

    def __init__(
        self,
        footprint_pages,
        budget_pages,
        *,
        policy="lru",
        readahead="none",
        page_cluster=3,
        cluster_slots=256,
        nslots=None,
        max_request_pages=128,
        page_bytes=4096,
        batch_pages=None,
        step_us=100_000.0,
        first_step=0,
        writeback_lag=None,
        zero_page=None,
        zeromap=None,
        writeback_throttle=2 * SWAP_CLUSTER_MAX,
        stats_flush_steps=None,
        scan_priorities=None,
        writeback_completion=None,
        write_cost=None,
        fill_write_credit=None,
        write_latency=None,
        plug_rules=False,
    ):
        self.F = footprint_pages
        self.budget = budget_pages
        self.policy_name = policy
        self.policy = {"lru": NaiveLRU, "clock": NaiveClock}.get(policy, None)
        self.policy = self.policy() if self.policy else NaiveLinux(page_bytes)
        if policy == "linux":
            self.policy.flush_steps = DEFAULT_STATS_FLUSH_STEPS if stats_flush_steps is None else stats_flush_steps
            self.policy.stat_step = first_step
            self.policy.scan_priorities = DEFAULT_SCAN_PRIORITIES if scan_priorities is None else scan_priorities
        self.batch = batch_pages or (SWAP_CLUSTER_MAX if policy == "linux" else 1)
        self.readahead = readahead
        self.page_cluster = page_cluster
        self.cs = cluster_slots
        self.nslots = nslots or -(-(footprint_pages + 1) // cluster_slots) * cluster_slots
        self.max_req = max_request_pages
        self.page_bytes = page_bytes
        self.pmd_pages = max(1, (2 << 20) // page_bytes)
        self.step_us = step_us
        self.first_step = first_step
        # linux only: writes in flight (page, writeback clock at issue), oldest first; zero-page mappings
        self.writeback_lag = (DEFAULT_WRITEBACK_LAG if policy == "linux" else 0) if writeback_lag is None else writeback_lag
        self.zero_page = (policy == "linux") if zero_page is None else zero_page
        # linux >= 6.12's swap zero map (mm/page_io.c swap_writeout, swap_read_folio): a page whose contents are
        # all zeros goes to swap with a slot but no write, and comes back with no read
        self.zeromap = (policy == "linux") if zeromap is None else zeromap
        self.writeback_throttle = writeback_throttle
        # "level": a priority level's writes complete as it ends (NaiveLinux.reclaim_levels), never by the
        # clock: an infinite lag, which also makes the throttle (lag + throttle) unreachable
        if writeback_completion is None:  # a lag given, or 32-page rounds: the lag rule
            by_level = policy == "linux" and self.policy.scan_priorities and writeback_lag is None
            writeback_completion = DEFAULT_WRITEBACK_COMPLETION if by_level else "lag"
        self.writeback_completion = writeback_completion
        if self.writeback_completion in ("level", "next-level", "call", "device"):
            self.writeback_lag = math.inf
        # "device": one page written per write_cost pages isolated, in order; a level's writes join the queue
        # as the level ends (unplug), and writes_in_flight then holds completion clocks, not issue clocks
        device = self.writeback_completion == "device"
        self.write_cost = (DEFAULT_WRITE_COST if write_cost is None else write_cost) if device else 0
        # "device": until the first major fault, each reclaim call first gives the device credit / 8 clock units
        # per page zero-filled since the pages it last paid for (whole units; a remainder's pages wait)
        credit = DEFAULT_FILL_WRITE_CREDIT if fill_write_credit is None else fill_write_credit
        self.fill_write_credit = credit if device else 0
        # "device": a write served by the device completes write_latency clock units later (0: at once)
        latency = DEFAULT_WRITE_LATENCY if write_latency is None else write_latency
        self.write_latency = latency if device else 0
        self.fill_seen = 0  # zero fills paid for
        self.device_done = 0  # clock by which the device has written everything handed to it
        self.plugged = 0  # the newest writes in flight, not yet handed over
        # "device", linux: blk_add_rq_to_plug's rules (a request joining a plug of 32, or one whose first request
        # is 128 KiB or more, first sends it to the device) and a swap-in's plug around its own reclaim
        self.plug_rules = bool(plug_rules) and device and policy == "linux"
        self.plug_sizes = []  # pages of each request in the task's plug (rows already written for all but the last)
        self.in_swapin = False  # reclaim inside a swap-in's plug: its own plugs are no-ops
        self.plug_sends = {"count": 0, "head": 0}
        self.nested_writes = 0  # pages written by reclaim inside a swap-in's plug
        self.wb_mark = -1  # "next-level": the writeback clock as the last level ended
        self.writes_in_flight = deque()
        self.wb_pages = set()
        self.freed_wb = set()  # pages the program freed while their write was in flight (still resident)
        self.freed_wb_dropped = self.freed_wb_forgotten = 0  # how each left (for the tests' coverage checks)
        self.wb_clock = 0
        self.zero_mapped = set()
        # pages (with a frame, or on swap) whose contents are all zeros: zero-filled by a load, or last stored
        # to by a store of zeros (access code 4), and no ordinary store since
        self.zeros = set()
        # page state
        self.resident = set()
        self.mapped = set()
        self.dirty = set()
        self.touched = set()
        self.ra_pages = set()
        self.slot_of = {}
        # slots: owner per slot, clusters
        nclusters = -(-self.nslots // cluster_slots)
        self.owner = [None] * (nclusters * cluster_slots)
        self.unusable = {0} | set(range(self.nslots, nclusters * cluster_slots))
        self.used = [sum(1 for s in range(c * cluster_slots, (c + 1) * cluster_slots) if s in self.unusable) for c in range(nclusters)]
        self.free_clusters = [c for c in range(nclusters) if self.used[c] == 0]
        self.nonfull = [c for c in range(nclusters) if 0 < self.used[c] < cluster_slots]
        self.current = None
        self.next_slot = 0
        self.usable = self.nslots - 1
        self.in_use = 0
        # readahead state
        self.ra_prev, self.ra_win, self.ra_hits = -(1 << 40), 0, 0
        self.cra_prev, self.cra_last, self.cra_hits = 0, 0, 0
        # plug and output
        self.dirty_evictions = 0
        self.zero_faults = 0  # major faults of a page of zeros (for the tests' coverage checks)
        self.pending = None  # [op, first_slot, npages, cause]
        self.rows = []
        self.step_faults = {"major": {}, "minor": {}}  # step -> count
        self.now = (0.0, 0)
        self.error = False
        self.c = dict.fromkeys(
            "accesses hits faults zero_fill zero_page major_faults pages_in pages_out readahead_issued readahead_hit "
            "swapcache_hit writeback_waits evictions clean_drops slot_frees reclaim_calls allocs frees freed_resident "
            "freed_swapped zero_out zero_in".split(),
            0,
        )

    # ---- slots -----------------------------------------------------------
    def swap_full(self):
        return (self.usable - self.in_use) * 2 < self.usable

    def _release_current(self):
        c = self.current
        if c is not None and self.used[c] < self.cs:
            self.nonfull.append(c)
        self.current = None

    def _takeable(self, s):
        """A free slot; or, with swap over half full (linux), one only the swap cache holds: its page has a frame
        a page-table entry maps, is not being written and was not freed by the program. The 6.12+ allocator's
        cluster scan reclaims such a slot (mm/swapfile.c cluster_scan_range / __try_to_reclaim_swap): the page
        keeps its frame, loses the slot and is dirty again."""
        if s in self.unusable:
            return False
        q = self.owner[s]
        if q is None:
            return True
        if self.policy_name != "linux" or not self.swap_full():
            return False
        if q not in self.resident or q not in self.mapped or q in self.freed_wb:
            return False
        return all(w[0] != q for w in self.writes_in_flight)

    def _take(self, s):
        q = self.owner[s]
        if q is not None:  # reclaimed from the swap cache
            self.free_slot(q)
            self.dirty.add(q)
            self.c["slot_frees"] += 1
        return s

    def alloc_slot(self, page):
        slot = None
        if self.current is not None:
            c = self.current
            slot = next((s for s in range(self.next_slot, (c + 1) * self.cs) if self._takeable(s)), None)
            if slot is None:
                self._release_current()
        if slot is None:
            for lst in (self.nonfull, self.free_clusters):
                if lst:
                    c = lst.pop(0)
                    self.current = c
                    slot = next(s for s in range(c * self.cs, (c + 1) * self.cs) if self._takeable(s))
                    break
        if slot is None:
            self.error = True
            return None
        self._take(slot)
        c = slot // self.cs
        self.owner[slot] = page
        self.slot_of[page] = slot
        self.used[c] += 1
        self.in_use += 1
        self.next_slot = slot + 1
        if slot + 1 == (c + 1) * self.cs:
            if self.used[c] < self.cs:
                self.nonfull.append(c)
            self.current = None
        return slot

    def free_slot(self, page):
        slot = self.slot_of.pop(page)
        self.owner[slot] = None
        c = slot // self.cs
        was_full = self.used[c] == self.cs
        self.used[c] -= 1
        self.in_use -= 1
        if c == self.current:
            return
        if self.used[c] == 0:
            if c in self.nonfull:
                self.nonfull.remove(c)
            self.free_clusters.append(c)
        elif was_full:
            self.nonfull.append(c)

    # ---- plug ------------------------------------------------------------
    def flush(self):
        if self.pending is None:
            return
        op, slot, n, cause = self.pending
        t, step = self.now
        self.rows.append((t, step, op, slot * self.page_bytes, n * self.page_bytes, cause))
        self.pending = None

    def plug_add(self, op, slot, cause):
        """A one-page bio joins the plug: a new request first sends a full plug (32 requests, or its first at
        128 KiB or more) to the device."""
        if not self.joins(op, slot):
            count = len(self.plug_sizes) >= 32
            head = bool(self.plug_sizes) and self.plug_sizes[0] * self.page_bytes >= 128 << 10
            if count or head:
                self.plug_sends["count" if count else "head"] += 1  # which rule sent it (for the tests)
                self.flush()
                self.unplug()
            self.plug_sizes.append(0)
        self.submit(op, slot, cause)
        self.plug_sizes[-1] = self.pending[2]

    def joins(self, op, slot):
        """A bio joins the last request when it is adjacent at either end (blk_try_merge: back or front)."""
        p = self.pending
        if p is None or p[0] != op or p[2] >= self.max_req:
            return False
        return slot in (p[1] + p[2], p[1] - 1)

    def submit(self, op, slot, cause):
        p = self.pending
        if self.joins(op, slot):
            p[1] = min(p[1], slot)
            p[2] += 1
            if cause == 0:
                p[3] = 0
            return
        self.flush()
        self.pending = [op, slot, 1, cause]

    # ---- reclaim ---------------------------------------------------------
    def unplug(self):
        """The level's plugged writes go to the device, each done write_cost after the one before (or now)."""
        q = self.writes_in_flight
        for i in range(len(q) - self.plugged, len(q)):
            self.device_done = max(self.device_done, self.wb_clock) + self.write_cost
            q[i][1] = self.device_done + self.write_latency
        self.plugged = 0
        self.plug_sizes = []

    def complete_writes(self, upto):
        """Complete, oldest first, the writes issued at clock ``upto`` or before (all with None).

        "device": the writes done by clock ``upto``; waiting for all of them moves the clock to the device's.
        """
        q = self.writes_in_flight
        if upto is None and q and self.writeback_completion == "device":
            self.unplug()
            self.wb_clock = max(self.wb_clock, self.device_done + self.write_latency)
        if upto is None:  # the task slept: its plug went out, whatever it held
            self.plug_sizes = []
        while q and (upto is None or q[0][1] <= upto):
            page, _ = q.popleft()
            self.wb_pages.discard(page)
            if page in self.freed_wb:  # freed by the program while written: now the frame and slot go
                self.freed_wb.discard(page)
                self.freed_wb_dropped += 1
                self.drop(page)
            elif page not in self.dirty:
                self.policy.rotate_to_tail(page)

    def skips_io(self, page):
        """With the zero map, a page of zeros is neither written (swpout_zero) nor read (swpin_zero)."""
        return self.zeromap and page in self.zeros

    def store(self, page, zero):
        """A store landed on ``page`` (it has a frame): its contents are zeros only if it stored zeros."""
        self.dirty.add(page)
        if zero:
            self.zeros.add(page)
        else:
            self.zeros.discard(page)

    def evict(self, page):
        self.dirty_evictions += page in self.dirty
        if page in self.dirty or page not in self.slot_of:
            if page not in self.slot_of and self.alloc_slot(page) is None:
                return
            if self.skips_io(page):  # marked in the zero map: a slot, no bio (the contents stay zeros)
                self.c["zero_out"] += 1
            else:
                self.submit(1, self.slot_of[page], 2)
                self.c["pages_out"] += 1
        else:
            self.c["clean_drops"] += 1
        for s in (self.resident, self.mapped, self.dirty, self.ra_pages):
            s.discard(page)
        self.c["evictions"] += 1

    def make_room(self, k):
        while len(self.resident) + k > self.budget and self.resident and not self.error:
            n = max(self.batch, len(self.resident) + k - self.budget)
            self.c["reclaim_calls"] += 1
            self.policy.reclaim(n, self)
            if not self.in_swapin:
                self.flush()

    # ---- readahead -------------------------------------------------------
    def vma_window(self, page):
        max_win = 1 << min(self.page_cluster, 5)
        if max_win == 1:
            return [page]
        prev = self.ra_prev
        win = naive_swapin_nr_pages(prev, page, self.ra_hits, max_win, self.ra_win)
        self.ra_prev, self.ra_win, self.ra_hits = page, win, 0
        if win == 1:
            return [page]
        if page == prev + 1:
            left = page
        elif page == prev - 1:
            left = page - win + 1
        else:
            left = page - (win - 1) // 2
        right = left + win
        left = max(left, 0)
        pmd0 = (page // self.pmd_pages) * self.pmd_pages
        return list(range(max(left, pmd0), min(right, self.F, pmd0 + self.pmd_pages)))

    def cluster_window(self, offset):
        max_pages = 1 << self.page_cluster
        if max_pages <= 1:
            return [offset]
        hits, self.cra_hits = self.cra_hits, 0
        pages = naive_swapin_nr_pages(self.cra_prev, offset, hits, max_pages, self.cra_last)
        if hits == 0:
            self.cra_prev = offset
        self.cra_last = pages
        if pages == 1:
            return [offset]
        start = offset - offset % pages
        end = start + pages - 1
        start = max(start, 1)
        end = min(end, self.nslots - 1)
        return list(range(start, end + 1))

    # ---- accesses --------------------------------------------------------
    # ---- alloc and free events (mm/memory.c zap_pte_range, mm/swapfile.c free_swap_and_cache) ----------
    def drop(self, page):
        """Free a page that has a frame: off its list, its swap slot (if any) freed, nothing written."""
        self.policy.remove(page)
        if page in self.slot_of:
            self.free_slot(page)
        for s in (self.resident, self.mapped, self.dirty, self.touched, self.ra_pages, self.zeros):
            s.discard(page)

    def release(self, page, event):
        """``event`` 1 (alloc) or 2 (free): whatever the address held is freed, with no I/O.

        A frame goes at once -- unless its write is in flight: then it stays (charged, on its list) until
        the write completes. A page on swap gives back its slot. Nothing of the page is remembered (no
        shadow): its next touch is a first touch. An alloc over a live page frees it the same way (an
        mmap over a mapping unmaps it first); an alloc or free of an address holding nothing only counts.
        """
        self.c["allocs" if event == 1 else "frees"] += 1
        if page in self.freed_wb:
            return
        self.zero_mapped.discard(page)
        if isinstance(self.policy, NaiveLinux):
            self.policy.shadow.pop(page, None)
        if page in self.resident:
            self.c["freed_resident"] += 1
            if page in self.wb_pages:
                self.freed_wb.add(page)
                for s in (self.mapped, self.dirty, self.ra_pages, self.zeros):
                    s.discard(page)
            else:
                self.drop(page)
        elif page in self.touched:
            if page in self.slot_of:
                self.free_slot(page)
                self.c["freed_swapped"] += 1
            self.touched.discard(page)
            self.zeros.discard(page)

    def forget_freed(self, page):
        """A page freed under writeback is touched again first: the old frame goes now, its write forgotten."""
        q = list(self.writes_in_flight)
        j = next(i for i, (p, _) in enumerate(q) if p == page)
        if j >= len(q) - self.plugged:
            self.plugged -= 1
        del q[j]
        self.writes_in_flight = deque(q)
        self.wb_pages.discard(page)
        self.freed_wb.discard(page)
        self.freed_wb_forgotten += 1
        self.drop(page)

    def access(self, page, write, zero=False):
        """A load, or a store (``write``); ``zero``: a store of zeros (access code 4)."""
        self.c["accesses"] += 1
        if page in self.freed_wb:
            self.forget_freed(page)
        if page in self.mapped or (page in self.zero_mapped and not write):
            self.c["hits"] += 1
            if page in self.mapped:
                self.policy.hit(page, None)
            if write:
                self.store(page, zero)
            return
        self.c["faults"] += 1
        on_swap = page in self.touched and page not in self.resident
        kind = "major" if on_swap and not self.skips_io(page) else "minor"  # a swap-in that reads, or not
        self.step_faults[kind][self.now[1]] = self.step_faults[kind].get(self.now[1], 0) + 1
        if self.policy_name == "linux":
            self.policy.stats_tick(self.now[1])
        if page in self.resident:  # swap-cache page: read ahead, or unmapped by reclaim and not yet freed
            if page in self.ra_pages:
                self.ra_pages.discard(page)
                self.c["readahead_hit"] += 1
                if self.readahead == "vma":
                    self.ra_hits = min(self.ra_hits + 1, 63)
                elif self.readahead == "cluster":
                    self.cra_hits += 1
            else:
                self.c["swapcache_hit"] += 1
            if self.readahead == "vma":
                self.ra_prev = page
            self.mapped.add(page)
            self.policy.hit(page, None)
            if page in self.slot_of and page not in self.wb_pages and (write or self.swap_full()):
                self.free_slot(page)
                self.c["slot_frees"] += 1
            if write:
                self.store(page, zero)
            return
        if page not in self.touched:
            if not write and self.zero_page:  # a load maps the shared zero page: no frame
                self.zero_mapped.add(page)
                self.c["zero_page"] += 1
                return
            self.zero_mapped.discard(page)
            self.c["zero_fill"] += 1
            self.make_room(1)
            if self.error:
                return
            self.resident.add(page)
            self.mapped.add(page)
            self.touched.add(page)
            self.store(page, zero or not write)  # zero-filled; an ordinary store then writes data into it
            self.policy.insert(page, True, None)
            return
        self.c["major_faults"] += 1
        if self.readahead == "vma":
            window = self.vma_window(page)
            cands = [q for q in window if q == page or (q in self.touched and q not in self.resident)]
        elif self.readahead == "cluster":
            slots = self.cluster_window(self.slot_of[page])
            cands = [self.owner[s] for s in slots if self.owner[s] is not None and (self.owner[s] == page or self.owner[s] not in self.resident)]
        else:
            cands = [page]
        if len(cands) > self.budget:
            cands = [page]
        # plug rules: swap_vma_readahead charges each page just before reading it, all under one plug
        if not self.plug_rules:
            self.make_room(len(cands))
        if self.error:
            return
        waits = not self.skips_io(page)  # the faulting page is read: the process sleeps until the read is done
        self.zero_faults += not waits
        filled = 0
        for q in cands:
            if self.plug_rules:
                self.in_swapin = True
                self.make_room(1)  # the pages already read count among the resident
                self.in_swapin = False
                if self.error:
                    return
            if self.skips_io(q):  # swap_read_folio: a slot marked in the zero map is filled with zeros, no bio
                filled += 1
            elif self.plug_rules:
                self.plug_add(0, self.slot_of[q], 0 if q == page else 1)
            else:
                self.submit(0, self.slot_of[q], 0 if q == page else 1)
            self.resident.add(q)
            if q != page:
                self.ra_pages.add(q)
        self.flush()
        if self.plug_rules:  # the plug ends: the writes its reclaim left in it go to the device
            self.unplug()
        self.c["pages_in"] += len(cands) - filled
        self.c["zero_in"] += filled
        self.c["readahead_issued"] += len(cands) - 1
        for q in cands:
            if q != page:
                self.policy.insert(q, False, None)
        self.policy.insert(page, True, None)
        self.mapped.add(page)
        if write or self.swap_full():
            self.free_slot(page)
            self.c["slot_frees"] += 1
        if write:
            self.store(page, zero)
        if waits:
            self.complete_writes(None)  # the wait for the read: writes queued before it are done too

    def preload_swapped(self, pages):
        for p in pages:
            if self.alloc_slot(int(p)) is None:
                return
            self.touched.add(int(p))

    def run(self, pages, writes, steps, events=None, zeros=None):
        """Replay rows; ``events`` (the trace's optional column): 0 access, 1 alloc, 2 free per row; ``zeros``
        (the optional ``zero`` column): a store with it set stores zeros. ``writes`` may also be the rows'
        access codes themselves (0 load, 1 store, 2 alloc, 3 free, 4 store of zeros).

        Every row, events included, takes its place in its step's time.
        """
        steps = np.asarray(steps, dtype=np.int64)
        counts = np.bincount(steps - self.first_step) if len(steps) else np.zeros(0, np.int64)
        codes = [int(w) for w in np.asarray(writes).tolist()]
        if zeros is not None:
            codes = [4 if z and c == 1 else c for c, z in zip(codes, np.asarray(zeros).tolist(), strict=True)]
        if events is not None:
            codes = [e + 1 if e else c for c, e in zip(codes, np.asarray(events).tolist(), strict=True)]
        assert all(0 <= c <= 4 for c in codes), "access codes are 0..4"
        seen = {}
        for page, code, step in zip(np.asarray(pages).tolist(), codes, steps.tolist(), strict=True):
            si = step - self.first_step
            j = seen.get(si, 0)
            seen[si] = j + 1
            self.now = (si * self.step_us + j * self.step_us / counts[si], step)
            if code in (2, 3):
                self.release(page, code - 1)
            else:
                self.access(page, code in (1, 4), code == 4)
            if self.error:
                break
        return self.rows, self.c


def naive_lru_misses(pages, capacity, events=None):
    """Misses of an exact LRU cache of ``capacity`` pages (OrderedDict); ``events``: an alloc or free row
    drops the page from the cache, leaving its frame empty (nothing is read back into it)."""
    cache = OrderedDict()
    misses = 0
    events = [0] * len(pages) if events is None else np.asarray(events).tolist()
    for p, ev in zip(np.asarray(pages).tolist(), events, strict=True):
        if ev:
            cache.pop(p, None)
            continue
        if p in cache:
            cache.move_to_end(p)
        else:
            misses += 1
            if capacity == 0:
                continue
            if len(cache) >= capacity:
                cache.popitem(last=False)
            cache[p] = True
    return misses


def naive_stack_distances(pages, events=None):
    """LRU stack distance of each access (1-based; 0 for a first access), by scanning a list.

    ``events`` (0 access, 1 alloc, 2 free per row): an alloc or a free takes the page out of the stack
    (its next access is a first access); its entry is -1.
    """
    stack = []
    out = []
    events = [0] * len(pages) if events is None else np.asarray(events).tolist()
    for p, ev in zip(np.asarray(pages).tolist(), events, strict=True):
        if ev:
            if p in stack:
                stack.remove(p)
            out.append(-1)
            continue
        if p in stack:
            d = len(stack) - stack.index(p)
            stack.remove(p)
            out.append(d)
        else:
            out.append(0)
        stack.append(p)
    return np.array(out, dtype=np.int64)


def write_access_trace(path, pages, writes, steps, footprint_pages, page_bytes=4096, regions=None, row_group_rows=None,
                       events=None, zeros=None):
    """Write a small ``kind: access`` file from arrays (for tests of every stage); ``events``: the optional
    ``event`` column (0 access, 1 alloc, 2 free); ``zeros``: the optional ``zero`` column (a store of zeros)."""
    from swaptrace.core.traceio import TraceWriter

    pages = np.asarray(pages, dtype=np.uint64)
    steps = np.asarray(steps, dtype=np.uint32)
    n_steps = int(steps.max()) + 1 if steps.size else 0
    meta = {
        "page_bytes": page_bytes,
        "footprint_pages": int(footprint_pages),
        "footprint_bytes": int(footprint_pages) * page_bytes,
        "regions": regions or [{"name": "t", "kind": "table", "first_page": 0, "pages": int(footprint_pages)}],
        "first_step": 0,
        "steps": n_steps,
    }
    kw = {"row_group_rows": row_group_rows} if row_group_rows else {}
    extra = {} if events is None else {"event": np.asarray(events, dtype=np.uint8)}
    if zeros is not None:
        extra["zero"] = np.asarray(zeros, dtype=bool)
    with TraceWriter(path, "access", meta, force=True, optional=tuple(extra), **kw) as w:
        w.write(step=steps, page=pages, write=np.asarray(writes, dtype=bool), region=np.zeros(pages.size, np.uint16),
                **extra)
    return path


def zipf_access_trace(path, *, seed, footprint, n, steps, write_p):
    """A small access trace: Zipf(1.2) pages scattered over ``footprint``, ``n // steps`` accesses a step."""
    rng = np.random.default_rng(seed)
    pages = (rng.zipf(1.2, n) * 40503) % footprint
    return write_access_trace(path, pages, rng.random(n) < write_p, np.repeat(np.arange(steps), n // steps), footprint)
