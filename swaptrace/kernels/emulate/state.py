"""State of the swap emulator as three plain arrays, plus its constants.

Every kernel function takes ``(b, m, f)``:

* ``b`` (uint16, one per footprint page): the page flags below;
* ``m`` (int64): a header of registers (``R_*``, ``C_*``), parameters
  (``P_*``) and offsets (``O_*``) followed by the int64 arrays it points at:
  slot of each page, list links (``next``/``prev``, with two sentinel heads),
  owner of each slot, per-cluster counters and links, accesses per step, a
  scratch area, the integer output columns and (``linux``) each evicted page's
  shadow entry and the queue of writes in flight;
* ``f`` (float64): step duration, current time, and the ``t_us`` output column.

Why not a namedtuple of twenty arrays: every numba call passing such a tuple
increments and decrements the reference count of each array, which cost more
than the emulation itself (measured: ~0.4 us per access). With three arrays a
call is cheap and the hot path (a hit) makes none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads where arrays are made, so the constants import light
    import numpy as np


# ---- page flag bits (b) ----------------------------------------------------
RESIDENT = 1  #: the page has a frame (mapped, or unmapped in the swap cache)
MAPPED = 2  #: a page-table entry points at the frame (accesses are hits)
DIRTY = 4  #: contents differ from the swap slot (or there is no slot)
TOUCHED = 8  #: the page has contents (first touch was a zero-fill)
READAHEAD = 16  #: brought in by readahead and not accessed since (PG_readahead)
REFERENCED = 32  #: PG_referenced (linux) / reference bit (clock)
YOUNG = 64  #: PTE accessed bit (linux)
ACTIVE = 128  #: on the active list (linux)
WRITEBACK = 256  #: written by reclaim, the write not yet complete (PG_writeback; linux)
ZERO_PAGE = 512  #: never written, read through the shared zero page: no frame, not on a list (linux)
#: freed by the program while under writeback (linux): still resident and charged, dropped with its slot when
#: its write completes (zap_pte_range -> free_swap_and_cache cannot take a folio under writeback)
FREED = 1024
#: the page's contents are all zeros: zero-filled and not stored to since, or stored to only with zeros (access
#: code ACC_ZERO_STORE). With P_ZEROMAP (Linux >= 6.12, mm/page_io.c ``swap_writeout``) reclaim gives such a
#: dirty page a slot and marks it in the swap device's zero map instead of writing it, and a swap-in of it
#: fills the frame with zeros instead of reading (``swap_read_folio_zeromap``); kept while the page is on swap
ZEROED = 2048

#: access codes, one uint8 per trace row (``traceio.ACCESS_CODE_*``): a load, a store, an alloc and a free event,
#: and a store that leaves the page all zeros (``memset(0)``, ``torch.zeros``, an optimizer's zeroed state)
ACC_LOAD, ACC_STORE, ACC_ALLOC, ACC_FREE, ACC_ZERO_STORE = 0, 1, 2, 3, 4

POLICY_LRU, POLICY_CLOCK, POLICY_LINUX = 0, 1, 2
RA_NONE, RA_VMA, RA_CLUSTER = 0, 1, 2
CL_FREE, CL_NONFULL, CL_OTHER = 0, 1, 2  # OTHER: full, or the current cluster
OP_READ, OP_WRITE = 0, 1  # traceio.OP_*
CAUSE_FAULT, CAUSE_READAHEAD, CAUSE_RECLAIM = 0, 1, 2  # traceio.CAUSE_*
ERR_SWAP_FULL = 1
ERR_BAD_PAGE = 2  # a page number outside the footprint
ERR_BAD_STEP = 3  # a step outside the trace's steps
ERR_OUT_FULL = 4  # the output columns overflowed (a bug: max_rows_per_access too small)

# ---- state registers (m[0:34]): allocator, readahead, writeback clock, flushed statistics, eviction log
R_RESIDENT = 0
R_N_ACTIVE = 1  # linux: pages on the active list (list 0)
R_N_INACTIVE = 2  # linux: pages on the inactive list (list 1)
R_SLOTS_USED = 3  # usable slots in use
R_CUR_CLUSTER = 4  # the allocator's current cluster, -1 if none
R_CUR_NEXT = 5  # next slot to try inside it
R_RA_PREV = 6  # VMA readahead: recorded page (SWAP_RA_ADDR)
R_RA_WIN = 7  # VMA readahead: previous window (SWAP_RA_WIN)
R_RA_HITS = 8  # VMA readahead: hits (SWAP_RA_HITS)
R_CRA_PREV = 9  # cluster readahead: prev_offset
R_CRA_LAST = 10  # cluster readahead: last_readahead_pages
R_CRA_HITS = 11  # cluster readahead: swapin_readahead_hits
R_PEND_OP = 12  # plugged request being merged: op, -1 if none
R_PEND_SLOT = 13
R_PEND_N = 14
R_PEND_CAUSE = 15
R_OUT_N = 16  # rows in the output columns
R_STEP = 17  # step of the access being processed
R_ERROR = 18
R_NONRES_AGE = 19  # linux: lruvec->nonresident_age (evictions + activations, mm/workingset.c)
R_REFAULT_SNAP = 20  # linux: C_REFAULT_ACTIVATIONS at the end of the last reclaim call (lruvec->refaults)
R_WB_CLOCK = 21  # linux: pages isolated by reclaim so far (+ the lag at each read wait): the writeback clock
R_WB_HEAD = 22  # linux: index of the oldest write in flight in the O_WBQ ring
R_WB_N = 23  # linux: writes in flight
R_STAT_STEP = 24  # linux: step of the last statistics flush
R_STAT_ACTIVE = 25  # linux: R_N_ACTIVE as of the last flush (lruvec_page_state(NR_ACTIVE_ANON))
R_STAT_INACTIVE = 26  # linux: R_N_INACTIVE as of the last flush
R_STAT_REFAULTS = 27  # linux: C_REFAULT_ACTIVATIONS as of the last flush (WORKINGSET_ACTIVATE_ANON)
R_WB_MARK = 28  # linux, WB_BY_NEXT_LEVEL: R_WB_CLOCK as the last priority level ended
R_WB_DEV = 29  # linux, WB_BY_DEVICE: R_WB_CLOCK by which the device has written every write handed to it
R_WB_PLUGGED = 30  # linux, WB_BY_DEVICE: the newest writes in O_WBQ, still in the level's plug (not on the device)
R_FILL_SEEN = 31  # linux, WB_BY_DEVICE: the C_ZERO_FILL already turned into device time
R_EV_N = 32  # rows in it
R_EV_AT = 33  # index (from the run's first access) of the access being processed, set on each fault

# ---- counters (m[34:58]): what happened so far; callers read them through EmuState.counters()
C_ZERO_PAGE = 34  # reads of never-written pages that mapped the shared zero page (linux)
C_ACCESSES = 35
C_HITS = 36
C_FAULTS = 37
C_ZERO_FILL = 38
C_MAJOR = 39
C_PAGES_IN = 40
C_PAGES_OUT = 41
C_RA_ISSUED = 42
C_RA_HIT = 43
C_EVICTIONS = 44
C_CLEAN_DROPS = 45
C_SLOT_FREES = 46
C_REQ_READ = 47
C_REQ_WRITE = 48
C_BYTES_READ = 49
C_BYTES_WRITTEN = 50
C_RECLAIM_CALLS = 51
C_ACTIVATIONS = 52
C_DEACTIVATIONS = 53
C_SCANNED = 54
C_REFAULT_ACTIVATIONS = 55  # linux: swap-ins put straight on the active list (WORKINGSET_ACTIVATE_ANON)
C_SWAPCACHE_HIT = 56  # minor faults on pages unmapped by reclaim and still in the swap cache
C_WB_WAITS = 57  # linux: reclaim met a page still under writeback and waited (cgroup v1 memcg reclaim)

# ---- parameters (m[58:84]): set once by new_state
P_POLICY = 58
P_BUDGET = 59  # resident pages allowed
P_BATCH = 60  # pages reclaimed per reclaim call (at least)
P_RA_MODE = 61
P_PAGE_CLUSTER = 62
P_MAX_REQ_PAGES = 63
P_PAGE_BYTES = 64
P_PMD_PAGES = 65  # pages per 2 MiB region (VMA readahead clamp)
P_CLUSTER_SLOTS = 66
P_NSLOTS = 67  # slots on the device, header slot 0 included
P_USABLE_SLOTS = 68  # total_swap_pages (vm_swap_full() denominator)
P_FIRST_STEP = 69
P_FOOTPRINT = 70  # F; list heads are F (lru/clock/active) and F + 1 (inactive)
P_MAX_ROWS_PER_ACCESS = 71
P_NCLUSTERS = 72  # C; cluster list heads are C (free) and C + 1 (non-full)
P_OUT_CAP = 73
P_NSTEPS = 74
P_WB_LAG = 75  # linux: a write completes once reclaim has isolated this many more pages; 0: at once
P_ZERO_PAGE = 76  # linux: a read of a never-written page maps the zero page (do_anonymous_page)
P_WB_THROTTLE = 77  # linux: pages a reclaim call may write beyond the lag before it waits for them all
P_STATS_FLUSH = 78  # linux: the memcg statistics reclaim reads are flushed every this many steps; 0: always exact
P_SCAN_PRIO = 79  # linux: reclaim walks the kernel's priority levels instead of 32-page rounds
P_WB_LEVEL = 80  # linux, with P_SCAN_PRIO: writes complete by level (WB_BY_*; P_WB_LAG is then WB_ALL)
P_WB_COST = 81  # linux, WB_BY_DEVICE: pages reclaim isolates in the time the device writes one page
P_FILL_CREDIT = 82  # linux, WB_BY_DEVICE: eighths of a writeback-clock unit per zero-filled page, until the first major fault
P_EV_CAP = 83  # rows of the eviction log; 0: not recorded (the default)

# ---- offsets (m[84:108]) of the arrays that follow the header inside m
O_SLOT = 84  # [F] slot of each page, -1 if none
O_NEXT = 85  # [2 (F + 2)] list links, next and prev interleaved (O_PREV = O_NEXT + 1)
O_PREV = 86
O_SLOT_PAGE = 87  # [S] page in each slot, -1 free, -2 never usable
O_CL_USED = 88  # [C] slots used (or unusable) per cluster
O_CL_WHERE = 89  # [C] CL_FREE / CL_NONFULL / CL_OTHER
O_CL_NEXT = 90  # [2 (C + 2)] cluster list links, interleaved like the page lists
O_CL_PREV = 91
O_STEP_N = 92  # [steps] accesses per step (unused by the kernels; kept for callers)
O_STEP_SEEN = 93  # [steps] accesses processed per step
O_TMP = 94  # [scratch] reclaim isolation (first 32) and readahead candidates (from 64)
O_OUT_STEP = 95  # [cap] output columns
O_OUT_OP = 96
O_OUT_OFF = 97
O_OUT_LEN = 98
O_OUT_CAUSE = 99
O_CL_HINT = 100  # [C] no free slot of the cluster lies below this slot
O_SHADOW = 101  # [F] linux: nonresident_age at the page's eviction (its shadow entry), -1 if none
O_WBQ = 102  # [F] linux: ring of pages under writeback, oldest first
O_WBT = 103  # [F] linux: R_WB_CLOCK when each of them was written (WB_BY_DEVICE: when it completes)
O_STEP_MAJOR = 104  # [steps] major faults per step (swap-ins that read)
O_STEP_MINOR = 105  # [steps] minor faults per step (every other fault)
O_EV_AT = 106  # [P_EV_CAP] the access during which each page was evicted (before that access completes)
O_EV_PAGE = 107  # [P_EV_CAP] the evicted page

# ---- parameters added later (m[108:109])
P_WB_LATENCY = 108  # linux, WB_BY_DEVICE: pages reclaim isolates between a write's service and its completion

# ---- counters added later (m[109:113]): the trace's alloc and free events (access codes ACC_ALLOC, ACC_FREE)
C_ALLOCS = 109  # alloc events
C_FREES = 110  # free events
C_FREED_RESIDENT = 111  # pages whose frame an event released (a free, or an alloc over a live page)
C_FREED_SWAPPED = 112  # pages on swap (no frame) whose slot an event released

# ---- registers added later (m[113:115]): is the trace in step order (a run that counts its steps as it goes)
R_STEP_MAX = 113  # the latest step (less P_FIRST_STEP) any access of the run has had
R_STEP_BACK = 114  # 1 once an access had a step before R_STEP_MAX: the counts of finished steps were not final

# ---- registers added later (m[115:119]): pages of zeros kept out of swap I/O (ZEROED)
C_ZERO_OUT = 115  # dirty all-zero pages reclaim freed without a write (vmstat swpout_zero)
C_ZERO_IN = 116  # swap-ins of all-zero pages, faulting or read ahead, filled without a read (vmstat swpin_zero)
P_ZEROMAP = 117  # linux: all-zero pages skip swap I/O (Linux >= 6.12); 0: they are written and read like any
C_ZERO_FAULTS = 118  # major faults on pages of zeros (counted in C_MAJOR, as the kernel's pgmajfault; no read waited)

# ---- added later (m[119:123]): the block layer's plug rules (blk_add_rq_to_plug, block/blk-mq.c)
P_PLUG_RULES = 119  # linux with WB_BY_DEVICE only (EmulatorConfig.kernel_params sets it): 1: a plug goes to the device at 32 requests, or when a request joins
# one whose first request reached 128 KiB, and a swap-in charges each window page under its own plug, which the
# reclaim it runs shares; 0: one plug per priority level, sent whole as the level ends
R_PLUG_REQS = 120  # requests started in the current plug
R_PLUG_HEAD = 121  # pages of the current plug's first request
R_NESTED = 122  # 1 while reclaim runs inside a swap-in's plug (its own blk_start_plug is then a no-op)

HEADER = 123
TMP_CANDIDATES = 64

# ---- f -------------------------------------------------------------------
F_STEP_US = 0
F_NOW = 1  # index of the current access within its step
F_OUT_T = 2  # output time column (index within step; converted to t_us by the caller)

#: a writeback clock no write reaches: as ``upto``, completes every write in flight; as ``P_WB_LAG``
#: (``P_WB_LEVEL``), no write completes by the clock (2^62: the lag plus a small throttle stays in int64)
WB_ALL = 1 << 62
#: P_WB_LEVEL values: a write completes as its own priority level ends, as the level after it ends (in the
#: same reclaim call or the next), as its reclaim call returns, or as a first-in first-out device gets to it
#: (its O_WBT entry is then the clock at which it completes, not the clock at which it was issued)
WB_BY_LEVEL, WB_BY_NEXT_LEVEL, WB_BY_CALL, WB_BY_DEVICE = 1, 2, 3, 4
#: the scan/isolate batch of reclaim (SWAP_CLUSTER_MAX, include/linux/swap.h)
SWAP_CLUSTER_MAX = 32
#: VMA readahead window order limit (SWAP_RA_ORDER_CEILING, mm/swap_state.c)
SWAP_RA_ORDER_CEILING = 5
#: VMA readahead hit counter saturation (SWAP_RA_HITS_MAX with 4 KiB pages)
SWAP_RA_HITS_MAX = 63


@dataclass(frozen=True)
class Counters:
    """The emulator's counters at one moment (what the ``C_*`` registers hold), for callers outside the kernels."""

    accesses: int
    hits: int
    faults: int
    zero_fill: int
    zero_page: int
    major_faults: int
    pages_in: int
    pages_out: int
    readahead_issued: int
    readahead_hit: int
    swapcache_hit: int
    writeback_waits: int
    evictions: int
    clean_drops: int
    slot_frees: int
    reclaim_calls: int
    activations: int
    deactivations: int
    scanned: int
    refault_activations: int
    bytes_read: int
    bytes_written: int
    read_requests: int
    write_requests: int
    allocs: int = 0
    frees: int = 0
    freed_resident: int = 0
    freed_swapped: int = 0
    zero_out: int = 0
    zero_in: int = 0
    zero_faults: int = 0


