"""The kernel's per-task delay accounting, read over generic netlink (no dependency but the socket module).

Linux keeps, per task, the time it waited for a CPU, for synchronous block I/O, for swap-in, in direct
reclaim, on thrashing pages, in compaction, for write-protect copies and in IRQs
(Documentation/accounting/delay-accounting.rst, kernel/delayacct.c), and hands them out as a
``struct taskstats`` (include/uapi/linux/taskstats.h) through the ``TASKSTATS`` generic netlink family
(kernel/taskstats.c):

* ``TASKSTATS_CMD_GET`` with ``TASKSTATS_CMD_ATTR_PID`` answers one live task's stats so far;
* a socket that sends ``TASKSTATS_CMD_ATTR_REGISTER_CPUMASK`` (a cpulist such as ``"0-1"``) is sent every
  task's final stats as it exits on those CPUs, so threads that end between two reads are not lost.

Delays are only counted while ``kernel.task_delayacct`` is 1 (off by default since Linux 5.14);
:func:`enable_delayacct` turns it on and leaves a note so that a killed capture's setting is restored by
:func:`restore_delayacct_leftovers`.

Wire format (include/uapi/linux/netlink.h, genetlink.h): a 16-byte ``nlmsghdr`` (length, type, flags,
sequence, port), a 4-byte ``genlmsghdr`` (command, version, reserved), then attributes, each a 4-byte
``nlattr`` (length, type) and its payload padded to 4 bytes. Family ids are resolved with the controller
(``GENL_ID_CTRL``) command ``CTRL_CMD_GETFAMILY``.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from collections.abc import Callable
from pathlib import Path

NETLINK_GENERIC = 16
NLM_F_REQUEST = 1
NLMSG_ERROR, NLMSG_DONE = 2, 3
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME = 1, 2
TASKSTATS_GENL_NAME = "TASKSTATS"
TASKSTATS_GENL_VERSION = 1
TASKSTATS_CMD_GET, TASKSTATS_CMD_NEW = 1, 2
TASKSTATS_TYPE_PID, TASKSTATS_TYPE_TGID, TASKSTATS_TYPE_STATS = 1, 2, 3
TASKSTATS_TYPE_AGGR_PID, TASKSTATS_TYPE_AGGR_TGID = 4, 5
TASKSTATS_CMD_ATTR_PID, TASKSTATS_CMD_ATTR_TGID = 1, 2
TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK = 3, 4

_NLMSGHDR = struct.Struct("=IHHII")
_GENLHDR = struct.Struct("=BBH")
_NLATTR = struct.Struct("=HH")

#: ``struct taskstats`` up to version 14 as a struct format: native sizes, the C alignment written out
#: as pad bytes ``x`` (taskstats.h marks the 8-byte alignments with ``__attribute__((aligned(8)))``)
_FIELDS: tuple[tuple[str, str], ...] = (
    ("version", "H"), ("", "2x"), ("ac_exitcode", "I"), ("ac_flag", "B"), ("ac_nice", "B"), ("", "6x"),
    ("cpu_count", "Q"), ("cpu_delay_total", "Q"), ("blkio_count", "Q"), ("blkio_delay_total", "Q"),
    ("swapin_count", "Q"), ("swapin_delay_total", "Q"), ("cpu_run_real_total", "Q"),
    ("cpu_run_virtual_total", "Q"), ("ac_comm", "32s"), ("ac_sched", "B"), ("", "7x"), ("ac_uid", "I"),
    ("ac_gid", "I"), ("ac_pid", "I"), ("ac_ppid", "I"), ("ac_btime", "I"), ("", "4x"), ("ac_etime", "Q"),
    ("ac_utime", "Q"), ("ac_stime", "Q"), ("ac_minflt", "Q"), ("ac_majflt", "Q"), ("coremem", "Q"),
    ("virtmem", "Q"), ("hiwater_rss", "Q"), ("hiwater_vm", "Q"), ("read_char", "Q"), ("write_char", "Q"),
    ("read_syscalls", "Q"), ("write_syscalls", "Q"), ("read_bytes", "Q"), ("write_bytes", "Q"),
    ("cancelled_write_bytes", "Q"), ("nvcsw", "Q"), ("nivcsw", "Q"), ("ac_utimescaled", "Q"),
    ("ac_stimescaled", "Q"), ("cpu_scaled_run_real_total", "Q"), ("freepages_count", "Q"),
    ("freepages_delay_total", "Q"), ("thrashing_count", "Q"), ("thrashing_delay_total", "Q"),
    ("ac_btime64", "Q"), ("compact_count", "Q"), ("compact_delay_total", "Q"), ("ac_tgid", "I"), ("", "4x"),
    ("ac_tgetime", "Q"), ("ac_exe_dev", "Q"), ("ac_exe_inode", "Q"),
    ("wpcopy_count", "Q"), ("wpcopy_delay_total", "Q"),  # version 13 ends here (416 bytes)
    ("irq_count", "Q"), ("irq_delay_total", "Q"),  # version 14 (432 bytes)
)
_V13_FIELDS = len(_FIELDS) - 2
_STATS_V13 = struct.Struct("=" + "".join(f for _, f in _FIELDS[:_V13_FIELDS]))
_STATS_V14 = struct.Struct("=" + "".join(f for _, f in _FIELDS))
_NAMES = [n for n, _ in _FIELDS if n]

#: the delay kinds kept: (name in the metadata, count field, delay-total field); totals are in ns
DELAY_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("cpu", "cpu_count", "cpu_delay_total"),
    ("blkio", "blkio_count", "blkio_delay_total"),
    ("swapin", "swapin_count", "swapin_delay_total"),
    ("freepages", "freepages_count", "freepages_delay_total"),
    ("thrashing", "thrashing_count", "thrashing_delay_total"),
    ("compact", "compact_count", "compact_delay_total"),
    ("wpcopy", "wpcopy_count", "wpcopy_delay_total"),
    ("irq", "irq_count", "irq_delay_total"),
)

#: where the capture notes the ``task_delayacct`` value it changed (one file per capture, named by its pid)
DELAYACCT_NOTE_DIR = Path("/run")
DELAYACCT_SYSCTL = Path("/proc/sys/kernel/task_delayacct")


class TaskstatsError(OSError):
    """The TASKSTATS family is missing or answered with an error."""


def _align4(n: int) -> int:
    return (n + 3) & ~3


def encode_attr(kind: int, payload: bytes) -> bytes:
    """One ``nlattr``: length (header + payload, unpadded), type, payload, zero padding to 4 bytes."""
    head = _NLATTR.pack(_NLATTR.size + len(payload), kind)
    return head + payload + b"\0" * (_align4(len(payload)) - len(payload))


def encode_message(family: int, cmd: int, attrs: bytes, *, seq: int = 1, version: int = 1) -> bytes:
    """A request: ``nlmsghdr`` (``NLM_F_REQUEST``, port 0 = the kernel), ``genlmsghdr``, attributes."""
    body = _GENLHDR.pack(cmd, version, 0) + attrs
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), family, NLM_F_REQUEST, seq, 0) + body


def decode_attrs(data: bytes) -> list[tuple[int, bytes]]:
    """The ``(type, payload)`` pairs of a run of attributes (the nested flag bits of the type cleared)."""
    out, i = [], 0
    while i + _NLATTR.size <= len(data):
        length, kind = _NLATTR.unpack_from(data, i)
        if length < _NLATTR.size:
            break
        out.append((kind & 0x3FFF, data[i + _NLATTR.size: i + length]))
        i += _align4(length)
    return out


def decode_messages(data: bytes) -> list[tuple[int, int, bytes]]:
    """The ``(type, seq, payload after nlmsghdr)`` of each netlink message in one datagram."""
    out, i = [], 0
    while i + _NLMSGHDR.size <= len(data):
        length, kind, _flags, seq, _port = _NLMSGHDR.unpack_from(data, i)
        if length < _NLMSGHDR.size:
            break
        out.append((kind, seq, data[i + _NLMSGHDR.size: i + length]))
        i += _align4(length)
    return out


def decode_taskstats(payload: bytes) -> dict[str, int]:
    """A ``struct taskstats`` as a dict of its fields (version >= 13; the v14 IRQ fields are 0 when absent).

    Times: ``*_delay_total`` and ``cpu_run_*_total`` in ns, ``ac_etime``/``ac_utime``/``ac_stime`` in µs.
    A later version's extra fields (after v14) are ignored.
    """
    if len(payload) >= _STATS_V14.size:
        values = _STATS_V14.unpack_from(payload)
    elif len(payload) >= _STATS_V13.size:
        values = _STATS_V13.unpack_from(payload) + (0, 0)
    else:
        raise TaskstatsError(f"struct taskstats of {len(payload)} bytes: older than version 13")
    out = dict(zip(_NAMES, values, strict=True))
    out["ac_comm"] = out["ac_comm"].split(b"\0", 1)[0].decode(errors="replace")
    return out


def decode_stats_reply(payload: bytes) -> list[dict[str, int]]:
    """The per-task stats in a ``TASKSTATS_CMD_NEW`` message (after its ``nlmsghdr``).

    Only ``TASKSTATS_TYPE_AGGR_PID`` (one thread's stats) is kept: the ``AGGR_TGID`` a thread group's
    end adds sums the same threads again.
    """
    out = []
    for kind, value in decode_attrs(payload[_GENLHDR.size:]):
        if kind == TASKSTATS_TYPE_AGGR_PID:
            for inner, data in decode_attrs(value):
                if inner == TASKSTATS_TYPE_STATS:
                    out.append(decode_taskstats(data))
    return out


def _error_code(payload: bytes) -> int:
    return -struct.unpack_from("=i", payload)[0] if len(payload) >= 4 else 0


class TaskstatsSocket:
    """A generic netlink socket to the TASKSTATS family.

    ``listen=True`` registers it for every CPU's exiting tasks (:meth:`exits`); otherwise it answers
    :meth:`get`. Close it (or use it as a context manager) to deregister.
    """

    def __init__(self, listen: bool = False, rcvbuf_bytes: int = 8 << 20):
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_GENERIC)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, 33, rcvbuf_bytes)  # SO_RCVBUFFORCE (root)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
        self.sock.bind((0, 0))
        self.seq = 0
        self.dropped = 0
        self.family = self._family_id()
        self.cpus = None
        if listen:
            self.cpus = f"0-{(os.cpu_count() or 1) - 1}"
            self._request(TASKSTATS_CMD_GET, encode_attr(TASKSTATS_CMD_ATTR_REGISTER_CPUMASK,
                                                          self.cpus.encode() + b"\0"), ack=True)

    def __enter__(self) -> TaskstatsSocket:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.sock.fileno() < 0:
            return
        if self.cpus is not None:
            try:
                self._request(TASKSTATS_CMD_GET, encode_attr(TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK,
                                                              self.cpus.encode() + b"\0"), ack=False)
            except OSError:
                pass
        self.sock.close()

    def _send(self, family: int, cmd: int, attrs: bytes, flags_ack: bool) -> int:
        self.seq += 1
        msg = bytearray(encode_message(family, cmd, attrs, seq=self.seq))
        if flags_ack:
            struct.pack_into("=H", msg, 6, NLM_F_REQUEST | 4)  # NLM_F_ACK
        self.sock.send(bytes(msg))
        return self.seq

    def _replies(self, seq: int):
        """Messages answering ``seq`` until its ack or error (others -- exit events -- are skipped)."""
        while True:
            data = self.sock.recv(1 << 16)
            for kind, mseq, payload in decode_messages(data):
                if mseq != seq:
                    continue
                if kind == NLMSG_ERROR:
                    code = _error_code(payload)
                    if code:
                        raise TaskstatsError(code, os.strerror(code))
                    return
                if kind == NLMSG_DONE:
                    return
                yield kind, payload

    def _family_id(self) -> int:
        seq = self._send(GENL_ID_CTRL, CTRL_CMD_GETFAMILY,
                         encode_attr(CTRL_ATTR_FAMILY_NAME, TASKSTATS_GENL_NAME.encode() + b"\0"), True)
        family = None
        try:
            for _kind, payload in self._replies(seq):
                for attr, value in decode_attrs(payload[_GENLHDR.size:]):
                    if attr == CTRL_ATTR_FAMILY_ID:
                        family = struct.unpack_from("=H", value)[0]
        except TaskstatsError as exc:
            raise TaskstatsError(exc.errno, "the kernel has no TASKSTATS netlink family "
                                 "(CONFIG_TASKSTATS off)") from None
        if family is None:
            raise TaskstatsError(errno.ENOENT, "no TASKSTATS family id in the controller's answer")
        return family

    def _request(self, cmd: int, attrs: bytes, ack: bool) -> list[tuple[int, bytes]]:
        seq = self._send(self.family, cmd, attrs, ack)
        if not ack:
            return []
        return list(self._replies(seq))

    def get(self, pid: int) -> dict[str, int] | None:
        """One live task's (thread's) stats so far; None when it no longer exists."""
        seq = self._send(self.family, TASKSTATS_CMD_GET, encode_attr(TASKSTATS_CMD_ATTR_PID, struct.pack("=I", pid)),
                         False)
        try:
            for kind, payload in self._replies(seq):
                if kind == self.family:
                    stats = decode_stats_reply(payload)
                    return stats[0] if stats else None
        except TaskstatsError as exc:
            if exc.errno in (errno.ESRCH, errno.EINVAL):
                return None
            raise
        return None

    def exits(self) -> list[dict[str, int]]:
        """The final stats of the tasks that exited since the last call (without waiting)."""
        out = []
        while True:
            try:
                data = self.sock.recv(1 << 16, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return out
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:  # the receive buffer overflowed: some exits are lost
                    self.dropped += 1
                    continue
                raise
            for kind, _seq, payload in decode_messages(data):
                if kind == self.family:
                    out.extend(decode_stats_reply(payload))


# ---------------------------------------------------------------------- kernel.task_delayacct

def _note_path(note_dir: Path, pid: int) -> Path:
    return Path(note_dir) / f"swaptrace-capture-{pid}.delayacct"


def enable_delayacct(note_dir: Path | None = None, sysctl: Path | None = None) -> Callable[[], None]:
    """Turn ``kernel.task_delayacct`` on; return the step that puts the previous value back.

    The previous value is first written to ``<note_dir>/swaptrace-capture-<pid>.delayacct`` (removed by
    the returned step), so that a capture killed outright has its setting restored by
    :func:`restore_delayacct_leftovers`. Without the sysctl (an older kernel counts always) nothing is
    changed.
    """
    sysctl = Path(sysctl or DELAYACCT_SYSCTL)
    note = _note_path(note_dir or DELAYACCT_NOTE_DIR, os.getpid())
    try:
        previous = sysctl.read_text().strip()
    except OSError:
        return lambda: None
    if previous == "1":
        return lambda: None
    note.write_text(previous + "\n")
    sysctl.write_text("1\n")

    def restore() -> None:
        sysctl.write_text(previous + "\n")
        note.unlink(missing_ok=True)

    return restore


def delayacct_leftovers(owner_alive: Callable[[str], bool], note_dir: Path | None = None) -> list[Path]:
    """Notes of captures that changed ``task_delayacct`` and no longer run."""
    base = Path(note_dir or DELAYACCT_NOTE_DIR)
    if not base.is_dir():
        return []
    return sorted(p for p in base.glob("swaptrace-capture-*.delayacct") if not owner_alive(p.name))


def restore_delayacct_leftovers(owner_alive: Callable[[str], bool], note_dir: Path | None = None,
                                sysctl: Path | None = None) -> list[str]:
    """Put back the ``task_delayacct`` value a dead capture noted, and remove its note; return what was done."""
    done = []
    for note in delayacct_leftovers(owner_alive, note_dir):
        value = note.read_text().strip()
        if value in ("0", "1"):
            Path(sysctl or DELAYACCT_SYSCTL).write_text(value + "\n")
        note.unlink(missing_ok=True)
        done.append(f"task_delayacct {value} ({note})")
    return done
