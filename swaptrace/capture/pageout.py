"""Paging a recorded program out at each reading (``capture --record --pageout``): which pages a window uses.

Without a limit nothing is reclaimed, so a recording sees each page's *first* touch only; what a step
does with memory it already holds comes from smaps ``Referenced:``, a count per mapping that does not say
which pages. ``--pageout`` asks the kernel, at every reading, to page out all of the program's anonymous
memory with ``process_madvise(pidfd, ranges, MADV_PAGEOUT)`` (mm/madvise.c, Linux >= 5.10;
``madvise_cold_or_pageout_pte_range`` clears the accessed bits and ``reclaim_pages`` reclaims the pages
whatever they were). Every page the program uses in the next window then faults back in:
``exceptions:page_fault_user`` names it exactly, as a load or a store. A store to a page that came back on
a load does not fault again (``do_swap_page`` maps an exclusive page writable), so at the next reading smaps
``Private_Dirty:`` of each mapping counts the pages written in the window (a page read back stays clean
while its swap slot is kept).

Requirements and costs, all checked or recorded:

* a swap area of our own, on only while recording (:class:`~swaptrace.capture.swapdev.SwapDevice`, under
  the capture lock, refused when other swap is active), at least twice the program's anonymous memory: a
  swap more than half full (``vm_swap_full``) frees a read-back page's slot and dirties it
  (``should_try_to_free_swap``, mm/memory.c), which would count loads as stores;
* pages mapped by more than one process (after a ``fork``, until copy-on-write) are skipped by the kernel
  and stay resident: their uses go unseen, as without ``--pageout``;
* the program runs slower (each window re-reads what it uses from the swap file): 4-7x in start-up in
  the study; readings in start-up are therefore taken by the program's **CPU time**
  (:data:`READING_CPU_S` of user time), not the clock, so the windows do not depend on how slow the swap is,
  and more often than without ``--pageout`` (0.5 s), since each window is one use per page.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from pathlib import Path

#: process_madvise(2) on x86-64 and arm64 (include/uapi/asm-generic/unistd.h 440; arch/x86 syscall_64.tbl 440)
SYS_PROCESS_MADVISE = 440
#: include/uapi/asm-generic/mman-common.h
MADV_PAGEOUT = 21
#: IOV_MAX: the most ranges one process_madvise call takes (include/uapi/linux/uio.h UIO_MAXIOV)
IOV_MAX = 1024
#: with --pageout and no step marks yet, a reading after this much user CPU time of the program, seconds. The
#: windows set the trace's resolution (one use per page and window), so finer is truer and costs page-outs.
#: Chosen on the study's fit shapes (kaggle-tenth, dlrm-random; research/results/real-training/fresh-boot):
#: start-up's pages read back, median error against the kernel 37 % at 0.5 s (4-5 windows), 13 % at 0.1 s,
#: 9 % at 0.05 s (34-35 windows; the recording 30 % longer than at 0.1 s)
READING_CPU_S = 0.05


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def page_out(pid: int, ranges: list[tuple[int, int]]) -> int:
    """Ask the kernel to page out ``[start, end)`` byte ranges of process ``pid``; returns bytes advised.

    ``OSError`` when the process is gone or the kernel refuses (``EINVAL`` before Linux 5.10, ``EPERM``
    without ``CAP_SYS_NICE``); pages it cannot reclaim (shared, locked, under I/O) are left as they are.
    """
    if not ranges:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.pidfd_open(pid)
    done = 0
    try:
        for i in range(0, len(ranges), IOV_MAX):
            chunk = ranges[i:i + IOV_MAX]
            iov = (_Iovec * len(chunk))(*[_Iovec(lo, hi - lo) for lo, hi in chunk])
            n = libc.syscall(SYS_PROCESS_MADVISE, fd, iov, len(chunk), MADV_PAGEOUT, 0)
            if n < 0:
                err = ctypes.get_errno()
                raise OSError(err, f"process_madvise(MADV_PAGEOUT): {os.strerror(err)}")
            done += int(n)
    finally:
        os.close(fd)
    return done


def default_swap_bytes(work_base: Path, meminfo: str | None = None) -> int:
    """The recording's swap size when not given: the machine's RAM (a program without a limit holds no more
    anonymous memory than that), at most half the free space where the swap file goes; bytes."""
    text = meminfo if meminfo is not None else Path("/proc/meminfo").read_text()
    total = next(int(line.split()[1]) * 1024 for line in text.splitlines() if line.startswith("MemTotal:"))
    free = shutil.disk_usage(work_base).free
    return max(1 << 20, min(total, free // 2))
