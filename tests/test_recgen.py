"""``generate --runtime RECORDING``: a whole-process trace from a recording (swaptrace.capture.process_trace).

A hand-built recording (written with the recording writer, docs/formats.md ``recording``) of a program with
a 33-page "table" mapping (a 128 KiB table + glibc's header), one long-lived 4-page mapping referenced 2
pages a step and one 8-page buffer mapped, written and unmapped every step; the trace is checked by hand
and against the slow twin (tests/naive_recgen.py), emulated at a small limit, and bad inputs refused.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from naive_recgen import naive_recorded_rows

from swaptrace.capture.process_trace import ModelArray, Recording, fits, match_arrays, model_arrays, split_packed
from swaptrace.cli import cli
from swaptrace.core.traceio import RECORD_EVENTS, TraceWriter, open_trace
from swaptrace.workload.generate import generate_arrays, generate_trace
from swaptrace.workload.layout import build_layout
from swaptrace.workload.process import startup_pages
from swaptrace.workload.spec import load_spec

P = 4096
ANON = 0x22  # MAP_PRIVATE | MAP_ANONYMOUS
TA, LA, BA = 0x7F0000000000, 0x7F1000000000, 0x7F2000000000  # table, long-lived, buffer mappings
SPEC = """
name = "rt"
batch_size = 2
optimizer = "sgd"
bottom_mlp = [2, 16]
top_mlp = [4, 1]
alpha = 1.05
default_steps = 3

[[tables]]
name = "T"
rows = {rows}
dim = 16
lookups = 1
"""


def ev(step, event, address=0, length=0, write=False, referenced=0, pid=7, dirty=0):
    return {"step": step, "event": event, "pid": pid, "address": address, "length": length, "write": write,
            "referenced": referenced, "dirty": dirty}


def hand_recording(training_steps=3, grow=False):
    """Start-up maps and writes the table (33 pages) and the long-lived mapping (4); each step maps, writes and
    unmaps the buffer (8) and references 2 pages of the long-lived mapping (smaps reading at its end)."""
    raw = [ev(0, "mmap", TA, 33 * P)] + [ev(0, "fault", TA + i * P + 16, write=True) for i in range(32)]
    raw += [ev(0, "mmap", LA, 4 * P)] + [ev(0, "fault", LA + i * P, write=True) for i in range(4)]
    raw += [ev(0, "referenced", LA, 4 * P, referenced=4 * P), ev(0, "referenced", TA, 33 * P, referenced=32 * P)]
    for s in range(1, training_steps + 1):
        raw += [ev(s, "mmap", BA, 8 * P)] + [ev(s, "fault", BA + i * P, write=True) for i in range(8)]
        raw += [ev(s, "munmap", BA, 8 * P), ev(s, "referenced", LA, 4 * P, referenced=2 * P),
                ev(s, "referenced", TA, 33 * P, referenced=5 * P)]
        if grow and s >= 2:  # steps 2 and 3 each map 2 pages, write them and keep them
            ga = BA + (16 + 4 * s) * P
            raw += [ev(s, "mmap", ga, 2 * P), ev(s, "fault", ga, write=True), ev(s, "fault", ga + P, write=True)]
    return raw


def _times(raw):
    """A time per row, in order; the rows of one reading (a run of referenced rows) share theirs, as a
    recorder's do."""
    t, out = 0.0, []
    for i, r in enumerate(raw):
        if not (r["event"] == "referenced" and i and raw[i - 1]["event"] == "referenced"):
            t += 1.0
        out.append(t)
    return np.asarray(out)


def write_recording(path, raw, steps, exit_told=True, cpu=None, readings=None, pageout=False):
    n = len(raw)
    col = lambda k, dt: np.asarray([r.get(k, 0) for r in raw], dtype=dt)  # noqa: E731
    flags = np.asarray([ANON if r["event"] == "mmap" else (2 if r["write"] else 0) for r in raw], np.uint64)
    with TraceWriter(path, "recording", {"page_bytes": P, "steps": steps, "exit_step": steps if exit_told else None,
                                         "command": ["hand-built"], "step_source": "marks", "pageout": pageout,
                                         **({"cpu": cpu} if cpu is not None else {}),
                                         **({"readings": readings} if readings is not None else {})},
                     optional=("dirty",) if pageout else ()) as w:
        w.write(t_us=_times(raw), step=col("step", np.uint32),
                event=np.asarray([RECORD_EVENTS.index(r["event"]) for r in raw], np.int8), pid=col("pid", np.int32),
                address=col("address", np.uint64), length=col("length", np.uint64), write=col("write", bool),
                flags=flags, old_address=np.zeros(n, np.uint64), old_length=np.zeros(n, np.uint64),
                referenced=col("referenced", np.uint64), anonymous=np.zeros(n, np.uint64),
                **({"dirty": col("dirty", np.uint64)} if pageout else {}))
    return path


@pytest.fixture
def case(tmp_path):
    spec_path = tmp_path / "rt.toml"
    spec_path.write_text(SPEC.format(rows=2048))  # 2048 x 16 x 4 B = 128 KiB = 32 pages
    rec = write_recording(tmp_path / "x.recording.parquet", hand_recording(), steps=4)
    return spec_path, rec


def _rows(path):
    d = open_trace(path, "access").read_all(["step", "page", "write", "event", "region"])
    return list(zip(*(d[k].tolist() for k in ("step", "page", "write", "event", "region")), strict=True))


def _twin_rows(spec_path, raw, steps=3, training_steps=3, rss=None, pageout=False):
    """The slow twin's rows for a recording's raw rows and the spec at ``spec_path``."""
    spec = load_spec(str(spec_path))
    regions = build_layout(spec).region_dicts()
    arrays = [(a.name, a.region, a.offset, a.nbytes) for a in model_arrays(spec, regions)]
    model = generate_arrays(spec, steps=steps)
    model_rows = list(zip(*(model[k].tolist() for k in ("step", "page", "write", "region")), strict=True))
    return naive_recorded_rows(raw, regions, arrays, model_rows, startup_pages(regions, spec.optimizer).tolist(),
                               steps, training_steps, rss=rss, pageout=pageout)


