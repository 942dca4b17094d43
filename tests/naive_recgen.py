"""Slow twin of ``generate --runtime RECORDING`` (swaptrace.capture.process_trace), from docs/process.md alone.

Input: a recording's raw rows as dicts (``step``, ``event`` one of ``mmap`` (anonymous private), ``munmap``,
``fault``, ``referenced``; ``pid``, ``address``, ``length``, ``write``, ``referenced`` in bytes), the model's
regions and arrays ``(name, region index, byte offset, bytes)`` and the model's trace rows. Only the events
these hold (no brk, mremap, fork): written as a plain dictionary of pages, no interval lists, no keys packed.
Output: the rows ``(step, page, write, event, region)`` of every trace step, in order.

Two rules of docs/process.md beyond the events: the model's ``scratch`` region gets none of the model's
accesses (the recording holds the program's activations), and, given the anonymous RSS at the readings, the
pages it holds beyond those first-touched and not unmapped by then (the gap) are stored to in an
``unrecorded`` region at each start-up reading, before its loads: the gap, but no more than the median gap of
the training steps' readings (what persists; the rest is the recorder's lag), and only the growth past the
most stored so far.

A recording made with ``--pageout`` (``pageout=True``: its program was paged out at every reading) differs at
two places of docs/process.md, and only for the program's own pages (a model array's are the spec's): a fault
on a page already touched and not unmapped is a use of it (a load or store as the fault says, where it was),
and a reading stores, per mapping, to ``dirty - stored`` of the pages loaded since the previous reading and not
stored to in that time (most recently loaded first), instead of the referenced loads; each such store goes
right after the row of its page's load when that load is in the reading's step, else where the reading is.
"""

from __future__ import annotations

import math
import statistics

P = 4096


