"""The model-vs-fio stage on perturbed lab measurements: does the fitted device always replay the stream?

A ``swaptrace run`` folder with fio holds one lab run; this scales its bandwidths at random (reads by one
factor 2^U(-2,2) for the whole curve, the two write jobs each by 2^U(-4,4), every job by a further
2^U(-0.7,0.7)), fits a device to each perturbed run as the pipeline does (quick fit), runs the lab jobs
on it and replays the folder's swap stream on it both ways. Prints one line per trial: ``ok`` with the
fitted geometry and effective OP, or ``FAIL at`` the step and the error.

Usage (repo root): PYTHONPATH=. python research/fit_perturbation.py RUN_FOLDER [SEED] [TRIALS]
e.g. after ``swaptrace run --preset tiny --steps 20 -o /tmp/tiny --fio-target /tmp/t.dat --fio-size 32MiB
--fio-runtime 1 --ssd-capacity 8GiB``. Before ``with_gc_room`` (:mod:`swaptrace.ssd.fit.writes`) seed 2
failed 2 of 40 trials at the lab jobs ("GC cannot reclaim space").
"""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

from swaptrace import SwaptraceError, replay
from swaptrace.fio import results as resmod
from swaptrace.ssd.fit.device import fit_device, predict_lab_jobs
from swaptrace.ssd.fit.measurements import measurements_from_rows


def main(folder: Path, seed: int, trials: int) -> int:
    rows, meta = resmod.read_results(folder / "fio-run")
    meas0 = measurements_from_rows(rows, meta)
    rng = random.Random(seed)
    failed = 0
    for trial in range(trials):
        g_read = 2 ** rng.uniform(-2, 2)
        bw = {j: v * (g_read if j.kind == "read" else 2 ** rng.uniform(-4, 4)) * 2 ** rng.uniform(-0.7, 0.7)
              for j, v in meas0.bw_mb_s.items()}
        where = "fit"
        try:
            cfg = fit_device(dataclasses.replace(meas0, bw_mb_s=bw), quick=True).config
            where = "lab jobs"
            predict_lab_jobs(cfg, bw)
            for timed in (False, True):
                where = f"replay (timestamps {timed})"
                replay(folder / "swapio.parquet", cfg, iodepth=1, use_timestamps=timed, precondition="seq",
                       fit="modulo")
            print(trial, "ok", cfg.channels, "x", cfg.dies_per_channel, "dies,", cfg.blocks_per_plane, "blocks/plane,",
                  f"effective OP {cfg.effective_op:.3f}", flush=True)
        except SwaptraceError as e:
            failed += 1
            print(trial, "FAIL at", where, e, flush=True)
    print(f"{trials - failed} of {trials} fitted and replayed")
    return 0


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.exit(main(Path(a[0]), int(a[1]) if len(a) > 1 else 2, int(a[2]) if len(a) > 2 else 40))
