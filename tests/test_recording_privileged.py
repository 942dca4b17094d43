"""``capture --record -- CMD`` under the real kernel: a small Python program that maps, touches and unmaps
known sizes in known steps; the recording must find those exact sizes in those steps. Each run takes
about a second. Skipped (with the reason) unless root with tracefs and the syscall tracepoints. After
each test no tracefs instance, work folder, output or process of ours may be left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from signal_helpers import default_sigint

from swaptrace.cli import cli
from swaptrace.errors import SwaptraceError

pytestmark = pytest.mark.privileged

PREFIX = "swaptrace-capture-"
REPO = str(Path(__file__).resolve().parent.parent)
CLI = "import sys; from swaptrace.cli import cli; sys.exit(cli())"
PAGES_PER_MIB = 256

# start-up maps 12 MiB and writes all of it; step k maps (5 + k) MiB, writes every page, writes the first
# 2 MiB of the start-up block and unmaps its buffer, then says so on stdout. MODE: "lines" prints only;
# "marks" also writes swaptrace step marks (and "end"); "same" maps 6 MiB every step (for detection).
PROGRAM = """
import mmap, sys, time
mode, steps = sys.argv[1], int(sys.argv[2])
MiB = 1 << 20
if mode == "marks":
    from swaptrace.markers import mark, mark_step