def test_fit_tolerance_by_hand():
    assert fits(131072, 32) and fits(131072, 33) and not fits(131072, 34) and not fits(131072, 31)
    assert fits(64 * P * 10, 640 + 1 + 10) and not fits(64 * P * 10, 640 + 12)


def test_arrays_matched_largest_first_to_the_closest_size():
    """By hand. A mapping of 50 pages fits both a 50-page and a 49-page array (need..need + 1 + need // 64):
    the larger array is matched first and takes the exact one (ties: the earliest), the smaller the other.
    Among fits the closest in size wins, not the first: 50 pages goes to the 50-page mapping, not the 51."""
    a, b = ModelArray("emb:A", 0, 0, 50 * P), ModelArray("emb:B", 1, 0, 49 * P)
    taken, heap = match_arrays([b, a], [(7, 0, 50), (7, 100, 50)], "emb:A")
    assert taken == {0: (a, 7, 0), 1: (b, 7, 100)} and heap == []
    c = ModelArray("emb:C", 1, 0, 35 * P)
    taken, heap = match_arrays([c, a], [(7, 0, 51), (7, 100, 50), (7, 200, 36), (7, 300, 35)], "emb:A")
    assert taken == {1: (a, 7, 100), 3: (c, 7, 300)} and heap == []


def test_tables_packed_in_one_block_are_split_in_the_specs_order():
    """By hand (FBGEMM keeps every table back to back in one tensor). Tables of 12,288, 2,048 and 5,000 bytes
    (19,336 bytes: 5 pages) in one 5-page block at page 1000, no mapping of the largest table's 3 pages alone:
    A holds bytes 0-12,287 (pages 0-2), B 12,288-14,335 (page 3), C 14,336-19,335 (pages 3-4: B's last page
    is C's first). All three are matched to their pieces though B and C are under glibc's mmap threshold."""
    a, b, c = (ModelArray("emb:A", 0, 0, 12288), ModelArray("emb:B", 1, 0, 2048), ModelArray("emb:C", 2, 0, 5000))
    allocs, packed = split_packed([a, b, c], [(9, 50, 1), (9, 1000, 5)])
    assert allocs == [(9, 50, 1), (9, 1000, 3), (9, 1003, 1), (9, 1003, 2)]
    assert packed == {"emb:A": 1, "emb:B": 2, "emb:C": 3}
    taken, heap = match_arrays([a, b, c], allocs, "emb:A", packed)
    assert taken == {1: (a, 9, 1000), 2: (b, 9, 1003), 3: (c, 9, 1003)} and heap == []
    # a recording with one mapping per table (PyTorch's) is left as it is
    own = [(9, 0, 3), (9, 10, 1), (9, 20, 2)]
    assert split_packed([a, b, c], own) == (own, {})


XA = 0x7F3000000000  # a 4-page mapping made in step 1, half written in step 1, half in step 2, unmapped in step 3


def _partly_referenced():
    raw = hand_recording()
    raw += [ev(1, "mmap", XA, 4 * P), ev(1, "fault", XA, write=True), ev(1, "fault", XA + P, write=True)]
    raw += [ev(2, "fault", XA + 2 * P, write=True), ev(2, "fault", XA + 3 * P, write=True),
            ev(2, "referenced", XA, 4 * P, referenced=3 * P), ev(3, "munmap", XA, 4 * P)]
    return sorted(raw, key=lambda r: r["step"])  # stable: each step's events in the order written


def test_a_mapping_alive_at_a_steps_end_is_runtime_and_referenced_less_its_fresh_pages(tmp_path):
    """By hand: XA is alive at the end of steps 1 and 2, so it is runtime (after the long-lived 34..37: 38..41)
    though step 3 frees it. Step 2's reading says 3 of its pages were referenced; 2 were first touched in the
    step (40, 41), so one more load, to the most recently first-touched other page (39, not 38). Then the twin."""
    spec_path = tmp_path / "rt.toml"
    spec_path.write_text(SPEC.format(rows=2048))
    raw = _partly_referenced()
    rec = write_recording(tmp_path / "x.recording.parquet", raw, steps=4)
    out = generate_trace(str(spec_path), tmp_path / "p.access.parquet", steps=3, runtime=Recording(str(rec)))
    meta = open_trace(out, "access").meta
    assert [(r["name"], r["first_page"], r["pages"]) for r in meta["regions"][3:]] == [("runtime", 34, 8),
                                                                                        ("step-buffers", 42, 8)]
    rows = _rows(out)
    assert [r for r in rows if r[0] == 2 and 38 <= r[1] <= 41] == [(2, 40, True, 0, 3), (2, 41, True, 0, 3),
                                                                   (2, 39, False, 0, 3)]
    assert [r for r in rows if r[0] == 3 and 38 <= r[1] <= 41] == [(3, p, False, 2, 3) for p in range(38, 42)]
    assert rows == _twin_rows(spec_path, raw)


