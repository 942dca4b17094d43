"""ftrace text of a recorded program (``capture --record``) -> memory events, in trace order.

The recording's tracefs instance holds these events, printed in their default text form (kernel 6.x;
the syscall events' form is ``print_syscall_enter``/``print_syscall_exit`` in kernel/trace/trace_syscalls.c,
the others the ``print fmt`` of their ``format`` file), every line prefixed with ``comm-tid (tgid)``
(``options/record-tgid``)::

    python-5613 (5613) [000] ..... 504.963477: sys_mmap(addr: 0, len: 800000, prot: 3, flags: 22, fd: ffffffffffffffff, off: 0)
    python-5613 (5613) [000] ..... 504.963490: sys_mmap -> 0x7f1c2a000000
    python-5613 (5613) [000] d.... 504.963500: page_fault_user: address=0x7f1c2a000010 ip=0x55d0... error_code=0x6
    python-5613 (5613) [001] ..... 504.990000: sched_process_fork: comm=python pid=5613 child_comm=python child_pid=5620

Numbers in the syscall lines are hexadecimal with or without ``0x`` (the ``print fmt`` is ``0x%08lx``; the
syscall printer writes ``%lx``): both are read as hexadecimal, so addresses stay exact 64-bit numbers.
An enter event and its exit are paired per thread (the exit carries the result: the mapped address of
``mmap``/``mremap``, the new break of ``brk``). The fault's address and error code come from
``exceptions:page_fault_user`` (arch/x86/include/asm/trace/exceptions.h; error code bit 1 = write,
bit 0 = the page was present: a protection fault, not a first touch; arch/x86/include/asm/trap_pf.h), and from
``exceptions:page_fault_kernel`` at a user address: the kernel writing into the program's memory for it (a
``read`` into a new buffer, ``copy_to_user``; bit 2 of its error code, user mode, is clear). A kernel fault at
a kernel address prints a symbol and is skipped.

Every event is keyed by the process (the thread group id): threads share one address space. A
``sched_process_fork`` whose child later shows up as a thread of its parent is a thread and is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from swaptrace.core.traceio import RECORD_EVENTS

#: x86-64 user addresses end here (47-bit: arch/x86/include/asm/page_64_types.h TASK_SIZE_MAX, 4-level paging)
USER_ADDRESS_END = 1 << 47
_HEXNUM = re.compile(r"^(0x)?[0-9a-fA-F]+$")

#: event codes (positions in :data:`~swaptrace.core.traceio.RECORD_EVENTS`)
EV = {name: i for i, name in enumerate(RECORD_EVENTS)}

# comm-tid (tgid) [cpu] flags  seconds.fraction: name: body ; the tgid is "-----" when the kernel lost it
_LINE = re.compile(
    r"^\s*(?P<comm>.*?)-(?P<tid>\d+)\s+\(\s*(?P<tgid>[-\d]+)\)\s+\[(?P<cpu>\d+)\]\s+"
    r"(?:[^\s:]{4,6}\s+)?(?P<sec>\d+)\.(?P<frac>\d+):\s+(?P<name>\w+)(?::\s?|(?=[( ]))(?P<body>.*)$"
)
_ENTER = re.compile(r"^\((?P<args>.*)\)\s*$")
_EXIT = re.compile(r"^\s*->\s*(?P<ret>(?:0x)?[0-9a-fA-F]+)\s*$")
_KV = re.compile(r"(\w+)[:=]\s*([^,\s]+)")
_LOST = re.compile(r"\[LOST (\d+) EVENTS\]")
_MARK = re.compile(r"^\s*(swaptrace[^\n]*)$")
#: the syscalls recorded (their ``syscalls/sys_enter_*`` and ``sys_exit_*`` events)
SYSCALLS = ("mmap", "munmap", "brk", "madvise", "mremap")
#: syscalls whose exit is needed (the result); the others are taken at their enter
_NEED_EXIT = ("mmap", "brk", "mremap")
#: an mmap row's ``flags`` holds the MAP_* flags in its low 32 bits and PROT_* from this bit on
PROT_SHIFT = 32
#: return values at or above this are -errno (include/linux/err.h, MAX_ERRNO = 4095)
ERR_RET = (1 << 64) - 4095


def _hex(text: str) -> int:
    return int(text, 16)


@dataclass
class ParsedRecording:
    """What :func:`parse_lines` found: events in trace order, markers, and what could not be read.

    ``events`` are tuples ``(t_ns, code, pid, address, length, write, flags, old_address, old_length)``
    with ``pid`` the process (thread group), ``code`` from :data:`EV`; for ``fork`` the parent's pid is
    in ``old_address``; an ``mmap``'s ``flags`` carry its ``prot`` from bit :data:`PROT_SHIFT` on. ``markers`` are ``(t_ns, text)`` of every ``swaptrace ...`` line.
    """

    events: list[tuple] = field(default_factory=list)
    markers: list[tuple[int, str]] = field(default_factory=list)
    lost_events: int = 0
    malformed: int = 0
    failed_calls: int = 0


@dataclass
class _State:
    pending: dict[tuple[int, str], tuple] = field(default_factory=dict)  # (tid, syscall) -> (t, args)
    tgid_of: dict[int, int] = field(default_factory=dict)
    forks: list[tuple[int, int]] = field(default_factory=list)  # (index in events, child tid)


def _args(body: str) -> dict[str, int]:
    return {k: _hex(v) for k, v in _KV.findall(body) if re.fullmatch(r"(?:0x)?[0-9a-fA-F]+", v)}


def _syscall(out: ParsedRecording, st: _State, head: tuple[int, int, int], name: str, body: str) -> None:
    """One ``sys_NAME(...)`` or ``sys_NAME -> ret`` line; ``head`` is its ``(t_ns, tid, pid)``."""
    t, tid, pid = head
    call = name[4:]
    m = _ENTER.match(body)
    if m:
        a = _args(m.group("args"))
        if call in _NEED_EXIT:
            st.pending[(tid, call)] = (t, a)
        elif call == "munmap":
            out.events.append((t, EV["munmap"], pid, a.get("addr", 0), a.get("len", 0), False, 0, 0, 0))
        elif call == "madvise":
            out.events.append((t, EV["madvise"], pid, a.get("start", 0), a.get("len_in", 0), False,
                               a.get("behavior", 0), 0, 0))
        return
    m = _EXIT.match(body)
    if not m:
        out.malformed += 1
        return
    if call not in _NEED_EXIT:
        return
    ret = _hex(m.group("ret")) & ((1 << 64) - 1)
    got = st.pending.pop((tid, call), None)
    if got is None:  # its enter came before the recording started
        return
    _, a = got
    if ret >= ERR_RET:
        out.failed_calls += 1
        return
    if call == "mmap":
        flags = (a.get("flags", 0) & 0xFFFFFFFF) | (a.get("prot", 0) & 0xFF) << PROT_SHIFT
        out.events.append((t, EV["mmap"], pid, ret, a.get("len", 0), False, flags, 0, 0))
    elif call == "brk":
        out.events.append((t, EV["brk"], pid, ret, 0, False, a.get("brk", 0), 0, 0))
    else:
        out.events.append((t, EV["mremap"], pid, ret, a.get("new_len", 0), False, a.get("flags", 0),
                           a.get("addr", 0), a.get("old_len", 0)))


def _other(out: ParsedRecording, st: _State, head: tuple[int, int, int], name: str, body: str) -> None:
    """A fault, fork, exec or exit line; ``head`` is its ``(t_ns, tid, pid)``."""
    t, _, pid = head
    kv = dict(_KV.findall(body))
    try:
        if name == "page_fault_user":
            err = _hex(kv["error_code"])
            out.events.append((t, EV["fault"], pid, _hex(kv["address"]), 0, bool(err & 2), err, 0, 0))
        elif name == "page_fault_kernel":  # the kernel touching the program's memory for it (copy_to_user)
            address = kv["address"]
            if _HEXNUM.match(address) and _hex(address) < USER_ADDRESS_END:  # else a kernel address (a symbol)
                err = _hex(kv["error_code"])
                out.events.append((t, EV["fault"], pid, _hex(address), 0, bool(err & 2), err, 0, 0))
        elif name == "sched_process_fork":
            st.forks.append((len(out.events), int(kv["child_pid"])))
            out.events.append((t, EV["fork"], int(kv["child_pid"]), 0, 0, False, 0, pid, 0))
        elif name == "sched_process_exec":
            out.events.append((t, EV["exec"], pid, 0, 0, False, 0, 0, 0))
        elif name == "sched_process_exit" and kv.get("group_dead") == "true":
            out.events.append((t, EV["exit"], pid, 0, 0, False, 0, 0, 0))
    except (KeyError, ValueError):
        out.malformed += 1


def parse_lines(lines: Iterable[str]) -> ParsedRecording:
    """Parse ``trace_pipe`` text of a recording (see the module docstring) into events and markers."""
    out, st = ParsedRecording(), _State()
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        lost = _LOST.search(line)
        if lost:
            out.lost_events += int(lost.group(1))
            continue
        m = _LINE.match(line)
        if m is None:
            out.malformed += 1
            continue
        t = int(m.group("sec")) * 1_000_000_000 + int((m.group("frac") + "000000000")[:9])
        tid, name, body = int(m.group("tid")), m.group("name"), m.group("body")
        tg = m.group("tgid")
        pid = int(tg) if tg.isdigit() and int(tg) > 0 else st.tgid_of.get(tid, tid)
        st.tgid_of[tid] = pid
        if name == "tracing_mark_write":
            mk = _MARK.match(body)
            if mk:
                out.markers.append((t, mk.group(1).strip()))
        elif name.startswith("sys_") and name[4:] in SYSCALLS:
            _syscall(out, st, (t, tid, pid), name, body)
        else:
            _other(out, st, (t, tid, pid), name, body)
    # a "fork" whose child ran as a thread of another process is a thread: no address space of its own
    threads = {i for i, child in st.forks if st.tgid_of.get(child, child) != child}
    if threads:
        out.events = [e for i, e in enumerate(out.events) if i not in threads]
    return out
