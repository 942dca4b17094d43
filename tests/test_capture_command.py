"""``capture -- CMD`` without root: argv handling, memory.stat and smaps parsing, phases, reclaim agents.

Expected values are worked out by hand from the kernel's documented file formats
(Documentation/admin-guide/cgroup-v1/memory.rst, cgroup-v2.rst, filesystems/proc.rst), not taken
from the code's output.
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from swaptrace.capture import command as cmd
from swaptrace.capture import command_record as rec
from swaptrace.capture import memwatch
from swaptrace.capture.agents import detect_reclaim_agents
from swaptrace.capture.cgroup import memory_kinds
from swaptrace.capture.convert import ParsedTrace, to_stream
from swaptrace.capture.options import CaptureOptions
from swaptrace.cli import cli
from swaptrace.errors import ConfigError

MiB = 1 << 20

# --------------------------------------------------------------------------- memory.stat


def _stat(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in text.strip().splitlines())}


def test_memory_kinds_v1_prefers_hierarchical_totals():
    stat = _stat("""
cache 1000
rss 2000
swap 300
total_cache 1100
total_rss 2200
total_swap 330
""")
    assert memory_kinds(stat, 1) == {"anon": 2200, "file": 1100, "swap": 330}
    local = {k: v for k, v in stat.items() if not k.startswith("total_")}
    assert memory_kinds(local, 1) == {"anon": 2000, "file": 1000, "swap": 300}
    # no swap accounting (swapaccount=0): the kind is unknown, not zero
    assert memory_kinds({"rss": 5, "cache": 6}, 1)["swap"] is None


def test_memory_kinds_v2_takes_swap_from_its_own_file():
    stat = _stat("""
anon 4096
file 8192
kernel 512
""")
    assert memory_kinds(stat, 2, swap_current=12288) == {"anon": 4096, "file": 8192, "swap": 12288}
    assert memory_kinds(stat, 2)["swap"] is None


# --------------------------------------------------------------------------- smaps

SMAPS = """\
55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
Rss:                 100 kB
Referenced:           60 kB
Anonymous:           100 kB
7f0000000000-7f0004000000 rw-p 00000000 00:00 0
Size:              65536 kB
Rss:               65536 kB
Referenced:        16384 kB
Anonymous:         65536 kB
7f1000000000-7f1000100000 r-xp 00000000 fd:01 1234                       /usr/lib/libc.so.6
Size:               1024 kB
Rss:                 800 kB
Referenced:          700 kB
Anonymous:             0 kB
7f2000000000-7f2000010000 rw-p 00010000 fd:01 1234                       /usr/lib/libc.so.6
Size:                 64 kB
Rss:                  64 kB
Referenced:           64 kB
Anonymous:            32 kB
VmFlags: rd wr mr mw me ac sd
"""


def test_parse_smaps_counts_referenced_only_in_anonymous_mappings():
    t = memwatch.parse_smaps(SMAPS)
    assert t["rss"] == (100 + 65536 + 800 + 64) * 1024
    assert t["anonymous"] == (100 + 65536 + 0 + 32) * 1024  # a written library data page is anonymous too
    assert t["referenced"] == (60 + 16384 + 700 + 64) * 1024
    assert t["anon_referenced"] == (60 + 16384) * 1024  # heap and the unnamed mapping only


def test_parse_smaps_rollup():
    text = """55d0c0000000-7ffd00000000 ---p 00000000 00:00 0                  [rollup]
