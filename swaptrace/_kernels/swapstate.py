"""State of the swap emulator as plain arrays (pynndescent style), plus its constants.

Everything the kernels carry from one trace chunk to the next lives in one
:class:`EmuState` namedtuple of numpy arrays; scalars live in the ``reg``
(int64) and ``freg`` (float64) register arrays at the indices below. numba
treats the module-level ints as compile-time constants.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

# ---- page flag bits (EmuState.flags, uint8) --------------------------------
RESIDENT = 1  #: the page has a frame (mapped, or unmapped in the swap cache)
MAPPED = 2  #: a page-table entry points at the frame (accesses are hits)
DIRTY = 4  #: contents differ from the swap slot (or there is no slot)
TOUCHED = 8  #: the page has contents (first touch was a zero-fill)
READAHEAD = 16  #: brought in by readahead and not accessed since (PG_readahead)
REFERENCED = 32  #: PG_referenced (linux) / reference bit (clock)
YOUNG = 64  #: PTE accessed bit (linux)
ACTIVE = 128  #: on the active list (linux)

# ---- policies and readahead modes ------------------------------------------
POLICY_LRU, POLICY_CLOCK, POLICY_LINUX = 0, 1, 2
RA_NONE, RA_VMA, RA_CLUSTER = 0, 1, 2

# ---- cluster list membership (EmuState.cl_where) ---------------------------
CL_FREE, CL_NONFULL, CL_OTHER = 0, 1, 2  # OTHER: full, or the current cluster

# ---- int64 registers (EmuState.reg) ----------------------------------------
R_RESIDENT = 0
R_N_ACTIVE = 1  # linux: pages on the active list (list 0)
R_N_INACTIVE = 2  # linux: pages on the inactive list (list 1)
R_SLOTS_USED = 3  # usable slots in use (header and tail slots excluded)
R_CUR_CLUSTER = 4  # the allocator's current cluster, -1 if none
R_CUR_NEXT = 5  # next slot to try inside the current cluster
R_RA_PREV = 6  # VMA readahead: recorded page (SWAP_RA_ADDR)
R_RA_WIN = 7  # VMA readahead: previous window (SWAP_RA_WIN)
R_RA_HITS = 8  # VMA readahead: hits since the last window (SWAP_RA_HITS)
R_CRA_PREV = 9  # cluster readahead: prev_offset
R_CRA_LAST = 10  # cluster readahead: last_readahead_pages
R_CRA_HITS = 11  # cluster readahead: swapin_readahead_hits
R_PEND_OP = 12  # plugged request being merged: op code, -1 if none
R_PEND_SLOT = 13  # its first slot
R_PEND_N = 14  # its length in pages
R_PEND_CAUSE = 15  # its cause code
R_OUT_N = 16  # rows in the output buffers
R_STEP = 17  # step of the access being processed
R_ERROR = 18  # 0, or ERR_SWAP_FULL
C_ACCESSES = 20
C_HITS = 21
C_FAULTS = 22
C_ZERO_FILL = 23
C_MAJOR = 24
C_PAGES_IN = 25
C_PAGES_OUT = 26
C_RA_ISSUED = 27
C_RA_HIT = 28
C_EVICTIONS = 29
C_CLEAN_DROPS = 30
C_SLOT_FREES = 31
C_REQ_READ = 32
C_REQ_WRITE = 33
C_BYTES_READ = 34
C_BYTES_WRITTEN = 35
C_RECLAIM_CALLS = 36
C_ACTIVATIONS = 37
C_DEACTIVATIONS = 38
C_SCANNED = 39
N_REG = 48

ERR_SWAP_FULL = 1

# ---- int64 parameters (EmuState.prm) ---------------------------------------
P_POLICY = 0
P_BUDGET = 1  # resident pages allowed
P_BATCH = 2  # pages reclaimed per reclaim call (at least)
P_RA_MODE = 3
P_PAGE_CLUSTER = 4
P_MAX_REQ_PAGES = 5  # block-layer request size limit, pages
P_PAGE_BYTES = 6
P_PMD_PAGES = 7  # pages per 2 MiB region (VMA readahead clamp)
P_CLUSTER_SLOTS = 8
P_NSLOTS = 9  # slots on the device, including the header slot 0
P_USABLE_SLOTS = 10  # total_swap_pages (vm_swap_full() denominator)
P_FIRST_STEP = 11
P_FOOTPRINT = 12
P_MAX_ROWS_PER_ACCESS = 13
N_PRM = 16

# ---- float64 registers (EmuState.freg) -------------------------------------
F_STEP_US = 0
F_NOW_US = 1  # t_us of the access being processed

#: the scan/isolate batch of reclaim (SWAP_CLUSTER_MAX, include/linux/swap.h)
SWAP_CLUSTER_MAX = 32
#: VMA readahead window order limit (SWAP_RA_ORDER_CEILING, mm/swap_state.c)
SWAP_RA_ORDER_CEILING = 5
#: VMA readahead hit counter saturation (SWAP_RA_HITS_MAX with 4 KiB pages)
SWAP_RA_HITS_MAX = 63

EmuState = namedtuple(
    "EmuState",
    [
        "flags",  # uint8[F]: bits above
        "slot",  # int64[F]: swap slot of each page, -1 if none
        "lnext",  # int64[F + 2]: list links; F and F+1 are the list heads (sentinels)
        "lprev",
        "slot_page",  # int64[S]: page in each slot, -1 free, -2 never usable
        "cl_used",  # int64[C]: slots in use (or unusable) per cluster
        "cl_where",  # int8[C]: CL_FREE / CL_NONFULL / CL_OTHER
        "cl_next",  # int64[C + 2]: cluster list links; C = free list, C+1 = nonfull list
        "cl_prev",
        "reg",  # int64[N_REG]
        "prm",  # int64[N_PRM]
        "freg",  # float64[2]
        "step_n",  # int64[steps]: accesses in each step (time model)
        "step_seen",  # int64[steps]: accesses processed so far in each step
        "tmp",  # int64[scratch]: readahead candidates / reclaim isolation
        "out_t",  # output buffers of one chunk, R_OUT_N rows used
        "out_step",
        "out_op",
        "out_off",
        "out_len",
        "out_cause",
    ],
)


def new_state(
    *,
    footprint_pages: int,
    nslots: int,
    cluster_slots: int,
    step_counts: np.ndarray,
    params: dict[str, int],
    step_us: float,
    out_rows: int,
) -> EmuState:
    """Allocate a fresh emulator state (no page resident, every slot free but the header)."""
    F = int(footprint_pages)
    C = -(-int(nslots) // int(cluster_slots))
    st = EmuState(
        flags=np.zeros(F, np.uint8),
        slot=np.full(F, -1, np.int64),
        lnext=np.empty(F + 2, np.int64),
        lprev=np.empty(F + 2, np.int64),
        slot_page=np.full(C * cluster_slots, -1, np.int64),
        cl_used=np.zeros(C, np.int64),
        cl_where=np.zeros(C, np.int8),
        cl_next=np.empty(C + 2, np.int64),
        cl_prev=np.empty(C + 2, np.int64),
        reg=np.zeros(N_REG, np.int64),
        prm=np.zeros(N_PRM, np.int64),
        freg=np.zeros(2, np.float64),
        step_n=np.ascontiguousarray(step_counts, dtype=np.int64),
        step_seen=np.zeros(len(step_counts), np.int64),
        tmp=np.zeros(max(4 * SWAP_CLUSTER_MAX, 2 << min(int(params["page_cluster"]), 20)) + 64, np.int64),
        out_t=np.zeros(out_rows, np.float64),
        out_step=np.zeros(out_rows, np.uint32),
        out_op=np.zeros(out_rows, np.int8),
        out_off=np.zeros(out_rows, np.uint64),
        out_len=np.zeros(out_rows, np.uint32),
        out_cause=np.zeros(out_rows, np.int8),
    )
    for i in (F, F + 1):  # empty circular lists
        st.lnext[i] = i
        st.lprev[i] = i
    for i in (C, C + 1):
        st.cl_next[i] = i
        st.cl_prev[i] = i
    p = st.prm
    p[P_POLICY] = params["policy"]
    p[P_BUDGET] = params["budget_pages"]
    p[P_BATCH] = params["batch_pages"]
    p[P_RA_MODE] = params["readahead"]
    p[P_PAGE_CLUSTER] = params["page_cluster"]
    p[P_MAX_REQ_PAGES] = params["max_request_pages"]
    p[P_PAGE_BYTES] = params["page_bytes"]
    p[P_PMD_PAGES] = max(1, (2 << 20) // params["page_bytes"])
    p[P_CLUSTER_SLOTS] = cluster_slots
    p[P_NSLOTS] = nslots
    p[P_USABLE_SLOTS] = nslots - 1
    p[P_FIRST_STEP] = params["first_step"]
    p[P_FOOTPRINT] = F
    p[P_MAX_ROWS_PER_ACCESS] = params["max_rows_per_access"]
    st.freg[F_STEP_US] = step_us
    r = st.reg
    r[R_CUR_CLUSTER] = -1
    r[R_PEND_OP] = -1
    r[R_RA_PREV] = -(1 << 40)  # "far away": the first fault is never adjacent
    r[R_CRA_PREV] = 0
    # slot 0 is the swap header; slots past the device end (last cluster) are unusable
    st.slot_page[0] = -2
    st.slot_page[nslots:] = -2
    for c in range(C):
        used = int(np.count_nonzero(st.slot_page[c * cluster_slots : (c + 1) * cluster_slots] == -2))
        st.cl_used[c] = used
        if used == cluster_slots:
            st.cl_where[c] = CL_OTHER
        else:  # partly unusable clusters start non-full, the others free (swapfile.c setup_clusters)
            _py_list_push_tail(st.cl_next, st.cl_prev, C + (1 if used else 0), c)
            st.cl_where[c] = CL_NONFULL if used else CL_FREE
    return st


def _py_list_push_tail(nxt: np.ndarray, prv: np.ndarray, head: int, x: int) -> None:
    last = prv[head]
    nxt[last] = x
    prv[x] = last
    nxt[x] = head
    prv[head] = x
