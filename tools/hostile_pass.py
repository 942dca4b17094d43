"""A hostile user's pass over every command (issue 30): damaged, wrong and dangerous inputs, outputs and values.

Every command that reads a file gets, in each file slot: a missing path, an empty file, a folder, a FIFO, a
file of another kind, text junk, and every damaged variant of its kind from tests/damaged.py (cut short,
wrong types, out of range). Every command that writes gets: its output on its own input (with --force), an
existing folder of the user's files (with --force), a FIFO, two outputs on one path, an output inside the
input dataset folder and names whose temporary name would pass 255 bytes. Every numeric or size option of
every command gets -1, 0, nan, inf, 1e400, 2^64, a word and an empty value, the command's other arguments
good (the option-value class; each command's good arguments run first as its control). Each case runs
in-process (click's runner) under a 60 s alarm and is scored:

- ``good``: exit 2, one ``Error:`` line, no traceback, nothing left behind, nothing of the user's changed;
- ``accepted``: exit 0 (the input was read as valid; listed so a person can judge each);
- ``traceback``, ``hang``, ``data-loss``, ``left-behind``, ``many-lines``, ``exit-N``: not handled well;
- ``no-control``: refused, but the slot's good input (its control, run first) fails too: the case proves nothing.

File readers covered (slot: kinds given): inspect, emulate, mrc, export (csv, libcachesim, mqsim), designs
TRACE and --packed, time --trace (access traces and dataset folders); compare A and B, ssd replay, fio jobs,
time, export mqsim (swap streams); generate --spec, presets FILE, emulate --profile, ssd synth/thesis/replay
--device, designs --device, time --device (a device TOML or a measured profile), time --costs, sweep FILE,
generate --runtime (TOML files); fio compare --model (JSON); fio import (iolog); ssd fit, fio profile, fio
compare and fio results RUN_DIR (a ``fio run`` folder: results.parquet and fio's raw JSON damaged); fio run
JOBS_DIR (its manifest.json damaged, --dry-run); runtime-profile CAPTURE and time --compute-baseline (a
``capture -- CMD`` stream whose kernel readings and command line are damaged); emulate and inspect of a process
trace (``generate --runtime``) whose ``process`` section is damaged; report FOLDER with a damaged
ssd-thesis.json, model-vs-fio.json, pipeline.json or fio-run/results.parquet.

Not covered, and why: ``capture`` (root, a kernel and the machine-wide capture lock: tests/test_capture_*),
``train`` and ``train --spec`` (torch; its bad values are refused before torch in tests/test_bad_inputs.py),
``runtime-profile --spec``, ``run --preset FILE``/``--device FILE``/``--time-costs`` and ``sweep --trace``/
``--device FILE`` (the same readers as generate --spec, ssd --device, time --costs and emulate, which are
covered), ``fio run`` for real (fio on a file; only its --dry-run checks here) and block devices.

Run from the repository root:  PYTHONPATH=$PWD python tools/hostile_pass.py [--quick] [--only WORD]
Prints one line per case that is not good, then the counts by outcome and by cause.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from click.testing import CliRunner  # noqa: E402
from damaged import damage, fake_capture  # noqa: E402

from swaptrace.cli import cli  # noqa: E402


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def invoke(args, timeout=60):
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        return CliRunner().invoke(cli, [str(a) for a in args])
    except Hang:
        return None
    finally:
        signal.alarm(0)


def digest(folder: Path) -> dict[str, str]:
    out = {}
    for p in folder.rglob("*"):
        try:
            out[str(p.relative_to(folder))] = (hashlib.sha1(p.read_bytes()).hexdigest() if p.is_file()
                                               and not p.is_fifo() else "other")
        except OSError:
            out[str(p.relative_to(folder))] = "unreadable"
    return out


def listing(folder: Path) -> set[str]:
    """Every path under ``folder`` (names only: what a case may leave behind)."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def setup(base: Path, quick: bool) -> dict[str, Path]:
    """The good inputs a user has, made with the CLI."""
    f: dict[str, Path] = {}

    def ok(*args):
        r = invoke(args, timeout=600)
        assert r is not None and r.exit_code == 0, (args, r and r.output)

    f["T"], f["S"], f["J"] = base / "t.access.parquet", base / "t.swapio.parquet", base / "jobs"
    ok("generate", "--preset", "tiny", "--steps", 2, "-o", f["T"])
    ok("emulate", f["T"], "--memory-fraction", "0.3", "-o", f["S"])
    ok("fio", "jobs", f["S"], "-o", f["J"], "--max-requests", 200, "--sweep", "4k")
    f["T_other"] = base / "other.access.parquet"
    ok("generate", "--preset", "tiny", "--steps", 3, "--seed", 7, "-o", f["T_other"])
    f["T_2m"] = base / "t2m.access.parquet"
    ok("generate", "--preset", "tiny", "--steps", 2, "--page-bytes", "2MiB", "-o", f["T_2m"])
    f["S_2m"] = base / "t2m.swapio.parquet"
    ok("emulate", f["T_2m"], "--memory-fraction", "0.5", "-o", f["S_2m"])
    f["DS"] = base / "ds.access.parquet"
    if not quick:
        ok("generate", "--preset", "tiny", "--steps", 4, "--workers", 1, "--parts", 2, "-o", f["DS"])
    f["iolog"] = base / "ok.iolog"
    f["iolog"].write_text("fio version 2 iolog\n/dev/x add\n/dev/x open\n/dev/x write 0 4096\n/dev/x close\n")
    f["spec"] = base / "spec.toml"
    f["spec"].write_text((Path("swaptrace/presets/tiny.toml")).read_text())
    f["kprof"] = base / "kernel.toml"
    f["kprof"].write_text(Path("swaptrace/profiles/linux-6.x-cgroup1.toml").read_text())
    f["dev"] = base / "dev.toml"
    f["dev"].write_text('base = "nvme-tlc"\nop = 0.28\nread_us = 60.0\n')
    f["devprof"] = base / "disk.toml"
    f["devprof"].write_text('kind = "swaptrace-device-profile"\nname = "d"\nsizes_bytes = [4096, 8192]\n'
                            'depths = [1, 4]\n[read]\nlatency_us = [[80.0, 90.0], [85.0, 95.0]]\n'
                            '[write]\nlatency_us = [[20.0, 25.0], [30.0, 35.0]]\n')
    f["costs"] = base / "costs.toml"
    f["costs"].write_text('kind = "swaptrace-host-costs"\nsource = "given"\nfault_cpu_us = 1.5\n'
                          'reclaim_cpu_us = 0.5\nwrite_cpu_us = 0.25\n')
    f["sweep"] = base / "sweep.toml"
    f["sweep"].write_text('presets = ["tiny"]\nsteps = 2\nmemory_fractions = [0.5]\npolicies = ["lru"]\n')
    f["model"] = base / "model.json"
    f["model"].write_text('{"request_size_gain": 1.7, "sequential_write_gain": 4.0}\n')
    f["P"] = base / "P"
    ok("run", "--preset", "tiny", "--steps", 2, "--no-fio", "--no-thesis", "-o", f["P"])
    (f["P"] / "ssd-thesis.json").write_text('{"ratios": {"read_128k_vs_4k": 1.7, "seq_vs_rand_write": 4.1}}\n')
    _setup_more(f, base, ok)
    f["text"] = base / "junk.parquet"
    f["text"].write_text("not parquet\n")
    f["empty"] = base / "empty.parquet"
    f["empty"].write_bytes(b"")
    f["folder"] = base / "a-folder"
    f["folder"].mkdir()
    f["fifo"] = base / "fifo.parquet"
    os.mkfifo(f["fifo"])
    f["user"] = base / "users-folder"
    f["user"].mkdir()
    (f["user"] / "thesis.docx").write_text("months of work")
    (f["user"] / "access.parquet").write_text("mine")
    return f