def test_hand_worked_trace(case, tmp_path):
    spec_path, rec = case
    out = generate_trace(str(spec_path), tmp_path / "p.access.parquet", steps=3, runtime=Recording(str(rec)))
    meta = open_trace(out, "access").meta
    names = [r["name"] for r in meta["regions"]]
    assert names == ["emb:T", "mlp", "scratch", "runtime", "step-buffers"]
    assert [r["first_page"] for r in meta["regions"][3:]] == [34, 38] and meta["footprint_pages"] == 46
    rows = _rows(out)
    step0 = [r for r in rows if r[0] == 0]
    # the table's 32 first touches are stores to the model's table pages, in order; the long-lived mapping gets
    # 4 allocs and 4 stores; the mlp page (in the heap) is stored to at the end of start-up
    want0 = ([(0, p, True, 0, 0) for p in range(32)] + [(0, p, False, 1, 3) for p in range(34, 38)]
             + [(0, p, True, 0, 3) for p in range(34, 38)] + [(0, 32, True, 0, 1)])
    assert step0 == want0
    model = generate_arrays(load_spec(str(spec_path)), steps=3)
    for t in (1, 2, 3):
        got = [r for r in rows if r[0] == t]
        want = ([(t, p, False, 1, 4) for p in range(38, 46)] + [(t, p, True, 0, 4) for p in range(38, 46)]
                + [(t, p, False, 2, 4) for p in range(38, 46)] + [(t, 37, False, 0, 3), (t, 36, False, 0, 3)])
        assert got[:len(want)] == want
        m = (model["step"] == t - 1) & (model["region"] != 2)  # region 2, scratch: the recording has the activations
        assert np.any((model["step"] == t - 1) & (model["region"] == 2))  # (which the model's own trace touches)
        assert got[len(want):] == [(t, p, w, 0, g) for p, w, g in zip(model["page"][m].tolist(),
                                                                      model["write"][m].tolist(),
                                                                      model["region"][m].tolist(), strict=True)]
    rec_meta = meta["process"]["recording"]
    assert rec_meta["matched"]["emb:T"]["pages"] == 33 and "mlp:bottom.0.weight" in rec_meta["in_heap"]
    assert meta["process"]["runtime_bytes"] == 4 * P and meta["process"]["step_bytes"] == 8 * P
    s = meta["summary"]
    assert (s["allocs"], s["frees"], s["freed_pages"]) == (4 + 24, 24, 8)
    assert s["accesses"] == len(rows) - 28 - 24
    assert s["unique_pages"] == len({r[1] for r in rows if r[3] == 0})


@pytest.mark.parametrize("steps", [1, 3, 7])
def test_trace_equals_twin(case, tmp_path, steps):
    spec_path, rec = case
    out = generate_trace(str(spec_path), tmp_path / "p.access.parquet", steps=steps, runtime=Recording(str(rec)))
    spec = load_spec(str(spec_path))
    regions = build_layout(spec).region_dicts()
    arrays = [(a.name, a.region, a.offset, a.nbytes) for a in model_arrays(spec, regions)]
    model = generate_arrays(spec, steps=steps)
    model_rows = list(zip(*(model[k].tolist() for k in ("step", "page", "write", "region")), strict=True))
    want = naive_recorded_rows(hand_recording(), regions, arrays, model_rows,
                               startup_pages(regions, spec.optimizer).tolist(), steps, 3)
    assert _rows(out) == want


def test_runtime_pages_are_numbered_by_address_not_by_first_touch(tmp_path):
    """By hand: start-up writes the long-lived mapping from its top page down (LA + 3P first). Its four pages
    are the runtime's, numbered by address: start-up's stores to them go to the runtime region's pages 3, 2,
    1, 0 in that order (swap readahead reads a fault's neighbours by address, so the trace keeps them), where
    first-touch order would give 0, 1, 2, 3. Then the twin."""
    spec_path = tmp_path / "rt.toml"
    spec_path.write_text(SPEC.format(rows=2048))
    raw = hand_recording()
    first_la = next(i for i, r in enumerate(raw) if r["event"] == "fault" and r["address"] == LA)
    raw[first_la:first_la + 4] = [ev(0, "fault", LA + i * P, write=True) for i in (3, 2, 1, 0)]
    rec = write_recording(tmp_path / "d.recording.parquet", raw, steps=4)
    out = generate_trace(str(spec_path), tmp_path / "d.access.parquet", steps=3, runtime=Recording(str(rec)))
    regions = open_trace(out, "access").meta["regions"]
    rt = next(i for i, g in enumerate(regions) if g["kind"] == "runtime")
    first = regions[rt]["first_page"]
    stores = [r[1] - first for r in _rows(out) if r[0] == 0 and r[4] == rt and r[3] == 0]
    assert stores[:4] == [3, 2, 1, 0], stores
    assert _rows(out) == _twin_rows(spec_path, raw)


def test_a_matched_mapping_is_the_model_s_only_from_when_it_was_made(tmp_path):
    """By hand: step 1 maps 33 pages at XA, writes them and unmaps them (a gradient); step 2 maps 33 pages at XA
    again and writes 32, kept to the end (Adagrad's state for T, made at the first update). The state is
    matched to step 2's mapping and the table to start-up's (both fit; the earliest first). Step 1's pages at
    XA are the program's: 33 stores to step buffers and 33 frees, beside the buffer's 8 and 8, not stores to
    the state that vanish when freed; step 2's 32 first touches are stores to the state's 32 pages."""
    xa = 0x7F3000000000
    spec_path = tmp_path / "rt.toml"
    spec_path.write_text(SPEC.format(rows=2048).replace('"sgd"', '"adagrad"'))
    raw = hand_recording()
    cut = next(i for i, r in enumerate(raw) if r["step"] == 1)
    grad = [ev(1, "mmap", xa, 33 * P)] + [ev(1, "fault", xa + i * P, write=True) for i in range(33)]
    grad += [ev(1, "munmap", xa, 33 * P)]
    cut2 = next(i for i, r in enumerate(raw) if r["step"] == 2)
    state = [ev(2, "mmap", xa, 33 * P)] + [ev(2, "fault", xa + i * P + 16, write=True) for i in range(32)]
    raw = raw[:cut] + grad + raw[cut:cut2] + state + raw[cut2:]
    rec = write_recording(tmp_path / "s.recording.parquet", raw, steps=4)
    out = generate_trace(str(spec_path), tmp_path / "p.access.parquet", steps=3, runtime=Recording(str(rec)))
    tr = open_trace(out, "access")
    matched = tr.meta["process"]["recording"]["matched"]
    assert matched["state:T"]["address"] == xa and matched["emb:T"]["address"] == TA
    regions = tr.meta["regions"]
    kind = {i: g["kind"] for i, g in enumerate(regions)}
    state_region = next(i for i, g in enumerate(regions) if g["name"] == "state:T")
    rows = _rows(out)
    step1 = [r for r in rows if r[0] == 1]
    assert sum(1 for r in step1 if r[3] == 2) == 33 + 8  # frees: the gradient's and the buffer's
    assert sum(1 for r in step1 if r[3] == 0 and kind[r[4]] == "step-buffers") == 33 + 8
    # a step's recorded rows come before the model's: step 2 opens with the state's 32 first touches (its mmap
    # allocates no trace page: XA is the model's from there)
    first = regions[state_region]["first_page"]
    assert [r for r in rows if r[0] == 2][:32] == [(2, first + i, True, 0, state_region) for i in range(32)]
    assert rows == _twin_rows(spec_path, raw)


