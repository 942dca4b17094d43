"""``capture --record`` without root: trace parsing, the anonymous-memory model against its naive twin,
hand-worked cases, step detection, the file and its reduction, and the command's bad inputs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from naive_recording import CODE, naive_page_events

from swaptrace.capture.record_parse import EV, PROT_SHIFT, parse_lines
from swaptrace.capture.recorder import anon_mappings, cpu_seconds, parallelism, resolve_steps
from swaptrace.capture.recording import (
    ALLOC,
    FREE,
    MOVE,
    RETOUCH,
    TOUCH,
    AnonTracker,
    Steps,
    assign_steps,
    detect_steps,
    find_period,
    page_events,
    reduce_rows,
)
from swaptrace.cli import cli
from swaptrace.core.traceio import TraceWriter

P = 4096
ANON = 0x22 | (3 << PROT_SHIFT)  # MAP_PRIVATE | MAP_ANONYMOUS, PROT_READ | PROT_WRITE
FILE = 0x02  # MAP_PRIVATE, from a file


def ev(code, pid=1, address=0, length=0, write=False, flags=0, old_address=0, old_length=0, t=0):
    return (t, CODE[code], pid, address, length, write, flags, old_address, old_length)


def product(events):
    tr = AnonTracker()
    return [pe for e in events for pe in tr.apply(e)]


def test_codes_agree_with_the_file_kind():
    assert CODE == EV


# ---------------------------------------------------------------------------------------------------- hand-worked

def test_hand_worked_mmap_fault_madvise_munmap():
    base = 0x10000  # page 16
    events = [
        ev("mmap", address=base, length=4 * P - 1, flags=ANON),  # rounds up to 4 pages
        ev("mmap", address=0x80000, length=P, flags=FILE),  # file memory: its fault is dropped
        ev("fault", address=base + 5, write=True),
        ev("fault", address=base + P + 9, write=False),
        ev("fault", address=base + P + 9, write=True),  # zero page -> real page: no second first touch
        ev("fault", address=0x80000, write=False),
        ev("madvise", address=base, length=P, flags=4),  # DONTNEED: page 16 freed, still mapped
        ev("madvise", address=base + P, length=P, flags=14),  # MADV_HUGEPAGE: frees nothing
        ev("fault", address=base, write=False),  # touched again after the free
        ev("munmap", address=base, length=2 * P),  # frees 16 and 17, unmaps them
        ev("fault", address=base, write=True),  # no longer mapped
        ev("exit"),
    ]
    want = [(ALLOC, 1, 16, 4, False, 0), (TOUCH, 1, 16, 1, True, 0), (TOUCH, 1, 17, 1, False, 0),
            (FREE, 1, 16, 1, False, 0), (TOUCH, 1, 16, 1, False, 0), (FREE, 1, 16, 1, False, 0),
            (FREE, 1, 17, 1, False, 0)]
    assert product(events) == want
    assert naive_page_events(events) == want
    # read as a --pageout recording: the second fault on page 17 is a use again (a store); the file page's
    # fault and the unmapped page's are still nothing
    tr = AnonTracker(retouch=True)
    paged = [pe for e in events for pe in tr.apply(e)]
    assert paged == want[:3] + [(RETOUCH, 1, 17, 1, True, 0)] + want[3:]


def test_hand_worked_brk_mremap_fork_exec():
    events = [
        ev("brk", address=0x5000 + 10),  # the heap starts at 0x500a: PAGE_ALIGN -> page 6
        ev("brk", address=0x8000),  # maps pages 6, 7
        ev("fault", address=0x6000, write=True),
        ev("fault", address=0x7fff, write=True),
        ev("brk", address=0x7000),  # gives back page 7
        ev("mmap", address=0x100000, length=3 * P, flags=ANON),  # pages 256..258
        ev("fault", address=0x100000, write=True),
        ev("fault", address=0x102000, write=True),
        # grow and move to page 512: 256 -> 512 moves, 258 -> 514 moves, 3 more pages mapped
        ev("mremap", address=0x200000, length=6 * P, old_address=0x100000, old_length=3 * P),
        ev("fault", address=0x100000, write=True),  # the old place is gone
        ev("fault", address=0x200000, write=True),  # moved: already touched
        ev("fault", address=0x205000, write=False),  # new part
        ev("fork", pid=2, old_address=1),
        ev("fault", pid=2, address=0x203000, write=True),  # the child's own first touch
        ev("fault", pid=2, address=0x202000, write=True),  # copied from the parent: touched already
        ev("exec", pid=2),
        ev("fault", pid=2, address=0x204000),  # nothing mapped after exec
        ev("exit", pid=1),
    ]
    want = [(ALLOC, 1, 6, 2, False, 0), (TOUCH, 1, 6, 1, True, 0), (TOUCH, 1, 7, 1, True, 0),
            (FREE, 1, 7, 1, False, 0), (ALLOC, 1, 256, 3, False, 0), (TOUCH, 1, 256, 1, True, 0),
            (TOUCH, 1, 258, 1, True, 0), (MOVE, 1, 256, 3, False, 512), (ALLOC, 1, 515, 3, False, 0),
            (TOUCH, 1, 517, 1, False, 0), (TOUCH, 2, 515, 1, True, 0),
            (FREE, 1, 6, 1, False, 0), (FREE, 1, 512, 1, False, 0), (FREE, 1, 514, 1, False, 0),
            (FREE, 1, 517, 1, False, 0)]
    assert product(events) == want
    assert naive_page_events(events) == want


def test_mremap_shrink_in_place_frees_the_cut_off_part():
    events = [ev("mmap", address=0x10000, length=4 * P, flags=ANON)]
    events += [ev("fault", address=0x10000 + i * P, write=True) for i in range(4)]
    events.append(ev("mremap", address=0x10000, length=P, old_address=0x10000, old_length=4 * P))
    want_tail = [(FREE, 1, 17, 1, False, 0), (FREE, 1, 18, 1, False, 0), (FREE, 1, 19, 1, False, 0)]
    assert product(events)[-3:] == want_tail == naive_page_events(events)[-3:]
    assert product([*events, ev("fault", address=0x11000)]) == product(events)  # page 17 is unmapped


# ---------------------------------------------------------------------------------------------------- the twin

def _random_events(rng, n):
    out = []
    pids = [1]
    for _ in range(n):
        pid = int(rng.choice(pids))
        r = rng.random()
        page = int(rng.integers(0, 48))
        npg = int(rng.integers(1, 9))
        if r < 0.12:
            flags = ANON if rng.random() < 0.8 else (FILE if rng.random() < 0.5 else 0x21)  # shared anon too
            out.append(ev("mmap", pid, page * P, npg * P - int(rng.integers(0, P)), flags=flags))
        elif r < 0.18:
            out.append(ev("munmap", pid, page * P, npg * P))
        elif r < 0.24:
            out.append(ev("madvise", pid, page * P, npg * P, flags=int(rng.choice([4, 8, 9, 24, 14, 3]))))
        elif r < 0.30:
            out.append(ev("brk", pid, (64 + int(rng.integers(0, 12))) * P + int(rng.integers(0, P))))
        elif r < 0.35:
            out.append(ev("mremap", pid, int(rng.integers(0, 48)) * P, npg * P, old_address=page * P,
                          old_length=int(rng.integers(0, 6)) * P))
        elif r < 0.37 and len(pids) < 4:
            child = max(pids) + 1
            pids.append(child)
            out.append(ev("fork", child, old_address=pid))
        elif r < 0.38:
            out.append(ev("exec", pid))
        elif r < 0.39 and pid != 1:
            pids.remove(pid)
            out.append(ev("exit", pid))
        else:
            out.append(ev("fault", pid, int(rng.integers(0, 80)) * P + int(rng.integers(0, P)),
                          write=bool(rng.random() < 0.5)))
    return out


def test_tracker_equals_its_naive_twin_on_many_small_cases():
    rng = np.random.default_rng(7)
    kinds = set()
    for _ in range(400):
        events = _random_events(rng, int(rng.integers(1, 120)))
        got = product(events)
        assert got == naive_page_events(events), events
        kinds.update(k for k, *_ in got)
    assert kinds == {TOUCH, ALLOC, FREE, MOVE}  # every kind was exercised


def test_reduction_of_a_file_equals_the_twin_step_by_step(tmp_path):
    rng = np.random.default_rng(3)
    events = _random_events(rng, 400)
    events = [(i * 10, *e[1:]) for i, e in enumerate(events)]
    steps = Steps((1000, 2500), 3500, "marks")
    step, exit_step = assign_steps(np.asarray([e[0] for e in events]), steps)
    cols = list(zip(*events, strict=True))
    columns = {"t_us": np.asarray(cols[0], float), "step": step, "event": np.asarray(cols[1], np.int8),
               "pid": np.asarray(cols[2], np.int32), "address": np.asarray(cols[3], np.uint64),
               "length": np.asarray(cols[4], np.uint64), "write": np.asarray(cols[5], bool),
               "flags": np.asarray(cols[6], np.uint64), "old_address": np.asarray(cols[7], np.uint64),
               "old_length": np.asarray(cols[8], np.uint64), "referenced": np.zeros(len(events), np.uint64),
               "anonymous": np.zeros(len(events), np.uint64)}
    path = tmp_path / "r.recording.parquet"
    with TraceWriter(path, "recording", {"page_bytes": 4096, "steps": 3, "exit_step": exit_step}) as w:
        w.write(**columns)
    rec = page_events(path)
    assert len(rec.steps) == 3 and rec.exit is not None and rec.page_bytes == 4096
    for sp in (*rec.steps, rec.exit):
        idx = [i for i, s in enumerate(step) if s == sp.step]
        tw = naive_page_events(events[: idx[-1] + 1] if idx else [])
        before = len(naive_page_events(events[: idx[0]])) if idx else len(tw)
        want = tw[before:]
        got = list(zip(sp.kind.tolist(), sp.pid.tolist(), sp.page.tolist(), sp.pages.tolist(), sp.write.tolist(),
                       sp.to_page.tolist(), strict=True))
        assert got == want
        pages, writes = sp.first_touches
        assert pages.tolist() == [w[2] for w in want if w[0] == TOUCH]
        assert writes.tolist() == [w[4] for w in want if w[0] == TOUCH]
        assert sp.frees.tolist() == [w[2] for w in want if w[0] == FREE]
        assert sp.allocations[1].tolist() == [w[3] for w in want if w[0] == ALLOC]


def test_referenced_rows_go_to_their_step():
    cols = {"event": np.asarray([EV["referenced"], EV["referenced"]]), "step": np.asarray([0, 1]),
            "pid": np.asarray([5, 5]), "address": np.asarray([0x10000, 0x10000], np.uint64),
            "length": np.asarray([8 * P, 8 * P], np.uint64), "referenced": np.asarray([8 * P, 3 * P], np.uint64),
            "t_us": np.zeros(2), "write": np.zeros(2, bool), "flags": np.zeros(2, np.uint64),
            "old_address": np.zeros(2, np.uint64), "old_length": np.zeros(2, np.uint64)}
    steps, ex = reduce_rows(cols, 2, None)
    assert ex is None
    assert steps[0].referenced["referenced_pages"].tolist() == [8]
    assert steps[1].referenced["referenced_pages"].tolist() == [3]
    assert steps[1].referenced["page"].tolist() == [16] and steps[1].referenced["pages"].tolist() == [8]


# ---------------------------------------------------------------------------------------------------- parsing

TRACE = """\
# tracer: nop
          python-100   (    100) [000] ..... 10.000001: tracing_mark_write: swaptrace start
          python-100   (    100) [000] ..... 10.000010: sys_brk(brk: 0)
          python-100   (    100) [000] ..... 10.000011: sys_brk -> 0x5000
          python-100   (    100) [000] ..... 10.000020: sys_mmap(addr: 0, len: 3000, prot: 3, flags: 22, fd: ffffffffffffffff, off: 0)
          python-100   (    100) [000] ..... 10.000021: sys_mmap -> 0x7f0000000000
          python-100   (    100) [000] d.... 10.000030: page_fault_user: address=0x7f0000001010 ip=0x55d000001000 error_code=0x6
          python-100   (    100) [000] d.... 10.000031: page_fault_kernel: address=0x7f0000002000 ip=__put_user_8 error_code=0x2
          python-100   (    100) [000] d.... 10.000032: page_fault_kernel: address=vmalloc_area+0x10 ip=x error_code=0x0
          python-100   (    100) [000] d.... 10.000033: page_fault_kernel: address=0xffff888000001000 ip=x error_code=0x0
          python-100   (    100) [001] ..... 10.000040: sys_mmap(addr: 0, len: 1000, prot: 3, flags: 22, fd: ffffffffffffffff, off: 0)
          python-100   (    100) [001] ..... 10.000041: sys_mmap -> 0xfffffffffffffff4
          python-100   (    100) [001] ..... 10.000050: sched_process_fork: comm=python pid=100 child_comm=python child_pid=101
          python-101   (    100) [001] ..... 10.000051: sys_munmap(addr: 7f0000000000, len: 1000)
          python-100   (    100) [001] ..... 10.000052: sched_process_fork: comm=python pid=100 child_comm=python child_pid=102
          python-102   (    102) [000] ..... 10.000060: sys_madvise(start: 7f0000000000, len_in: 2000, behavior: 4)
          python-102   (    102) [000] ..... 10.000061: sys_mremap(addr: 7f0000000000, old_len: 3000, new_len: 6000, flags: 1, new_addr: 0)
          python-102   (    102) [000] ..... 10.000062: sys_mremap -> 0x7f0000100000
          python-102   (    102) [000] ..... 10.000070: sched_process_exit: comm=python pid=102 prio=120 group_dead=true
          python-101   (    100) [001] ..... 10.000071: sched_process_exit: comm=python pid=101 prio=120 group_dead=false
