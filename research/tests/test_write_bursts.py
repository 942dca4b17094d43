"""research/write_bursts.py: write requests grouped by reclaim call, and the pages isolated before the first free."""

from __future__ import annotations

from research_scripts import load

write_bursts = load("write_bursts")

P = "          python-9777    [001] .....   "


def _shrink(t, scanned, reclaimed, prio):
    return (f"{P}{t}: mm_vmscan_lru_shrink_inactive: nid=0 nr_scanned={scanned} nr_reclaimed={reclaimed} "
            f"nr_dirty=0 nr_writeback=0 nr_activate_anon=0 nr_ref_keep=0 priority={prio} flags=RECLAIM_WB_ANON")


def _write(t, pages, sector):
    return f"{P}{t}: block_rq_issue: 7,0 W {pages * 4096} () {sector} + {pages * 8} be,0,4 [python]"


# A hand-made trace: step 3; call 1 writes 1 then 2 pages (levels 12 and 11), isolates 1 + 2 + 5 = 8 pages
# before the batch that frees (level 10), and a request issued after its end by kblockd (a plug flushed at a
# sleep) still counts for it; call 2 frees clean pages only; a read never counts.
LINES = [
    f"{P}100.000001: tracing_mark_write: swaptrace step 3",
    f"{P}100.000010: mm_vmscan_memcg_reclaim_begin: order=0 gfp_flags=GFP_HIGHUSER_MOVABLE",
    _shrink("100.000020", 1, 0, 12),
    _write("100.000021", 1, 8),
    _shrink("100.000030", 2, 0, 11),
    _write("100.000031", 2, 16),
    _shrink("100.000040", 5, 0, 10),
    _shrink("100.002021", 32, 7, 10),
    f"{P}100.002030: mm_vmscan_memcg_reclaim_end: nr_reclaimed=7",
    "    kworker/1:1H-44      [001] .....   100.002040: block_rq_issue: 7,0 W 8192 () 40 + 16 be,0,4 [kworker/1:1H]",
    f"{P}100.002050: block_rq_issue: 7,0 R 4096 () 8 + 8 be,0,4 [python]",
    f"{P}100.003000: mm_vmscan_memcg_reclaim_begin: order=0 gfp_flags=GFP_HIGHUSER_MOVABLE",
    _shrink("100.003010", 1, 1, 12),
    f"{P}100.003020: mm_vmscan_memcg_reclaim_end: nr_reclaimed=1",
]


def test_requests_are_grouped_by_call_and_level_scans_summed():
    calls = write_bursts.parse(LINES)
    assert len(calls) == 2
    first, second = calls
    assert first.step == 3 and first.writes == [1, 2, 2]  # the kworker's request belongs to the call before it
    assert first.scanned_by_level == {12: 1, 11: 2, 10: 5 + 32}
    assert second.writes == [] and second.scanned_by_level == {12: 1}


def test_latency_counts_pages_isolated_from_the_first_write_to_the_first_free():
    first = write_bursts.parse(LINES)[0]
    # the first write follows level 12's event (its batch was counted before it), so the pages isolated
    # from it until the freeing batch are levels 11 and 10's first batch, 2 + 5; written meanwhile 1 + 2
    assert first.written_before_free == 3 and first.isolated_before_free == 2 + 5
    assert first.latency_ns == 2_000_000  # 100.002021 - 100.000021
    assert write_bursts.latencies(write_bursts.parse(LINES), 3) == [first]
    assert write_bursts.latencies(write_bursts.parse(LINES), 4) == []


def test_cli_pools_traces(tmp_path, capsys):
    path = tmp_path / "run.trace.txt"
    path.write_text("\n".join(LINES) + "\n")
    assert write_bursts.main([str(path), str(path), "--calls", "1", "--min-written", "1"]) == 0
    out = capsys.readouterr().out
    assert "5 pages in [1, 2, 2]" in out and "pooled: 2 calls, median 7 pages isolated" in out
    assert write_bursts.main([str(tmp_path / "missing.txt")]) == 2
