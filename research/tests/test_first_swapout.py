"""research/first_swapout.py: write sizes of the first swap-out and after it, kernel against emulator."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from research_scripts import load

fs = load("first_swapout")


def _stream(path, rows):
    """A minimal swapio-like file: (step, op, first slot, pages) per request."""
    pq.write_table(pa.table({
        "step": pa.array([r[0] for r in rows], pa.uint32()),
        "op": pa.array([r[1] for r in rows]).dictionary_encode(),
        "offset": pa.array([r[2] * 4096 for r in rows], pa.uint64()),
        "length": pa.array([r[3] * 4096 for r in rows], pa.uint32()),
    }), path)
    return str(path)


def test_ks_hand_worked():
    # CDFs of {1, 2} and {2, 3}: at 1: 0.5 vs 0, at 2: 1 vs 0.5, at 3: 1 vs 1 -> 0.5
    assert fs.ks(np.array([1, 2]), np.array([2, 3])) == 0.5
    assert fs.ks(np.array([4, 4]), np.array([4])) == 0.0
    assert math.isnan(fs.ks(np.array([]), np.array([1])))


def test_parts_and_reuse(tmp_path):
    # kernel: step 2 writes 128 + 128 fresh pages, step 3 rewrites slot 1 and slot 130 (1 page each) and
    # writes 2 fresh pages; a read is ignored
    k = fs.read_writes(_stream(tmp_path / "k.parquet", [
        (2, "write", 1, 128), (2, "write", 129, 128), (3, "read", 1, 1), (3, "write", 1, 1),
        (3, "write", 130, 1), (3, "write", 257, 2)]))
    # emulator: step 2 writes 4 pages then fills 2 holes one page at a time (slots 2 and 3 already written)
    e = fs.read_writes(_stream(tmp_path / "e.parquet", [
        (2, "write", 1, 4), (2, "write", 2, 1), (2, "write", 3, 1), (3, "write", 5, 1)]))
    assert fs.reused_single(k) == 2 and fs.reused_single(e) == 2
    rows = {r["part"]: r for r in fs.compare(k, e)}
    assert rows["step 2"]["n_k"] == 2 and rows["step 2"]["mean_k"] == 512.0
    assert rows["step 2"]["mean_e"] == (16 + 4 + 4) / 3
    assert rows["rest"]["n_k"] == 3 and rows["rest"]["mean_k"] == (4 + 4 + 8) / 3
    assert rows["all"]["n_k"] == 5 and rows["all"]["n_e"] == 4
    assert abs(rows["all"]["err"] - ((28 / 4) / (1040 / 5) - 1)) < 1e-12
    assert rows["step 2"]["ks"] == 1.0  # every emulator request is smaller than every kernel one


def test_cli_refuses_a_bad_pair(capsys):
    assert fs.main(["only-one-file.parquet"]) == 2
    assert "KERNEL=EMULATOR" in capsys.readouterr().err