def _paged_out_recording():
    """:func:`hand_recording` as made with --pageout: step 1, after its buffer, loads the long-lived pages 0 and
    1, stores to page 2 and loads a table page again; its reading finds 2 pages of the long-lived mapping and 5
    of the table dirty. Steps 2 and 3 re-touch nothing."""
    raw = hand_recording()
    cut = next(i for i, r in enumerate(raw) if r["step"] == 1 and r["event"] == "referenced")
    again = [ev(1, "fault", LA), ev(1, "fault", LA + P + 8), ev(1, "fault", LA + 2 * P, write=True),
             ev(1, "fault", TA + 16)]
    raw = raw[:cut] + again + raw[cut:]
    for r in raw:
        if r["event"] == "referenced":
            r["dirty"] = {(0, LA): 4 * P, (1, LA): 2 * P, (1, TA): 5 * P}.get((r["step"], r["address"]), 0)
    return raw


def test_a_paged_out_recording_gives_its_uses_again_and_the_stores_that_did_not_fault(tmp_path):
    """By hand (docs/process.md, --pageout): step 1's re-touches of the long-lived mapping (trace pages 34..37)
    are a load of 34, a load of 35 and a store to 36, where they were made; its reading's 2 dirty pages are the
    store to 36 and one store that did not fault, put on the most recently loaded page, 35, right after its load
    (before the store to 36, though the reading comes after it). No referenced loads
    (steps 2 and 3 have none), and the table's re-touch and dirty pages are the spec's business (none). Start-up's
    4 dirty pages are its 4 first stores: nothing more."""
    spec_path = tmp_path / "rt.toml"
    spec_path.write_text(SPEC.format(rows=2048))
    raw = _paged_out_recording()
    rec = write_recording(tmp_path / "po.recording.parquet", raw, steps=4, pageout=True)
    out = generate_trace(str(spec_path), tmp_path / "p.access.parquet", steps=3, runtime=Recording(str(rec)))
    rows = _rows(out)
    buffer = lambda t: ([(t, p, False, 1, 4) for p in range(38, 46)] + [(t, p, True, 0, 4) for p in range(38, 46)]  # noqa: E731
                        + [(t, p, False, 2, 4) for p in range(38, 46)])
    step = lambda t: [r for r in rows if r[0] == t and r[4] >= 3]  # noqa: E731 (the recorded rows)
    assert step(1) == buffer(1) + [(1, 34, False, 0, 3), (1, 35, False, 0, 3), (1, 35, True, 0, 3), (1, 36, True, 0, 3)]
    assert step(2) == buffer(2) and step(3) == buffer(3)
    assert [r for r in rows if r[0] == 0 and r[4] == 3] == ([(0, p, False, 1, 3) for p in range(34, 38)]
                                                           + [(0, p, True, 0, 3) for p in range(34, 38)])
    assert rows == _twin_rows(spec_path, raw, pageout=True)
    # the same events read without --pageout: the re-faults are no first touches, the referenced loads come back
    plain = write_recording(tmp_path / "plain.recording.parquet", raw, steps=4)
    out2 = generate_trace(str(spec_path), tmp_path / "q.access.parquet", steps=3, runtime=Recording(str(plain)))
    assert [r for r in _rows(out2) if r[0] == 1 and r[4] == 3] == [(1, 37, False, 0, 3), (1, 36, False, 0, 3)]


@pytest.mark.parametrize("steps", [1, 3, 7])
@pytest.mark.parametrize("window", ["step", "across steps"])
def test_a_paged_out_trace_equals_twin(tmp_path, steps, window):
    """``across steps``: step 2 loads two long-lived pages and has no reading, so step 3's reading counts them
    dirty: their stores stay at the reading (a store is placed after its load only within the load's step)."""
    spec_path = tmp_path / "rt.toml"
    spec_path.write_text(SPEC.format(rows=2048))
    raw = _paged_out_recording() + [ev(3, "fault", LA + 3 * P), ev(3, "fault", LA + 3 * P, write=True),
                                    ev(3, "referenced", LA, 4 * P, dirty=3 * P)]
    if window == "across steps":
        raw = ([r for r in raw if not (r["step"] == 2 and r["event"] == "referenced")]
               + [ev(2, "fault", LA), ev(2, "fault", LA + P)])
        raw.sort(key=lambda r: r["step"])  # stable: each step's events keep their order
        first = next(r for r in raw if r["step"] == 3 and r["event"] == "referenced" and r["address"] == LA)
        first["dirty"] = 2 * P
    rec = write_recording(tmp_path / "po.recording.parquet", raw, steps=4, pageout=True)
    out = generate_trace(str(spec_path), tmp_path / "p.access.parquet", steps=steps, runtime=Recording(str(rec)))
    assert _rows(out) == _twin_rows(spec_path, raw, steps=steps, pageout=True)


def test_repeated_steps_do_not_allocate_again_what_they_kept(tmp_path):
    spec_path = tmp_path / "rt.toml"
    spec_path.write_text(SPEC.format(rows=2048))
    rec = write_recording(tmp_path / "g.recording.parquet", hand_recording(grow=True), steps=4)
    out = generate_trace(str(spec_path), tmp_path / "p.access.parquet", steps=7, runtime=Recording(str(rec)))
    spec = load_spec(str(spec_path))
    regions = build_layout(spec).region_dicts()
    arrays = [(a.name, a.region, a.offset, a.nbytes) for a in model_arrays(spec, regions)]
    model = generate_arrays(spec, steps=7)
    model_rows = list(zip(*(model[k].tolist() for k in ("step", "page", "write", "region")), strict=True))
    rows = _rows(out)
    assert rows == naive_recorded_rows(hand_recording(grow=True), regions, arrays, model_rows,
                                       startup_pages(regions, spec.optimizer).tolist(), 7, 3)
    # the 4 pages steps 2 and 3 keep are runtime pages besides the long-lived mapping's 34..37: each is
    # allocated in its own step and never again when the step repeats (trace steps 4..7 repeat 2, 3, 2, 3)
    kept = {p for p, kind in ((r[1], r[4]) for r in rows) if kind == 3} - set(range(34, 38))
    allocs = {t: sum(1 for r in rows if r[0] == t and r[3] == 1 and r[1] in kept) for t in range(1, 8)}
    assert len(kept) == 4 and allocs == {1: 0, 2: 2, 3: 2, 4: 0, 5: 0, 6: 0, 7: 0}


