"""Taskstats netlink encoding and decoding, the stalls recorder's arithmetic, the quiet wait, the sysctl's undo.

No root needed: messages are hand-built byte strings, checked against the product and against the
independent decoder in ``tests/naive_taskstats.py`` (offsets computed from taskstats.h, not written out);
the recorder is driven by fake sockets and a fake load.
"""

from __future__ import annotations

import struct

import naive_taskstats as naive
import pytest

from swaptrace.capture import stalls as st
from swaptrace.capture import taskstats as ts

FAMILY = 31


def _struct_bytes(size: int, values: dict) -> bytes:
    """A ``struct taskstats`` of ``size`` bytes with ``values`` at the naive layout's offsets, 0 elsewhere."""
    offsets, _ = naive.layout()
    buf = bytearray(size)
    for name, value in values.items():
        off, width, n = offsets[name]
        if off + width * n > size:  # a field of a later version than this struct's
            continue
        if name == "ac_comm":
            buf[off: off + len(value)] = value.encode()
        else:
            buf[off: off + width] = int(value).to_bytes(width, "little")
    return bytes(buf)


def _distinct_values() -> dict:
    """Every field a different value that fits its width (so a shifted offset reads a wrong one)."""
    out = {}
    for i, (name, width, _n, _) in enumerate(naive.MEMBERS):
        if name == "ac_pad":
            continue
        out[name] = "trainer" if name == "ac_comm" else (1000 * (i + 1) + 7) % (1 << (8 * width))
    out["version"] = 14
    return out


def _attr(kind: int, payload: bytes) -> bytes:
    pad = (-len(payload)) % 4
    return (4 + len(payload)).to_bytes(2, "little") + kind.to_bytes(2, "little") + payload + b"\0" * pad


def _message(kind: int, body: bytes, seq: int = 0) -> bytes:
    return (16 + len(body)).to_bytes(4, "little") + kind.to_bytes(2, "little") + b"\0\0" + \
        seq.to_bytes(4, "little") + b"\0" * 4 + body


def test_the_layout_is_taskstats_h():
    offsets, size = naive.layout()
    # hand-worked from the header: 8 u64 from 16 (cpu_count aligned(8)), ac_comm 80..112, ac_sched aligned(8)
    # at 112, ac_uid aligned(8) at 120, ac_etime aligned(8) at 144, ac_tgid at 368, ac_tgetime at 376
    assert offsets["cpu_count"][0] == 16 and offsets["ac_comm"][0] == 80 and offsets["ac_sched"][0] == 112
    assert offsets["ac_uid"][0] == 120 and offsets["ac_etime"][0] == 144 and offsets["ac_tgid"][0] == 368
    assert offsets["ac_tgetime"][0] == 376 and offsets["wpcopy_delay_total"][0] == 408
    assert offsets["irq_delay_total"][0] == 424 and size == 432
    assert ts._STATS_V13.size == 416 and ts._STATS_V14.size == 432


