"""A slow twin of :class:`swaptrace.capture.recording.AnonTracker`, written from the system calls' semantics.

Each process is a set of mapped anonymous pages and a set of touched pages, page by page (no ranges):

* mmap: the pages of ``[addr, addr + len)`` that were touched are freed and unmapped (``MAP_FIXED``
  replaces them); an anonymous private mapping maps them all (one alloc of the range);
* munmap: touched pages in the range freed, all unmapped;
* madvise DONTNEED / FREE / REMOVE / DONTNEED_LOCKED: touched pages in the range freed, still mapped;
* brk: the first call sets the heap's start; afterwards pages between ``PAGE_ALIGN`` of the old and new
  break are mapped (an alloc) or freed and unmapped;
* mremap: the kept part's touched pages move (a move event), the cut-off part's are freed, a larger new
  size maps the extra pages (an alloc); a target over mapped pages frees them first;
* a fault on a mapped, untouched page is a touch (write = bit 1 of the error code);
* fork copies the parent's sets; exec empties them; exit frees every touched page.

Events are ``(t, code, pid, address, length, write, flags, old_address, old_length)`` with the codes of
``swaptrace.core.traceio.RECORD_EVENTS``; page events ``(kind, pid, page, pages, write, to_page)`` with
kinds touch 0, alloc 1, free 2, move 3.
"""

from __future__ import annotations

PAGE = 4096
NAMES = ("mmap", "munmap", "brk", "madvise", "mremap", "fault", "referenced", "fork", "exec", "exit")
CODE = {n: i for i, n in enumerate(NAMES)}


def _npages(length: int) -> int:
    n = length // PAGE
    return n + 1 if length % PAGE else n


class NaiveTracker:
    def __init__(self):
        self.mapped: dict[int, set[int]] = {}
        self.touched: dict[int, set[int]] = {}
        self.brk: dict[int, list[int]] = {}  # pid -> [start, current]

    def _ensure(self, pid):
        self.mapped.setdefault(pid, set())
        self.touched.setdefault(pid, set())

    def _drop(self, pid, pages, unmap):
        out = []
        for p in sorted(pages):
            if p in self.touched[pid]:
                self.touched[pid].discard(p)
                out.append((2, pid, p, 1, False, 0))
        if unmap:
            for p in pages:
                self.mapped[pid].discard(p)
        return out

    def step(self, ev):
        _, code, pid, address, length, write, flags, old_address, old_length = ev
        name = NAMES[code]
        if name == "fork":
            parent = old_address
            self.mapped[pid] = set(self.mapped.get(parent, set()))
            self.touched[pid] = set(self.touched.get(parent, set()))
            if parent in self.brk:
                self.brk[pid] = list(self.brk[parent])
            else:
                self.brk.pop(pid, None)
            return []
        if name == "exec":
            self.mapped[pid], self.touched[pid] = set(), set()
            self.brk.pop(pid, None)
            return []
        if name == "exit":
            out = [(2, pid, p, 1, False, 0) for p in sorted(self.touched.get(pid, ()))]
            self.mapped.pop(pid, None)
            self.touched.pop(pid, None)
            self.brk.pop(pid, None)
            return out
        if name == "fault":
            page = address // PAGE
            if page in self.mapped.get(pid, ()) and page not in self.touched.get(pid, ()):
                self.touched[pid].add(page)
                return [(0, pid, page, 1, bool(write), 0)]
            return []
        self._ensure(pid)
        first = address // PAGE
        if name == "mmap":
            pages = list(range(first, first + _npages(length)))
            out = self._drop(pid, pages, True)
            map_flags = flags % (1 << 32)
            if map_flags & 0x20 and map_flags % 16 == 2:
                self.mapped[pid].update(pages)
                out.append((1, pid, first, len(pages), False, 0))
            return out
        if name == "munmap":
            return self._drop(pid, range(first, first + _npages(length)), True)
        if name == "madvise":
            if flags in (4, 8, 9, 24):
                return self._drop(pid, range(first, first + _npages(length)), False)
            return []
        if name == "brk":
            return self._brk(pid, address)
        if name == "mremap":
            return self._mremap(pid, address, length, old_address, old_length)
        return []

    def _brk(self, pid, new):
        if pid not in self.brk:
            self.brk[pid] = [new, new]
            return []
        start, cur = self.brk[pid]
        if new < start:  # brk never ends below the heap's start: such a value cannot come from the kernel
            return []
        self.brk[pid][1] = new
        heap_first = _npages(start)
        old_end, new_end = _npages(cur), _npages(new)
        if new_end > old_end:
            first = max(old_end, heap_first)
            self.mapped[pid].update(range(first, new_end))
            return [(1, pid, first, new_end - first, False, 0)]
        if new_end < old_end:
            return self._drop(pid, range(max(new_end, heap_first), old_end), True)
        return []

    def _mremap(self, pid, new_addr, new_len, old_addr, old_len):
        old_first, old_n = old_addr // PAGE, _npages(old_len)
        new_first, new_n = new_addr // PAGE, _npages(new_len)
        if old_n == 0:
            return []
        if old_first not in self.mapped[pid]:
            if new_first != old_first:
                return self._drop(pid, range(new_first, new_first + new_n), True)
            return []
        keep = min(old_n, new_n)
        moved = [p for p in range(old_first, old_first + keep) if p in self.touched[pid]]
        out = self._drop(pid, range(old_first + keep, old_first + old_n), True)
        for p in range(old_first, old_first + keep):
            self.mapped[pid].discard(p)
            self.touched[pid].discard(p)
        if new_first != old_first:
            out += self._drop(pid, range(new_first, new_first + new_n), True)
            out.append((3, pid, old_first, keep, False, new_first))
        self.mapped[pid].update(range(new_first, new_first + new_n))
        self.touched[pid].update(new_first + (p - old_first) for p in moved)
        if new_n > old_n:
            out.append((1, pid, new_first + old_n, new_n - old_n, False, 0))
        return out


def naive_page_events(events):
    """Every page event of ``events``, in order."""
    t = NaiveTracker()
    out = []
    for ev in events:
        out += t.step(ev)
    return out