def test_emulate_frees_without_io(case, tmp_path):
    spec_path, rec = case
    out = generate_trace(str(spec_path), tmp_path / "p.access.parquet", steps=6, runtime=Recording(str(rec)))
    stream = tmp_path / "p.swapio.parquet"
    # 24 pages: the model's 34 and the runtime's 4 do not fit, so the model's pages go to swap and come back
    r = CliRunner().invoke(cli, ["emulate", str(out), "--memory", str(24 * P), "-o", str(stream), "--json"])
    assert r.exit_code == 0, r.output
    s = open_trace(stream, "swapio").meta["summary"]
    assert s["frees"] == 6 * 8 and s["allocs"] == 4 + 6 * 8
    # a buffer page is freed right after its store; one reclaimed in between gives its slot back, unread
    assert s["freed_resident"] + s["freed_swapped"] == 6 * 8
    assert s["pages_out"] > 0
    # a freed page's next store is a zero-fill, never a read: against the same trace without its alloc and free
    # rows (each buffer page then zero-filled once, later hit or read back), exactly 6 x 8 - 8 more zero-fills;
    # every other page is zero-filled once in both, whatever the limit does to it
    d = open_trace(out, "access").read_all(["step", "page", "write", "region", "event"])
    keep = d["event"] == 0
    kept = tmp_path / "nofree.access.parquet"
    with TraceWriter(kept, "access", dict(open_trace(out, "access").meta), optional=("event",)) as w:
        w.write(**{k: v[keep] for k, v in d.items()})
    stream2 = tmp_path / "nofree.swapio.parquet"
    r = CliRunner().invoke(cli, ["emulate", str(kept), "--memory", str(24 * P), "-o", str(stream2), "--json"])
    assert r.exit_code == 0, r.output
    s2 = open_trace(stream2, "swapio").meta["summary"]
    assert s2.get("frees", 0) == 0 and s["zero_fill"] - s2["zero_fill"] == 6 * 8 - 8


def test_the_recorded_threads_reach_the_time_model(case, tmp_path):
    """A recording's measured threads go into the process trace, the emulated stream and the time model's
    default; a recording without them (older files) leaves the stream at one thread; --threads overrides."""
    spec_path, _ = case
    rec = write_recording(tmp_path / "t.recording.parquet", hand_recording(), steps=4,
                          cpu={"parallelism": 1.8, "threads": 2, "cpu_s": 0.9, "wall_s": 0.5, "readings": 4})
    old = write_recording(tmp_path / "o.recording.parquet", hand_recording(), steps=4)
    threads = {}
    for name, path in (("new", rec), ("old", old)):
        out = generate_trace(str(spec_path), tmp_path / f"{name}.access.parquet", steps=4, runtime=Recording(str(path)))
        stream = tmp_path / f"{name}.swapio.parquet"
        r = CliRunner().invoke(cli, ["emulate", str(out), "--memory", str(20 * P), "-o", str(stream)])
        assert r.exit_code == 0, r.output
        args = ["time", str(stream), "--device", "tiny", "--step-compute-us", "1000", "--fault-cpu-us", "1",
                "--reclaim-cpu-us", "0", "--write-cpu-us", "0", "--json"]
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, r.output
        threads[name] = json.loads(r.output)
        if name == "new":
            r = CliRunner().invoke(cli, [*args, "--threads", "1"])
            assert r.exit_code == 0, r.output
            given = json.loads(r.output)
    assert open_trace(tmp_path / "new.access.parquet", "access").meta["process"]["threads"] == 2
    assert threads["new"]["threads"] == 2 and "t.recording.parquet" in threads["new"]["threads_source"]
    assert threads["old"]["threads"] == 1 and "threads" not in open_trace(tmp_path / "old.swapio.parquet").meta
    assert given["threads"] == 1 and given["threads_source"] == "given"
    # the option reached the model: the same waited faults on one thread stall longer than shared by two
    assert given["faults_waited"] == threads["new"]["faults_waited"] > 0
    assert given["total_us"] > threads["new"]["total_us"]


def test_run_with_a_recording_predicts_the_process_on_its_threads(case, tmp_path):
    """``run --runtime RECORDING``: the pipeline traces the whole process (start-up as step 0), and its time
    stage shares each step over the recording's threads; pipeline.json holds the recording's hash, so another
    recording reruns generate."""
    spec_path, _ = case
    rec = write_recording(tmp_path / "t.recording.parquet", hand_recording(), steps=4,
                          cpu={"parallelism": 2.1, "threads": 2, "cpu_s": 1.05, "wall_s": 0.5, "readings": 4})
    out = tmp_path / "run"
    args = ["run", "--preset", str(spec_path), "--runtime", str(rec), "--steps", "4", "--memory", str(24 * P),
            "--no-fio", "--no-thesis", "--ssd-capacity", "4GiB", "-o", str(out)]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    access = open_trace(out / "access.parquet", "access").meta
    assert access["process"]["threads"] == 2 and access["steps"] == 5  # start-up and 4 steps
    timing_meta = open_trace(out / "timing.parquet").meta
    assert timing_meta["summary"]["threads"] == 2
    manifest = json.loads((out / "pipeline.json").read_text())
    assert manifest["generate"]["params"]["runtime"]["sha256"]
    rec.unlink()  # another recording under the same name: generate runs again
    write_recording(rec, hand_recording(grow=True), steps=4,
                    cpu={"parallelism": 1.0, "threads": 1, "cpu_s": 0.5, "wall_s": 0.5, "readings": 4})
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    assert "generate: done" in r.output, r.output
    assert open_trace(out / "timing.parquet").meta["summary"]["threads"] == 1


