"""A slow, independent reading of taskstats netlink messages, written from the kernel's headers.

The product (:mod:`swaptrace.capture.taskstats`) unpacks ``struct taskstats`` with one struct format in
which the padding is written out by hand. Here the offsets are computed instead, the way a C compiler
lays the struct out: each member at the next multiple of its alignment -- its size, or 8 where
include/uapi/linux/taskstats.h says ``__attribute__((aligned(8)))`` -- and the fields are read one by one
with ``int.from_bytes``. Netlink framing follows include/uapi/linux/netlink.h (``NLMSG_ALIGN``,
``NLA_ALIGN``: 4 bytes) and genetlink.h (a 4-byte ``genlmsghdr``).
"""

from __future__ import annotations

# (name, bytes per element, elements, aligned(8) in the header) in the order of taskstats.h, version 14
MEMBERS = [
    ("version", 2, 1, False), ("ac_exitcode", 4, 1, False), ("ac_flag", 1, 1, False), ("ac_nice", 1, 1, False),
    ("cpu_count", 8, 1, True), ("cpu_delay_total", 8, 1, False), ("blkio_count", 8, 1, False),
    ("blkio_delay_total", 8, 1, False), ("swapin_count", 8, 1, False), ("swapin_delay_total", 8, 1, False),
    ("cpu_run_real_total", 8, 1, False), ("cpu_run_virtual_total", 8, 1, False),
    ("ac_comm", 1, 32, False), ("ac_sched", 1, 1, True), ("ac_pad", 1, 3, False),
    ("ac_uid", 4, 1, True), ("ac_gid", 4, 1, False), ("ac_pid", 4, 1, False), ("ac_ppid", 4, 1, False),
    ("ac_btime", 4, 1, False), ("ac_etime", 8, 1, True), ("ac_utime", 8, 1, False), ("ac_stime", 8, 1, False),
    ("ac_minflt", 8, 1, False), ("ac_majflt", 8, 1, False), ("coremem", 8, 1, False), ("virtmem", 8, 1, False),
    ("hiwater_rss", 8, 1, False), ("hiwater_vm", 8, 1, False), ("read_char", 8, 1, False),
    ("write_char", 8, 1, False), ("read_syscalls", 8, 1, False), ("write_syscalls", 8, 1, False),
    ("read_bytes", 8, 1, False), ("write_bytes", 8, 1, False), ("cancelled_write_bytes", 8, 1, False),
    ("nvcsw", 8, 1, False), ("nivcsw", 8, 1, False), ("ac_utimescaled", 8, 1, False),
    ("ac_stimescaled", 8, 1, False), ("cpu_scaled_run_real_total", 8, 1, False),
    ("freepages_count", 8, 1, False), ("freepages_delay_total", 8, 1, False),
    ("thrashing_count", 8, 1, False), ("thrashing_delay_total", 8, 1, False), ("ac_btime64", 8, 1, False),
    ("compact_count", 8, 1, False), ("compact_delay_total", 8, 1, False), ("ac_tgid", 4, 1, False),
    ("ac_tgetime", 8, 1, True), ("ac_exe_dev", 8, 1, False), ("ac_exe_inode", 8, 1, False),
    ("wpcopy_count", 8, 1, False), ("wpcopy_delay_total", 8, 1, False),
    ("irq_count", 8, 1, False), ("irq_delay_total", 8, 1, False),
]


def layout() -> tuple[dict[str, tuple[int, int, int]], int]:
    """``{name: (offset, element size, elements)}`` and the struct's size (a multiple of its alignment, 8)."""
    offsets, at = {}, 0
    for name, size, n, aligned8 in MEMBERS:
        align = 8 if aligned8 else size
        at = (at + align - 1) // align * align
        offsets[name] = (at, size, n)
        at += size * n
    return offsets, (at + 7) // 8 * 8


def read_struct(data: bytes) -> dict:
    """Every field whose bytes are present (little-endian, as on x86 and arm64); ``ac_comm`` as text."""
    offsets, _ = layout()
    out = {}
    for name, (off, size, n) in offsets.items():
        if name == "ac_pad" or off + size * n > len(data):
            continue
        if name == "ac_comm":
            out[name] = data[off: off + n].split(b"\0")[0].decode()
        else:
            out[name] = int.from_bytes(data[off: off + size], "little")
    return out


def attrs(data: bytes) -> list[tuple[int, bytes]]:
    """``(type, payload)`` of each ``nlattr`` (length u16, type u16; the next starts at a 4-byte boundary)."""
    out, i = [], 0
    while i + 4 <= len(data):
        length = int.from_bytes(data[i: i + 2], "little")
        kind = int.from_bytes(data[i + 2: i + 4], "little")
        out.append((kind, data[i + 4: i + length]))
        i += (length + 3) // 4 * 4
    return out


def messages(data: bytes) -> list[tuple[int, bytes]]:
    """``(type, bytes after the 16-byte nlmsghdr)`` of each netlink message in a datagram."""
    out, i = [], 0
    while i + 16 <= len(data):
        length = int.from_bytes(data[i: i + 4], "little")
        kind = int.from_bytes(data[i + 4: i + 6], "little")
        out.append((kind, data[i + 16: i + length]))
        i += (length + 3) // 4 * 4
    return out


def thread_stats(datagram: bytes, family: int) -> list[dict]:
    """The stats in each ``TASKSTATS_TYPE_AGGR_PID`` (4) -> ``TASKSTATS_TYPE_STATS`` (3) of ``family``'s messages."""
    found = []
    for kind, body in messages(datagram):
        if kind != family:
            continue
        for a, value in attrs(body[4:]):  # after the genlmsghdr
            if a == 4:
                found += [read_struct(v) for t, v in attrs(value) if t == 3]
    return found
