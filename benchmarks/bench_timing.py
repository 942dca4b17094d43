"""Benchmark of the time model: ``swaptrace time`` on the demo stream, after compilation.

Run: ``python benchmarks/bench_timing.py [--quick]``. Generates and emulates ``demo`` (200 steps, half
the footprint; cached under ``benchmarks/results/timing``), then times, after one warm-up call that
compiles the kernel (medians of 3):

1. the model alone (:func:`swaptrace.timing.model.simulate` on the prepared requests), numba kernel vs the
   naive Python twin (``tests/naive_timing.py``) on the first 20 000 requests;
2. ``swaptrace time STREAM --device nvme-tlc --step-compute-us 100000`` end to end in this process
   (reading the stream, the CPU micro-benchmark, the model, the per-step Parquet table) -- target
   under 1 s;
3. the same with ``--compute mlp`` (which replays the trace with no memory limit: seconds, it is a
   measurement, not the model).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import naive_timing  # noqa: E402
from _measure import median_time  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from swaptrace import emulate_trace, generate_trace  # noqa: E402
from swaptrace.cli import cli  # noqa: E402
from swaptrace.timing import model as timing  # noqa: E402

WORK = ROOT / "benchmarks" / "results" / "timing"


def _median(fn, repeats: int = 3) -> float:
    return median_time(fn, repeats)[0]




def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="50 steps instead of 200")
    args = ap.parse_args(argv)
    steps = 50 if args.quick else 200
    WORK.mkdir(parents=True, exist_ok=True)
    trace = WORK / f"demo-{steps}.access.parquet"
    stream = WORK / f"demo-{steps}.swapio.parquet"
    if not trace.exists():
        generate_trace("demo", trace, steps=steps, seed=0)
    if not stream.exists():
        emulate_trace(trace, stream, memory_fraction=0.5)
    req = timing.read_stream(stream)
    dev = timing.load_device_timing("nvme-tlc")
    comp = timing.given_compute(req.nsteps, 100_000.0)
    cpu = timing.CpuCosts(1.0, 0.3, 0.0)
    timing.simulate(req, dev, comp, cpu)  # compile (or load from numba's cache)
    t_model = _median(lambda: timing.simulate(req, dev, comp, cpu))
    n = min(20_000, req.step.size)
    sub = [dict(step=int(req.step[i]), frac=float(req.frac[i]), op=int(req.op[i]), nbytes=float(req.nbytes[i]),
                waits=bool(req.waits[i]), burst=int(req.burst[i])) for i in range(n)]
    last = sub[-1]["step"] + 1 if sub else 0
    sizes, depths, read, write = (list(a) for a in dev.arrays())
    t0 = time.perf_counter()
    naive_timing.simulate(sub, last, comp.access_us[:last], comp.dense_us[:last], sizes, depths,
                          [list(r) for r in read], [list(w) for w in write], 1.0, 0.3, 0.0, 4096)
    t_naive = time.perf_counter() - t0
    sub_req = timing.StreamRequests(req.step[:n], req.frac[:n], req.op[:n], req.nbytes[:n], req.waits[:n],
                                    req.burst[:n], last, 0, 4096, "bench")
    sub_comp = timing.ComputeTime(comp.access_us[:last], comp.dense_us[:last], "bench")
    t_kernel_sub = _median(lambda: timing.simulate(sub_req, dev, sub_comp, cpu))
    runner = CliRunner()
    out = WORK / "steps.parquet"

    def cli_run(*extra):
        r = runner.invoke(cli, ["time", str(stream), "--device", "nvme-tlc", "-o", str(out), "--force", *extra])
        assert r.exit_code == 0, r.output

    cli_run("--step-compute-us", "100000")
    t_cli = _median(lambda: cli_run("--step-compute-us", "100000"))
    t_mlp = _median(lambda: cli_run("--compute", "mlp"), repeats=1)
    print(f"demo, {steps} steps, {req.step.size:,} requests ({int(req.waits.sum()):,} waited reads)\n")
    print("| what | time |")
    print("|---|---:|")
    print(f"| model kernel, whole stream | {t_model * 1e3:.1f} ms |")
    print(f"| model kernel, first {n:,} requests | {t_kernel_sub * 1e3:.2f} ms |")
    print(f"| naive Python twin, first {n:,} requests | {t_naive * 1e3:.0f} ms ({t_naive / max(t_kernel_sub, 1e-9):.0f}x) |")
    print(f"| `swaptrace time --step-compute-us 100000` end to end | {t_cli:.2f} s (target < 1 s) |")
    print(f"| `swaptrace time --compute mlp` end to end (measures {steps} steps) | {t_mlp:.1f} s |")
    return 0 if np.isfinite(t_cli) else 1


if __name__ == "__main__":
    sys.exit(main())