big = mmap.mmap(-1, 12 * MiB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for i in range(0, 12 * MiB, 4096):
    big[i] = 1
for k in range(steps):
    if mode == "marks":
        mark_step()
    size = (6 if mode == "same" else 5 + k) * MiB
    buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for i in range(0, size, 4096):
        buf[i] = 2
    for i in range(0, 2 * MiB, 4096):
        big[i] = 3
    buf.close()
    print(f"Finished training it {k + 1}/{steps}", flush=True)
    time.sleep(0.1)
if mode == "marks":
    mark("end")
    time.sleep(0.3)  # the recorder reads at the end mark when its trace reader gets to it: a program gone by then
                     # leaves its last step without a reading (docs/capture.md); one clean-clone run lost it
"""


def _leftovers() -> list[str]:
    from swaptrace.capture.tracing import list_instances

    mine = f"{PREFIX}{os.getpid()}-record"
    left = [str(p) for p in list_instances(PREFIX) if p.name.endswith("-record")]
    left += [str(p) for p in Path("/var/tmp").glob(f"{PREFIX}*-record")]
    return [x for x in left if mine in x or not _alive(x)]


def _alive(item: str) -> bool:
    pid = item.split(PREFIX, 1)[1].split("-", 1)[0]
    return Path(f"/proc/{pid}").exists()


@pytest.fixture(autouse=True)
def _machine(monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("capture --record needs root")
    from swaptrace.capture.recorder import check_record_machine

    try:
        check_record_machine()
    except SwaptraceError as exc:
        pytest.skip(f"recording is not possible here: {exc}")
    monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    assert _leftovers() == [], "leftovers before the test"
    yield
    assert _leftovers() == []


def _record(tmp_path, mode, steps, *extra):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = tmp_path / f"{mode}.recording.parquet"
    r = CliRunner().invoke(cli, ["capture", "--record", "-o", str(out), "--timeout", "60", *extra, "--",
                                 sys.executable, str(prog), mode, str(steps)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return out, r


def _big_allocations(sp) -> list[int]:
    """Sizes (pages) of the step's allocations over 2 MiB (the interpreter's own arenas are 1 MiB)."""
    return [int(n) for n in sp.allocations[1] if n > 2 * PAGES_PER_MIB]


def test_step_lines_find_the_exact_sizes_in_their_steps(tmp_path):
    from swaptrace.capture.recording import page_events

    out, r = _record(tmp_path, "lines", 3, "--step-line", r"^Finished training it \d+/\d+$")
    assert [ln for ln in r.output.splitlines() if ln.startswith("Finished")] == \
        [f"Finished training it {k}/3" for k in (1, 2, 3)]  # passed through unchanged, in order
    rec = page_events(out)
    meta = rec.meta
    assert meta["step_source"] == "lines" and meta["steps"] == 3 and meta["exit_step"] == 3
    assert meta["thp_disabled"] is True and meta["thp"]
    # a line ends a step: step 0 is start-up and iteration 1; steps 1, 2 are iterations 2, 3; then the exit
    assert _big_allocations(rec.steps[0]) == [12 * PAGES_PER_MIB, 5 * PAGES_PER_MIB]
    assert _big_allocations(rec.steps[1]) == [6 * PAGES_PER_MIB]
    assert _big_allocations(rec.steps[2]) == [7 * PAGES_PER_MIB]
    for k, size in ((1, 6), (2, 7)):
        sp = rec.steps[k]
        pages, writes = sp.first_touches
        buf = sp.allocations[0][sp.allocations[1] == size * PAGES_PER_MIB][0]
        in_buf = (pages >= buf) & (pages < buf + size * PAGES_PER_MIB)
        assert int(in_buf.sum()) == size * PAGES_PER_MIB and writes[in_buf].all()  # every page, written
        freed = sp.frees
        assert int(((freed >= buf) & (freed < buf + size * PAGES_PER_MIB)).sum()) == size * PAGES_PER_MIB
        # the start-up block's 2 MiB are referenced again but were touched before: no first touch there
        ref = sp.referenced
        big = ref["pages"] == 12 * PAGES_PER_MIB
        assert big.sum() == 1 and ref["referenced_pages"][big][0] == 2 * PAGES_PER_MIB
    assert rec.exit is not None and len(rec.exit.frees) >= 12 * PAGES_PER_MIB  # the exit gives it all back
    assert meta["lost_events"] == 0


def test_marks_win_and_give_steps_from_one(tmp_path):
    from swaptrace.capture.recording import page_events

    out, _ = _record(tmp_path, "marks", 3, "--step-line", "Finished")
    rec = page_events(out)
    assert rec.meta["step_source"] == "marks" and rec.meta["steps"] == 4 and rec.meta["step_note"] == "end mark"
    assert _big_allocations(rec.steps[0]) == [12 * PAGES_PER_MIB]
    assert [_big_allocations(rec.steps[k]) for k in (1, 2, 3)] == [[5 * PAGES_PER_MIB], [6 * PAGES_PER_MIB],
                                                                    [7 * PAGES_PER_MIB]]
    assert all(len(rec.steps[k].referenced["pid"]) for k in range(4))  # a reading at every mark and the end


def test_steps_are_found_from_repeating_allocations(tmp_path):
    from swaptrace.capture.recording import page_events

    out, _ = _record(tmp_path, "same", 5)
    rec = page_events(out)
    assert rec.meta["step_source"] == "pattern"
    sizes = [_big_allocations(sp) for sp in rec.steps]
    assert sizes[0] == [12 * PAGES_PER_MIB]
    assert sizes[1:] == [[6 * PAGES_PER_MIB]] * 5


def test_steps_option_stops_the_program(tmp_path):
    from swaptrace.capture.recording import page_events

    t0 = time.monotonic()
    out, _ = _record(tmp_path, "lines", 40, "--step-line", "Finished", "--steps", "2")
    assert time.monotonic() - t0 < 20  # 40 iterations would take over 4 s of sleeping alone
    rec = page_events(out)
    assert rec.meta["stopped_after_steps"] is True and rec.meta["steps"] == 3
    assert _big_allocations(rec.steps[2]) == [7 * PAGES_PER_MIB]


def test_a_failing_program_leaves_nothing(tmp_path):
    out = tmp_path / "f.recording.parquet"
    r = CliRunner().invoke(cli, ["capture", "--record", "-o", str(out), "--", sys.executable, "-c",
                                 "import sys; sys.exit(3)"], catch_exceptions=False)
    assert r.exit_code == 2 and "status 3" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_recording_leaves_nothing(tmp_path, sig):
    out = tmp_path / "s.recording.parquet"
    tag = f"swaptrace-test-{os.getpid()}-{sig}"  # this test's program, not another's running at the same time
    env = {**os.environ, "PYTHONPATH": REPO}
    child = subprocess.Popen([sys.executable, "-c", CLI, "capture", "--record", "-o", str(out), "--",
                              sys.executable, "-c", f"import time; print('up', flush=True); time.sleep(60)  # {tag}"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=default_sigint)
    assert child.stdout.readline().strip() == "up"  # the program runs, so the instance is there
    from swaptrace.capture.cgroup import list_groups, memory_hierarchy
    from swaptrace.capture.tracing import list_instances

    assert [p for p in list_instances(f"{PREFIX}{child.pid}-record")]
    try:
        memory_hierarchy()
        assert list_groups(f"{PREFIX}{child.pid}-record"), "the program runs in a memory cgroup of its own"
    except SwaptraceError:
        pass
    child.send_signal(sig)
    _, err = child.communicate(timeout=30)
    assert child.returncode != 0 and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []
    assert list_instances(f"{PREFIX}{child.pid}") == []
    assert list_groups(f"{PREFIX}{child.pid}") == []
    assert not list(Path("/var/tmp").glob(f"{PREFIX}{child.pid}*"))
    ps = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout.split()
    assert not [p for p in ps if int(p) != os.getpid()], "the program outlived the recording"


def test_overhead_is_reported(tmp_path):
    """Not a benchmark: the recording states what its readings cost, and a run costs seconds, not minutes."""
    out, _ = _record(tmp_path, "lines", 2, "--step-line", "Finished")
    from swaptrace.core.traceio import read_metadata

    meta = read_metadata(out)
    fac = meta["facilities"]
    assert fac["smaps_readings"] >= 2 and 0 < fac["smaps_seconds"] < 5  # a line each, and start-up every 0.5 s
    assert meta["loadavg_start"] >= 0 and meta["loadavg_end"] >= 0 and meta["kernel"]["release"]
    assert np.isfinite(meta["duration_us"]) and meta["faults_not_anonymous"] > 0


# --pageout: start-up writes 12 MiB; step 1 loads its first 512 pages, loads and then stores to the next 256, and
# stores to the 256 after those; step 2 leaves it alone. Each mark is followed by a pause, so the recorder's
# reading (and page-out) at the mark is over before the step's accesses begin (it reads the marks
# asynchronously, docs/capture.md).
PAGED_PROGRAM = """
import mmap, time
from swaptrace.markers import mark, mark_step
big = mmap.mmap(-1, 12 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for i in range(0, 12 << 20, 4096):
    big[i] = 1
mark_step()
time.sleep(1.0)
total = 0
for p in range(768):
    total += big[p * 4096]
for p in range(512, 768):
    big[p * 4096] = 2
for p in range(768, 1024):
    big[p * 4096] = 3
mark_step()
time.sleep(1.0)
mark("end")
time.sleep(0.5)
"""


def test_pageout_records_each_use_and_the_stores_that_did_not_fault(tmp_path):
    """Paged out at the mark, the 12 MiB block's pages fault back in as step 1 uses them: 1,024 re-touches, of
    which the 256 stores that found their page out; smaps then finds 512 of its pages dirty (those 256 and the
    256 loaded first and stored to after, which did not fault: the read-in page is mapped writable). Within
    1 %: reclaim skips a page it cannot lock at that moment (``reclaim_pages``), and that page then does not
    fault. Dirty pages may be more by what the page-out could not take: a page start-up wrote last may still
    sit in another CPU's batch of pages on their way to the LRU (``folio_batch``, 31 pages; ``madvise`` drains
    only its own CPU's), stays resident and is dirty at the next reading (one run under load: 535). The swap
    area is gone afterwards."""
    from swaptrace.capture.recording import RETOUCH, page_events
    from swaptrace.core import blockdev

    if blockdev.swap_areas():
        pytest.skip(f"swap is active on {blockdev.swap_areas()}: --pageout needs the machine's swap to itself")
    prog = tmp_path / "paged.py"
    prog.write_text(PAGED_PROGRAM)
    out = tmp_path / "paged.recording.parquet"
    r = CliRunner().invoke(cli, ["capture", "--record", "--pageout", "--swap-size", "256MiB", "-o", str(out),
                                 "--timeout", "60", "--", sys.executable, str(prog)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "without --pageout" not in r.output
    assert blockdev.swap_areas() == [], "the recording's swap area is left on"
    rec = page_events(out)
    assert rec.meta["pageout"] is True and rec.meta["steps"] == 3
    lo = int(rec.steps[0].allocations[0][rec.steps[0].allocations[1] == 12 * PAGES_PER_MIB][0])
    s1 = rec.steps[1]
    in_big = (s1.page >= lo) & (s1.page < lo + 12 * PAGES_PER_MIB) & (s1.kind == RETOUCH)
    assert abs(int(in_big.sum()) - 1024) <= 10 and abs(int((in_big & s1.write).sum()) - 256) <= 3
    assert set((s1.page[in_big] - lo).tolist()) <= set(range(1024))
    ref = s1.referenced
    dirty = int(ref["dirty_pages"][(ref["page"] == lo) & (ref["pages"] == 12 * PAGES_PER_MIB)][0])
    assert 512 - 5 <= dirty <= 512 + 5 + 31 * (os.cpu_count() or 1)
    s2 = rec.steps[2]
    assert not ((s2.page >= lo) & (s2.page < lo + 12 * PAGES_PER_MIB) & (s2.kind == RETOUCH)).any()
    fac = rec.meta["facilities"]["pageout"]
    assert fac["advised_bytes"] >= 12 << 20 and fac["swap"]["device_bytes"] == 256 << 20 and fac["warning"] is None