def _setup_more(f: dict[str, Path], base: Path, ok) -> None:
    """The inputs of the readers added for issue 30's full-size pass: a fio run folder, a capture of a program,
    a runtime profile, a process trace and a pipeline folder holding every part a report reads."""
    import json

    from swaptrace.pipeline import stages

    f["RUN"] = base / "run"  # a `fio run` folder: two sweep jobs and the replay on a small file
    ok("fio", "run", f["J"], "--target", base / "t.dat", "--size", "8MiB", "--runtime", 1, "--jobs",
       "sweep_read_4k,sweep_write_4k,replay", "-o", f["RUN"])
    f["CAP"] = fake_capture(f["S"], base / "cap.swapio.parquet")  # a `capture -- swaptrace train` stream
    f["rtprof"] = base / "runtime.toml"
    f["rtprof"].write_text(Path("swaptrace/profiles/runtime/pytorch-cpu.toml").read_text())
    f["PT"] = base / "pt.access.parquet"
    ok("generate", "--preset", "tiny", "--steps", 2, "--runtime", f["rtprof"], "-o", f["PT"])
    # a pipeline folder with every part a report reads: the thesis, the fio run, model vs fio
    f["R"] = base / "R"
    ok("run", "--preset", "tiny", "--steps", 2, "--no-fio", "--no-thesis", "-o", f["R"])
    ok("ssd", "thesis", "--device", "nvme-tlc", "--capacity", "4GiB", "--drive-writes", 0.1, "-o",
       f["R"] / "ssd-thesis.json")
    shutil.copytree(f["RUN"], f["R"] / "fio-run")
    stages.run_model_vs_fio(f["R"], None, lambda line: None, None)
    assert "fitted" in json.loads((f["R"] / "model-vs-fio.json").read_text()), "model vs fio did not fit"
    shutil.rmtree(f["R"] / "report")
    f["jobs-manifest"] = f["J"] / "manifest.json"
    f["fifojobs"] = base / "fifo-jobs"  # a folder whose manifest.json is a FIFO (read, it would block forever)
    f["fifojobs"].mkdir()
    os.mkfifo(f["fifojobs"] / "manifest.json")