#: each Counters field's register
COUNTER_REGISTERS = {
    "accesses": C_ACCESSES, "hits": C_HITS, "faults": C_FAULTS, "zero_fill": C_ZERO_FILL, "zero_page": C_ZERO_PAGE,
    "major_faults": C_MAJOR, "pages_in": C_PAGES_IN, "pages_out": C_PAGES_OUT, "readahead_issued": C_RA_ISSUED,
    "readahead_hit": C_RA_HIT, "swapcache_hit": C_SWAPCACHE_HIT, "writeback_waits": C_WB_WAITS,
    "evictions": C_EVICTIONS, "clean_drops": C_CLEAN_DROPS, "slot_frees": C_SLOT_FREES,
    "reclaim_calls": C_RECLAIM_CALLS, "activations": C_ACTIVATIONS, "deactivations": C_DEACTIVATIONS,
    "scanned": C_SCANNED, "refault_activations": C_REFAULT_ACTIVATIONS, "bytes_read": C_BYTES_READ,
    "bytes_written": C_BYTES_WRITTEN, "read_requests": C_REQ_READ, "write_requests": C_REQ_WRITE,
    "allocs": C_ALLOCS, "frees": C_FREES, "freed_resident": C_FREED_RESIDENT, "freed_swapped": C_FREED_SWAPPED,
    "zero_out": C_ZERO_OUT, "zero_in": C_ZERO_IN, "zero_faults": C_ZERO_FAULTS,
}


