"""research/fault_vmas.py: swap-ins that read, per thread and per mapping, from a hand-written trace."""

from __future__ import annotations

from research_scripts import load

fv = load("fault_vmas")

# two threads of the program (11, 12) and one of another process (99); loop0 is dev 7,0
TRACE = """\
# tracer: nop
       swaptrace-11    [000] d.... 100.000000: page_fault_user: address=0x10000 ip=0x1 error_code=0x4
       swaptrace-11    [000] ..... 100.000010: block_bio_queue: 7,0 R 800 + 8 [swaptrace]
       swaptrace-12    [001] d.... 100.000011: page_fault_user: address=0x20000 ip=0x1 error_code=0x4
       swaptrace-11    [000] ..... 100.000012: block_bio_queue: 7,0 RA 808 + 8 [swaptrace]
       swaptrace-12    [001] ..... 100.000013: block_bio_queue: 7,0 W 4000 + 64 [swaptrace]
       swaptrace-11    [000] ..... 100.000014: block_bio_queue: 7,0 R 816 + 8 [swaptrace]
       swaptrace-99    [001] d.... 100.000015: page_fault_user: address=0x10000 ip=0x1 error_code=0x4
       swaptrace-99    [001] ..... 100.000016: block_bio_queue: 7,0 R 900 + 8 [swaptrace]
       swaptrace-11    [000] d.... 100.000020: page_fault_user: address=0x11000 ip=0x1 error_code=0x6
       swaptrace-12    [001] d.... 100.000030: page_fault_user: address=0x21000 ip=0x1 error_code=0x4
       swaptrace-12    [001] ..... 100.000031: block_bio_queue: 7,0 R 1600 + 8 [swaptrace]
       swaptrace-11    [000] d.... 100.000040: page_fault_user: address=0x90000 ip=0x1 error_code=0x4
       swaptrace-11    [000] ..... 100.000041: block_bio_queue: 7,0 R 2400 + 16 [swaptrace]
"""


def test_reads_go_to_the_fault_before_them_in_the_same_thread(tmp_path):
    text = tmp_path / "trace.txt"
    text.write_text(TRACE)
    faults, first = fv.faults_that_read(text, {11, 12})
    # thread 11's first fault read three pages (its own and two read ahead); its second read nothing (a minor
    # fault); thread 12's first fault read nothing (the write is reclaim's), its second one page; 11's last two
    # pages. Thread 99 is another process.
    assert sorted(faults) == [(100.0, 0x10000, 3), (100.00003, 0x21000, 1), (100.00004, 0x90000, 2)]
    assert first == 100.00001


def test_each_fault_is_named_by_the_snapshot_that_maps_it():
    snaps = fv.Snapshots()
    snaps.maps = [(99.0, [(0x10000, 0x20000, "anon 0 MiB"), (0x20000, 0x30000, "[heap]")]),
                  (100.00002, [(0x10000, 0x30000, "anon 0 MiB")])]
    faults = [(100.0, 0x10000, 3), (100.00003, 0x21000, 1), (100.00004, 0x90000, 2), (98.0, 0x21000, 4)]
    agg = fv.by_mapping(faults, snaps)
    # the second fault is after the second snapshot, where [heap] was merged into the anonymous mapping; the
    # last one is before any snapshot: the first names it; 0x90000 is in none
    assert agg["anon 0 MiB"] == {"faults": 2, "pages": 4, "hist": {1: 1, 3: 1}}
    assert agg["[heap]"] == {"faults": 1, "pages": 4, "hist": {4: 1}}
    assert agg["unmapped at every snapshot"] == {"faults": 1, "pages": 2, "hist": {2: 1}}