def reader_slots(f):
    """(command, kind of the file slot, argv with {X} for the slot); OUT is a fresh folder per case."""
    OUT = "{OUT}"
    tim = ["--device", "nvme-tlc", "--compute", "none", "--fault-cpu-us", 1, "--reclaim-cpu-us", 1]
    return [
        ("inspect", "access", ["inspect", "{X}"]),
        ("inspect", "swapio", ["inspect", "{X}"]),
        ("emulate", "access", ["emulate", "{X}", "-o", OUT + "/s.swapio.parquet", "--memory-fraction", 0.5]),
        ("mrc", "access", ["mrc", "{X}", "-o", OUT + "/m.csv"]),
        ("export csv", "access", ["export", "{X}", "--format", "csv", "-o", OUT + "/e.csv"]),
        ("export libcachesim", "access", ["export", "{X}", "--format", "libcachesim", "-o", OUT + "/e.bin"]),
        ("designs", "access", ["designs", "{X}", "-o", OUT + "/d", "--memory-fraction", 0.5, "--device", "none"]),
        ("designs --packed", "access", ["designs", f["T"], "-o", OUT + "/d", "--memory-fraction", 0.5, "--device",
                                        "none", "--packed", "{X}"]),
        ("time --trace", "access", ["time", f["S"], "--device", "nvme-tlc", "--compute", "mlp", "--fault-cpu-us", 1,
                                    "--reclaim-cpu-us", 1, "--trace", "{X}"]),
        ("compare a", "swapio", ["compare", "{X}", f["S"]]),
        ("compare b", "swapio", ["compare", f["S"], "{X}"]),
        ("ssd replay", "swapio", ["ssd", "replay", "{X}", "--device", "nvme-tlc", "--capacity", "4GiB",
                                  "-o", OUT + "/t.parquet"]),
        ("fio jobs", "swapio", ["fio", "jobs", "{X}", "-o", OUT + "/j", "--sweep", "4k", "--max-requests", 100]),
        ("time", "swapio", ["time", "{X}", *tim]),
        ("export mqsim", "swapio", ["export", "{X}", "--format", "mqsim", "-o", OUT + "/e.trace"]),
        ("generate --spec", "toml", ["generate", "--spec", "{X}", "--steps", 1, "-o", OUT + "/g.parquet"]),
        ("presets", "toml", ["presets", "{X}"]),
        ("emulate --profile", "toml", ["emulate", f["T"], "-o", OUT + "/s.parquet", "--memory-fraction", 0.5,
                                       "--profile", "{X}"]),
        ("ssd synth --device", "toml", ["ssd", "synth", "--device", "{X}", "--pattern", "randwrite", "--volume",
                                        "0.05x", "--capacity", "1GiB", "--no-timing", "-o", OUT + "/t.parquet"]),
        ("time --device ssd", "toml", ["time", f["S"], "--device", "{X}", "--compute", "none", "--fault-cpu-us", 1,
                                       "--reclaim-cpu-us", 1]),
        ("time --device profile", "devprof", ["time", f["S"], "--device", "{X}", "--compute", "none",
                                              "--fault-cpu-us", 1, "--reclaim-cpu-us", 1]),
        ("time --costs", "costs", ["time", f["S"], "--device", "nvme-tlc", "--compute", "none", "--costs", "{X}"]),
        ("sweep file", "sweep", ["sweep", "{X}", "--workers", 1, "-o", OUT + "/sw"]),
        ("fio compare --model", "json", ["fio", "compare", "{RUN}", "--model", "{X}"]),
        ("fio import", "iolog", ["fio", "import", "{X}", "-o", OUT + "/i.swapio.parquet"]),
        # the readers added for issue 30's full-size pass
        ("ssd fit", "fio-run", ["ssd", "fit", "{X}", "-o", OUT + "/fit.toml"]),
        ("fio profile", "fio-run", ["fio", "profile", "{X}", "-o", OUT + "/p.toml"]),
        ("fio compare", "fio-run", ["fio", "compare", "{X}"]),
        ("fio results", "fio-run", ["fio", "results", "{X}"]),
        ("fio run", "jobs-manifest", ["fio", "run", "{X}", "--target", OUT + "/t.dat", "--size", "8MiB", "--runtime",
                                      1, "-o", OUT + "/r", "--dry-run"]),
        ("runtime-profile", "capture", ["runtime-profile", "{X}", "-o", OUT + "/r.toml"]),
        ("time --compute-baseline", "capture", ["time", f["S"], "--device", "nvme-tlc", "--compute", "mlp",
                                                "--fault-cpu-us", 1, "--reclaim-cpu-us", 1, "--compute-baseline",
                                                "{X}"]),
        ("generate --runtime", "rtprof", ["generate", "--preset", "tiny", "--steps", 1, "--runtime", "{X}", "-o",
                                          OUT + "/g.access.parquet"]),
        ("emulate process", "process", ["emulate", "{X}", "-o", OUT + "/s.swapio.parquet", "--memory-fraction", 0.5]),
        ("inspect process", "process", ["inspect", "{X}"]),
        ("ssd thesis --device", "toml", ["ssd", "thesis", "--device", "{X}", "--capacity", "4GiB", "--drive-writes",
                                         0.1, "-o", OUT + "/t.json"]),
        ("ssd replay --device", "toml", ["ssd", "replay", f["S"], "--device", "{X}", "--capacity", "4GiB",
                                         "-o", OUT + "/t.parquet"]),
        ("designs --device", "toml", ["designs", f["T"], "-o", OUT + "/d", "--memory-fraction", 0.5, "--device",
                                      "{X}"]),
        *((f"report {part}", f"report:{part}", ["report", "{X}", "-o", OUT + "/r"])
          for part in ("ssd-thesis.json", "model-vs-fio.json", "pipeline.json", "fio-run/results.parquet")),
    ]