def test_attribute_and_request_bytes():
    assert ts.encode_attr(ts.TASKSTATS_CMD_ATTR_PID, struct.pack("=I", 0x1234)) == bytes.fromhex("0800010034120000")
    name = ts.encode_attr(ts.CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0")
    assert name == bytes.fromhex("0e000200") + b"TASKSTATS\0" + b"\0\0"  # 14 bytes, padded to 16
    msg = ts.encode_message(ts.GENL_ID_CTRL, ts.CTRL_CMD_GETFAMILY, name, seq=7)
    assert msg == bytes.fromhex("24000000" "1000" "0100" "07000000" "00000000" "03010000") + name
    cpus = ts.encode_attr(ts.TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, b"0-1\0")
    assert cpus == bytes.fromhex("0800030030" "2d3100")


@pytest.mark.parametrize("size", [416, 432, 432 + 64])  # version 13, 14, and a later one with more fields
def test_stats_decode_against_the_naive_reader(size):
    values = _distinct_values()
    raw = _struct_bytes(size, values)
    mine = ts.decode_taskstats(raw)
    theirs = naive.read_struct(raw)
    for name, value in theirs.items():
        if size == 416 and name.startswith("irq"):
            continue
        assert mine[name] == value, name
    assert mine["ac_comm"] == "trainer" and mine["cpu_delay_total"] == values["cpu_delay_total"]
    if size == 416:
        assert mine["irq_count"] == 0 and mine["irq_delay_total"] == 0
    else:
        assert mine["irq_delay_total"] == values["irq_delay_total"]


def test_too_old_a_struct_is_refused():
    with pytest.raises(ts.TaskstatsError):
        ts.decode_taskstats(bytes(400))


def test_reply_keeps_thread_stats_not_the_group_sum():
    a = _struct_bytes(432, {"ac_pid": 11, "swapin_delay_total": 5_000_000})
    b = _struct_bytes(432, {"ac_pid": 12, "swapin_delay_total": 2_000_000})
    tgid_sum = _struct_bytes(432, {"ac_pid": 11, "swapin_delay_total": 7_000_000})
    genl = bytes([ts.TASKSTATS_CMD_NEW, 1, 0, 0])
    one = _message(FAMILY, genl + _attr(4, _attr(1, struct.pack("=I", 11)) + _attr(3, a)))
    two = _message(FAMILY, genl + _attr(4, _attr(1, struct.pack("=I", 12)) + _attr(3, b))
                   + _attr(5, _attr(2, struct.pack("=I", 11)) + _attr(3, tgid_sum)))
    noise = _message(ts.NLMSG_ERROR, struct.pack("=i", 0) + bytes(16))
    datagram = one + noise + two
    mine = [s for kind, _seq, body in ts.decode_messages(datagram) if kind == FAMILY
            for s in ts.decode_stats_reply(body)]
    theirs = naive.thread_stats(datagram, FAMILY)
    assert [s["ac_pid"] for s in mine] == [11, 12] == [s["ac_pid"] for s in theirs]
    assert [s["swapin_delay_total"] for s in mine] == [5_000_000, 2_000_000]


def test_error_message_code():
    assert ts._error_code(struct.pack("=i", -3)) == 3 and ts._error_code(struct.pack("=i", 0)) == 0


# ---------------------------------------------------------------------- the recorder, with fake sockets

class _FakeSocket:
    """Exits handed out in batches; ``get`` answers from ``live``."""

    batches: list[list[dict]] = []
    live: dict[int, dict] = {}

    def __init__(self, listen: bool = False):
        self.listen, self.dropped = listen, 0

    def exits(self):
        return _FakeSocket.batches.pop(0) if _FakeSocket.batches else []

    def get(self, tid):
        return _FakeSocket.live.get(tid)

    def close(self):
        pass


def _rec(pid, tgid, ppid, swapin_ms, *, cpu_ms=0, utime_us=0):
    return {"ac_pid": pid, "ac_tgid": tgid, "ac_ppid": ppid, "swapin_count": 1, "swapin_delay_total": swapin_ms * 10**6,
            "cpu_count": 1, "cpu_delay_total": cpu_ms * 10**6, "ac_utime": utime_us, "ac_stime": 0}


def test_exited_tasks_of_the_tree_are_summed_per_step(monkeypatch):
    monkeypatch.setattr(st, "TaskstatsSocket", _FakeSocket)
    monkeypatch.setattr(st, "read_psi", lambda: {"memory_some": 0, "memory_full": 0, "io_some": 0, "io_full": 0})
    # batch 1 (read at the end of step 0): a thread of the root (100) and an unrelated task;
    # batch 2 (at the run's end): a grandchild (300, parent 200) before its parent (200, parent 100)
    _FakeSocket.batches = [[], [_rec(101, 100, 1, 4), _rec(900, 900, 1, 50)],
                           [_rec(300, 300, 200, 2), _rec(200, 200, 100, 1), _rec(100, 100, 1, 3)]]
    rec = st.StallRecorder(load=lambda: 0.25)
    rec.begin("limited", lambda: [])
    rec.root(100)
    rec.start()
    rec.mark(0)
    rec.end(1)
    d = rec.report()["delays"]["limited"]
    # hand-worked: step 0 = thread 101's 4 ms; step 1 = 2 + 1 + 3 ms; the unrelated 50 ms never counts
    assert d["steps"] == [0, 1] and d["swapin_us"] == [4000, 6000] and d["swapin_count"] == [1, 3]
    assert d["total"]["swapin_us"] == 10000 and d["tasks_seen"] == 4
    load = rec.report()["load"]["limited"]
    assert load["load_before"] == 0.25 == load["load_after"] and "quiet_wait" not in load


def test_live_tasks_are_read_and_not_counted_twice_after_exit(monkeypatch):
    import os

    monkeypatch.setattr(st, "TaskstatsSocket", _FakeSocket)
    me = os.getpid()
    tids = [int(t) for t in os.listdir(f"/proc/{me}/task")]
    _FakeSocket.live = {tid: _rec(tid, me, 1, 1) for tid in tids}
    _FakeSocket.batches = [[], [], [_rec(tids[0], me, 1, 5)]]  # the first thread's final record, 5 ms
    rec = st.StallRecorder(load=lambda: 0.0)
    rec.begin("free", lambda: [me])
    rec.start()
    rec.mark(0)
    rec.end(1)
    d = rec.report()["delays"]["free"]
    n = len(tids)
    # start: n live threads at 1 ms; end of step 0: the same; end: first thread 5 ms final + n-1 live at 1 ms
    assert d["swapin_us"] == [0, 4000] and d["total"]["swapin_us"] == 4000 and d["tasks_seen"] == n
    _FakeSocket.live = {}


def test_other_processes_cpu_is_the_busy_time_less_the_trees(monkeypatch):
    """By hand: /proc/stat's busy time grows 10.0 -> 12.0 s over the run; the tree's one task used 1.2 s of
    user time (its final record at the end): other processes used 2.0 - 1.2 = 0.8 s."""
    monkeypatch.setattr(st, "TaskstatsSocket", _FakeSocket)
    monkeypatch.setattr(st, "read_psi", lambda: None)
    busy = iter([10.0, 10.5, 12.0])
    monkeypatch.setattr(st, "busy_cpu_s", lambda: next(busy))
    _FakeSocket.live = {}
    _FakeSocket.batches = [[], [], [_rec(100, 100, 1, 0, utime_us=1_200_000)]]
    rec = st.StallRecorder(load=lambda: 0.0)
    rec.begin("limited", lambda: [])
    rec.root(100)
    rec.start()
    rec.mark(0)
    rec.end(1)
    r = rec.report()
    assert r["delays"]["limited"]["total"]["utime_us"] == 1_200_000
    assert r["load"]["limited"]["other_cpu_s"] == pytest.approx(0.8, abs=1e-9)


def test_no_taskstats_keeps_psi_and_load(monkeypatch):
    def refuse(listen=False):
        raise ts.TaskstatsError(2, "no TASKSTATS family")

    monkeypatch.setattr(st, "TaskstatsSocket", refuse)
    rec = st.StallRecorder(load=lambda: 1.5)
    rec.begin("free", lambda: [])
    rec.start()
    rec.end()
    r = rec.report()
    assert r["delays"] == {} and "no TASKSTATS" in r["delays_unavailable"]
    assert r["load"]["free"]["load_before"] == 1.5 and r["load"]["free"]["other_cpu_s"] >= 0


# ---------------------------------------------------------------------- the quiet wait

class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def test_quiet_wait_waits_until_the_load_falls():
    clock, loads, said = _Clock(), iter([2.0, 1.2, 0.4]), []
    got = st.wait_quiet(0.5, 600, load=lambda: next(loads), sleep=clock.sleep, clock=clock, say=said.append,
                        poll_s=5)
    assert got == {"waited_s": 10.0, "load_start": 0.4, "quiet": True}
    assert len(said) == 1 and "0.5" in said[0] and "2.00" in said[0]


def test_quiet_wait_gives_up_at_its_timeout_and_says_nothing_when_quiet():
    clock = _Clock()
    got = st.wait_quiet(0.5, 12, load=lambda: 3.0, sleep=clock.sleep, clock=clock, poll_s=5)
    assert got == {"waited_s": 12.0, "load_start": 3.0, "quiet": False}
    said = []
    assert st.wait_quiet(0.5, 12, load=lambda: 0.1, say=said.append)["waited_s"] == 0 and said == []


def test_recorder_records_the_wait(monkeypatch):
    monkeypatch.setattr(st, "TaskstatsSocket", _FakeSocket)
    loads = iter([0.9, 0.3, 0.3, 0.35])
    monkeypatch.setattr(st.time, "sleep", lambda s: None)
    rec = st.StallRecorder(wait_quiet=0.5, quiet_timeout_s=60, load=lambda: next(loads))
    rec.begin("limited", lambda: [])
    rec.start()
    rec.end()
    load = rec.report()["load"]["limited"]
    assert load["quiet_wait"]["quiet"] and load["quiet_wait"]["load_start"] == 0.3
    assert load["load_before"] == 0.3 and load["load_after"] == 0.35


# ---------------------------------------------------------------------- kernel.task_delayacct and its note

def test_delayacct_is_turned_on_noted_and_restored(tmp_path):
    sysctl = tmp_path / "task_delayacct"
    sysctl.write_text("0\n")
    restore = ts.enable_delayacct(tmp_path, sysctl)
    notes = list(tmp_path.glob("swaptrace-capture-*.delayacct"))
    assert sysctl.read_text().strip() == "1" and len(notes) == 1 and notes[0].read_text().strip() == "0"
    restore()
    assert sysctl.read_text().strip() == "0" and not list(tmp_path.glob("*.delayacct"))
    sysctl.write_text("1\n")  # already on: nothing to change, nothing noted
    ts.enable_delayacct(tmp_path, sysctl)()
    assert sysctl.read_text().strip() == "1" and not list(tmp_path.glob("*.delayacct"))


def test_a_dead_captures_note_restores_the_value(tmp_path):
    from swaptrace.capture.leftovers import owner_alive

    sysctl = tmp_path / "task_delayacct"
    sysctl.write_text("1\n")
    (tmp_path / "swaptrace-capture-999999999.delayacct").write_text("0\n")  # no such pid
    assert len(ts.delayacct_leftovers(owner_alive, tmp_path)) == 1
    done = ts.restore_delayacct_leftovers(owner_alive, tmp_path, sysctl)
    assert len(done) == 1 and sysctl.read_text().strip() == "0" and not list(tmp_path.glob("*.delayacct"))


def test_psi_and_busy_cpu_readers(tmp_path):
    (tmp_path / "memory").write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=120\n"
                                     "full avg10=0.00 avg60=0.00 avg300=0.00 total=80\n")
    (tmp_path / "io").write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n"
                                 "full avg10=0.00 avg60=0.00 avg300=0.00 total=3\n")
    assert st.read_psi(tmp_path) == {"memory_some": 120, "memory_full": 80, "io_some": 7, "io_full": 3}
    assert st.read_psi(tmp_path / "absent") is None
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 20 30 400 50 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    import os
    # busy = user + nice + system + irq + softirq + steal = 100 + 20 + 30 + 6 + 7 + 8 (idle 400, iowait 50 left out)
    assert st.busy_cpu_s(stat) == pytest.approx(171 / os.sysconf("SC_CLK_TCK"))