def test_a_recording_without_its_exit_told_apart_loses_its_last_step(case, tmp_path):
    spec_path, _ = case
    rec = write_recording(tmp_path / "n.recording.parquet", hand_recording(), steps=4, exit_told=False)
    out = generate_trace(str(spec_path), tmp_path / "p.access.parquet", steps=3, runtime=Recording(str(rec)))
    info = open_trace(out, "access").meta["process"]["recording"]
    assert info["training_steps"] == 2 and "not told apart" in info["exit"]
    assert info["cycle"] == "trace steps above 2 repeat recording steps 2..2"


def _refused(tmp_path, spec_path, rec, needle):
    out = tmp_path / "bad.access.parquet"
    r = CliRunner().invoke(cli, ["generate", "--spec", str(spec_path), "--steps", "2", "--runtime", str(rec),
                                 "-o", str(out)])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and needle in r.output, r.output
    assert not out.exists() and not [p for p in tmp_path.iterdir() if "bad.access" in p.name]


def test_recording_of_another_model_is_refused(case, tmp_path):
    _, rec = case
    other = tmp_path / "other.toml"
    other.write_text(SPEC.format(rows=4096))  # a 256 KiB table: no 64-page mapping
    _refused(tmp_path, other, rec, "emb:T")


def test_recording_without_steps_is_refused(case, tmp_path):
    spec_path, _ = case
    rec = write_recording(tmp_path / "s.recording.parquet", [r for r in hand_recording() if r["step"] == 0], 1)
    _refused(tmp_path, spec_path, rec, "no training step")


def test_damaged_and_wrong_files_are_refused(case, tmp_path):
    spec_path, rec = case
    damaged = tmp_path / "d.recording.parquet"
    damaged.write_bytes(b"PAR1" + rec.read_bytes()[4:200])
    _refused(tmp_path, spec_path, damaged, str(damaged))
    body = bytearray(rec.read_bytes())  # data pages damaged under a valid footer
    footer = int.from_bytes(body[-8:-4], "little")
    for i in range(8, len(body) - footer - 8):
        body[i] ^= 0x5A
    damaged.write_bytes(bytes(body))
    _refused(tmp_path, spec_path, damaged, str(damaged))
    access = generate_trace(str(spec_path), tmp_path / "a.access.parquet", steps=1)
    _refused(tmp_path, spec_path, access, "recording")