GOOD = {"access": "T", "swapio": "S", "toml": None, "devprof": "devprof", "costs": "costs", "sweep": "sweep",
        "json": "model", "iolog": "iolog", "fio-run": "RUN", "capture": "CAP", "rtprof": "rtprof", "process": "PT",
        "jobs-manifest": "jobs-manifest"}


def good_for(cmd: str, kind: str, f) -> Path:
    if kind == "toml":
        return {"generate --spec": f["spec"], "presets": f["spec"], "emulate --profile": f["kprof"]}.get(cmd, f["dev"])
    return f[GOOD[kind]]


def control_input(cmd: str, kind: str, f) -> Path:
    """The good input of a reader slot (its control)."""
    if kind.startswith("report:"):
        return f["R"]
    if kind == "jobs-manifest":
        return f["J"]
    if kind == "access" and cmd == "time --trace":
        return f["T"]
    return good_for(cmd, kind, f)


def damage_kind(kind: str, cmd: str) -> str:
    if kind in ("access", "swapio", "fio-run", "capture", "process", "iolog"):
        return kind
    return "json" if kind in ("json", "jobs-manifest") else "toml"


#: JSON of the right syntax and the wrong shape, for the JSON files a command or a report reads
JSON_SHAPES = {"shape:list": "[1, 2]", "shape:null": "null", "shape:number": "7", "shape:empty-object": "{}"}


def report_variants(part: str, f, scratch: Path) -> dict[str, Path]:
    """Copies of the pipeline folder R with its ``part`` missing, not a file, or damaged."""
    good = f["R"] / part
    made: dict[str, Path] = {}

    def folder(name: str) -> Path:
        d = scratch / f"report-{part.replace('/', '_')}" / name
        shutil.copytree(f["R"], d)
        (d / part).unlink()
        made[name] = d
        return d / part

    folder("missing")
    folder("empty").write_bytes(b"")
    folder("folder").mkdir()
    os.mkfifo(folder("fifo"))
    folder("junk").write_text("not a report part\n")
    kind = "fio-results" if part.endswith(".parquet") else "json"
    for name, bad in damage(kind, good, scratch / f"report-{part.replace('/', '_')}-damaged").items():
        shutil.copyfile(bad, folder(f"damaged:{name}"))
    if kind == "json":
        for name, text in JSON_SHAPES.items():
            folder(name).write_text(text)
    if part == "pipeline.json":  # a stage that skipped, listing its outputs of the wrong shape
        for name, entry in {"skipped-outputs-number": {"skipped": "no fio", "outputs": 5},
                            "skipped-outputs-objects": {"skipped": "no fio", "outputs": [{"a": 1}]},
                            "skipped-reason-object": {"skipped": {"why": 1}, "outputs": ["fio-run"]}}.items():
            folder(name).write_text(json.dumps({"fio": entry}))
    if part == "model-vs-fio.json":  # the fields the report prints, of the wrong types
        doc = json.loads(good.read_text())
        for name, change in {"fitted-text": ("fitted", "yes"), "jobs-text": ("jobs", "many"),
                             "replays-of-numbers": ("replays", [1, 2]), "error-number": ("error", 5),
                             "residuals-text": ("residuals", "small"), "device-number": ("device", 7)}.items():
            folder(f"field:{name}").write_text(json.dumps({**doc, change[0]: change[1]}))
    if part == "ssd-thesis.json":
        doc = json.loads(good.read_text())
        for key in list(doc)[:6]:
            folder(f"field:{key}-text").write_text(json.dumps({**doc, key: "x"}))
    return made


