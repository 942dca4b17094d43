"""Parsing the reclaim tracepoints of a capture (``--trace-reclaim``) into per-step counters.

Sample lines are in the format of Linux 6.18's ``trace_pipe`` (recorded on this machine, pids and
times edited); no root needed.
"""

from __future__ import annotations

import numpy as np

from swaptrace.capture.convert import parse_lines
from swaptrace.capture.reclaim import COUNTERS, RECLAIM_EVENTS, parse_reclaim

BEGIN = "python-500 [001] ..... {t}: mm_vmscan_memcg_reclaim_begin: order=0 gfp_flags=GFP_HIGHUSER_MOVABLE"
END = "python-500 [001] ..... {t}: mm_vmscan_memcg_reclaim_end: nr_reclaimed={n}"
INACTIVE = ("python-500 [001] ..... {t}: mm_vmscan_lru_shrink_inactive: nid=0 nr_scanned={scanned} "
            "nr_reclaimed={reclaimed} nr_dirty=0 nr_writeback=0 nr_congested=0 nr_immediate=0 "
            "nr_activate_anon={act} nr_activate_file=0 nr_ref_keep={keep} nr_unmap_fail=0 priority={prio} "
            "flags=RECLAIM_WB_ANON|RECLAIM_WB_ASYNC")
ACTIVE = ("python-500 [001] ..... {t}: mm_vmscan_lru_shrink_active: nid=0 nr_taken={n} nr_active=0 "
          "nr_deactivated={n} nr_referenced=0 priority={prio} flags=RECLAIM_WB_FILE|RECLAIM_WB_ASYNC")
FLUSH = "kworker/u8:4-77 [000] ..... {t}: memcg_flush_stats: memcg_id=1 stats_updates=192 force=1 needs_flush=1"
MARK = "python-500 [001] ..... {t}: tracing_mark_write: swaptrace {what}"
BLOCK = "python-500 [001] ..... {t}: block_rq_issue: 7,0 W 131072 () 2048 + 256 be,0,4 [python]"


def trace_lines():
    """Two steps: step 0 one call that goes down to priority 10, step 1 two calls, one flush each step."""
    return [
        "# tracer: nop",
        MARK.format(t="100.000000", what="start"),
        MARK.format(t="100.000001", what="step 0"),
        FLUSH.format(t="100.100000"),
        BEGIN.format(t="100.200000"),
        INACTIVE.format(t="100.200001", scanned=2, reclaimed=0, act=0, keep=2, prio=12),
        INACTIVE.format(t="100.200002", scanned=32, reclaimed=20, act=4, keep=8, prio=11),
        ACTIVE.format(t="100.200003", n=5, prio=11),
        INACTIVE.format(t="100.200004", scanned=32, reclaimed=12, act=1, keep=0, prio=10),
        BLOCK.format(t="100.200005"),
        END.format(t="100.200006", n=32),
        MARK.format(t="101.000000", what="step 1"),
        BEGIN.format(t="101.100000"),
        INACTIVE.format(t="101.100001", scanned=40, reclaimed=32, act=0, keep=8, prio=12),
        END.format(t="101.100002", n=32),
        FLUSH.format(t="101.150000"),
        BEGIN.format(t="101.200000"),
        INACTIVE.format(t="101.200001", scanned=32, reclaimed=2, act=30, keep=0, prio=8),
        ACTIVE.format(t="101.200002", n=16, prio=8),
        END.format(t="101.200003", n=2),
        MARK.format(t="101.900000", what="end"),
    ]


def parse(lines, **kw):
    return parse_reclaim(lines, parse_lines(lines).markers, **kw)


def test_counts_per_step_add_up_the_passes_of_each_call():
    r = parse(trace_lines())
    c = {k: r.counters[k].tolist() for k in COUNTERS}
    assert r.steps.tolist() == [0, 1]
    assert c["calls"] == [1, 2]
    assert c["scanned"] == [2 + 32 + 32, 40 + 32]
    assert c["reclaimed"] == [32, 34]
    assert c["kept"] == [10, 8]
    assert c["activated"] == [5, 30]
    assert c["deactivated"] == [5, 16]
    assert c["flushes"] == [1, 1]
    # lowest priority per call: 10; then 12 and 8
    assert r.min_priority.tolist() == [10.0, 10.0]
    assert r.priority_calls[10] == 1 and r.priority_calls[12] == 1 and r.priority_calls[8] == 1
    assert sum(r.priority_calls) == 3
    assert r.events == 15 and r.malformed == 0 and r.outside_calls == 0 and r.unfinished_calls == 0