@dataclass
class EmuState:
    """The three kernel arrays, with numpy views of the parts for Python callers and tests."""

    b: np.ndarray
    m: np.ndarray
    f: np.ndarray

    def _part(self, offset_index: int, size: int) -> np.ndarray:
        o = int(self.m[offset_index])
        return self.m[o : o + size]

    def counters(self) -> Counters:
        """A snapshot of the counters."""
        m = self.m
        return Counters(**{name: int(m[index]) for name, index in COUNTER_REGISTERS.items()})

    @property
    def resident_pages(self) -> int:
        """Pages with a frame now."""
        return int(self.m[R_RESIDENT])

    def fork(self, *, budget_pages: int, write_cost: int, max_rows_per_access: int,
             counting: bool = False) -> EmuState:
        """A copy of this state that goes on under another budget and device speed.

        The two are used only by reclaim (``_make_room``; the device clock), so a
        fork made before the first reclaim call continues exactly as a run started
        with those parameters would. The caller checks that no reclaim happened;
        ``max_rows_per_access`` must fit the output buffer this state was made with.
        ``counting``: the copy counts requests without writing rows (``P_OUT_CAP = 0``)
        and leaves out the output columns and the eviction log, most of a state's memory
        (so ``max_rows_per_access`` need not fit anything).
        """
        if self.m[C_RECLAIM_CALLS] != 0:
            raise ValueError("a state can be forked only before its first reclaim call")
        if not counting and max_rows_per_access > self.m[P_MAX_ROWS_PER_ACCESS]:
            raise ValueError("the fork's rows per access do not fit this state's output buffer")
        if counting:
            end = int(self.m[O_OUT_STEP])  # the output columns and the eviction log are the layout's tail
            m = self.m[:end].copy()
            for index in (O_OUT_STEP, O_OUT_OP, O_OUT_OFF, O_OUT_LEN, O_OUT_CAUSE, O_EV_AT, O_EV_PAGE):
                m[index] = end  # no room, never written: both capacities are 0
            m[P_OUT_CAP] = m[R_OUT_N] = m[P_EV_CAP] = m[R_EV_N] = 0
            st = EmuState(b=self.b.copy(), m=m, f=self.f[:F_OUT_T].copy())
        else:
            st = EmuState(b=self.b.copy(), m=self.m.copy(), f=self.f.copy())
        st.m[P_BUDGET] = budget_pages
        st.m[P_WB_COST] = write_cost
        st.m[P_MAX_ROWS_PER_ACCESS] = max_rows_per_access
        return st

    @property
    def error(self) -> int:
        """The error code the last kernel call stopped with (``ERR_*``), 0 if none."""
        return int(self.m[R_ERROR])

    def drop_rows(self) -> None:
        """Forget the output rows (a run that only counts)."""
        self.m[R_OUT_N] = 0

    @property
    def F(self) -> int:
        return int(self.m[P_FOOTPRINT])

    @property
    def C(self) -> int:
        return int(self.m[P_NCLUSTERS])

    @property
    def flags(self) -> np.ndarray:
        return self.b

    @property
    def reg(self) -> np.ndarray:
        return self.m[:HEADER]

    @property
    def slot(self) -> np.ndarray:
        return self._part(O_SLOT, self.F)

    @property
    def lnext(self) -> np.ndarray:
        return self._part(O_NEXT, 2 * (self.F + 2))[::2]

    @property
    def lprev(self) -> np.ndarray:
        return self._part(O_PREV, 2 * (self.F + 2) - 1)[::2]

    @property
    def step_major(self) -> np.ndarray:
        """Major faults per step (index = step - first_step)."""
        return self._part(O_STEP_MAJOR, int(self.m[P_NSTEPS]))

    @property
    def step_seen(self) -> np.ndarray:
        """Rows processed per step so far (index = step - first_step): accesses and alloc and free events."""
        return self._part(O_STEP_SEEN, int(self.m[P_NSTEPS]))

    @property
    def step_minor(self) -> np.ndarray:
        """Minor faults per step: zero-fill, zero-page, read-ahead and swap-cache hits."""
        return self._part(O_STEP_MINOR, int(self.m[P_NSTEPS]))

    @property
    def slot_page(self) -> np.ndarray:
        return self._part(O_SLOT_PAGE, self.C * int(self.m[P_CLUSTER_SLOTS]))

    def take_rows(self) -> dict[str, np.ndarray] | None:
        """Copy out and clear the output rows (swapio columns), or None if there are none."""
        import numpy as np

        n = int(self.m[R_OUT_N])
        if n == 0:
            return None
        rows = {
            "t_us": self.f[F_OUT_T : F_OUT_T + n].copy(),  # index within step until the caller converts it
            "step": self._part(O_OUT_STEP, n).astype(np.uint32),
            "op": self._part(O_OUT_OP, n).astype(np.int8),
            "offset": self._part(O_OUT_OFF, n).astype(np.uint64),
            "length": self._part(O_OUT_LEN, n).astype(np.uint32),
            "cause": self._part(O_OUT_CAUSE, n).astype(np.int8),
        }
        self.m[R_OUT_N] = 0
        return rows


    def take_evictions(self) -> tuple[np.ndarray, np.ndarray]:
        """Copy out and clear the eviction log: ``(at, page)``, ``at`` the index of the access (from the
        run's first) during which ``page`` left memory, before that access's page was mapped."""
        n = int(self.m[R_EV_N])
        at, page = self._part(O_EV_AT, n).copy(), self._part(O_EV_PAGE, n).copy()
        self.m[R_EV_N] = 0
        return at, page