CPU:1 [LOST 7 EVENTS]
this line is not a trace line
          python-100   (    100) [000] ..... 10.500000: tracing_mark_write: swaptrace step 0
"""


def test_parse_lines_reads_every_event_exactly():
    p = parse_lines(TRACE.splitlines(True))
    assert p.lost_events == 7 and p.malformed == 1 and p.failed_calls == 1
    assert p.markers == [(10_000_001_000, "swaptrace start"), (10_500_000_000, "swaptrace step 0")]
    names = [list(EV)[e[1]] for e in p.events]
    # the thread (101, of process 100) is no fork; its munmap is process 100's; its exit is no group exit
    # the kernel's fault at a user address is a fault (a store, for copy_to_user); at kernel addresses, none
    assert names == ["brk", "mmap", "fault", "fault", "munmap", "fork", "madvise", "mremap", "exit"]
    brk, mmap, fault, kfault, munmap, fork, madvise, mremap, exit_ = p.events
    assert kfault[3] == 0x7F0000002000 and kfault[5] is True and kfault[6] == 2 and kfault[2] == 100
    assert brk[3] == 0x5000 and brk[6] == 0
    assert mmap[3] == 0x7F0000000000 and mmap[4] == 0x3000 and mmap[6] == 0x22 | 3 << PROT_SHIFT
    assert fault[3] == 0x7F0000001010 and fault[5] is True and fault[6] == 6 and fault[0] == 10_000_030_000
    assert munmap[2] == 100 and munmap[3] == 0x7F0000000000 and munmap[4] == 0x1000
    assert fork[2] == 102 and fork[7] == 100
    assert madvise[2] == 102 and madvise[6] == 4 and madvise[4] == 0x2000
    assert mremap[3] == 0x7F0000100000 and mremap[4] == 0x6000 and mremap[7] == 0x7F0000000000 and mremap[8] == 0x3000
    assert exit_[2] == 102


def test_anon_mappings_of_smaps():
    text = """\