def test_a_failing_read_is_reported_not_raised(monkeypatch):
    import os

    class Broken(_FakeSocket):
        def get(self, tid):
            raise struct.error("truncated reply")

    monkeypatch.setattr(st, "TaskstatsSocket", Broken)
    _FakeSocket.batches = []
    rec = st.StallRecorder(load=lambda: 0.0)
    rec.begin("limited", lambda: [os.getpid()])
    rec.start()
    rec.mark(0)  # from a trace reader's thread this must not raise
    rec.end(1)
    r = rec.report()
    # no delays without every boundary, and the reason
    assert r["delays"] == {"limited": {"errors": ["error('truncated reply')"] * 3}}
    assert r["load"]["limited"]["wall_s"] >= 0


def test_attribute_type_flags_are_cleared():
    """netlink.h: the top two bits of nla_type are NLA_F_NESTED (0x8000) and NLA_F_NET_BYTEORDER (0x4000), not
    the type. By hand: a nested attribute 4 (AGGR_PID) with 4 payload bytes, then attribute 1 with 2 (padded)."""
    data = struct.pack("=HH", 8, 0x8000 | 4) + b"abcd" + struct.pack("=HH", 6, 0x4000 | 1) + b"xy\0\0"
    assert ts.decode_attrs(data) == [(4, b"abcd"), (1, b"xy")]