def test_metadata_form_is_json_ready():
    meta = parse(trace_lines()).to_meta()
    assert meta["totals"] == {"calls": 3, "scanned": 138, "reclaimed": 66, "kept": 18, "activated": 35,
                              "deactivated": 21, "flushes": 2}
    assert meta["min_priority"] == [10.0, 10.0]
    assert meta["steps"] == [0, 1]


def test_block_requests_still_parse_beside_the_reclaim_events():
    parsed = parse_lines(trace_lines())
    assert parsed.requests == 1
    assert parsed.malformed == 0
    assert parsed.other_events == 15  # the reclaim events are someone else's business there


def test_steps_without_reclaim_and_a_last_step_beyond_the_markers():
    r = parse(trace_lines(), first_step=0, last_step=3)
    assert r.steps.tolist() == [0, 1, 2, 3]
    assert r.counters["calls"].tolist() == [1, 2, 0, 0]
    assert np.isnan(r.min_priority[2]) and np.isnan(r.min_priority[3])
    assert parse(trace_lines(), first_step=0, last_step=3).to_meta()["min_priority"][3] is None


def test_malformed_and_orphan_events_are_counted_not_fatal():
    lines = trace_lines()
    lines.insert(5, "python-500 [001] ..... 100.200001: mm_vmscan_lru_shrink_inactive: nid=0 nr_scanned=garbage")
    lines.append(INACTIVE.format(t="102.000000", scanned=7, reclaimed=7, act=0, keep=0, prio=12))  # kswapd-like
    lines.append(END.format(t="102.000001", n=7))  # an end without a begin
    lines.append(BEGIN.format(t="102.000002"))  # a call the trace cut off
    lines.append("python-500 [001] ..... 102.5: some_other_event: mm_vmscan_lru_shrink_inactive mentioned")
    r = parse(lines)
    assert r.malformed == 1 and r.malformed_examples
    assert r.outside_calls == 2
    assert r.unfinished_calls == 1
    assert r.counters["calls"].tolist() == [1, 2]  # the complete calls are unchanged
    assert r.counters["scanned"].tolist() == [66, 72]


def test_events_before_the_first_step_marker_count_for_the_first_step():
    lines = [BEGIN.format(t="99.0"), INACTIVE.format(t="99.1", scanned=3, reclaimed=3, act=0, keep=0, prio=12),
             END.format(t="99.2", n=3), MARK.format(t="100.0", what="step 5")]
    r = parse(lines, first_step=5)
    assert r.steps.tolist() == [5]
    assert r.counters["scanned"].tolist() == [3]


def test_event_names_are_tracefs_paths():
    assert all(e.count("/") == 1 and e.split("/")[0] in ("vmscan", "memcg") for e in RECLAIM_EVENTS)


def test_reclaim_calls_lists_each_call_and_sums_to_the_step_counters():
    from swaptrace.capture.reclaim import reclaim_calls

    lines = trace_lines()
    calls, counts = reclaim_calls(lines, parse_lines(lines).markers)
    got = [(c.step, c.scanned, c.reclaimed, c.kept, c.activated, c.deactivated, c.min_priority) for c in calls]
    assert got == [(0, 66, 32, 10, 5, 5, 10), (1, 40, 32, 8, 0, 0, 12), (1, 32, 2, 0, 30, 16, 8)]
    assert (calls[0].begin_ns, calls[0].end_ns, calls[0].pid) == (100_200_000_000, 100_200_006_000, 500)
    assert counts.events == parse(lines).events
    per_step = parse(lines).counters
    for k in ("scanned", "reclaimed", "kept", "activated", "deactivated"):
        assert [sum(getattr(c, k) for c in calls if c.step == s) for s in (0, 1)] == per_step[k].tolist()


def test_reclaim_calls_skip_orphans_and_malformed_lines():
    from swaptrace.capture.reclaim import reclaim_calls

    lines = [END.format(t="99.000000", n=3),  # a call begun before tracing
             BEGIN.format(t="100.000000"),
             "python-500 [001] ..... 100.000001: mm_vmscan_lru_shrink_inactive: nid=0 nr_scanned=oops",
             INACTIVE.format(t="100.000002", scanned=7, reclaimed=7, act=0, keep=0, prio=12),
             END.format(t="100.000003", n=7),
             BEGIN.format(t="100.100000")]  # never ends
    calls, counts = reclaim_calls(lines, [])
    assert [(c.step, c.scanned, c.reclaimed) for c in calls] == [(0, 7, 7)]
    assert (counts.outside_calls, counts.malformed, counts.unfinished_calls) == (1, 1, 1)