def jobs_variants(f, scratch: Path) -> dict[str, Path]:
    """Copies of the fio job folder J with its manifest.json damaged, missing or not a file."""
    made: dict[str, Path] = {}

    def folder(name: str) -> Path:
        d = scratch / "jobs-manifest" / name
        shutil.copytree(f["J"], d)
        (d / "manifest.json").unlink()
        made[name] = d
        return d / "manifest.json"

    folder("missing")
    folder("empty").write_bytes(b"")
    folder("folder").mkdir()
    os.mkfifo(folder("fifo"))
    folder("binary").write_bytes(b"\x00\xff\xfe junk")
    for name, bad in damage("json", f["jobs-manifest"], scratch / "jobs-manifest-damaged").items():
        shutil.copyfile(bad, folder(f"damaged:{name}"))
    for name, text in JSON_SHAPES.items():
        folder(name).write_text(text)
    doc = json.loads(f["jobs-manifest"].read_text())
    for name, change in {"jobs-text": ("jobs", "all"), "jobs-of-numbers": ("jobs", [1, 2]),
                         "precondition-text": ("precondition", "yes"), "kind-number": ("kind", 3)}.items():
        folder(f"field:{name}").write_text(json.dumps({**doc, change[0]: change[1]}))
    first = dict(doc["jobs"][0])
    for name, change in {"job-file-escapes": ("file", "../../../etc/passwd"), "job-file-number": ("file", 5),
                         "job-name-number": ("name", 5), "job-group-list": ("group", [1])}.items():
        folder(f"field:{name}").write_text(json.dumps({**doc, "jobs": [{**first, change[0]: change[1]},
                                                                          *doc["jobs"][1:]]}))
    return made


def variants(cmd, kind, f, scratch: Path) -> dict[str, Path]:
    if kind.startswith("report:"):
        return report_variants(kind.split(":", 1)[1], f, scratch)
    if kind == "jobs-manifest":
        return jobs_variants(f, scratch)
    good = good_for(cmd, kind, f)
    other = {"access": f["S"], "swapio": f["T"], "fio-run": f["J"], "capture": f["S"], "process": f["S"]}.get(
        kind, f["T"])
    v = {"missing": scratch / "nope" / "x.parquet", "empty": f["empty"], "folder": f["folder"], "fifo": f["fifo"],
         "wrong-kind": other, "junk": f["text"]}
    if kind == "process":
        v["plain-trace"] = f["T"]  # a model's trace: no process section, valid
    dk = damage_kind(kind, cmd)
    if dk != "iolog":
        v |= {f"damaged:{k}": p for k, p in damage(dk, good, scratch / f"{cmd.replace(' ', '_')}-{kind}").items()}
    if kind == "access" and f["DS"].exists():
        v |= {f"dataset:{k}": p for k, p in damage("dataset", f["DS"], scratch / f"ds-{cmd.replace(' ', '_')}").items()}
    if kind == "access" and cmd in ("designs --packed", "time --trace"):
        v["mismatch:other-trace"] = f["T_other"]
        v["mismatch:2MiB-pages"] = f["T_2m"]
    if cmd == "compare b":
        v["mismatch:2MiB-pages"] = f["S_2m"]
    return v