55d000000000-55d000021000 rw-p 00000000 00:00 0                          [heap]
Rss:                 132 kB
Referenced:          100 kB
Anonymous:           132 kB
7f0000000000-7f0000100000 r--p 00000000 08:01 1234                       /usr/lib/libc.so.6
Referenced:          400 kB
Anonymous:             0 kB
7f1000000000-7f1000800000 rw-p 00000000 00:00 0
Referenced:         2048 kB
Anonymous:          4096 kB
Private_Dirty:        12 kB
"""
    assert anon_mappings(text) == [(0x55D000000000, 0x55D000021000, 100 * 1024, 132 * 1024, 0),
                                   (0x7F1000000000, 0x7F1000800000, 2048 * 1024, 4096 * 1024, 12 * 1024)]


# ---------------------------------------------------------------------------------------------------- steps

def test_find_period_hand_cases():
    # start-up: five growing mmaps (all +1: not balanced), then (mmap +8, munmap -8, mmap +2, munmap -2) x 4
    codes = [0] * 5 + [0, 1, 0, 1] * 4 + [1]
    deltas = [1] * 5 + [8, -8, 2, -2] * 4 + [-5]
    assert find_period(np.asarray(codes), np.asarray(deltas)) == (5, 4, 4)
    # only growth: no pattern
    assert find_period(np.zeros(20, int), np.ones(20, int)) is None
    # rotation: the repetition starts at its lowest running allocation (before the +8)
    assert find_period(np.asarray([1, 0, 1, 0, 1, 0, 1]), np.asarray([-8, 8, -8, 8, -8, 8, -8])) == (1, 2, 3)


def _cycle_events(n_steps, t0=0):
    """A synthetic program: start-up grows by ten mappings, then steps of (mmap 8 MiB, touch, munmap)."""
    out, t, page = [], t0, 0x1000
    for i in range(10):
        out.append(ev("mmap", address=(page + i * 300) * P, length=256 * P, flags=ANON, t=t))
        t += 10
    for _ in range(n_steps):
        out.append(ev("mmap", address=0x90000 * P, length=2048 * P, flags=ANON, t=t))
        out += [ev("fault", address=(0x90000 + k) * P, write=True, t=t + 1 + k) for k in range(0, 2048, 512)]
        out.append(ev("munmap", address=0x90000 * P, length=2048 * P, t=t + 5000))
        t += 10_000
    out.append(ev("munmap", address=page * P, length=256 * P, t=t + 1))  # exit frees start-up memory
    return out, t


def test_detect_steps_finds_the_repeating_allocations():
    events, t_end = _cycle_events(5)
    steps = detect_steps(events)
    assert steps.how == "pattern" and steps.period == 2
    assert steps.boundaries == tuple(100 + 10_000 * k for k in range(5))
    assert steps.exit_ns == t_end + 1  # the first call after the last whole step
    step, exit_step = assign_steps(np.asarray([e[0] for e in events]), steps)
    assert exit_step == 6 and step[0] == 0 and step[-1] == 6 and set(step[10:-1].tolist()) == {1, 2, 3, 4, 5}


def test_detect_steps_without_a_pattern_splits_at_the_peak():
    events = [ev("mmap", address=i * 256 * P, length=256 * P, flags=ANON, t=i) for i in range(6)]
    events.append(ev("munmap", address=0, length=256 * P, t=10))
    s = detect_steps(events)
    assert s.how == "growth" and s.boundaries == (5,) and s.exit_ns is None
    assert detect_steps([ev("fault", address=0)]).how == "none"


def test_resolve_steps_from_marks_lines_and_cap():
    from swaptrace.capture.record_parse import ParsedRecording

    marks = [(100, "swaptrace step 0"), (200, "swaptrace step 1"), (300, "swaptrace step 2")]
    s = resolve_steps(ParsedRecording(markers=[*marks, (350, "swaptrace end")]), None, 1000)
    assert s.boundaries == (100, 200, 300) and s.exit_ns == 350 and s.how == "marks"
    s = resolve_steps(ParsedRecording(markers=marks), None, 1000)
    assert s.exit_ns == 400 and s.note == "median step"  # one median step after the last mark
    s = resolve_steps(ParsedRecording(markers=marks), None, 390)
    assert s.exit_ns is None  # the program ended sooner: its exit is not told apart
    lines = [(100, "swaptrace line 1"), (200, "swaptrace line 2"), (300, "swaptrace line 3")]
    s = resolve_steps(ParsedRecording(markers=lines), None, 1000)
    assert s.boundaries == (100, 200) and s.exit_ns == 300 and s.how == "lines"
    s = resolve_steps(ParsedRecording(markers=marks), 1, 1000)
    assert s.boundaries == (100,) and s.exit_ns == 200
    # marks win over lines
    assert resolve_steps(ParsedRecording(markers=[*lines, *marks]), None, 1000).how == "marks"


# ---------------------------------------------------------------------------------------------------- the command

def _run(args):
    return CliRunner().invoke(cli, ["capture", *args], catch_exceptions=False)


@pytest.mark.parametrize("args,needle", [
    (["--record", "-o", "{out}", "--"], "nothing after --"),
    (["--record", "-o", "{out}", "--step-line", "(", "--", "true"], "--step-line"),
    (["--record", "-o", "{out}", "--", "no-such-program-xyz"], "command not found"),
    (["--record", "-o", "{out}", "--memory", "1GiB", "--", "true"], "--memory"),
    (["--record", "--", "true"], "-o OUTPUT"),
    (["--step-line", "x", "-o", "{out}", "--memory", "1GiB", "--", "true"], "--record"),
    (["--pageout", "-o", "{out}", "--memory", "1GiB", "--", "true"], "--pageout"),
    (["--record", "--swap-size", "1GiB", "-o", "{out}", "--", "true"], "only with --pageout"),
])
def test_bad_record_inputs_are_one_line(tmp_path, args, needle):
    out = tmp_path / "r.recording.parquet"
    r = _run([a.replace("{out}", str(out)) for a in args])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert list(tmp_path.iterdir()) == []


def test_record_needs_root(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    out = tmp_path / "r.recording.parquet"
    r = _run(["--record", "-o", str(out), "--", "true"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.stderr.strip().splitlines() == ["Error: capture --record needs root (it makes a tracefs instance and "
                                             "reads the program's smaps)"]
    assert list(tmp_path.iterdir()) == []


def test_cpu_seconds_reads_utime_and_stime_past_a_command_name_with_spaces_and_parentheses():
    # proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime ...
    line = "4242 (py (torch) x) R 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 7 3 20 0 3 0\n"
    assert cpu_seconds(line, 100) == pytest.approx(3.0)  # (250 + 50) ticks at 100 per second
    own = Path(f"/proc/{os.getpid()}/stat").read_text()
    assert 0 < cpu_seconds(own, os.sysconf("SC_CLK_TCK")) < 1e6


def test_threads_are_the_effective_number_of_busy_threads_in_the_window():
    """Hand-worked: readings every second; the window [1 s, 4 s] holds those at 1, 2, 3 and 4 s. Between the
    first and the last, thread 10 ran 3.0 s, thread 11 2.0 s, thread 12 (started in the window) 1.0 s and
    thread 13 not at all: (3 + 2 + 1)^2 / (9 + 4 + 1) = 36 / 14 = 2.571 effective threads, 3 when rounded;
    6 CPU-s in 3 s is a parallelism of 2."""
    s = 1_000_000_000

    def r(t, cpu):
        return {"t_ns": t * s, "threads_cpu_s": cpu}

    readings = [r(0, {10: 0.5}), r(1, {10: 1.0, 11: 1.0, 13: 0.2}), r(2, {10: 2.0, 11: 1.5, 13: 0.2}),
                r(3, {10: 3.0, 11: 2.5, 12: 0.5, 13: 0.2}), r(4, {10: 4.0, 11: 3.0, 12: 1.0, 13: 0.2}),
                r(5, {10: 9.0, 11: 9.0, 12: 9.0})]
    got = parallelism(readings, 1 * s, 4 * s)
    assert got["effective_threads"] == pytest.approx(36 / 14, abs=1e-3) and got["threads"] == 3
    assert got["parallelism"] == pytest.approx(2.0) and got["cpu_s"] == pytest.approx(6.0)
    assert got["wall_s"] == pytest.approx(3.0) and got["readings"] == 4
    assert got["busiest_threads_cpu_s"] == [3.0, 2.0, 1.0, 0.0]
    assert parallelism(readings, 1 * s, 1 * s) is None  # one reading: no interval
    # one busy thread beside a nearly idle one is one thread; two equally busy are two
    one = [r(0, {1: 0.0, 2: 0.0}), r(1, {1: 1.0, 2: 0.1})]
    assert parallelism(one, 0, s)["threads"] == 1
    two = [r(0, {1: 0.0, 2: 0.0}), r(1, {1: 0.8, 2: 0.8})]
    assert parallelism(two, 0, s)["threads"] == 2
    assert parallelism([r(0, {1: 0.0}), r(1, {1: 0.0})], 0, s) is None  # no CPU time: nothing measured


def test_pageout_swap_size_and_warning_by_hand(tmp_path):
    """--pageout's default swap is the machine's RAM, at most half the free space where it goes; a program
    that held more than half the swap area is warned about (the kernel frees a read-back page's slot then)."""
    import shutil

    from swaptrace.capture.pageout import default_swap_bytes, page_out
    from swaptrace.capture.recorder import ReferencedReader, _pageout_warning

    assert default_swap_bytes(tmp_path, "MemTotal:       10000 kB\nMemFree: 5 kB\n") == 10000 * 1024
    free = shutil.disk_usage(tmp_path).free
    assert default_swap_bytes(tmp_path, f"MemTotal: {free} kB\n") == free // 2  # RAM above half the free space
    assert page_out(os.getpid(), []) == 0  # nothing asked, no call
    reader = ReferencedReader(os.getpid(), pageout=True)
    reader.readings = [{"anon_rss_bytes": 100 << 20}, {"anon_rss_bytes": 300 << 20}]
    assert _pageout_warning(reader, {"device_bytes": 600 << 20}) is None  # exactly half: the kernel's test is >
    line = _pageout_warning(reader, {"device_bytes": 512 << 20})
    assert line.startswith("the program held 300 MiB, more than half the 512 MiB swap area")


def _listen(fifo: Path, marks: list, n: int) -> None:
    """Stamp each line written to the marker FIFO (the writer opens, writes one mark, closes)."""
    import time

    while len(marks) < n:
        with open(fifo) as fh:
            marks += [(time.monotonic(), line.strip()) for line in fh]


def _line_run(tmp_path, reading_s: float):
    """A recorder run with only what ``--step-line`` uses: its marker (a FIFO, stamped as read), its tee, and
    a reading that takes ``reading_s`` (``--pageout`` pages the program out in it: seconds)."""
    import io
    import re
    import threading
    import time
    import types

    from swaptrace.capture import recorder

    fifo = tmp_path / "trace_marker"
    os.mkfifo(fifo)
    marks: list = []
    readings: list = []

    def boundary(count: int) -> None:
        t0 = time.monotonic()
        started.set()
        time.sleep(reading_s)
        readings.append((count, t0, time.monotonic()))

    started = threading.Event()

    run = recorder._Run.__new__(recorder._Run)
    run.live = recorder._Live()
    run.trace = types.SimpleNamespace(marker_path=lambda: fifo)
    run.line_readings = recorder._LineReadings(boundary)
    run.line_readings.start()
    r, w = os.pipe()
    tee = recorder._Tee(r, io.BytesIO(), re.compile(r"^Finished training it"), run._on_line)
    run.started = started  # (the test's own: set when a reading starts)
    return run, tee, w, marks, readings, threading.Thread(target=_listen, args=(fifo, marks, 3), daemon=True)


def test_a_step_line_is_marked_while_the_previous_reading_runs(tmp_path):
    """Two more lines 50 ms apart while the first line's reading takes 0.5 s: both are marked before that
    reading ends, not after it (a mark held back behind a reading put the program's exit, which follows
    the last line at once, into its last step); a line that comes during a reading gets the next reading."""
    import time

    run, tee, w, marks, readings, listener = _line_run(tmp_path, 0.5)
    listener.start()
    tee.start()
    os.write(w, b"Finished training it 1/3 loss 0.1\n")
    assert run.started.wait(timeout=5)  # line 1's reading is under way
    time.sleep(0.05)
    os.write(w, b"Finished training it 2/3 loss 0.1\n")
    time.sleep(0.05)
    os.write(w, b"Finished training it 3/3 loss 0.1\n")
    os.close(w)
    tee.join(timeout=5)
    listener.join(timeout=5)
    assert [m for _, m in marks] == ["swaptrace line 1", "swaptrace line 2", "swaptrace line 3"]
    time.sleep(0.6)  # the first reading ends; lines 2 and 3 came during it: one reading for both
    run.line_readings.finish(timeout=5)
    assert [c for c, _, _ in readings] == [1, 3]
    assert marks[1][0] < readings[0][2] and marks[2][0] < readings[0][2]
    assert not run.line_readings.is_alive()


def test_no_reading_starts_after_the_run_finishes(tmp_path):
    """finish() lets the reading under way end and starts no other (the program has exited). The three
    lines come in one write: the reading under way is of whichever lines were queued when the reader woke
    (the first, the first two or all three)."""
    import time

    run, tee, w, marks, readings, listener = _line_run(tmp_path, 0.3)
    listener.start()
    tee.start()
    os.write(w, b"Finished training it 1/3\nFinished training it 2/3\nFinished training it 3/3\n")
    os.close(w)
    tee.join(timeout=5)
    listener.join(timeout=5)
    assert run.started.wait(timeout=5)
    run.line_readings.finish(timeout=5)
    assert len(marks) == 3 and len(readings) == 1 and readings[0][0] in (1, 2, 3)
    time.sleep(0.4)
    assert len(readings) == 1
