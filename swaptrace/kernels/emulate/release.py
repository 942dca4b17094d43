"""The trace's alloc and free events: a page leaves the program's address space (Linux's ``zap_pte_range``).

A free (``munmap``, ``MADV_DONTNEED``, a ``brk`` shrink) of an anonymous page, as mm/memory.c
``zap_pte_range`` does it:

* a page with a frame (mapped, or unmapped in the swap cache) leaves its LRU list and is freed at once,
  with no I/O even when dirty (``folio_remove_rmap_ptes`` then the folio's last ``folio_put``); a
  swap-cache page's slot is freed with it (``free_swap_and_cache``, mm/swapfile.c, drops the swap cache);
* a page on swap (no frame) gives back its slot (``free_swap_and_cache``);
* a page under writeback (``linux`` with writes in flight) cannot be taken from the swap cache
  (``folio_free_swap`` refuses a folio under writeback), so it stays resident and charged, flagged
  ``FREED``, until its write completes; it is then dropped with its slot (``_wb_complete``). If the
  program touches the address again before that, the old frame is dropped there and then
  (:func:`_wb_forget`): the address is a new page, and the emulator keeps one state per address;
* the page keeps no refault shadow (the page-table entry, which held the swap entry, is cleared; the
  swap-cache shadow dies with the slot), so its next touch is a zero-fill first touch
  (``do_anonymous_page``), charged then, on the inactive list (since 5.9, b518154e59aa).

An alloc makes the address valid again; it charges nothing and issues no I/O: the page is charged at
its first touch. An alloc over a page that still holds contents (``mmap`` with ``MAP_FIXED`` over a
live mapping unmaps it first, mm/mmap.c ``mmap_region``) frees it as above; an alloc or a free of a page
that holds nothing (never touched, freed already) only counts. The swap device is not told about freed
slots (the emulator models no discard), as for every other slot it frees.
"""

from __future__ import annotations

from swaptrace.kernels.emulate.dlist import _unlink
from swaptrace.kernels.emulate.slots import _free_slot
from swaptrace.kernels.emulate.state import (
    ACC_ALLOC,
    ACTIVE,
    C_ALLOCS,
    C_FREED_RESIDENT,
    C_FREED_SWAPPED,
    C_FREES,
    FREED,
    O_NEXT,
    O_PREV,
    O_SHADOW,
    O_SLOT,
    O_WBQ,
    O_WBT,
    P_FOOTPRINT,
    P_POLICY,
    POLICY_LINUX,
    R_N_ACTIVE,
    R_N_INACTIVE,
    R_RESIDENT,
    R_WB_HEAD,
    R_WB_N,
    R_WB_PLUGGED,
    RESIDENT,
    TOUCHED,
    WRITEBACK,
)
from swaptrace.kernels.jit import jit_noref


@jit_noref
def _drop(b, m, page):
    """Free a resident page: off its list, its slot (if any) back to the allocator, no I/O; untouched after."""
    _unlink(m, m[O_NEXT], m[O_PREV], page)
    if m[P_POLICY] == POLICY_LINUX:
        if b[page] & ACTIVE:
            m[R_N_ACTIVE] -= 1
        else:
            m[R_N_INACTIVE] -= 1
    if m[m[O_SLOT] + page] >= 0:
        _free_slot(m, page)
    m[R_RESIDENT] -= 1
    b[page] = 0


@jit_noref
def _wb_forget(b, m, page):
    """A ``FREED`` page's address is touched again before its write completed: drop the old frame now.

    Its entry leaves the ring of writes in flight (the later ones move up, keeping their times).
    """
    F = m[P_FOOTPRINT]
    q, t = m[O_WBQ], m[O_WBT]
    h, n = m[R_WB_HEAD], m[R_WB_N]
    j = 0
    while j < n:
        i = h + j if h + j < F else h + j - F
        if m[q + i] == page:
            break
        j += 1
    if j < n:
        if j >= n - m[R_WB_PLUGGED]:
            m[R_WB_PLUGGED] -= 1
        for k in range(j, n - 1):
            i = h + k if h + k < F else h + k - F
            i2 = i + 1 if i + 1 < F else 0
            m[q + i] = m[q + i2]
            m[t + i] = m[t + i2]
        m[R_WB_N] = n - 1
    _drop(b, m, page)


@jit_noref
def _release(b, m, page, code):
    """An alloc (``code`` ACC_ALLOC) or a free event for ``page`` (module docstring)."""
    if code == ACC_ALLOC:
        m[C_ALLOCS] += 1
    else:
        m[C_FREES] += 1
    fl = b[page]
    if fl & FREED:  # freed already, its write still in flight: nothing more to free
        return
    m[m[O_SHADOW] + page] = -1
    if fl & RESIDENT:
        m[C_FREED_RESIDENT] += 1
        if fl & WRITEBACK:  # folio_free_swap refuses it: freed as its write completes
            b[page] = (fl & (WRITEBACK | ACTIVE | RESIDENT | TOUCHED)) | FREED
        else:
            _drop(b, m, page)
    elif fl & TOUCHED:  # on swap: free_swap_and_cache
        if m[m[O_SLOT] + page] >= 0:
            _free_slot(m, page)
            m[C_FREED_SWAPPED] += 1
        b[page] = 0
    else:  # never touched, or the zero page mapped (no frame, no slot)
        b[page] = 0