def writer_cases(f):
    """(command, case, argv, paths the user must keep) for the output rule."""
    T, S, U = f["T"], f["S"], f["user"]
    name250 = "x" * 250 + ".csv"
    cases = [
        ("mrc", "out-is-input", ["mrc", T, "-o", T, "--force"], [T]),
        ("mrc", "out-is-plot", ["mrc", T, "-o", "{OUT}/m.png", "--plot", "{OUT}/m.png"], []),
        ("mrc", "out-fifo", ["mrc", T, "-o", f["fifo"], "--force"], []),
        ("mrc", "name-250", ["mrc", T, "-o", "{OUT}/" + name250], []),
        ("mrc", "name-300", ["mrc", T, "-o", "{OUT}/" + "y" * 300], []),
        ("emulate", "out-is-input", ["emulate", T, "-o", T, "--force", "--memory-fraction", 0.5], [T]),
        ("export", "out-is-input", ["export", T, "-o", T, "--force"], [T]),
        ("export", "out-is-user-folder", ["export", T, "-o", U, "--force"], [U]),
        ("generate", "out-is-spec", ["generate", "--spec", f["spec"], "--steps", 1, "-o", f["spec"], "--force"],
         [f["spec"]]),
        ("time", "out-is-save-costs", ["time", S, "--device", "nvme-tlc", "--compute", "none", "--fault-cpu-us", 1,
                                       "--reclaim-cpu-us", 1, "-o", "{OUT}/x", "--save-costs", "{OUT}/x"], []),
        ("time", "save-costs-is-costs", ["time", S, "--device", "nvme-tlc", "--compute", "none", "--costs", f["costs"],
                                         "--save-costs", f["costs"], "--force"], [f["costs"]]),
        ("time", "out-is-stream", ["time", S, "--device", "nvme-tlc", "--compute", "none", "--fault-cpu-us", 1,
                                   "--reclaim-cpu-us", 1, "-o", S, "--force"], [S]),
        ("compare", "plot-is-input", ["compare", S, S, "--plot", S, "--force"], [S]),
        ("ssd replay", "out-is-input", ["ssd", "replay", S, "--device", "nvme-tlc", "--capacity", "1GiB", "-o", S,
                                        "--force"], [S]),
        ("ssd synth", "out-is-device", ["ssd", "synth", "--device", f["dev"], "--pattern", "randwrite", "--volume",
                                        "0.05x", "--capacity", "1GiB", "--no-timing", "-o", f["dev"], "--force"],
         [f["dev"]]),
        ("fio jobs", "out-is-user-folder", ["fio", "jobs", S, "-o", U, "--force", "--sweep", "4k"], [U]),
        ("fio jobs", "out-has-fifo-manifest", ["fio", "jobs", S, "-o", f["fifojobs"], "--force", "--sweep", "4k"],
         [f["fifojobs"]]),
        ("fio jobs", "out-holds-input", ["fio", "jobs", f["J"] / "s.swapio.parquet", "-o", f["J"], "--force",
                                         "--sweep", "4k"], []),
        ("fio import", "out-is-input", ["fio", "import", f["iolog"], "-o", f["iolog"], "--force"], [f["iolog"]]),
        ("fio profile", "out-is-results", ["fio", "profile", "{RUN}", "-o", "{RUN}/results.parquet", "--force"],
         ["{RUN}"]),
        ("fio run", "out-is-user-folder", ["fio", "run", f["J"], "--target", "{OUT}/t.dat", "--size", "8MiB",
                                           "--runtime", 1, "--jobs", "sweep_read_4k", "-o", U, "--force"], [U]),
        ("fio run", "target-is-manifest", ["fio", "run", f["J"], "--target", f["J"] / "manifest.json", "--size",
                                           "8MiB", "--runtime", 1, "--jobs", "sweep_read_4k", "--force",
                                           "-o", "{OUT}/r"], [f["J"]]),
        ("designs", "out-is-user-folder", ["designs", T, "-o", U, "--force", "--memory-fraction", 0.5, "--device",
                                           "none"], [U]),
        ("run", "out-is-user-folder", ["run", "--preset", "tiny", "--steps", 2, "--no-fio", "--no-thesis", "-o", U,
                                       "--force"], [U]),
        ("report", "out-is-user-folder", ["report", f["P"], "-o", U], [U]),
        ("report", "out-is-input", ["report", f["P"], "-o", f["P"]], [f["P"]]),
        ("sweep", "out-is-user-folder", ["sweep", f["sweep"], "--workers", 1, "-o", U], [U]),
        ("sweep", "plot-is-sweep-file", ["sweep", f["sweep"], "--workers", 1, "-o", "{OUT}/sw", "--plot",
                                         f["sweep"]], [f["sweep"]]),
    ]
    if f["DS"].exists():
        cases += [("mrc", "out-in-dataset", ["mrc", f["DS"], "-o", f["DS"] / "m.csv"], [f["DS"]]),
                  ("generate", "out-is-dataset-with-user-file",
                   ["generate", "--preset", "tiny", "--steps", 2, "--workers", 1, "--parts", 2, "-o", "{DSCOPY}",
                    "--force"], ["{DSCOPY}/notes.txt"])]
    return cases


#: the option-value class: what a hostile user types as a number or a size
VALUES = {"-1": "-1", "0": "0", "nan": "nan", "inf": "inf", "1e400": "1e400", "2^64": str(2 ** 64), "word": "lots",
          "empty": ""}
#: commands left out of the option-value class, and why
NO_VALUE_CASES = {"capture": "needs root, a kernel and the capture lock", "train": "needs torch",
                  "ssd devices": "no numeric option"}


