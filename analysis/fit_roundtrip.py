"""The SSD fit's round trip (issue 31): simulate a lab run on known devices, fit it, predict it back.

Known devices: the shipped presets (reduced to 256 MiB, ``roundtrip.preset_device``) and
held-out devices drawn with seeds 1..N from ``swaptrace.ssd.fit.roundtrip.HELD_OUT_RANGES``. For each,
the worst relative bandwidth error over the lab jobs and the parameters found beside the true ones.

    PYTHONPATH=. python analysis/fit_roundtrip.py --held-out 8 [--no-presets] [--seeds 1 2 ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from swaptrace import ConfigError
from swaptrace.ssd.fit import roundtrip as R


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--held-out", type=int, default=6, help="number of random held-out devices (seeds 1..N)")
    ap.add_argument("--no-presets", action="store_true", help="skip the shipped presets")
    ap.add_argument("--seeds", type=int, nargs="*", help="held-out seeds (default 1..N)")
    args = ap.parse_args()
    devices = [] if args.no_presets else [R.preset_device(n) for n in R.preset_names()]
    devices += [R.held_out_device(s) for s in (args.seeds if args.seeds is not None else range(1, args.held_out + 1))]
    print("| device | max error | worst job | ch x dies | program unit KiB | tR us | channel MB/s | link MB/s | "
          "tPROG us | eff. OP | ok |")
    print("|---|---:|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for cfg in devices:
            t0 = time.perf_counter()
            try:
                r = R.round_trip(cfg, work)
            except ConfigError as exc:  # e.g. a spare too thin for GC at the reduced size
                print(f"| {cfg.name} | - | not simulable at this size: {exc} |||||||||", flush=True)
                continue
            k, f = r["known"], r["fitted"]
            worst = max(r["errors"], key=lambda j: abs(r["errors"][j]))
            print(f"| {r['device']} | {r['max_error']:.1%} | {worst} | {k['channels']}x{k['dies_per_channel']} -> "
                  f"{f['channels']}x{f['dies_per_channel']} | {k['program_unit'] >> 10} -> {f['page_bytes'] >> 10} | "
                  f"{k['read_us']:.0f} -> {f['read_us']:.0f} | {k['channel_mb_s']:.0f} -> {f['channel_mb_s']:.0f} | "
                  f"{k['host_mb_s']:.0f} -> {f['host_mb_s']:.0f} | {k['program_us']:.0f} -> {f['program_us']:.0f} | "
                  f"{k['effective_op']:.1%} -> {f['effective_op']:.1%}{r['spare_bound']} | "
                  f"{'yes' if r['ok'] else 'NO'} ({time.perf_counter() - t0:.0f} s) |", flush=True)


if __name__ == "__main__":
    main()
