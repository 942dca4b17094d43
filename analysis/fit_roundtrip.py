"""The SSD fit's round trip (issue 31): simulate a lab run on known devices, fit it, predict it back.

Known devices: the shipped presets (resized to the smallest capacity from 1 GiB they accept) and
held-out devices drawn with seeds 1..N from ``swaptrace.fio.roundtrip.HELD_OUT_RANGES``. For each,
the worst relative bandwidth error over the lab jobs and the parameters found beside the true ones.

    PYTHONPATH=. python analysis/fit_roundtrip.py --held-out 6 [--no-presets]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from swaptrace.fio import roundtrip as R


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--held-out", type=int, default=6, help="number of random held-out devices (seeds 1..N)")
    ap.add_argument("--no-presets", action="store_true", help="skip the shipped presets (slow: GiB-sized)")
    args = ap.parse_args()
    devices = [] if args.no_presets else [R.preset_device(n) for n in R.preset_names()]
    devices += [R.held_out_device(s) for s in range(1, args.held_out + 1)]
    print("| device | max error | worst job | ch x dies (true -> fit) | tR us | tPROG us | eff. OP | ok |")
    print("|---|---:|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for cfg in devices:
            t0 = time.perf_counter()
            r = R.round_trip(cfg, work)
            k, f = r["known"], r["fitted"]
            worst = max(r["errors"], key=lambda j: abs(r["errors"][j]))
            print(f"| {r['device']} | {r['max_error']:.1%} | {worst} | {k['channels']}x{k['dies_per_channel']} -> "
                  f"{f['channels']}x{f['dies_per_channel']} | {k['read_us']:.0f} -> {f['read_us']:.0f} | "
                  f"{k['program_us']:.0f} -> {f['program_us']:.0f} | {k['effective_op']:.1%} -> "
                  f"{f['effective_op']:.1%} | {'yes' if r['ok'] else 'NO'} ({time.perf_counter() - t0:.0f} s) |",
                  flush=True)


if __name__ == "__main__":
    main()