def value_bases(f) -> dict[str, list]:
    """Each command's good arguments (its control): small presets, 1-2 steps, small drives, --dry-run for fio."""
    OUT = "{OUT}"
    return {
        "presets": ["presets", "tiny"],
        "generate": ["generate", "--preset", "tiny", "--steps", 1, "-o", OUT + "/g.access.parquet"],
        "inspect": ["inspect", f["T"]],
        "emulate": ["emulate", f["T"], "-o", OUT + "/s.swapio.parquet", "--memory-fraction", 0.5],
        "mrc": ["mrc", f["T"], "-o", OUT + "/m.csv"],
        "export": ["export", f["S"], "--format", "mqsim", "-o", OUT + "/e.trace"],
        "runtime-profile": ["runtime-profile", f["CAP"], "-o", OUT + "/r.toml"],
        "compare": ["compare", f["S"], f["S"]],
        "ssd replay": ["ssd", "replay", f["S"], "--device", "nvme-tlc", "--capacity", "4GiB", "-o", OUT + "/t.parquet"],
        "ssd synth": ["ssd", "synth", "--device", "nvme-tlc", "--pattern", "randwrite", "--volume", "0.01x",
                      "--capacity", "4GiB", "--no-timing", "-o", OUT + "/t.parquet"],
        "ssd thesis": ["ssd", "thesis", "--device", "nvme-tlc", "--capacity", "4GiB", "--drive-writes", 0.1,
                       "-o", OUT + "/t.json"],
        "ssd fit": ["ssd", "fit", f["RUN"], "-o", OUT + "/fit.toml"],
        "fio jobs": ["fio", "jobs", f["S"], "-o", OUT + "/j", "--sweep", "4k", "--max-requests", 100],
        "fio run": ["fio", "run", f["J"], "--target", OUT + "/t.dat", "--size", "8MiB", "--runtime", 1, "--jobs",
                    "sweep_read_4k", "-o", OUT + "/r", "--dry-run"],
        "fio results": ["fio", "results", f["RUN"]],
        "fio import": ["fio", "import", f["iolog"], "-o", OUT + "/i.swapio.parquet"],
        "fio compare": ["fio", "compare", f["RUN"]],
        "fio profile": ["fio", "profile", f["RUN"], "-o", OUT + "/p.toml"],
        "time": ["time", f["S"], "--device", "nvme-tlc", "--compute", "none", "--fault-cpu-us", 1,
                 "--reclaim-cpu-us", 1],
        "designs": ["designs", f["T"], "-o", OUT + "/d", "--memory-fraction", 0.5, "--device", "none"],
        "run": ["run", "--preset", "tiny", "--steps", 2, "--no-fio", "--no-thesis", "-o", OUT + "/p"],
        "sweep": ["sweep", "--preset", "tiny", "--steps", 2, "--memory-fraction", 0.5, "--workers", 1,
                  "-o", OUT + "/sw"],
        "report": ["report", f["P"], "-o", OUT + "/r"],
    }


def _commands(group, path=()):
    import click

    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the top group loads each command when named
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))
        else:
            yield " ".join((*path, name)), cmd


#: the text options that take a size (swaptrace.core.units.parse_bytes, or ``Nx`` of the drive for --volume); found by
#: the flag named in the command's parse_bytes call, listed here where the flag is passed indirectly
SIZE_FLAGS_INDIRECT = {"--page-size", "--write-buffer", "--page-bytes", "--sweep"}


def size_flags() -> set[str]:
    """Every flag some command reads with :func:`swaptrace.core.units.parse_bytes` (read off the command modules)."""
    import re

    found = set(SIZE_FLAGS_INDIRECT)
    for path in Path("swaptrace/commands").glob("*.py"):
        found |= set(re.findall(r'parse_bytes\([^()]*?,\s*"(--[a-z-]+)"', path.read_text()))
    return found


def value_options(cmd) -> list[str]:
    """The options of ``cmd`` that take a number or a size: click's int and float types, and sized text."""
    import click

    sizes = size_flags()
    out = []
    for p in cmd.params:
        if not isinstance(p, click.Option) or p.is_flag:
            continue
        t = p.type
        numeric = isinstance(t, click.types.IntParamType | click.types.FloatParamType | click.IntRange
                             | click.FloatRange)
        sized = isinstance(t, click.types.StringParamType) and any(o in sizes for o in p.opts)
        if numeric or sized:
            out.append(max(p.opts, key=len))
    return out


def value_cases(f) -> tuple[list[tuple[str, str, list]], dict[str, list]]:
    """(command, case, argv) of the option-value class, and each command's control (its good arguments)."""
    bases = value_bases(f)
    cases = []
    for name, cmd in _commands(cli):
        if name in NO_VALUE_CASES:
            continue
        base = bases[name]
        for opt in value_options(cmd):
            # the option's other spellings and a value given in the base are taken out: the case sets it alone
            spellings = next(p.opts for p in cmd.params if opt in getattr(p, "opts", ()))
            kept, i = [], 0
            while i < len(base):
                if str(base[i]) in spellings:
                    i += 2
                    continue
                kept.append(base[i])
                i += 1
            for vname, value in VALUES.items():
                cases.append((name, f"{opt} {vname}", [*kept, opt, value]))
    return cases, bases


