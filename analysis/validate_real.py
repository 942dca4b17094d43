"""How close to real training: ``capture -- swaptrace train`` against ``generate --runtime`` + ``emulate``.

For every model shape of :data:`SHAPES` (``analysis/real_specs``) and every whole-process limit of
:data:`LIMITS` (fractions of the shape's unlimited peak, from "framework memory squeezed" to "tables
squeezed"), a real PyTorch training run is captured under the kernel (``RUNS`` times); the same model is
then generated as a whole process (``generate --runtime``) and emulated at the same limit, and the two
swap streams are compared per phase (start-up, training): pages in and out, requests, mean request sizes,
write-size KS distance.

Fit on some, score on others: the runtime profile (``swaptrace/profiles/runtime/pytorch-cpu.toml``) is
derived from the unlimited runs of the :data:`FIT` shapes only; the other shapes are scored with it
(``shipped``) and with a profile derived from their own unlimited run (``own``, what a user gets from
``swaptrace runtime-profile`` of a short capture).

Captures run on a quiet machine (``capture --wait-quiet 0.5``: each run starts once the 1-min load average is
at most 0.5, or after ``--quiet-timeout``); a point whose two runs' training step walls differ by more than
:data:`NOISY` is marked ``noisy`` in the table (and its run that started at the higher load is captured once
more with ``capture --repeat-noisy``); the table shows each run's load (kernel.load, docs/capture.md).

Usage (root; captures are cached under ``traces/real-validation``)::

    sudo .venv/bin/python analysis/validate_real.py capture [--runs 2] [--steps 15] [--repeat-noisy]
    .venv/bin/python analysis/validate_real.py profile     # derive the runtime profile from the FIT shapes
    .venv/bin/python analysis/validate_real.py predict -o research/results/real-training
    .venv/bin/python analysis/validate_real.py score DIR... [--render]   # the checks over stored predictions
    .venv/bin/python analysis/validate_real.py variant --take K -- --write-cost 4   # other emulate options
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "traces" / "real-validation"
SPECS = ROOT / "analysis" / "real_specs"
PY = str(ROOT / ".venv" / "bin" / "python")
SWAPTRACE = str(ROOT / ".venv" / "bin" / "swaptrace")
PROFILE_OUT = ROOT / "swaptrace" / "profiles" / "runtime" / "pytorch-cpu.toml"
#: this disk's fio profile and host costs, measured as root by analysis/validate_timing.py (0.7.1, another boot)
HOST = ROOT / "research" / "results" / "timing" / "fault_overhead.json"
#: the costs a slowdown is priced with must be measured on the boot its captures were taken on (they do not
#: repeat across boots: research/results/real-training/fresh-boot/README.md): the study's captures' boot's
#: fio profile (``--device``) and host costs (``--costs``, ``swaptrace time --measure-fault-overhead
#: --save-costs``: fault, reclaim and write costs and the fault cost's spread; None: HOST's)
FRESH_BOOT = ROOT / "research" / "results" / "real-training" / "fresh-boot"
DISK = FRESH_BOOT / "disk-measured-12-43.toml"
COSTS: Path | None = FRESH_BOOT / "host-costs-measured-12-16.toml"
#: ``measure``: CPUs kept busy beside fio (the study's programs run two threads on this 2-CPU machine), and
#: the host-cost micro-benchmark's runs (their median is the cost, their range carried into the prediction)
BUSY_CPUS = 2
COST_RUNS = 5
#: ``measure`` starts each phase at a 1-min load at most this (the captures' own rule, ``--wait-quiet 0.5``),
#: waiting at most this long (s) and then going on at the load there is, which it prints
QUIET_LOAD = 0.5
QUIET_WAIT_S = 300
#: each point is also emulated with this % less and more memory (``emulate --sensitivity``): how far the answer
#: moves there, beside the kernel's (a limit near the knee of the miss-ratio curve moves it most)
SENSITIVITY_PCT = 1
#: emulate with the swap device size each capture had (``params.swap_bytes``: like for like) instead of emulate's
#: default, the trace's footprint (``--footprint-swap``), whose swap is more than half full at tight limits and so
#: frees every read-back page's slot (vm_swap_full), which the captures' 2.25 GiB never did
CAPTURE_SWAP = True

#: shape name -> spec file (analysis/real_specs)
SHAPES = {
    "kaggle-tenth": "kaggle-tenth-d16-sgd-zipf.toml",
    "dlrm-random": "dlrm-random-d64-adagrad-uniform.toml",
    "rm3-eighth": "rm3-eighth-d32-rowwise-zipf.toml",
    "mlperf-multihot": "mlperf-multihot-d128-adagrad-zipf.toml",
}
#: the second framework, held out: ``SHAPE@torchrec`` trains SHAPE's spec with ``--framework torchrec``
#: (TorchRec's EmbeddingBagCollection on FBGEMM's CPU kernels; never used to choose anything)
FRAMEWORKS = ("pytorch", "torchrec")
#: the shapes whose unlimited runs the shipped runtime profile is derived from; the others are held out
FIT = ("kaggle-tenth", "dlrm-random")
#: the emulator's write cost for a process trace: chosen in 0.8 on the FIT shapes against their captures
#: (the shipped profile's ``write_cost``), used unchanged for traces made from a recording
WRITE_COST = 1
#: whole-process limits as fractions of the shape's unlimited peak (``capture --memory-fraction``)
LIMITS = (0.85, 0.65, 0.5, 0.4)
RUNS = 2
STEPS = 15
#: captures wait (``capture --wait-quiet``) for a 1-min load average at most this before each run
WAIT_QUIET = 0.5
#: a point's two runs are noisy when their training step walls differ by more than this share
NOISY = 0.10
SEED = 0
THREADS = 2


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    print("+", " ".join(args), flush=True)
    return subprocess.run(args, check=check, text=True, capture_output=True)


def capture_path(shape: str, frac: float, run: int) -> Path:
    return WORK / f"{shape}-{frac:.2f}-r{run}.kernel.swapio.parquet"


def spec_of(shape: str) -> Path:
    """The spec file of ``shape`` (``SHAPE`` or ``SHAPE@FRAMEWORK``)."""
    return SPECS / SHAPES[shape.split("@")[0]]


def warm(shape: str) -> None:
    """One unlimited step of the shape's program, before a recording or a repeated capture: its files in the page
    cache (this machine's DAMON scheme pages out idle page cache) and its numba kernels compiled -- a cold first
    run compiled them inside a recording (take 92's first: 72 k more 16 KiB mappings, start-up 55 s against 18 s).
    Its exit status is not checked: TorchRec's program now and then aborts at exit ("terminate called without an
    active exception"), warm all the same."""
    subprocess.run(train_argv(shape, 1), check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def repeat_capture(shape: str, frac: float, run: int, out: Path) -> None:
    """The study's capture of ``shape`` at ``frac`` again, at run ``run``'s limit (no unlimited baseline), into
    ``out``; for the research tools that watch a capture from beside it (they :func:`warm` the program first,
    before they start watching)."""
    meta = _meta(capture_path(shape, frac, run))
    subprocess.run([SWAPTRACE, "capture", "--memory", str(int(meta["memory_bytes"])), "-o", str(out), "--json",
                    "--force", "--no-baseline", "--wait-quiet", str(WAIT_QUIET), "--", *train_argv(shape, STEPS)],
                   check=True, stdout=subprocess.DEVNULL)


def train_argv(shape: str, steps: int) -> list[str]:
    framework = shape.split("@")[1] if "@" in shape else "pytorch"
    if framework not in FRAMEWORKS:
        raise SystemExit(f"{shape}: unknown framework {framework!r} (one of {', '.join(FRAMEWORKS)})")
    return [SWAPTRACE, "train", "--spec", str(spec_of(shape)), "--steps", str(steps), "--seed", str(SEED),
            "--threads", str(THREADS), "--quiet", "--framework", framework]


#: which recording of each shape ``record`` makes and ``predict`` uses (``--take``): 0 the first, K the K-th
#: more, so that two recordings' predictions of the same captures show what one recording's own run carries
TAKE = 0


#: ``record --pageout``: the recording's swap area, more than twice any shape's memory (pageout's vm_swap_full)
PAGEOUT_SWAP = "4GiB"
#: ``record --unmarked``: the line ``swaptrace train --step-lines`` prints after each step (as DLRM's own script)
STEP_LINE = r"^Finished training it \d+/\d+"
#: the variable through which a program finds the marker file (swaptrace.markers.MARKER_ENV)
MARKER_ENV = "SWAPTRACE_MARKER"


def recording_path(shape: str) -> Path:
    return WORK / (f"{shape}.recording.parquet" if TAKE == 0 else f"{shape}.take{TAKE}.recording.parquet")


def do_record(args) -> None:
    """One unlimited recording per shape (``capture --record``): all a prediction from a recording needs."""
    WORK.mkdir(parents=True, exist_ok=True)
    for shape in args.shapes or list(SHAPES):
        out = recording_path(shape)
        if out.exists():
            continue
        pageout = ["--pageout", "--swap-size", PAGEOUT_SWAP] if args.pageout else []
        argv = train_argv(shape, args.steps)
        warm(shape)
        if args.unmarked:  # as an unmodified program: no marks, its steps from the lines it prints
            argv = ["env", "-u", MARKER_ENV, *argv, "--step-lines"]
            pageout += ["--step-line", STEP_LINE]
        r = sh(SWAPTRACE, "capture", "--record", *pageout, "-o", str(out), "--json", "--force", "--", *argv,
               check=False)
        if r.returncode != 0:
            print(f"recording failed: {r.stderr.strip()}", flush=True)


def _capture_once(out: Path, limit: list[str], argv: list[str], baseline: bool) -> None:
    """One capture, waiting while another capture holds the machine-wide lock."""
    cmd = [SWAPTRACE, "capture", *limit, "-o", str(out), "--json", "--force", "--wait-quiet", str(WAIT_QUIET)]
    if not baseline:
        cmd.append("--no-baseline")
    for _ in range(360):
        r = sh(*cmd, "--", *argv, check=False)
        if r.returncode == 0:
            out.with_suffix(".json").write_text(r.stdout)
            return
        if "another capture is running" not in r.stderr:
            print(f"capture failed: {r.stderr.strip()}", flush=True)
            return
        time.sleep(5)
    raise SystemExit("gave up waiting for the capture lock")


def unlimited_peak(shape: str, run: int) -> int:
    """The unlimited run's peak group usage (bytes), from the shape's first capture of this run."""
    return int(_meta(capture_path(shape, LIMITS[0], run))["kernel"]["unlimited"]["peak_bytes"])


def _capture_point(shape: str, frac: float, run: int, argv: list[str]) -> None:
    """One run of a point: the loosest limit with the unlimited run (``--memory-fraction``), the others as the
    same fraction of that run's peak (``--memory``, no second unlimited run)."""
    if frac == LIMITS[0]:
        _capture_once(capture_path(shape, frac, run), ["--memory-fraction", str(frac)], argv, baseline=True)
    else:
        peak = unlimited_peak(shape, run)
        _capture_once(capture_path(shape, frac, run), ["--memory", str(int(frac * peak))], argv, baseline=False)


def do_capture(args) -> None:
    """Every point's runs (:func:`_capture_point`); then, with ``--repeat-noisy``, a noisy point's run that
    started at the higher load once more."""
    WORK.mkdir(parents=True, exist_ok=True)
    shapes = args.shapes or list(SHAPES)
    for run in range(args.runs):
        for shape in shapes:
            argv = train_argv(shape, args.steps)
            for frac in LIMITS:
                if not capture_path(shape, LIMITS[0], run).exists() and frac != LIMITS[0]:
                    break
                if not capture_path(shape, frac, run).exists():
                    _capture_point(shape, frac, run, argv)
    for shape in shapes:
        for frac in LIMITS:
            paths = [capture_path(shape, frac, run) for run in range(args.runs)]
            spread = run_spread([_meta(p) for p in paths if p.exists()])
            if spread is None or spread <= NOISY:
                continue
            loads = [run_load(_meta(p)).get("load_before") or 0.0 for p in paths]
            worst = int(np.argmax(loads))
            print(f"noisy: {shape} {frac:.2f}: runs differ by {spread:.0%}; loads {loads}", flush=True)
            if args.repeat_noisy:
                _capture_point(shape, frac, worst, train_argv(shape, args.steps))


def training_wall_us(meta: dict) -> float:
    """The limited run's training step walls summed (µs), the last step (the program's exit) left out."""
    return float(np.sum(meta["kernel"]["limited"]["step_wall_us"][:-1]))


def run_spread(metas: list[dict]) -> float | None:
    """How far a point's runs' training walls differ: (largest - smallest) / smallest; None under two runs."""
    walls = [training_wall_us(m) for m in metas]
    if len(walls) < 2 or min(walls) <= 0:
        return None
    return (max(walls) - min(walls)) / min(walls)


def run_load(meta: dict) -> dict:
    """The limited run's load record (``kernel.load.limited``: load before/after, other processes' CPU)."""
    return (meta["kernel"].get("load") or {}).get("limited") or {}


def _meta(path: Path) -> dict:
    from swaptrace import open_trace
    return open_trace(path, kind="swapio").meta


#: where ``measure`` puts this boot's device profiles and host costs (``make validate-real`` prices with them)
MEASURED = ROOT / "research" / "results" / "real-training" / "this-boot"


def do_measure(args) -> None:
    """This boot's prices for ``predict``, measured afresh (root; 4 min on this 2-CPU machine, plus any wait for quiet): the captures' swap
    device (a loop device over a file) by fio idle and with two CPUs kept busy (``validate_timing.py profile
    --loop [--busy-cpus 2]``: ``disk-loop.toml``, ``disk-loop-busy.toml`` and ``disk-loop-busy-reads.toml``,
    the one ``predict`` should be given: docs/timing.md "Busy CPUs"), then the host's fault and write costs
    against the idle profile (``swaptrace time --measure-fault-overhead``: ``host-costs-loop.toml``). A
    capture's boot is the boot to measure on: costs and latencies do not repeat across boots
    (research/results/real-training/boot-2/README.md)."""
    import shutil

    from swaptrace.capture.stalls import wait_quiet

    def quiet() -> float:
        """Each phase starts on a quiet machine (the burners of the busy phase lift the 1-min load for minutes);
        returns the load it started at."""
        return wait_quiet(QUIET_LOAD, QUIET_WAIT_S, say=lambda m: print(f"measure: {m}", flush=True))["load_start"]

    out = Path(args.results).resolve()
    out.mkdir(parents=True, exist_ok=True)
    timing = ROOT / "analysis" / "validate_timing.py"
    fio_work = ROOT / "traces" / "timing-validation"
    for suffix in ("-loop", "-loop-busy"):  # a fresh measurement, not an earlier run's results
        shutil.rmtree(fio_work / f"fio-run-{out.name}{suffix}", ignore_errors=True)
    for busy in ([], ["--busy-cpus", str(BUSY_CPUS)]):
        print(f"measure: the loop device's fio profile{' with busy CPUs' if busy else ''} (load {quiet():.2f})",
              flush=True)
        sh(PY, str(timing), "profile", "--loop", *busy, "--results", str(out))
    print(f"measure: the host's costs (load {quiet():.2f})", flush=True)
    sh(SWAPTRACE, "time", str(fio_work / "tiny-0.35.swapio.parquet"), "--device", str(out / "disk-loop.toml"),
       "--measure-fault-overhead", "--fault-overhead-runs", str(COST_RUNS), "--save-costs",
       str(out / "host-costs-loop.toml"), "--force")
    print(f"measure: {out}: disk-loop.toml, disk-loop-busy.toml, disk-loop-busy-reads.toml, host-costs-loop.toml "
          f"(predict --costs {out / 'host-costs-loop.toml'} --device {out / 'disk-loop-busy-reads.toml'})")


def do_profile(args) -> None:
    """Derive the shipped runtime profile: the mean of the FIT shapes' own profiles (their run-0 baselines)."""
    from swaptrace.workload.process import RuntimeProfile, to_toml
    own = [derive_own(shape, 0) for shape in FIT]
    fields = ("runtime_bytes", "active_bytes", "step_bytes", "file_bytes", "kernel_bytes")
    mean = {k: int(np.mean([getattr(p, k) for p in own])) for k in fields}
    mean["active_bytes"] = min(mean["active_bytes"], mean["runtime_bytes"])
    import torch  # only to record the version measured
    mean["write_cost"] = 1  # chosen on the FIT shapes' captures against the kernel profile's ensemble
    prof = RuntimeProfile(name="pytorch-cpu", measured_on=(
        f"torch {torch.__version__}, {THREADS} threads, swaptrace train of {', '.join(FIT)} ({STEPS} steps), "
        "capture -- CMD unlimited runs; mean of the two (analysis/validate_real.py profile)"), **mean)
    notes = {k: "per shape: " + ", ".join(f"{s} {getattr(p, k) >> 20} MiB" for s, p in zip(FIT, own, strict=True))
             for k in fields}
    notes["write_cost"] = (f"chosen on {', '.join(FIT)} at every limit against the ensemble (write costs 3-8), "
                           "which wrote up to 2x the pages the kernel wrote at start-up; held-out shapes scored after")
    PROFILE_OUT.parent.mkdir(parents=True, exist_ok=True)
    PROFILE_OUT.write_text(to_toml(prof, notes))
    print(PROFILE_OUT.read_text())


def derive_own(shape: str, run: int):
    from swaptrace import load_spec
    from swaptrace.capture.runtime_profile import derive
    path = capture_path(shape, LIMITS[0], run)
    meta = _meta(path)
    prof, _ = derive(meta["kernel"], load_spec(SPECS / SHAPES[shape]), steps=int(meta["steps"]) - 1, seed=SEED,
                     name=f"{shape}-own", measured_on=str(path.name))
    return prof


def phase_numbers(path: Path) -> dict:
    """Pages in/out, requests, mean sizes and write-size histogram: start-up (step 0), training, all."""
    import pyarrow.parquet as pq
    t = pq.read_table(path, columns=["step", "op", "length"])
    step = t["step"].to_numpy()
    op = np.asarray(t["op"].to_pylist(), dtype=object)
    length = t["length"].to_numpy().astype(np.int64)
    out = {}
    # the last step is left out of both: a captured program's last step also holds its exit (the interpreter
    # frees every object and so reads back what was swapped), which the trace does not model
    meta = _meta(path)
    last = int(meta.get("first_step", 0)) + int(meta["steps"]) - 1  # from the metadata: the rows may end earlier
    for phase, sel in (("startup", step == 0), ("training", (step > 0) & (step < last)), ("all", step < last)):
        r, w = sel & (op == "read"), sel & (op == "write")
        sizes, counts = np.unique(length[w], return_counts=True)
        out[phase] = {"pages_in": int(length[r].sum() // 4096), "pages_out": int(length[w].sum() // 4096),
                      "reads": int(r.sum()), "writes": int(w.sum()),
                      "read_kib": float(length[r].mean() / 1024) if r.any() else None,
                      "write_kib": float(length[w].mean() / 1024) if w.any() else None,
                      "write_hist": {int(s): int(c) for s, c in zip(sizes, counts, strict=True)}}
    return out


def _ks(a: dict, b: dict) -> float | None:
    from swaptrace.compare import ks_distance
    if not a or not b:
        return None
    return float(ks_distance({str(k): v for k, v in a.items()}, {str(k): v for k, v in b.items()}))


_GENERATED: set[Path] = set()


def trace_for(shape: str, profile: str) -> Path:
    """The access trace of ``shape`` generated with ``profile`` (``model-only``, a runtime profile or a
    recording), made anew the first time a run asks for it (a profile may have changed since)."""
    trace = WORK / f"{shape}-{Path(profile).stem}.access.parquet"
    if trace not in _GENERATED:
        _GENERATED.add(trace)
        runtime = [] if profile == "model-only" else ["--runtime", profile]
        sh(SWAPTRACE, "generate", "--spec", str(spec_of(shape)), "--steps", str(STEPS), "--seed", str(SEED),
           *runtime, "-o", str(trace), "--force")
    return trace


def emulate_at(trace: Path, cap: Path, emu: Path, options: list[str]) -> subprocess.CompletedProcess:
    """``emulate`` ``trace`` at capture ``cap``'s limit, with its swap device size (unless ``--footprint-swap``:
    emulate's default, the footprint) and ``options``, into ``emu``; not checked (the model alone may fit)."""
    meta = _meta(cap)
    swap = (["--swap-bytes", str(int(meta["params"]["swap_bytes"]))]
            if CAPTURE_SWAP and meta.get("params", {}).get("swap_bytes") else [])
    return sh(SWAPTRACE, "emulate", str(trace), "--memory", str(int(meta["memory_bytes"])), *options, *swap,
              "-o", str(emu), "--force", check=False)


def predict_point(shape: str, frac: float, profile: str) -> dict:
    """Generate the shape as a process with ``profile`` (``model-only``: the model alone; a runtime profile; or
    the shape's own recording, at the write cost of :data:`WRITE_COST`) and emulate it at each run's limit;
    numbers per phase."""
    trace = trace_for(shape, profile)
    write_cost = ["--write-cost", str(WRITE_COST)] if profile.endswith(".recording.parquet") else []
    rows = []
    for run in range(RUNS):
        cap = capture_path(shape, frac, run)
        if not cap.exists():
            continue
        meta = _meta(cap)
        emu = WORK / f"{shape}-{frac:.2f}-r{run}-{Path(profile).stem}.emu.swapio.parquet"
        r = emulate_at(trace, cap, emu, [*write_cost, "--sensitivity", str(SENSITIVITY_PCT)])
        if r.returncode != 0:  # the model alone fits in the limit: nothing is swapped
            print(r.stderr.strip(), flush=True)
            continue
        k, e = phase_numbers(cap), phase_numbers(emu)
        rows.append({"run": run, "limit_bytes": int(meta["memory_bytes"]), "kernel": k, "emulator": e,
                     "sensitivity": sensitivity_band(_meta(emu), e["all"]),
                     "zero_pages": zero_pages(meta, _meta(emu)),
                     "load": run_load(meta), "training_wall_us": training_wall_us(meta),
                     "ks_write": {p: _ks(k[p]["write_hist"], e[p]["write_hist"]) for p in k},
                     **slowdowns(shape, run, meta, emu)})
    spread = run_spread([_meta(capture_path(shape, frac, run)) for run in range(RUNS)
                         if capture_path(shape, frac, run).exists()])
    return {"shape": shape, "frac": frac, "profile": profile, "held_out": shape not in FIT, "runs": rows,
            "run_spread": spread, "noisy": spread is not None and spread > NOISY}


def sensitivity_band(emu_meta: dict, emulated: dict) -> dict:
    """Pages in and out (all phases) at :data:`SENSITIVITY_PCT` % less and more memory: the emulation's own
    phase numbers scaled by how much its whole-run counts moved there (``emulate --sensitivity``)."""
    sens, whole = emu_meta["params"]["sensitivity"], emu_meta["summary"]
    return {key: [round(emulated[key] * n / whole[key]) if whole[key] else emulated[key] for n in sens[key]]
            for key in ("pages_in", "pages_out")}


def zero_pages(kernel_meta: dict, emu_meta: dict) -> dict:
    """Pages of zeros swapped out and in without I/O (Linux >= 6.12's swap zero map), whole run: the kernel's
    vmstat ``swpout_zero``/``swpin_zero`` over the limited run (its exit included) against the emulator's
    ``zero_out``/``zero_in``. None where the capture did not read them (kernels before 6.12)."""
    vm = (kernel_meta.get("kernel", {}).get("limited") or {}).get("vmstat_delta") or {}
    summary = emu_meta.get("summary", {})
    if "swpout_zero" not in vm:
        return {}
    return {"kernel": {"out": int(vm["swpout_zero"]), "in": int(vm.get("swpin_zero", 0))},
            "emulator": {"out": int(summary.get("zero_out", 0)), "in": int(summary.get("zero_in", 0))}}


def slowdowns(shape: str, run: int, meta: dict, emu: Path) -> dict:
    """Measured and predicted training slowdown, the last step (the program's exit) left out of both.

    Measured: the limited run's step walls over the unlimited run's (the shape's first capture of the run).
    Predicted: 1 + the stall ``swaptrace time`` gives the emulated stream (this disk's fio profile, this host's
    measured fault and write costs, each step's compute the unlimited run's median step, on the threads the
    stream carries: a recording's measured ``threads``, one for a six-number profile) over the unlimited
    run's time for the same steps, the measured slowdown's denominator.
    """
    free = _meta(capture_path(shape, LIMITS[0], run))["kernel"]["unlimited"]["step_wall_us"][:-1]
    limited = meta["kernel"]["limited"]["step_wall_us"][:-1]
    measured = float(np.sum(limited) / np.sum(free))
    compute = float(np.median(free))
    fault, costs, spread = host_costs()
    import pyarrow.parquet as pq

    def predict(fault_us: float, timing: Path):
        sh(SWAPTRACE, "time", str(emu), "--device", str(DISK), "--step-compute-us", f"{compute:.1f}",
           *costs, "--fault-cpu-us", f"{fault_us:.2f}", "-o", str(timing), "--force")
        t = pq.read_table(timing, columns=["step", "step_us", "compute_us", "fault_wait_us", "queue_us",
                                           "fault_cpu_us", "reclaim_cpu_us"])
        step = t["step"].to_numpy()
        training = (step > 0) & (step < step.max())
        # the same compute on both sides: the unlimited run's own steps (its first ones are slower than the
        # median the model computes with), plus the model's stall; dividing the model's time by its own
        # compute instead inflated the slowdown by the unlimited run's sum over its median (1.1-1.8x here)
        stall = float((t["step_us"].to_numpy() - t["compute_us"].to_numpy())[training].sum())
        return t, training, 1.0 + stall / float(np.sum(free[:int(training.sum())]))

    timing = emu.with_suffix(".timing.parquet")
    t, training, predicted = predict(fault, timing)
    summary = json.loads(pq.read_schema(timing).metadata[b"swaptrace"])["summary"]
    # the host's fault overhead measured over several runs: the prediction at its lowest and highest
    ends = [predict(f, emu.with_suffix(".timing-spread.parquet"))[2] for f in (spread[0], spread[-1])] if spread else []
    return {"slowdown_measured": measured, "slowdown_predicted": predicted,
            **({"slowdown_predicted_range": ends} if ends else {}), "threads": summary.get("threads", 1),
            "terms": stall_terms(meta, {c: t[c].to_numpy()[training] for c in t.column_names})}


def host_costs() -> tuple[float, list[str], list[float]]:
    """The host's fault cost (us), the ``swaptrace time`` options for its other costs, and the fault cost's
    lowest and highest measurement: from :data:`COSTS` if given, else from :data:`HOST`."""
    if COSTS is not None:
        import tomllib
        c = tomllib.loads(COSTS.read_text())
        return float(c["fault_cpu_us"]), ["--costs", str(COSTS)], sorted(c.get("fault_cpu_us_range", []))
    host = json.loads(HOST.read_text())
    return (float(host["overhead_us"]), ["--write-cpu-us", f"{host['write_overhead_us']:.2f}"],
            sorted(r["overhead_us"] for r in host.get("runs", [])))


def stall_terms(meta: dict, model: dict) -> dict:
    """The time model's terms beside the program's own delays (task delay accounting), training steps only (s).

    I/O wait: the model's fault wait + queueing against the threads' block I/O + swap-in delay
    (``swap_read_folio`` counts only the submission as swap-in; the wait is block I/O). Reclaim: the model's
    reclaim and fault CPU against direct reclaim (``freepages``) delay. CPU wait (runnable, not running) has
    no model term: it is the machine's load. Delays are summed over the program's threads, the model's terms
    over its threads (the stream's ``threads``); a step's threads that wait together count once per thread.
    """
    d = (meta["kernel"].get("delays") or {}).get("limited") or {}
    if "blkio_us" not in d:
        return {}
    steps = np.asarray(d["steps"])
    sel = (steps > 0) & (steps < steps.max())

    def total(key: str) -> float:
        return float(np.asarray(d[key])[sel].sum()) / 1e6

    return {"io_wait_s": {"kernel": total("blkio_us") + total("swapin_us"),
                          "model": float(model["fault_wait_us"].sum() + model["queue_us"].sum()) / 1e6},
            "reclaim_s": {"kernel": total("freepages_us"),
                          "model": float(model["reclaim_cpu_us"].sum() + model["fault_cpu_us"].sum()) / 1e6},
            "thrashing_s": total("thrashing_us"), "cpu_wait_s": total("cpu_us")}


def do_predict(args) -> None:
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for shape in args.shapes or list(SHAPES):
        if not capture_path(shape, LIMITS[0], 0).exists():
            continue
        profiles = [str(recording_path(shape))] if recording_path(shape).exists() else []
        if "@" not in shape and TAKE == 0:  # the six-number profiles describe PyTorch programs only
            profiles.append(str(PROFILE_OUT))
        if args.own and shape not in FIT and "@" not in shape:
            own = derive_own(shape, 0)
            from swaptrace.workload.process import to_toml
            own_path = WORK / f"{shape}-own.toml"
            own_path.write_text(to_toml(own))
            profiles.append(str(own_path))
        for profile in profiles:
            for frac in LIMITS:
                results.append(predict_point(shape, frac, profile))
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "results.md").write_text(render(results))
    print(render(results))


def _err(k: float | None, e: float | None) -> str:
    if k is None or e is None:
        return "-"
    if k == 0:
        return "0/0" if e == 0 else "+inf"
    return f"{(e - k) / k:+.0%}"


#: the issue's targets, one owner for the study's scoring (results.md's summary, ``score``): pages in and out
#: within this share of the kernel's or within :data:`PAGES_FLOOR` pages, whichever is wider (a point that
#: swaps a few thousand pages is not missed by a few hundred); mean write request within :data:`WRITE_TOL`;
#: write-size KS distance at most :data:`KS_MAX`; training slowdown within :data:`SLOWDOWN_TOL`
PAGES_TOL = 0.15
PAGES_FLOOR = 2000
WRITE_TOL = 0.25
KS_MAX = 0.2
SLOWDOWN_TOL = 0.25
#: a check is met when at least this share of the points pass it (counted over all, fit and held out)
TARGET_SHARE = 0.75


def _ok(k: int, e: int) -> bool:
    """Pages within ±:data:`PAGES_TOL` of the kernel's, or within :data:`PAGES_FLOOR` pages."""
    return abs(e - k) <= max(PAGES_TOL * k, PAGES_FLOOR)


def _within(k: float | None, e: float | None, tol: float) -> bool:
    """``e`` within ±``tol`` of ``k``; two absent values (neither wrote) agree, one absent does not."""
    if k is None or e is None:
        return k is None and e is None
    return abs(e - k) <= tol * k


def checks(x: dict) -> dict[str, bool]:
    """Whether one run of a point (a ``runs`` entry of results.json) meets each of the issue's checks."""
    k, e = x["kernel"]["all"], x["emulator"]["all"]
    ks = x["ks_write"]["all"]
    return {"pages": _ok(k["pages_in"], e["pages_in"]) and _ok(k["pages_out"], e["pages_out"]),
            "write": _within(k["write_kib"], e["write_kib"], WRITE_TOL),
            "ks": (ks is None and not k["writes"] and not e["writes"]) or (ks is not None and ks <= KS_MAX),
            "slowdown": _within(x["slowdown_measured"], x["slowdown_predicted"], SLOWDOWN_TOL)}


CHECK_NAMES = {"pages": f"pages in and out ±{PAGES_TOL:.0%} (or {PAGES_FLOOR:,})",
               "write": f"mean write ±{WRITE_TOL:.0%}", "ks": f"write-size KS ≤ {KS_MAX}",
               "slowdown": f"training slowdown ±{SLOWDOWN_TOL:.0%}"}


def tally(results: list[dict], names=tuple(CHECK_NAMES)) -> dict[str, dict[str, int]]:
    """Per check of ``names``: runs that pass it, all / fit / held out, and how many runs each group has
    (``n_*``)."""
    out = {name: {"all": 0, "fit": 0, "held_out": 0} for name in names}
    n = {"n_all": 0, "n_fit": 0, "n_held_out": 0}
    for r in results:
        group = "held_out" if r["held_out"] else "fit"
        for x in r["runs"]:
            n["n_all"] += 1
            n["n_" + group] += 1
            for name, ok in checks(x).items():
                if name in out:
                    out[name]["all"] += ok
                    out[name][group] += ok
    return {name: {**c, **n} for name, c in out.items()}


def render_tally(results: list[dict], names=tuple(CHECK_NAMES)) -> str:
    """The summary table: each check's runs within its target, all / fit / held out, and whether ≥ 75 %."""
    lines = ["| check | all | fit | held out | held out ≥ 75 % |", "|---|---|---|---|---|"]
    for name, c in tally(results, names).items():
        met = c["held_out"] >= TARGET_SHARE * c["n_held_out"] if c["n_held_out"] else None
        lines.append(f"| {CHECK_NAMES[name]} | {c['all']} of {c['n_all']} | {c['fit']} of {c['n_fit']} | "
                     f"{c['held_out']} of {c['n_held_out']} | {'-' if met is None else 'yes' if met else 'no'} |")
    return "\n".join(lines) + "\n"


def _load_text(load: dict) -> str:
    """``before->after`` 1-min load of the limited run, and other processes' share of the CPUs."""
    if "load_before" not in load:
        return "-"
    share = load.get("other_cpu_share")
    return f"{load['load_before']:.2f}->{load['load_after']:.2f}" + ("" if share is None else f" ({share:.0%} other)")


def _noisy_text(point: dict) -> str:
    spread = point.get("run_spread")
    if spread is None:
        return "-"
    return f"yes ({spread:.0%})" if point.get("noisy") else f"no ({spread:.0%})"


def _band_text(x: dict) -> str:
    """The emulation's pages in at 1 % less and more memory, and whether the kernel's lies between them."""
    band = (x.get("sensitivity") or {}).get("pages_in")
    if not band:
        return "-"
    k, e = x["kernel"]["all"]["pages_in"], x["emulator"]["all"]["pages_in"]
    inside = min(band + [e]) <= k <= max(band + [e])
    return f"{band[0]} .. {band[1]}{' (kernel inside)' if inside else ''}"


def _range_text(x: dict) -> str:
    """The predicted slowdown at the host's lowest and highest measured fault overhead, in brackets."""
    r = x.get("slowdown_predicted_range")
    return f" ({r[0]:.2f}-{r[1]:.2f})" if r else ""


def render(results: list[dict]) -> str:
    lines = [render_tally(results),
             "| shape | held out | profile | limit (of peak) | run | pages in k / e | err | pages out k / e | err "
             "| write KiB k / e | KS write | slowdown k / e (range) | pages within | pages in at -/+1 % memory "
             "| load | noisy |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for x in r["runs"]:
            k, e = x["kernel"]["all"], x["emulator"]["all"]
            ok = checks(x)["pages"]
            ks = x["ks_write"]["all"]
            lines.append(
                f"| {r['shape']} | {'yes' if r['held_out'] else 'no (fit)'} | {Path(r['profile']).stem} | "
                f"{r['frac']:.2f} ({x['limit_bytes'] >> 20} MiB) | {x['run']} | {k['pages_in']} / {e['pages_in']} | "
                f"{_err(k['pages_in'], e['pages_in'])} | {k['pages_out']} / {e['pages_out']} | "
                f"{_err(k['pages_out'], e['pages_out'])} | "
                f"{(k['write_kib'] or 0):.1f} / {(e['write_kib'] or 0):.1f} | {'-' if ks is None else f'{ks:.2f}'} | "
                f"{x['slowdown_measured']:.2f} / {x['slowdown_predicted']:.2f}{_range_text(x)} | {'yes' if ok else 'no'} | "
                f"{_band_text(x)} | {_load_text(x.get('load') or {})} | {_noisy_text(r)} |")
    lines += ["", "Stalls, training steps (s; the program's delays summed over its threads, the model's terms over "
              "its threads, the stream's count):", "",
              "| shape | profile | limit | run | model threads | I/O wait k / model | reclaim k / model | thrashing k "
              "| CPU wait k |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for x in r["runs"]:
            t = x.get("terms") or {}
            if not t:
                continue
            lines.append(f"| {r['shape']} | {Path(r['profile']).stem} | {r['frac']:.2f} | {x['run']} | "
                         f"{x.get('threads', 1)} | {t['io_wait_s']['kernel']:.2f} / {t['io_wait_s']['model']:.2f} | "
                         f"{t['reclaim_s']['kernel']:.2f} / {t['reclaim_s']['model']:.2f} | "
                         f"{t['thrashing_s']:.2f} | {t['cpu_wait_s']:.2f} |")
    lines += ["", "Pages of zeros swapped without I/O (Linux >= 6.12's swap zero map; whole run, the kernel's exit "
              "included; not in the pages above):", "",
              "| shape | limit | run | out k / e | in k / e |", "|---|---|---|---|---|"]
    for r in results:
        for x in r["runs"]:
            z = x.get("zero_pages") or {}
            if z:
                lines.append(f"| {r['shape']} | {r['frac']:.2f} | {x['run']} | {z['kernel']['out']} / "
                             f"{z['emulator']['out']} | {z['kernel']['in']} / {z['emulator']['in']} |")
    return "\n".join(lines) + "\n"


def do_variant(args) -> None:
    """Emulate every captured run of the study with other ``emulate`` options and count pages, mean write and
    KS (no slowdown): a setting tried on the fit shapes in a minute, and then scored on the held-out ones,
    before it goes into ``predict``. Each shape's trace is generated again from its recording, as ``predict``
    does; the streams go to ``traces/real-validation/variant``."""
    out = WORK / "variant"
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for shape in args.shapes or list(SHAPES):
        if not recording_path(shape).exists():
            print(f"variant: no recording {recording_path(shape).name} (record --take {TAKE} first)", file=sys.stderr)
            raise SystemExit(2)
        trace = trace_for(shape, str(recording_path(shape)))
        for frac in LIMITS:
            rows = []
            for run in range(RUNS):
                cap = capture_path(shape, frac, run)
                if not cap.exists():
                    continue
                emu = out / f"{shape}-{frac:.2f}-r{run}.swapio.parquet"
                if emulate_at(trace, cap, emu, args.emulate).returncode != 0:
                    continue
                k, e = phase_numbers(cap), phase_numbers(emu)
                rows.append({"kernel": k, "emulator": e, "slowdown_measured": None, "slowdown_predicted": None,
                             "ks_write": {p: _ks(k[p]["write_hist"], e[p]["write_hist"]) for p in k}})
            results.append({"shape": shape, "frac": frac, "held_out": shape not in FIT, "runs": rows})
    print(f"emulate {' '.join(args.emulate)}, take {TAKE}:")
    print(render_tally(results, ("pages", "write", "ks")), end="")


def do_score(args) -> None:
    """Each result set's tally side by side (one column a set: all runs, held out in brackets); ``--render``
    writes each set's results.md again from its results.json (with the summary these rules give)."""
    dirs = [Path(d) for d in args.results]
    sets = []
    for d in dirs:
        path = d / "results.json" if d.is_dir() else d
        if not path.exists():
            print(f"score: {path}: no results.json (a predict output folder?)", file=sys.stderr)
            raise SystemExit(2)
        results = json.loads(path.read_text())
        sets.append(tally(results))
        if args.render:
            path.with_name("results.md").write_text(render(results))
    names = [d.name if d.is_dir() else d.parent.name for d in dirs]
    lines = ["| check (all runs, held out) | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for name in CHECK_NAMES:
        lines.append(f"| {CHECK_NAMES[name]} | " + " | ".join(
            f"{t[name]['all']} of {t[name]['n_all']} ({t[name]['held_out']} of {t[name]['n_held_out']})"
            for t in sets) + " |")
    print("\n".join(lines))


def main(argv=None) -> int:
    global LIMITS, TAKE, COSTS, DISK, CAPTURE_SWAP
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("--runs", type=int, default=RUNS)
    c.add_argument("--steps", type=int, default=STEPS)
    c.add_argument("--shapes", nargs="*")
    c.add_argument("--repeat-noisy", action="store_true",
                   help=f"capture once more a point's run (the one that started at the higher load) when its runs' "
                        f"training walls differ by more than {NOISY * 100:g} %%")
    rec = sub.add_parser("record")
    rec.add_argument("--steps", type=int, default=STEPS)
    rec.add_argument("--shapes", nargs="*")
    rec.add_argument("--unmarked", action="store_true", help="record each program as an unmodified one: without "
                     "its step marks (SWAPTRACE_MARKER unset), its steps from the line it prints after each step")
    rec.add_argument("--pageout", action="store_true", help="capture --record --pageout: page the program out at "
                     "every reading (which pages each window uses)")
    sub.add_parser("profile")
    me = sub.add_parser("measure", help="root: this boot's loop-device profiles (idle, busy CPUs) and host costs "
                        "for predict")
    me.add_argument("--results", default=str(MEASURED), help=f"where they go (default {MEASURED.relative_to(ROOT)})")
    sc = sub.add_parser("score", help="the issue's checks counted over stored predictions (results.json)")
    sc.add_argument("results", nargs="+", help="predict's output folders (or their results.json)")
    sc.add_argument("--render", action="store_true", help="write each folder's results.md again")
    va = sub.add_parser("variant", help="pages, mean write and KS of every captured run with other emulate "
                        "options (no slowdown), in a minute")
    va.add_argument("--shapes", nargs="*")
    va.add_argument("emulate", nargs="+", metavar="OPTION", help="emulate options, after --")
    pr = sub.add_parser("predict")
    pr.add_argument("--shapes", nargs="*")
    pr.add_argument("--own", action="store_true", help="also a six-number profile from each held-out shape's capture")
    pr.add_argument("-o", "--output", default=str(ROOT / "research" / "results" / "real-training"))
    pr.add_argument("--costs", help="host-costs TOML (swaptrace time --save-costs) measured on the captures' boot "
                    f"(default: {COSTS.relative_to(ROOT)}); 'host' for research/results/timing's")
    pr.add_argument("--device", help=f"fio device profile TOML measured on the captures' boot (default: "
                    f"{DISK.relative_to(ROOT)})")
    pr.add_argument("--footprint-swap", action="store_true",
                    help="emulate each point with emulate's default swap size, the trace's footprint (default: "
                         "its capture's swap device size, 2.25 GiB at 0.65-0.4)")
    pr.add_argument("--capture-swap", action="store_true", help="the default (kept for the commands of earlier notes)")
    for sp in (c, pr, va):
        sp.add_argument("--limits", type=float, nargs="+", help=f"fractions of the unlimited peak (default "
                        f"{' '.join(map(str, LIMITS))}); the first is captured with the unlimited run")
    for sp in (rec, pr, va):
        sp.add_argument("--take", type=int, default=0, help="which recording of each shape: 0 the first, K the "
                        "K-th more (another file; predict then leaves the six-number profile out)")
    args = p.parse_args(argv)
    if getattr(args, "limits", None):
        LIMITS = tuple(args.limits)
    TAKE = getattr(args, "take", 0)
    if getattr(args, "costs", None):
        COSTS = None if args.costs == "host" else Path(args.costs).resolve()
    if getattr(args, "device", None):
        DISK = Path(args.device).resolve()
    CAPTURE_SWAP = not getattr(args, "footprint_swap", False)
    {"capture": do_capture, "record": do_record, "profile": do_profile, "measure": do_measure, "predict": do_predict,
     "score": do_score, "variant": do_variant}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
