"""generate -> emulate -> ssd -> report on the ``tiny`` preset, with swaptrace's public names only (docs/api.md).

Run it with swaptrace installed (``make setup``)::

    python docs/examples/api_chain.py            # into a new temporary folder
    python docs/examples/api_chain.py OUT_DIR    # into OUT_DIR (created if missing)

It writes the files ``swaptrace run`` would (``access.parquet``, ``swapio.parquet``, ``ssd.parquet``), so
:func:`swaptrace.build_report` finds each of them, and prints the report's path last. A few seconds (the
first run of a checkout compiles the numba kernels first, a minute or two).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import swaptrace


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="swaptrace-api-"))
    folder.mkdir(parents=True, exist_ok=True)

    # generate: 10 training steps of the tiny preset (26 Kaggle-shaped tables, ~43 MiB) -> an access trace
    spec = swaptrace.load_spec("tiny")
    access = swaptrace.generate_trace(spec, folder / "access.parquet", steps=10, seed=0, force=True)
    trace = swaptrace.open_trace(access, "access")
    print(f"generate: {trace.num_rows:,} page accesses over {trace.meta['footprint_bytes'] / 2**20:.0f} MiB")

    # emulate: Linux's swap path with half the footprint in DRAM -> the swap I/O stream
    emu = swaptrace.emulate_trace(access, folder / "swapio.parquet", memory_fraction=0.5, force=True)
    print(f"emulate: {emu.pages_in:,} pages in, {emu.pages_out:,} pages out "
          f"({emu.memory_pages * 4096 / 2**20:.0f} MiB of memory)")

    # ssd: the stream replayed on the SSD model (a 4 GiB drive of the nvme-tlc preset) -> a timeline
    drive = swaptrace.load_device("nvme-tlc", capacity_bytes=4 << 30)
    ssd = swaptrace.replay(emu.path, drive, out=folder / "ssd.parquet", force=True)
    print(f"ssd: write amplification {ssd.waf:.2f}, {ssd.throughput_mb_s:.0f} MB/s")

    # report: every figure the folder's files allow, and report.md
    report = swaptrace.build_report(folder)
    print(f"report: {len(report.figures)} figures")
    print(report.path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