def run_case(args, out: Path, watch: list[Path], base: Path, fill) -> tuple[str, str]:
    before = {p: digest(p) if p.is_dir() else (p.read_bytes() if p.exists() else None) for p in watch}
    base_before = listing(base)
    r = invoke(fill(args))
    if r is None:
        return "hang", "no answer within 60 s"
    for p, old in before.items():
        now = digest(p) if p.is_dir() else (p.read_bytes() if p.exists() else None)
        if p.is_dir() and isinstance(old, dict):
            if any(now.get(k) != v for k, v in old.items()):
                return "data-loss", str(p)
        elif now != old:
            return "data-loss", str(p)
    err = (r.stderr if r.stderr_bytes is not None else r.output).strip()
    tb = "Traceback" in r.output or (r.exception is not None and not isinstance(r.exception, SystemExit))
    if tb:
        return "traceback", f"{type(r.exception).__name__}: {str(r.exception)[:140]}"
    if r.exit_code == 0:
        return "accepted", r.output.strip().splitlines()[0][:100] if r.output.strip() else ""
    left = listing(base) - base_before
    if r.exit_code == 2 and left:
        return "left-behind", ", ".join(sorted(left)[:3])
    lines = err.splitlines()
    if r.exit_code != 2:
        return f"exit-{r.exit_code}", lines[-1][:140] if lines else ""
    if len(lines) != 1 or not lines[0].startswith("Error:"):
        return "many-lines", " | ".join(lines[:3])[:160]
    return "good", lines[0][:160]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the dataset folder (no Dask) and the sweep rows")
    ap.add_argument("--only", default=None, help="only commands containing this word")
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hostile-"))
    started = time.perf_counter()
    f = setup(base, a.quick)
    run_dir = f["RUN"]
    scratch = base / "scratch"
    outcomes: list[tuple[str, str, str, str]] = []
    n = 0

    def fill_for(out: Path):
        def fill(args):
            return [str(x).replace("{OUT}", str(out)).replace("{RUN}", str(run_dir))
                    .replace("{DSCOPY}", str(base / "dscopy")) for x in args]
        return fill

    for cmd, kind, argv in reader_slots(f):
        if a.only and a.only not in cmd:
            continue
        if a.quick and cmd.startswith("sweep"):
            continue
        # the slot's control: its good input must pass, so no case is good by failing on something else
        control = base / "control"
        control.mkdir()
        good = control_input(cmd, kind, f)
        r = invoke(fill_for(control)([str(x).replace("{X}", str(good)) for x in argv]), timeout=300)
        failed = None if r is not None and r.exit_code == 0 else \
            "hang" if r is None else (r.output.strip().splitlines() or ["?"])[-1][:140]
        shutil.rmtree(control, ignore_errors=True)
        if failed:
            print(f"control fails: {cmd} ({kind}): {failed}")
        for vname, path in variants(cmd, kind, f, scratch).items():
            n += 1
            out = base / f"out-{n}"
            out.mkdir()
            args = [str(x).replace("{X}", str(path)) for x in argv]
            outcome, detail = run_case(args, out, [f["T"], f["S"], f["P"]], base, fill_for(out))
            if failed and outcome == "good":
                outcome, detail = "no-control", failed
            outcomes.append((cmd, vname, outcome, detail))
            shutil.rmtree(out, ignore_errors=True)
    if f["DS"].exists():
        shutil.copytree(f["DS"], base / "dscopy")
        (base / "dscopy" / "notes.txt").write_text("mine")
    for cmd, case, argv, watch in writer_cases(f):
        if a.only and a.only not in cmd:
            continue
        if a.quick and cmd.startswith("sweep"):
            continue
        n += 1
        out = base / f"out-{n}"
        out.mkdir()
        fill = fill_for(out)
        outcome, detail = run_case(argv, out, [Path(fill([w])[0]) for w in watch], base, fill)
        outcomes.append((cmd, case, outcome, detail))
        shutil.rmtree(out, ignore_errors=True)
    cases, controls = value_cases(f)
    failed_controls = {}
    for name, argv in controls.items():
        if a.only and a.only not in name or (a.quick and name == "sweep"):
            continue
        out = base / "control"
        out.mkdir()
        r = invoke(fill_for(out)(argv), timeout=300)
        if r is None or r.exit_code != 0:
            failed_controls[name] = "hang" if r is None else (r.output.strip().splitlines() or ["?"])[-1][:140]
        shutil.rmtree(out, ignore_errors=True)
    for name, why in failed_controls.items():
        print(f"control fails: {name}: {why}")
    for cmd, case, argv in cases:
        if a.only and a.only not in cmd or (a.quick and cmd == "sweep"):
            continue
        n += 1
        out = base / f"out-{n}"
        out.mkdir()
        outcome, detail = run_case(argv, out, [f["T"], f["S"], f["P"], f["RUN"], f["CAP"]], base, fill_for(out))
        if cmd in failed_controls and outcome == "good":
            outcome, detail = "no-control", failed_controls[cmd]
        outcomes.append((cmd, case, outcome, detail))
        shutil.rmtree(out, ignore_errors=True)
    by = collections.Counter(o for _, _, o, _ in outcomes)
    for cmd, v, o, d in outcomes:
        if o != "good":
            print(f"{o:<12} {cmd:<24} {v:<34} {d}")
    print(f"\n{len(outcomes)} cases in {time.perf_counter() - started:.0f} s: " +
          ", ".join(f"{k} {c}" for k, c in by.most_common()))
    shutil.rmtree(base, ignore_errors=True)
    return 0 if not by.keys() - {"good", "accepted"} else 1


if __name__ == "__main__":
    sys.exit(main())