@pytest.mark.privileged
def test_recorded_tiny_training_gives_a_process_trace(tmp_path, monkeypatch):
    """Record ``swaptrace train --preset tiny --steps 3`` (seconds) and generate from it."""
    import os
    import sys
    from pathlib import Path

    if os.geteuid() != 0:
        pytest.skip("capture --record needs root")
    pytest.importorskip("torch")
    from swaptrace.capture.recorder import check_record_machine
    from swaptrace.capture.recording import FREE, page_events
    from swaptrace.errors import SwaptraceError

    try:
        check_record_machine()
    except SwaptraceError as exc:
        pytest.skip(f"recording is not possible here: {exc}")
    repo = str(Path(__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", repo + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rec = tmp_path / "tiny.recording.parquet"
    r = CliRunner().invoke(cli, ["capture", "--record", "-o", str(rec), "--timeout", "300", "--", sys.executable,
                                 "-m", "swaptrace.cli", "train", "--preset", "tiny", "--steps", "3"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "without --pageout" in r.output  # the summary says what the default leaves out
    from swaptrace.capture import cgroup, leftovers
    assert not [g for g in cgroup.list_groups(leftovers.PREFIX) if g.name.endswith("-record")]  # removed
    out = generate_trace("tiny", tmp_path / "p.access.parquet", steps=5, runtime=Recording(str(rec)))
    meta = open_trace(out, "access").meta
    # the program ran in a group of its own: page tables and slab charged beyond its anonymous memory
    # (a 300 MiB process maps at least 150 page-table pages; less than 16 MiB in all)
    try:
        cgroup.memory_hierarchy()
    except SwaptraceError:
        assert meta["process"]["kernel_bytes"] == 0
    else:
        assert 150 * 4096 <= meta["process"]["kernel_bytes"] < 16 << 20, meta["process"]["recording"]["kernel_note"]
    matched = meta["process"]["recording"]["matched"]
    spec = load_spec("tiny")
    # the tables of 2 MiB or more (C3, C12, C21, C16, C4) are found; smaller ones may sit in the heap
    big = {f"emb:{t.name}" for t in spec.tables if t.weight_bytes >= 2 << 20}
    assert big and big <= set(matched), (big, sorted(matched))
    d = open_trace(out, "access").read_all(["step", "region", "event"])
    runtime = [i for i, g in enumerate(meta["regions"]) if g["kind"] in ("runtime", "step-buffers")]
    recorded = page_events(rec)
    for t in range(1, 6):
        m = d["step"] == t
        assert np.isin(d["region"][m], runtime).any()  # the runtime is used in every training step
        # its frees are the recording's (cycled): steps beyond 3 repeat recording steps 2..3
        src = t if t <= 3 else 2 + (t - 4) % 2
        assert int(np.count_nonzero(d["event"][m] == 2)) == int(np.count_nonzero(recorded.steps[src].kind == FREE))


def test_a_start_up_reading_loads_what_was_touched_before_its_window_where_it_was_taken(tmp_path):
    """By hand: start-up writes half the table, makes and writes the long-lived mapping (runtime 34..37), is read
    (LA: 4 referenced, all first touched in the window: no load), writes the table's other half and is read again
    (LA: 3 referenced, none first touched in that window: 3 loads, 37, 36, 35, most recently first-touched
    first), then writes nothing more. The loads sit between the second half's stores and the end of start-up;
    summed over the step, as before readings had places, 7 referenced against 4 first touches gave none."""
    spec_path = tmp_path / "rt.toml"
    spec_path.write_text(SPEC.format(rows=2048))
    raw0 = [ev(0, "mmap", TA, 33 * P)] + [ev(0, "fault", TA + i * P + 16, write=True) for i in range(16)]
    raw0 += [ev(0, "mmap", LA, 4 * P)] + [ev(0, "fault", LA + i * P, write=True) for i in range(4)]
    raw0 += [ev(0, "referenced", LA, 4 * P, referenced=4 * P), ev(0, "referenced", TA, 33 * P, referenced=16 * P)]
    raw0 += [ev(0, "fault", TA + i * P + 16, write=True) for i in range(16, 32)]
    raw0 += [ev(0, "referenced", LA, 4 * P, referenced=3 * P), ev(0, "referenced", TA, 33 * P, referenced=16 * P)]
    raw = raw0 + [r for r in hand_recording() if r["step"] > 0]
    rec = write_recording(tmp_path / "w.recording.parquet", raw, steps=4)
    out = generate_trace(str(spec_path), tmp_path / "p.access.parquet", steps=3, runtime=Recording(str(rec)))
    step0 = [r for r in _rows(out) if r[0] == 0]
    want0 = ([(0, p, True, 0, 0) for p in range(16)] + [(0, p, False, 1, 3) for p in range(34, 38)]
             + [(0, p, True, 0, 3) for p in range(34, 38)] + [(0, p, True, 0, 0) for p in range(16, 32)]
             + [(0, p, False, 0, 3) for p in (37, 36, 35)] + [(0, 32, True, 0, 1)])
    assert step0 == want0
    spec = load_spec(str(spec_path))
    regions = build_layout(spec).region_dicts()
    arrays = [(a.name, a.region, a.offset, a.nbytes) for a in model_arrays(spec, regions)]
    model = generate_arrays(spec, steps=3)
    model_rows = list(zip(*(model[k].tolist() for k in ("step", "page", "write", "region")), strict=True))
    assert _rows(out) == naive_recorded_rows(raw, regions, arrays, model_rows,
                                             startup_pages(regions, spec.optimizer).tolist(), 3, 3)


def test_start_up_memory_the_recording_did_not_see_is_stored_where_a_reading_found_it(case, tmp_path):
    """By hand: start-up's reading finds 41 pages of anonymous RSS where the recording has 36 first-touched
    (the table mapping's 32 -- its header page is never touched -- and the long-lived 4), so 5 pages more
    (a library's copy-on-write data, say) go to an ``unrecorded`` region after the step buffers, stored at
    the reading, before its loads, and never touched again. Then the twin, with the RSS per reading."""
    spec_path, _ = case
    raw = hand_recording()
    t_reading = float(_times(raw)[next(i for i, r in enumerate(raw) if r["event"] == "referenced")])
    rec = write_recording(tmp_path / "u.recording.parquet", raw, steps=4,
                          readings=[{"t_us": t_reading, "step": 0, "anon_rss_bytes": 41 * P, "pids": 1}])
    out = generate_trace(str(spec_path), tmp_path / "u.access.parquet", steps=3, runtime=Recording(str(rec)))
    meta = open_trace(out, "access").meta
    assert [(r["name"], r["first_page"], r["pages"]) for r in meta["regions"][3:]] == [
        ("runtime", 34, 4), ("step-buffers", 38, 8), ("unrecorded", 46, 5)]
    assert meta["footprint_pages"] == 51 and meta["process"]["recording"]["unrecorded_pages"] == 5
    rows = _rows(out)
    want0 = ([(0, p, True, 0, 0) for p in range(32)] + [(0, p, False, 1, 3) for p in range(34, 38)]
             + [(0, p, True, 0, 3) for p in range(34, 38)] + [(0, p, True, 0, 5) for p in range(46, 51)]
             + [(0, 32, True, 0, 1)])
    assert [r for r in rows if r[0] == 0] == want0
    assert not [r for r in rows if r[0] > 0 and r[4] == 5]  # never touched again
    assert rows == _twin_rows(spec_path, raw, rss=[41])
    # pages freed before the reading are not recorded memory: a 3-page buffer mapped, written and unmapped in
    # start-up leaves the 5 as they were (36 alive again at the reading)
    ref = next(i for i, r in enumerate(raw) if r["event"] == "referenced")
    freed = raw[:ref] + [ev(0, "mmap", BA, 3 * P)] + [ev(0, "fault", BA + i * P, write=True) for i in range(3)]
    freed += [ev(0, "munmap", BA, 3 * P)] + raw[ref:]
    t_freed = float(_times(freed)[ref + 5])
    rec3 = write_recording(tmp_path / "w.recording.parquet", freed, steps=4,
                           readings=[{"t_us": t_freed, "step": 0, "anon_rss_bytes": 41 * P, "pids": 1}])
    out3 = generate_trace(str(spec_path), tmp_path / "w.access.parquet", steps=3, runtime=Recording(str(rec3)))
    assert open_trace(out3, "access").meta["regions"][-1]["pages"] == 5
    assert _rows(out3) == _twin_rows(spec_path, freed, rss=[41])
    # two readings: after the table's 32 stores the RSS is 34 (2 unrecorded: 46, 47, stored there), at the end 41
    # (5 in all: 3 more, 48..50)
    two = raw[:33] + [ev(0, "referenced", TA, 33 * P, referenced=32 * P)] + raw[33:]
    t1, t2 = float(_times(two)[33]), float(_times(two)[ref + 1])
    rec4 = write_recording(tmp_path / "y.recording.parquet", two, steps=4,
                           readings=[{"t_us": t1, "step": 0, "anon_rss_bytes": 34 * P, "pids": 1},
                                     {"t_us": t2, "step": 0, "anon_rss_bytes": 41 * P, "pids": 1}])
    out4 = generate_trace(str(spec_path), tmp_path / "y.access.parquet", steps=3, runtime=Recording(str(rec4)))
    step0 = [r for r in _rows(out4) if r[0] == 0]
    assert step0[32:34] == [(0, 46, True, 0, 5), (0, 47, True, 0, 5)]
    assert [r[1] for r in step0 if r[4] == 5] == [46, 47, 48, 49, 50]
    assert _rows(out4) == _twin_rows(spec_path, two, rss=[34, 41])
    # what persists caps it: each training step's reading (36 pages alive: the buffer is unmapped before it) finds
    # RSS 40, a gap of 4, so start-up's gap of 5 counts 4 (the 5th was the recorder's lag); without the cap a
    # transient spike would stay in the trace for good
    times = _times(raw)
    reads = [i for i, r in enumerate(raw) if r["event"] == "referenced" and raw[i - 1]["event"] != "referenced"]
    assert len(reads) == 4  # start-up and each of the 3 steps
    rec5 = write_recording(tmp_path / "z.recording.parquet", raw, steps=4,
                           readings=[{"t_us": float(times[i]), "step": raw[i]["step"], "pids": 1,
                                      "anon_rss_bytes": (41 if raw[i]["step"] == 0 else 40) * P} for i in reads])
    out5 = generate_trace(str(spec_path), tmp_path / "z.access.parquet", steps=3, runtime=Recording(str(rec5)))
    assert open_trace(out5, "access").meta["regions"][-1] == {"name": "unrecorded", "kind": "unrecorded",
                                                              "first_page": 46, "pages": 4}
    assert _rows(out5) == _twin_rows(spec_path, raw, rss=[41, 40, 40, 40])
    # an RSS at or below what was recorded adds nothing
    rec2 = write_recording(tmp_path / "v.recording.parquet", raw, steps=4,
                           readings=[{"t_us": t_reading, "step": 0, "anon_rss_bytes": 30 * P, "pids": 1}])
    out2 = generate_trace(str(spec_path), tmp_path / "v.access.parquet", steps=3, runtime=Recording(str(rec2)))
    assert [r["name"] for r in open_trace(out2, "access").meta["regions"]][-1] == "step-buffers"


def test_kernel_memory_is_the_median_of_the_training_readings_by_hand():
    """The group's usage less anonymous memory and page cache, at the training steps' readings only (start-up
    and the exit left out, a reading without the group skipped); the median, at least 0; None unmeasured."""
    from swaptrace.capture.process_trace import kernel_memory

    def r(step, usage, anon, file):
        return {"step": step, "group_bytes": usage * P, "group_anon_bytes": anon * P, "group_file_bytes": file * P}

    readings = [r(0, 100, 10, 0),  # start-up: 90 pages, left out
                r(1, 50, 40, 2), r(2, 60, 45, 3), r(3, 59, 45, 4),  # 8, 12, 10 pages
                {"step": 3, "anon_rss_bytes": 5 * P},  # no group reading: skipped
                r(4, 500, 1, 0)]  # the exit (4 recording steps: start-up and 1..3): left out
    k = kernel_memory(readings, 4)
    assert k["kernel_bytes"] == 10 * P and "median of 3" in k["kernel_note"]
    assert kernel_memory([r(1, 5, 6, 0)], 4)["kernel_bytes"] == 0  # usage read below anon (a race): 0, not less
    assert kernel_memory([{"step": 1, "anon_rss_bytes": P}], 4)["kernel_bytes"] is None
    assert kernel_memory([], 4)["kernel_bytes"] is None
    # a --pageout recording's group holds swap cache the subtraction would count: the kernel's own kmem count
    paged = [{**x, "group_kernel_bytes": (3 + i) * P} for i, x in enumerate(readings) if "group_bytes" in x]
    k = kernel_memory(paged, 4, pageout=True)  # steps 1..3 at 4, 5, 6 pages
    assert k["kernel_bytes"] == 5 * P and "kmem" in k["kernel_note"]
    assert kernel_memory(paged, 4)["kernel_bytes"] == 10 * P  # without --pageout, as before


def test_the_kernel_memory_a_recording_measured_comes_out_of_the_budget(case, tmp_path):
    """A recording whose readings hold its cgroup: the trace's ``kernel_bytes`` is their kernel memory and
    ``emulate --memory X`` gives the trace X less it (pages of memory, swap I/O); without them, the whole X."""
    spec_path, old = case
    readings = [{"t_us": 1e9 + s, "step": s, "group_bytes": (60 + s) * P, "group_anon_bytes": 50 * P,
                 "group_file_bytes": (7 + s) * P} for s in (1, 2, 3)]  # 3 pages of kernel memory each
    new = write_recording(tmp_path / "k.recording.parquet", hand_recording(), steps=4, readings=readings)
    got = {}
    for name, rec in (("old", old), ("new", new)):
        out = generate_trace(str(spec_path), tmp_path / f"{name}.access.parquet", steps=4, runtime=Recording(str(rec)))
        stream = tmp_path / f"{name}.swapio.parquet"
        r = CliRunner().invoke(cli, ["emulate", str(out), "--memory", str(24 * P), "-o", str(stream), "--json"])
        assert r.exit_code == 0, r.output
        got[name] = (open_trace(out, "access").meta["process"], json.loads(r.output))
    assert got["old"][0]["kernel_bytes"] == 0 and "not measured" in got["old"][0]["recording"]["kernel_note"]
    assert got["new"][0]["kernel_bytes"] == 3 * P
    assert got["old"][1]["memory_pages"] == 24 and got["new"][1]["memory_pages"] == 21
    assert got["new"][1]["pages_out"] > got["old"][1]["pages_out"]  # three pages less room: more swapped
    # inspect says the same of each recording
    for rec, want in ((new, "0.01 MiB (median of 3 training readings"), (old, "not measured")):
        r = CliRunner().invoke(cli, ["inspect", str(rec)])
        assert r.exit_code == 0, r.output
        line = next(x for x in r.output.splitlines() if x.startswith("kernel memory"))
        assert want in line, line
    r = CliRunner().invoke(cli, ["inspect", str(new), "--json"])
    assert json.loads(r.output)["kernel_memory"]["kernel_bytes"] == 3 * P
