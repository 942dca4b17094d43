"""Streams of one checkout against another's: every policy x readahead x writeback rule on two small traces.

Run it in each checkout (``PYTHONPATH=CHECKOUT python tools/stream_identity.py OUT.json``), then compare
the two JSON files with ``--against OLD.json``: each case's rows (hashed column by column), summary (but
``memory_pages``, which 0.7 corrected for ensembles), write cost and per-step faults must be equal. 0.7.0
against 0.6.0 (1e3bb2c): 88 of 88 cases identical. Cases without ``ensemble`` in their options use the
command's default (the profile's ensemble where it applies), as ``swaptrace emulate`` does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

FIELDS = ("rows", "hash", "summary", "write_cost", "step_faults")


def cases() -> list[tuple[str, dict]]:
    out = []
    for preset in ("tiny", "demo"):
        for frac in (0.15, 0.5):
            base = {"memory_fraction": frac}
            for pol in ("lru", "clock"):
                out += [(preset, {**base, "policy": pol, "readahead": ra}) for ra in ("vma", "cluster", "none")]
            for ra in ("vma", "cluster", "none"):
                out += [(preset, {**base, "policy": "linux", "readahead": ra}),
                        (preset, {**base, "policy": "linux", "readahead": ra, "ensemble": False})]
            out += [(preset, {**base, "policy": "linux", "writeback_completion": wb})
                    for wb in ("lag", "level", "next-level", "call")]
            out += [(preset, {**base, "policy": "linux", **kw}) for kw in (
                {"write_cost": 6}, {"ensemble": False, "fill_write_credit": 0}, {"writeback_lag": 100},
                {"scan_priorities": False}, {"initial_state": "swapped", "ensemble": False},
                {"stats_flush_steps": 0, "zero_page": False, "ensemble": False})]
    return out


def run(folder: Path) -> dict:
    import pyarrow.parquet as pq

    from swaptrace import emulate_trace, generate_trace

    traces = {}
    for preset, steps in (("tiny", 4), ("demo", 3)):
        traces[preset] = folder / f"{preset}-{steps}.access.parquet"
        if not traces[preset].exists():
            generate_trace(preset, traces[preset], steps=steps, seed=1)
    found = {}
    for preset, kw in cases():
        call = dict(kw) if "ensemble" in kw or kw.get("policy") != "linux" else {**kw, "ensemble": None}
        emulate_trace(traces[preset], folder / "o.parquet", force=True, **call)
        table = pq.read_table(folder / "o.parquet")
        h = hashlib.sha256()
        for c in ("t_us", "step", "op", "offset", "length", "cause"):
            h.update(str(table.column(c).to_pylist()).encode())
        meta = json.loads(pq.read_metadata(folder / "o.parquet").metadata[b"swaptrace"])
        summary = {k: v for k, v in meta["summary"].items() if k != "memory_pages"}
        found[preset + " " + json.dumps(kw, sort_keys=True)] = {
            "rows": table.num_rows, "hash": h.hexdigest(), "summary": summary,
            "write_cost": meta["params"].get("write_cost"), "step_faults": meta["step_faults"]}
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="JSON file to write this checkout's results to")
    ap.add_argument("--against", type=Path, help="another checkout's JSON: report the cases that differ")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        found = run(Path(tmp))
    args.out.write_text(json.dumps(found, indent=1, sort_keys=True))
    if args.against is None:
        print(f"{len(found)} cases written to {args.out}")
        return 0
    ref = json.loads(args.against.read_text())
    differ = [k for k in ref if k not in found or any(ref[k][f] != found[k][f] for f in FIELDS)]
    print(f"{len(ref) - len(differ)} of {len(ref)} cases identical")
    for k in differ:
        print(f"  differs: {k}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