def new_state(
    *,
    footprint_pages: int,
    nslots: int,
    cluster_slots: int,
    nsteps: int,
    params: dict[str, int],
    step_us: float,
    out_rows: int,
    event_rows: int = 0,
) -> EmuState:
    """Allocate a fresh emulator state (no page resident, every slot free but the header).

    ``event_rows`` > 0 records every eviction (:meth:`EmuState.take_evictions`); it must exceed
    the budget, since one access may evict every resident page.
    """
    import numpy as np

    F = int(footprint_pages)
    C = -(-int(nslots) // int(cluster_slots))
    S = C * int(cluster_slots)
    tmp = TMP_CANDIDATES + (2 << min(int(params["page_cluster"]), 20)) + 64
    sizes = [
        (O_SLOT, F), (O_NEXT, 2 * (F + 2)), (O_PREV, 0), (O_SLOT_PAGE, S), (O_CL_USED, C), (O_CL_WHERE, C),
        (O_CL_NEXT, 2 * (C + 2)), (O_CL_PREV, 0), (O_STEP_N, nsteps), (O_STEP_SEEN, nsteps),
        (O_STEP_MAJOR, nsteps), (O_STEP_MINOR, nsteps), (O_TMP, tmp),
        (O_CL_HINT, C), (O_SHADOW, F), (O_WBQ, F), (O_WBT, F),
        # the output columns and the eviction log last: a counting copy (fork(counting=True)) leaves them out
        (O_OUT_STEP, out_rows), (O_OUT_OP, out_rows), (O_OUT_OFF, out_rows), (O_OUT_LEN, out_rows),
        (O_OUT_CAUSE, out_rows), (O_EV_AT, event_rows), (O_EV_PAGE, event_rows),
    ]
    m = np.zeros(HEADER + sum(n for _, n in sizes), np.int64)
    o = HEADER
    for index, n in sizes:
        m[index] = o
        o += n
    m[O_PREV] = m[O_NEXT] + 1
    m[O_CL_PREV] = m[O_CL_NEXT] + 1
    st = EmuState(b=np.zeros(F, np.uint16), m=m, f=np.zeros(F_OUT_T + out_rows, np.float64))
    m[P_POLICY] = params["policy"]
    m[P_BUDGET] = params["budget_pages"]
    m[P_BATCH] = params["batch_pages"]
    m[P_RA_MODE] = params["readahead"]
    m[P_PAGE_CLUSTER] = params["page_cluster"]
    m[P_MAX_REQ_PAGES] = params["max_request_pages"]
    m[P_PAGE_BYTES] = params["page_bytes"]
    m[P_PMD_PAGES] = max(1, (2 << 20) // params["page_bytes"])
    m[P_CLUSTER_SLOTS] = cluster_slots
    m[P_NSLOTS] = nslots
    m[P_USABLE_SLOTS] = nslots - 1
    m[P_FIRST_STEP] = params["first_step"]
    m[P_FOOTPRINT] = F
    m[P_MAX_ROWS_PER_ACCESS] = params["max_rows_per_access"]
    m[P_NCLUSTERS] = C
    m[P_OUT_CAP] = out_rows
    m[P_NSTEPS] = nsteps
    m[P_WB_LAG] = params.get("writeback_lag", 0)
    m[P_ZERO_PAGE] = params.get("zero_page", 0)
    m[P_ZEROMAP] = params.get("zeromap", 0)
    m[P_WB_THROTTLE] = params.get("writeback_throttle", 2 * SWAP_CLUSTER_MAX)
    m[P_STATS_FLUSH] = params.get("stats_flush_steps", 0)
    m[P_SCAN_PRIO] = params.get("scan_priorities", 0)
    m[P_WB_LEVEL] = params.get("writeback_level", 0)
    m[R_WB_MARK] = -1
    m[P_WB_COST] = params.get("write_cost", 0)
    m[P_FILL_CREDIT] = params.get("fill_write_credit", 0)
    m[P_WB_LATENCY] = params.get("write_latency", 0)
    m[P_PLUG_RULES] = params.get("plug_rules", 0)
    m[P_EV_CAP] = event_rows
    m[R_STAT_STEP] = params["first_step"]  # flushed as the run starts: every list empty
    st.f[F_STEP_US] = step_us
    m[R_CUR_CLUSTER] = -1
    m[R_PEND_OP] = -1
    m[R_RA_PREV] = -(1 << 40)  # "far away": the first fault is never adjacent
    nxt, prv = st.lnext, st.lprev
    for h in (F, F + 1):  # empty circular lists
        nxt[h] = h
        prv[h] = h
    # slot 0 is the swap header; slots past the device end (last cluster) are unusable
    sp = st.slot_page
    sp[:] = -1
    sp[0] = -2
    sp[nslots:] = -2
    used = (sp.reshape(C, cluster_slots) == -2).sum(axis=1)
    ou, ow = int(m[O_CL_USED]), int(m[O_CL_WHERE])
    m[ou : ou + C] = used
    m[m[O_CL_HINT] : m[O_CL_HINT] + C] = np.arange(C) * cluster_slots
    cn, cp = int(m[O_CL_NEXT]), int(m[O_CL_PREV])
    for h in (C, C + 1):
        m[cn + 2 * h] = h
        m[cp + 2 * h] = h
    # partly unusable clusters start non-full, full ones nowhere, the others free (swapfile.c setup_clusters)
    free = np.flatnonzero(used == 0)
    nonfull = np.flatnonzero((used > 0) & (used < cluster_slots))
    m[ow : ow + C] = CL_OTHER
    m[ow + free] = CL_FREE
    m[ow + nonfull] = CL_NONFULL
    for h, members in ((C, free), (C + 1, nonfull)):
        if members.size:
            chain = np.concatenate([[h], members, [h]])
            m[cn + 2 * chain[:-1]] = chain[1:]
            m[cp + 2 * chain[1:]] = chain[:-1]
    st.slot[:] = -1
    m[m[O_SHADOW] : m[O_SHADOW] + F] = -1
    return st