def _pages_of(address, length):
    return list(range(address // P, address // P + math.ceil(length / P)))


def naive_recorded_rows(raw, regions, arrays, model_rows, startup, steps, training_steps, rss=None, pageout=False):
    """See the module docstring; ``startup``: model pages a program writes at start-up, in order; ``steps``:
    the trace's training steps; ``training_steps``: the recording's (exit rows must not be in ``raw``);
    ``rss``: the anonymous RSS in pages at each reading, in order from start-up's first (None, or a list
    shorter than the readings: not measured at the rest)."""
    by_step = {s: [r for r in raw if r["step"] == s] for s in range(training_steps + 1)}
    # 1. mappings never unmapped: (pid, first page, pages), in the order they were made
    maps = []
    for i, r in enumerate(raw):
        if r["event"] == "mmap":
            maps.append((r["pid"], r["address"] // P, math.ceil(r["length"] / P), i))
    unmapped = [(r["pid"], set(_pages_of(r["address"], r["length"])), i) for i, r in enumerate(raw)
                if r["event"] == "munmap"]
    kept = [m for m in maps if not any(pid == m[0] and i > m[3] and set(range(m[1], m[1] + m[2])) & pages
                                       for pid, pages, i in unmapped)]
    # 2. arrays, largest first, to a kept mapping of ceil(b/P) .. ceil(b/P) + 1 + ceil(b/P)//64 pages
    model_page, model_from = {}, {}  # (pid, page) -> model page; -> the row of the mmap that made it the model's
    used = set()
    for _name, region, offset, nbytes in sorted(arrays, key=lambda a: (-a[3], a[0])):
        need = math.ceil(nbytes / P)
        if nbytes < 128 * 1024:
            continue
        fit = [m for m in kept if m not in used and need <= m[2] <= need + 1 + need // 64]
        if not fit:
            continue
        m = min(fit, key=lambda m: (m[2] - need, kept.index(m)))
        used.add(m)
        first = regions[region]["first_page"] + offset // P
        for i in range(m[2]):
            model_page[(m[0], m[1] + i)] = (first + i, region) if i < need else None
            model_from[(m[0], m[1] + i)] = m[3]
    row_of = {id(r): i for i, r in enumerate(raw)}

    def is_model(key, r):
        """The page is the model's at row ``r``: its kept mapping was made by then (before it, the same address
        was some other mapping of the program's)."""
        return key in model_page and row_of[id(r)] >= model_from[key]
    # 3. runtime: alive at some step's end; else step-buffers; each numbered in address order (pid, then page)
    alive, first_touch, runtime = set(), [], set()
    for s in range(training_steps + 1):
        for r in by_step[s]:
            if r["event"] == "fault":
                key = (r["pid"], r["address"] // P)
                if is_model(key, r) or key in alive:
                    continue
                alive.add(key)
                if key not in first_touch:
                    first_touch.append(key)
            elif r["event"] == "munmap":
                for p in _pages_of(r["address"], r["length"]):
                    alive.discard((r["pid"], p))
        runtime |= alive
    nxt = sum(r["pages"] for r in regions)
    trace_page = {}
    n_regions = len(regions)
    for keys in (sorted(k for k in first_touch if k in runtime), sorted(k for k in first_touch if k not in runtime)):
        if not keys:
            continue  # no such region: the next takes its index
        for k in keys:
            trace_page[k] = (nxt, n_regions)
            nxt += 1
        n_regions += 1
    unrec_first, unrec_region = nxt, n_regions  # the unrecorded region comes last
    # the gap at each reading: a pass of its own over the rows (faults add a page, unmaps take pages away)
    gaps, in_rss, n_read = [], set(), 0
    for s in range(training_steps + 1):
        for j, r in enumerate(by_step[s]):
            if r["event"] == "fault":
                in_rss.add((r["pid"], r["address"] // P))
            elif r["event"] == "munmap":
                in_rss -= {(r["pid"], p) for p in _pages_of(r["address"], r["length"])}
            elif r["event"] == "referenced" and not (j + 1 < len(by_step[s])
                                                     and by_step[s][j + 1]["event"] == "referenced"):
                if rss is not None and n_read < len(rss):
                    gaps.append((s, rss[n_read] - len(in_rss)))
                n_read += 1
    persistent = [g for s, g in gaps if s > 0]
    cap = int(statistics.median(persistent)) if persistent else None
    startup_gaps = [g if cap is None else min(g, cap) for s, g in gaps if s == 0]
    unrec_made = 0
    # 4. rows of each recording step
    rec_rows, alive, stamp, clock = [], set(), {}, 0
    stored, loaded_at = set(), {}  # --pageout: the window's own pages stored to; loaded (not stored) -> when
    load_row = {}  # --pageout: page -> (step, index in its step's rows) of the row of its latest fault
    for s in range(training_steps + 1):
        rows, touched = [], set()
        for j, r in enumerate(by_step[s]):
            if r["event"] == "referenced":
                # a reading is a run of referenced rows; its loads go where it was taken, counted against the
                # pages first touched since the step's previous reading
                if j + 1 < len(by_step[s]) and by_step[s][j + 1]["event"] == "referenced":
                    continue  # the run's last row loads for the whole run
                run = []
                for q in range(j, -1, -1):
                    if by_step[s][q]["event"] != "referenced":
                        break
                    run.insert(0, by_step[s][q])
                if s == 0 and startup_gaps:
                    need = startup_gaps.pop(0)
                    rows += [(unrec_first + i, True, 0, unrec_region) for i in range(unrec_made, max(need, unrec_made))]
                    unrec_made = max(need, unrec_made)
                for rr in run:
                    if is_model((rr["pid"], rr["address"] // P), rr):
                        continue
                    if pageout:
                        span = set(_pages_of(rr["address"], rr["length"]))
                        n_stored = len([k for k in stored if k[0] == rr["pid"] and k[1] in span])
                        cands = sorted((k for k in loaded_at if k[0] == rr["pid"] and k[1] in span),
                                       key=lambda k: -loaded_at[k])
                        take = min(rr.get("dirty", 0) // P - n_stored, len(cands))
                        picked = cands[:max(take, 0)]
                        # the ones loaded in this step: inserted after their load, the latest first so that the
                        # earlier places do not move; the rest at the reading
                        for k in sorted((k for k in picked if load_row[k][0] == s), key=lambda k: -load_row[k][1]):
                            rows.insert(load_row[k][1] + 1, (trace_page[k][0], True, 0, trace_page[k][1]))
                        rows += [(trace_page[k][0], True, 0, trace_page[k][1]) for k in picked if load_row[k][0] != s]
                        continue
                    inside = [k for k in alive if k[0] == rr["pid"] and k in trace_page
                              and k[1] in _pages_of(rr["address"], rr["length"])]
                    want = rr["referenced"] // P - len([k for k in inside if k in touched])
                    rest = sorted((k for k in inside if k not in touched), key=lambda k: -stamp[k])
                    rows += [(trace_page[k][0], False, 0, trace_page[k][1]) for k in rest[:max(want, 0)]]
                touched = set()
                stored, loaded_at = set(), {}
            elif r["event"] == "fault":
                key = (r["pid"], r["address"] // P)
                if is_model(key, r):
                    if model_page[key] is not None and key not in alive:
                        alive.add(key)
                        rows.append((model_page[key][0], r["write"], 0, model_page[key][1]))
                    continue
                clock += 1
                if pageout:
                    if r["write"]:
                        stored.add(key)
                        loaded_at.pop(key, None)
                    elif key not in stored:
                        loaded_at[key] = clock
                load_row[key] = (s, len(rows))  # the row this fault adds (read only for a load)
                if key in alive:
                    if pageout:  # used again after a page-out
                        rows.append((trace_page[key][0], r["write"], 0, trace_page[key][1]))
                    continue  # no first touch
                alive.add(key)
                touched.add(key)
                stamp[key] = clock
                rows.append((trace_page[key][0], r["write"], 0, trace_page[key][1]))
            elif r["event"] == "munmap":
                for p in _pages_of(r["address"], r["length"]):
                    key = (r["pid"], p)
                    stored.discard(key)
                    loaded_at.pop(key, None)
                    if key in alive:
                        alive.discard(key)
                        touched.discard(key)
                        rows.append((trace_page[key][0], False, 2, trace_page[key][1]))
            elif r["event"] == "mmap":
                for p in _pages_of(r["address"], r["length"]):
                    if (r["pid"], p) in trace_page and not is_model((r["pid"], p), r):
                        rows.append((trace_page[(r["pid"], p)][0], False, 1, trace_page[(r["pid"], p)][1]))
        rec_rows.append(rows)
    # 5. the trace: step 0, start-up stores not written yet, then each training step's recorded and model rows
    written0 = {p for p, _, e, _ in rec_rows[0] if e == 0}
    out = [(0, *row) for row in rec_rows[0]]
    region_of = lambda page: max(i for i, r in enumerate(regions) if r["first_page"] <= page)  # noqa: E731
    out += [(0, p, True, 0, region_of(p)) for p in startup if p not in written0]
    half = math.ceil(training_steps / 2)
    held = set()  # runtime pages holding memory, along the trace
    first_runtime = sum(r["pages"] for r in regions)

    def replay(t, rows, repeat):
        kept = []
        for p, w, e, g in rows:
            if p >= first_runtime:
                if e == 1 and repeat and p in held:
                    continue  # a repeated step does not allocate again what it kept
                (held.add if e == 0 else held.discard)(p)
            kept.append((t, p, w, e, g))
        return kept

    out = replay(0, rec_rows[0], False) + out[len(rec_rows[0]):]
    for t in range(1, steps + 1):
        r = t if t <= training_steps else training_steps - half + 1 + (t - training_steps - 1) % half
        out += replay(t, rec_rows[r], t > training_steps)
        out += [(t, p, w, 0, g) for st, p, w, g in model_rows if st + 1 == t and regions[g]["kind"] != "scratch"]
    return out