Rss:               66500 kB
Pss:               66000 kB
Referenced:        17208 kB
Anonymous:         65668 kB
"""
    r = memwatch.parse_smaps_rollup(text)
    assert r["Rss"] == 66500 * 1024 and r["Referenced"] == 17208 * 1024 and r["Anonymous"] == 65668 * 1024


class _FakeGroup:
    def __init__(self, pids):
        self._pids = pids

    def pids(self):
        return list(self._pids)


def test_referenced_probe_clears_refs_and_keeps_the_largest_reading(tmp_path):
    proc = tmp_path / "proc"
    for pid in (11, 12):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "smaps").write_text(SMAPS)
        (proc / str(pid) / "clear_refs").write_text("")
    probe = memwatch.ReferencedProbe(_FakeGroup([11, 12]), interval_s=60, proc=proc)
    probe.first_mark()
    assert all((proc / str(p) / "clear_refs").read_text() == "1" for p in (11, 12))
    probe.read()
    (proc / "12" / "smaps").write_text(SMAPS.replace("Referenced:        16384 kB", "Referenced:            0 kB"))
    probe.read()  # lower: freed or not touched any more; the maximum stays
    out = probe.stop()
    assert out["anon_resident_startup_bytes"] == 2 * (100 + 65536 + 32) * 1024
    assert out["anon_referenced_training_bytes"] == 2 * (60 + 16384) * 1024
    assert out["smaps_readings"] == 2 and out["why_null"] is None


def test_referenced_probe_without_a_marker_is_null_with_a_reason(tmp_path):
    out = memwatch.ReferencedProbe(_FakeGroup([]), proc=tmp_path).stop()
    assert out["anon_referenced_training_bytes"] is None and "no step marker" in out["why_null"]


# --------------------------------------------------------------------------- phases


def test_phase_peaks_split_at_the_first_marker():
    # (t_ns, usage, anon, file, swap); marker at t = 25: the reading at 30 is the one it triggered
    samples = [(10, 5, 4, 1, 0), (20, 9, 7, 2, 0), (30, 12, 10, 2, 0), (40, 8, 6, 2, 3), (50, 11, 8, 3, 4)]
    p = memwatch.phase_peaks(samples, 25)
    assert p["startup"] == {"samples": 3, "usage": 12, "anon": 10, "file": 2, "swap": 0}
    assert p["training"] == {"samples": 3, "usage": 12, "anon": 10, "file": 3, "swap": 4}
    assert p["run"]["usage"] == 12 and p["run"]["swap"] == 4
    assert memwatch.phase_peaks(samples, None)["startup"] is None
    assert memwatch.reading_after(samples, 25) == {"usage": 12, "anon": 10, "file": 2, "swap": 0, "t_ns": 30}
    assert memwatch.phase_peaks([(1, 5, 4, 1, None)], 0)["training"]["swap"] is None


def test_step_walls_and_slowdowns():
    assert rec.step_walls_us([(1000, 0), (4000, 1), (10000, 2)], 12000) == [3.0, 6.0, 2.0]
    lim = {"wall_s": 6.0, "training_s": 4.0}
    free = {"wall_s": 2.0, "training_s": 1.0}
    assert rec.slowdowns(lim, free) == {"slowdown": 4.0, "slowdown_wall": 3.0, "slowdown_training": 4.0}
    assert rec.slowdowns({"wall_s": 6.0, "training_s": None}, {"wall_s": 2.0, "training_s": None})["slowdown"] == 3.0
    assert rec.slowdowns(lim, None)["slowdown"] is None


def _parsed(t_ns, markers):
    n = len(t_ns)
    return ParsedTrace(np.asarray(t_ns, np.int64), np.ones(n, np.int8), np.zeros(n, np.uint64),
                       np.full(n, 4096, np.uint32), np.zeros(n, bool), np.ones(n, np.int64), markers=markers)


def test_stream_steps_of_a_marked_program_put_start_up_at_zero():
    parsed = _parsed([1_000, 5_000, 12_000, 30_000], [(0, "start", -1), (4_000, "step", 0), (11_000, "step", 1)])
    s = to_stream(parsed, first_step=0, step_offset=1)
    assert s.step.tolist() == [0, 1, 2, 2]
    assert rec.stream_steps(s, [(4_000, 0), (11_000, 1)], 1.0) == 3


def test_stream_steps_of_an_unmarked_program_are_time_windows():
    # origin at the start marker (t = 0); windows of 10 us
    parsed = _parsed([1_000, 9_999, 10_000, 35_000], [(0, "start", -1), (40_000, "end", -1)])
    s = to_stream(parsed, window_us=10.0)
    assert s.step.tolist() == [0, 0, 1, 3]
    assert rec.stream_steps(s, [], 10e-6) == 4  # 40 us of run in 10 us windows


def test_marker_lines_are_found_across_chunk_boundaries(tmp_path):
    from swaptrace.capture.tracing import BlockTrace

    seen = []
    bt = BlockTrace.__new__(BlockTrace)
    bt._carry, bt.on_marker = b"", lambda t, text: seen.append((t, text))
    line = b"  python3-6455  [000] ...1.   221.540644: tracing_mark_write: swaptrace step 7\n"
    other = b"  kworker-1 [001] ..... 221.6: block_rq_issue: 7,0 W 4096 () 8 + 8 be,0,4 [kworker]\n"
    data = other + line + line.replace(b"step 7", b"end")
    for cut in range(0, len(data), 13):  # every split of the text into chunks of 13 bytes
        bt._scan_markers(data[cut:cut + 13])
    assert seen == [(221_540_644_000, "swaptrace step 7"), (221_540_644_000, "swaptrace end")]


# --------------------------------------------------------------------------- reclaim agents


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _kdamond(root, state):
    k = root / "sys/kernel/mm/damon/admin/kdamonds/0"
    _write(k / "state", state + "\n")
    _write(k / "pid", "78\n")
    ctx = k / "contexts/0"
    _write(ctx / "operations", "paddr\n")
    _write(ctx / "monitoring_attrs/intervals/aggr_us", "5000000\n")
    s = ctx / "schemes/0"
    _write(s / "action", "pageout\n")
    _write(s / "access_pattern/age/min", "12\n")
    _write(s / "access_pattern/nr_accesses/max", "1\n")
    for i, (ftype, allow) in enumerate((("anon", "N"), ("unmapped", "Y"))):
        _write(s / f"ops_filters/{i}/type", ftype + "\n")
        _write(s / f"ops_filters/{i}/matching", "Y\n")
        _write(s / f"ops_filters/{i}/allow", allow + "\n")
    _write(root / "proc/78/comm", "kdamond.0\n")
    _write(root / "proc/1/comm", "systemd\n")


def test_damon_pageout_scheme_is_found_and_described(tmp_path):
    _kdamond(tmp_path, "on")
    found = detect_reclaim_agents(tmp_path)
    scheme = found["damon"]["kdamonds"][0]["contexts"][0]["schemes"][0]
    assert scheme["min_age_s"] == 60.0  # 12 aggregation intervals of 5 s
    assert scheme["filters"] == ["reject anon", "allow unmapped"]
    assert found["damon"]["threads"] == [{"pid": 78, "comm": "kdamond.0"}]
    assert found["active"] == ["DAMON kdamond 0 (paddr): pageout of regions idle >= 60 s (reject anon, allow unmapped)"]


def test_damon_off_and_other_agents(tmp_path):
    _kdamond(tmp_path, "off")
    _write(tmp_path / "sys/module/damon_reclaim/parameters/enabled", "Y\n")
    _write(tmp_path / "sys/kernel/mm/lru_gen/min_ttl_ms", "1000\n")
    _write(tmp_path / "proc/555/comm", "systemd-oomd\n")
    active = detect_reclaim_agents(tmp_path)["active"]
    assert active == ["DAMON module damon_reclaim enabled", "MGLRU min_ttl_ms = 1000",
                      "user-space proactive reclaim: systemd-oomd (pid 555)"]
    assert detect_reclaim_agents(tmp_path / "empty")["active"] == []


# --------------------------------------------------------------------------- argv handling


@pytest.fixture
def calls(monkeypatch):
    """Record what the CLI would capture instead of capturing."""
    seen = []

    def fake(argv, out, **kw):
        seen.append((argv, out, kw))
        raise ConfigError("stop here")  # the CLI's one-line error path, after the arguments were understood

    monkeypatch.setattr(cmd, "capture_command", fake)
    return seen


def test_trace_reclaim_reaches_a_program_capture(calls, tmp_path):
    """``--trace-reclaim -- CMD``: the program's capture traces its reclaim calls (the flag reaches
    capture_command); without it, it does not."""
    out = str(tmp_path / "o.swapio.parquet")
    for flag, want in ((["--trace-reclaim"], True), ([], False)):
        res = CliRunner().invoke(cli, ["capture", "--memory", "32MiB", "-o", out, *flag, "--", "true"])
        assert res.exit_code == 2 and "stop here" in res.output
        assert calls[-1][2]["trace_reclaim"] is want


def test_dashes_take_a_command_with_its_own_options(calls, tmp_path):
    out = str(tmp_path / "o.swapio.parquet")
    res = CliRunner().invoke(cli, ["capture", "--memory", "32MiB", "-o", out, "--window", "0.5", "--",
                                   "python", "-c", "print(1)", "--memory", "x"])
    assert res.exit_code == 2 and "stop here" in res.output
    argv, got_out, kw = calls[0]
    assert argv == ["python", "-c", "print(1)", "--memory", "x"] and got_out == out
    options = kw["options"]
    assert options.memory_bytes == 32 * MiB and kw["window_s"] == 0.5 and options.unlimited_run is True
    # a one-word program after -- is a program, not a TRACE
    CliRunner().invoke(cli, ["capture", "--memory", "32MiB", "-o", out, "--", "true"])
    assert calls[1][0] == ["true"]


def test_wait_quiet_reaches_the_capture(calls, tmp_path):
    out = str(tmp_path / "o.swapio.parquet")
    CliRunner().invoke(cli, ["capture", "--memory", "32MiB", "-o", out, "--", "true"])
    assert calls[0][2]["options"].wait_quiet is None  # off by default
    res = CliRunner().invoke(cli, ["capture", "--memory", "32MiB", "-o", out, "--wait-quiet", "0.5",
                                   "--quiet-timeout", "30", "--", "true"])
    assert res.exit_code == 2 and "stop here" in res.output
    options = calls[1][2]["options"]
    assert options.wait_quiet == 0.5 and options.quiet_timeout_s == 30
    res = CliRunner().invoke(cli, ["capture", "--memory", "32MiB", "-o", out, "--quiet-timeout", "30", "--", "true"])
    assert res.exit_code == 2 and "--quiet-timeout" in res.output and len(calls) == 2


@pytest.mark.parametrize("args, message", [
    (["t.access.parquet", "--", "true"], "not both"),
    ([], "TRACE"),
    (["--"], "nothing after --"),
    (["--compute", "mlp", "--", "true"], "--compute goes only with TRACE"),
    (["--no-lock-baseline", "--", "true"], "--lock-baseline goes only with TRACE"),
])
def test_trace_or_command_but_one_of_them(calls, tmp_path, args, message):
    trace = tmp_path / "t.access.parquet"
    trace.write_bytes(b"")  # there (a missing TRACE is refused first, as any missing input), never read
    args = [str(trace) if a == trace.name else a for a in args]
    res = CliRunner().invoke(cli, ["capture", "--memory", "8MiB", "-o", str(tmp_path / "o.parquet"), *args])
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1 and calls == []


@pytest.mark.parametrize("kw, message", [
    ({"argv": ["definitely-not-a-program-here"], "memory_bytes": 8 * MiB}, "command not found"),
    ({"argv": ["true"]}, "exactly one of"),
    ({"argv": ["true"], "memory_bytes": 8 * MiB, "memory_fraction": 0.5}, "exactly one of"),
    ({"argv": ["true"], "memory_bytes": 1000}, "at least 1 MiB"),
    ({"argv": ["true"], "memory_bytes": 8 * MiB, "window_s": 0}, "--window"),
])
def test_command_child_checks(kw, message):
    argv = kw.pop("argv")
    with pytest.raises(ConfigError, match=message):
        cmd.CommandChild(argv, **kw).check_inputs(CaptureOptions())


def test_fraction_needs_the_unlimited_run():
    with pytest.raises(ConfigError, match="needs --baseline"):
        cmd.CommandChild(["true"], memory_fraction=0.5).check_inputs(CaptureOptions(unlimited_run=False))


def test_limit_from_a_fraction_of_the_unlimited_peak():
    child = cmd.CommandChild(["true"], memory_fraction=0.5)
    free = cmd.ProgramRun("free", 0, "", 0, 1, [], 100 * MiB + 123, None, 0, {}, {}, {})
    assert child.limit_bytes(free) == 50 * MiB  # 0.5 x peak, down to whole pages
    assert cmd.CommandChild(["true"], memory_bytes=8 * MiB + 5).limit_bytes(None) == 8 * MiB
