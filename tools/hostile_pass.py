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
- ``traceback``, ``hang``, ``data-loss``, ``left-behind``, ``many-lines``, ``exit-N``: not handled well (``exit-N``
  is the wrong exit code: N = 128 + the signal for a process killed by one);
- ``bad-output``: exit 0, but what it wrote does not read back (a name that breaks the TOML it is written into);
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

The surfaces of issue 39, each counted apart at the end (``--only SURFACE`` runs one):

- ``train`` (a real process, its address space limited to 8 GiB): models inside the spec's bounds that cannot fit
  in memory (a table of 2^31-1 rows, tiny at batch 4 Mi, a 1 Mi-wide MLP, ``--preset criteo-terabyte``), every
  value of --steps, --seed and --threads, and SWAPTRACE_MARKER naming a FIFO with no reader, /proc/version,
  /dev/full, a folder or the user's notes.txt (kept byte for byte);
- ``mark_step``: ``python -c "from swaptrace import mark_step; mark_step(X)"`` for X = -5, 2.9, True, 10**30 and
  ``mark("a\\nswaptrace step 9")`` with SWAPTRACE_MARKER naming the user's file, and ``mark_step()`` with each
  hostile marker: the exception python prints last must be one line, the file as it was (a traceback is python's);
- ``runtime-profile``: a capture with every swapio damage it can also have, ``--name`` with a newline or a quote
  (an accepted profile must read back: ``bad-output`` otherwise), --steps beyond the capture's marks, a --preset
  that is not the one captured, -o onto the capture as typed, ``./sub/../``, a symbolic link and a hard link;
- ``generate --runtime``: the profile with each field missing or of the wrong type, -o onto it under each spelling;
- ``ssd fit``: a run folder whose results file is a FIFO, a link to one or to /dev/zero, dangling, another kind;
  -o inside the run folder (--force); device names with a newline or a quote (the device must read back);
- ``fio run --steady``: --round, --ss-ramp, --steady-cap and --fill-cap without --steady (dry and real runs on an
  8 MiB file), a cap shorter than a round or the ramp, every bad value of each with --steady;
- ``force folders``: ``run``, ``designs``, ``fio jobs``, ``fio run`` (with --force), ``sweep`` and ``report``
  (which take none) with -o a folder of the user's files, and the same holding a file of the user's under the
  name the command marks its folders with (``pipeline.json``, ``report.md``, ...): refused, every file kept;
- ``signals``: Ctrl-C (SIGINT to the process group) and SIGTERM (to the process) once ``emulate``, ``run
  --no-fio`` (at work, and as they write), ``train`` and, as root, ``capture -- sleep`` are at work: exit 130, one
  line after the signal, no ``.partial``, no process of the session (or the captured program) and nothing of the
  capture left.

Real processes run in a session of their own, ``python -m swaptrace.cli`` importing the same swaptrace as the
pass, under a timeout after which the session is killed (``hang``); ``no-control`` there also means the command
ended before the signal was sent. ``--log FILE`` writes every case (surface, command, case, argv, outcome, detail,
first line of stderr) as a JSON line, and ``--rerun FILE`` runs again the cases such a log scored other than good.

Not covered, and why: ``capture`` beyond its signals (root, a kernel and the machine-wide capture lock:
tests/test_capture_*), ``train --spec`` of damaged files (the reader of generate --spec),
``runtime-profile --spec``, ``run --preset FILE``/``--device FILE``/``--time-costs`` and ``sweep --trace``/
``--device FILE`` (the same readers as generate --spec, ssd --device, time --costs and emulate, which are
covered), ``fio run`` for real beyond the steady cases (fio on a file; only its --dry-run checks here) and block
devices.

Run from the repository root:  PYTHONPATH=$PWD python tools/hostile_pass.py [--quick] [--only WORD]... [--case WORD]...
[--log FILE] [--rerun FILE]. Prints one line per case that is not good, then the counts by outcome, then by surface.
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
        r = CliRunner().invoke(cli, [str(a) for a in args])
    except Hang:
        return None
    finally:
        signal.alarm(0)
    # click's runner catches what the command raises, the alarm's Hang among them: that is a hang, not a traceback
    return None if isinstance(r.exception, Hang) else r


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



def run_case(args, out: Path, watch: list[Path], base: Path, fill, cwd: Path | None = None,
             after=None) -> tuple[str, str, str]:
    """One case in-process: (outcome, detail, first line of stderr). ``after(argv)`` judges an accepted case's
    output (a problem in one line, or None); ``cwd`` is the folder the command runs in (relative spellings)."""
    before = {p: digest(p) if p.is_dir() else (p.read_bytes() if p.exists() else None) for p in watch}
    base_before = listing(base)
    argv = fill(args)
    here = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        r = invoke(argv)
    finally:
        os.chdir(here)
    if r is None:
        return "hang", "no answer within 60 s", ""
    err = (r.stderr if r.stderr_bytes is not None else r.output).strip()
    first = (err.splitlines() or [""])[0][:160]
    for p, old in before.items():
        now = digest(p) if p.is_dir() else (p.read_bytes() if p.exists() else None)
        if p.is_dir() and isinstance(old, dict):
            lost = [k for k, v in old.items() if now.get(k) != v]
            if lost:
                return "data-loss", f"{p}: " + ", ".join(f"{k} {'changed' if k in now else 'removed'}"
                                                        for k in lost[:4]), first
        elif now != old:
            return "data-loss", str(p), first
    tb = "Traceback" in r.output or (r.exception is not None and not isinstance(r.exception, SystemExit))
    if tb:
        return "traceback", f"{type(r.exception).__name__}: {str(r.exception)[:140]}", first
    if r.exit_code == 0:
        problem = after(argv) if after is not None else None
        if problem:
            return "bad-output", problem[:160], first
        return "accepted", r.output.strip().splitlines()[0][:100] if r.output.strip() else "", first
    left = listing(base) - base_before
    if r.exit_code == 2 and left:
        return "left-behind", ", ".join(sorted(left)[:3]), first
    lines = err.splitlines()
    if r.exit_code != 2:
        return f"exit-{r.exit_code}", lines[-1][:140] if lines else "", first
    if len(lines) != 1 or not lines[0].startswith("Error:"):
        return "many-lines", " | ".join(lines[:3])[:160], first
    return "good", lines[0][:160], first


# ---- issue 39: train, mark_step, runtime profiles, ssd fit, fio run --steady, signals, folders of the user's ----
#
# The surfaces below are met as a user meets them. Those that need a real process -- `train` (torch, an address
# space limit so that a model that cannot fit is never tried on this machine), `mark_step` from a `python -c`
# one-liner, and Ctrl-C or SIGTERM to a working command -- run as `python -m swaptrace.cli` in a session of their
# own, under a timeout after which the session is killed (a hang); the others run in-process like the cases
# above. Each case names the surface it belongs to, counted apart at the end.

#: the surfaces, in the order the pass runs them (the classes of the counts at the end)
SURFACES = ("readers", "writers", "values", "train", "mark_step", "runtime-profile", "generate --runtime", "ssd fit",
            "fio run --steady", "force folders", "signals")
#: the environment variable a capture names its marker file in (swaptrace.markers.MARKER_ENV)
MARKER_ENV = "SWAPTRACE_MARKER"
#: the address space a `train` case may use: a model that cannot fit must be refused, not tried, and a product
#: that tries fails here instead of swapping this shared machine to a halt
TRAIN_AS_BYTES = 8 << 30
#: what a user's notes are, byte for byte (a marker file must leave them so)
NOTES = b"my notes\nline two\n"


class Surfaces:
    """Where the cases of issue 39 find their inputs: made once, under ``base/i39``."""

    def __init__(self, f: dict[str, Path], base: Path):
        self.f, self.base = f, base
        self.root = base / "i39"
        self.root.mkdir(exist_ok=True)
        self._n = 0

    def folder(self, name: str) -> Path:
        """A new folder of its own for one case's inputs."""
        self._n += 1
        d = self.root / f"{self._n:03d}-{name.replace('/', '_').replace(' ', '_')[:60]}"
        d.mkdir(parents=True)
        return d


def _swaptrace_root() -> Path:
    """The folder whose ``swaptrace`` the pass imports: the processes it starts import the same one."""
    import swaptrace

    return Path(swaptrace.__file__).resolve().parents[1]


class ProcCase:
    """A case run as a real process (``python ARGV``), scored by its exit code, stderr and what it left."""

    def __init__(self, surface: str, cmd: str, case: str, argv: list, *, watch=(), env=None, cwd: Path | None = None,
                 timeout: float = 60, one_liner: bool = False, sig: int | None = None, ready=None,
                 token: str | None = None, mem_limit: int | None = None):
        self.surface, self.cmd, self.case = surface, cmd, case
        self.argv = [str(a) for a in argv]
        self.watch = [Path(w) for w in watch]
        self.env = dict(env or {})
        self.cwd, self.timeout, self.one_liner = cwd, timeout, one_liner
        self.sig, self.ready, self.token, self.mem_limit = sig, ready, token, mem_limit

    def shown(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env.items())
        words = ["swaptrace", *self.argv[2:]] if self.argv[:2] == ["-m", "swaptrace.cli"] else ["python", *self.argv]
        return (env + " " if env else "") + " ".join(_quote(w) for w in words)


def _quote(word: str) -> str:
    import shlex

    return shlex.quote(word)


def _cli(*args) -> list:
    return ["-m", "swaptrace.cli", *args]


def _child_setup(mem_limit: int | None) -> None:  # runs in the child, before exec
    import resource

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a terminal's Ctrl-C reaches it as it reaches a user's command
    if mem_limit:
        resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))


def _session(sid: int) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.getsid(int(d.name)) == sid:
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def _with_word(token: str) -> list[int]:
    """Processes whose command line holds ``token`` (a child that left the session, e.g. a captured program)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if token.encode() in Path(d, "cmdline").read_bytes().split(b"\0"):
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:60]
    except OSError:
        return "?"


def _snapshot(p: Path):
    if p.is_dir():
        return digest(p)
    try:
        return p.read_bytes() if p.is_file() and not p.is_fifo() else ("other" if os.path.lexists(p) else None)
    except OSError:
        return "unreadable"


def _changed(watch: dict[Path, object]) -> str | None:
    for p, old in watch.items():
        now = _snapshot(p)
        if isinstance(old, dict):
            if not isinstance(now, dict):
                return f"{p} (no longer a folder)"
            lost = [k for k, v in old.items() if now.get(k) != v]
            if lost:
                return f"{p}: " + ", ".join(f"{k} {'changed' if k in now else 'removed'}" for k in lost[:4])
        elif now != old:
            if isinstance(old, bytes) and isinstance(now, bytes) and now.startswith(old):
                return f"{p} changed (appended {now[len(old):][:60]!r})"
            return f"{p} changed"
    return None


def _partials(base: Path) -> list[str]:
    return sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.name.endswith(".partial"))


def _exception_lines(err: str) -> list[str]:
    """The message of the exception a ``python -c`` traceback ends in: the lines after its last frame."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if not any(ln.startswith("Traceback") for ln in lines):
        return lines
    last = max(i for i, ln in enumerate(lines) if ln.startswith((" ", "\t", "Traceback")))
    return lines[last + 1:]


def run_process(c: ProcCase, base: Path) -> tuple[str, str, str]:
    """Run ``c`` as a process in a session of its own: (outcome, detail, first line of stderr)."""
    import subprocess
    import threading

    watch = {p: _snapshot(p) for p in c.watch}
    base_before = listing(base)
    env = dict(os.environ)
    env.pop(MARKER_ENV, None)
    env["PYTHONPATH"] = str(_swaptrace_root())
    env.update(c.env)
    err_chunks: list[bytes] = []
    out_chunks: list[bytes] = []
    p = subprocess.Popen([sys.executable, *c.argv], cwd=c.cwd or base, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                         preexec_fn=lambda: _child_setup(c.mem_limit))
    readers = [threading.Thread(target=lambda s=s, b=b: b.extend(iter(lambda: s.read1(65536), b"")), daemon=True)
               for s, b in ((p.stderr, err_chunks), (p.stdout, out_chunks))]
    for t in readers:
        t.start()
    t0 = time.monotonic()
    sent_at = None
    hung = False
    try:
        if c.sig is not None:
            while p.poll() is None and not c.ready(p.pid, time.monotonic() - t0):
                if time.monotonic() - t0 > c.timeout:
                    break
                time.sleep(0.02)
            if p.poll() is None and time.monotonic() - t0 <= c.timeout:
                sent_at = len(b"".join(err_chunks))
                if c.sig == signal.SIGINT:
                    os.killpg(p.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole foreground group
                else:
                    os.kill(p.pid, c.sig)  # `kill PID`, as a service manager or a user does
        try:
            p.wait(timeout=max(1.0, c.timeout - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            hung = True
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    finally:
        # what outlived it: its session, and a captured program (found by a word of its command line); looked
        # for before its output is read to the end, since a process left behind may hold the pipes open
        deadline = time.monotonic() + (20 if c.sig is not None else 3)
        while True:
            alive = sorted(set(_session(p.pid)) | (set(_with_word(c.token)) if c.token else set()))
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        for pid in alive:  # the case's own processes: ended by their ids
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for t in readers:
            t.join(timeout=10)
        if not any(t.is_alive() for t in readers):  # closing a pipe a thread still reads would wait for it
            p.stdout.close()
            p.stderr.close()
    raw_err = b"".join(err_chunks)
    err = raw_err.decode(errors="replace")
    out = b"".join(out_chunks).decode(errors="replace")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    first = lines[0][:160] if lines else ""
    capture_left = _capture_leftovers(p.pid) if c.surface == "signals" and "capture" in c.cmd else []
    if c.one_liner:
        first = (_exception_lines(err) or lines or [""])[-1][:160]
    if hung:
        return "hang", f"no answer within {c.timeout:g} s" + (f"; stderr: {first}" if first else ""), first
    lost = _changed(watch)
    if lost:
        return "data-loss", lost + (f"; stderr: {first}" if first else ""), first
    if c.sig is not None and sent_at is None:
        return "no-control", "ended before the signal: " + (first or f"exit {p.returncode}"), first
    rc = p.returncode if p.returncode >= 0 else 128 - p.returncode
    killed = f" (killed by {signal.Signals(-p.returncode).name})" if p.returncode < 0 else ""
    new = sorted(listing(base) - base_before)
    if c.one_liner:  # the traceback is python's; what counts is the exception it ends in
        message = _exception_lines(err)
        if rc == 0:
            return "accepted", (out.strip().splitlines() or ["no error, exit 0"])[0][:100], first
        if alive or new:
            return "left-behind", ", ".join([*(f"process {q} {_comm(q)}" for q in alive), *new][:3]), first
        if rc != 1:
            return f"exit-{rc}", (message[-1] if message else "")[:140] + killed, first
        if len(message) != 1:
            return "many-lines", " | ".join(message[:3])[:160], first
        return "good", message[0][:160], first
    if "Traceback" in err:
        return "traceback", (_exception_lines(err) or lines or [""])[-1][:140], first
    if rc == 0 and c.sig is None:
        return "accepted", (out.strip().splitlines() or [""])[0][:100], first
    if c.sig is not None:
        left = [f"process {q} {_comm(q)}" for q in alive] + [f"partial {x}" for x in _partials(base)
                                                               if x not in base_before] + capture_left
        after = [ln for ln in raw_err[sent_at:].decode(errors="replace").splitlines() if ln.strip()]
    else:
        left = [f"process {q} {_comm(q)}" for q in alive] + new
        after = lines
    if left:
        return "left-behind", ", ".join(left[:3])[:160], first
    expected = 130 if c.sig is not None else 2
    if rc != expected:
        return f"exit-{rc}", ((after or lines or [""])[-1][:140]) + killed, first
    if len(after) != 1 or (c.sig is None and not after[0].startswith("Error:")):
        return "many-lines", " | ".join(after[:3])[:160], first
    return "good", after[0][:160], first


def _capture_leftovers(pid: int) -> list[str]:
    """What the capture of process ``pid`` left: cgroups, its tracefs instance, swap on a loop device, work folder."""
    try:
        from swaptrace.capture.leftovers import PREFIX, find_leftovers

        return [x for x in find_leftovers() if f"{PREFIX}{pid}" in x]
    except Exception as exc:  # noqa: BLE001 -- the check itself failing is reported, not fatal
        return [f"(could not look: {exc})"]


def _after_s(seconds: float):
    return lambda pid, t: t >= seconds


def _partial_in(folder: Path):
    """Ready once the command writes: a temporary of its output exists."""
    return lambda pid, t: any(p.name.endswith(".partial") for p in folder.rglob(".*"))


def _torch_working(then: float):
    """Ready ``then`` seconds after torch is loaded into the process (the model is built and stepping)."""
    seen: dict[str, float] = {}

    def ready(pid: int, t: float) -> bool:
        if "at" not in seen:
            try:
                if "libtorch" in Path(f"/proc/{pid}/maps").read_text():
                    seen["at"] = t
            except OSError:
                pass
            return False
        return t - seen["at"] >= then
    return ready


def _child_running(token: str, then: float):
    """Ready ``then`` seconds after a process with ``token`` in its command line runs (a captured program)."""
    seen: dict[str, float] = {}

    def ready(pid: int, t: float) -> bool:
        if "at" not in seen:
            if _with_word(token):
                seen["at"] = t
            return False
        return t - seen["at"] >= then
    return ready


def _torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def _train_spec(path: Path, *, rows: int = 1000, bottom=(13, 64, 16), top=(64, 1)) -> Path:
    """A spec ``train`` takes (float32 tables of the bottom MLP's output width, one output), inside every bound."""
    d = bottom[-1]
    path.write_text(f'name = "{path.stem}"\nbatch_size = 256\noptimizer = "sgd"\nbottom_mlp = {list(bottom)}\n'
                    f'top_mlp = {list(top)}\nalpha = 1.05\ndefault_steps = 2\n\n[[tables]]\nname = "t"\n'
                    f"rows = {rows}\ndim = {d}\nlookups = 1\n")
    from swaptrace.workload.spec import load_spec

    load_spec(str(path))  # inside the spec's bounds: the case is about memory, not about the spec's checks
    return path


def _tiny_at_batch(path: Path, batch: int) -> Path:
    """The tiny preset at another batch size: its MLPs' activations alone are ~6.6 KiB a sample (27 GiB at 4 Mi)."""
    import re

    text = (_swaptrace_root() / "swaptrace" / "presets" / "tiny.toml").read_text()
    path.write_text(re.sub(r"(?m)^batch_size = \d+$", f"batch_size = {batch}", text).replace('name = "tiny"',
                                                                                              f'name = "{path.stem}"'))
    from swaptrace.workload.spec import load_spec

    assert load_spec(str(path)).batch_size == batch
    return path


def _hostile_markers(s: Surfaces, name: str) -> dict[str, tuple[Path, list[Path]]]:
    """name -> (what SWAPTRACE_MARKER names, the user's files it must leave as they are)."""
    d = s.folder(f"markers-{name}")
    fifo = d / "marker.fifo"
    os.mkfifo(fifo)  # no reader: opened for writing it blocks for ever
    notes = d / "notes.txt"
    notes.write_bytes(NOTES)
    (d / "a-folder").mkdir()
    return {"fifo-no-reader": (fifo, []), "proc-version": (Path("/proc/version"), []),
            "dev-full": (Path("/dev/full"), []), "folder": (d / "a-folder", []), "user-file": (notes, [notes])}


def train_cases(s: Surfaces) -> tuple[list[ProcCase], list]:
    """``train``: models inside the spec's bounds that cannot fit in memory, every numeric option's bad values,
    and a hostile SWAPTRACE_MARKER. Returns the cases and the surface's control (good arguments)."""
    d = s.folder("train-specs")
    quick = ["--steps", 1, "--quiet"]
    big = {"rows-2^31-1": _train_spec(d / "rows.toml", rows=(1 << 31) - 1),
           "tiny-at-batch-4Mi": _tiny_at_batch(d / "batch.toml", 1 << 22),
           "mlp-1Mi-wide": _train_spec(d / "mlp.toml", bottom=(13, 1 << 20, 1 << 20, 16))}
    cases = [ProcCase("train", "train", f"cannot-fit:{name}", _cli("train", "--spec", spec, *quick), cwd=d,
                      timeout=180, mem_limit=TRAIN_AS_BYTES) for name, spec in big.items()]
    cases.append(ProcCase("train", "train", "cannot-fit:preset-criteo-terabyte",
                          _cli("train", "--preset", "criteo-terabyte", *quick), cwd=d, timeout=180,
                          mem_limit=TRAIN_AS_BYTES))
    from swaptrace.commands.train import command as train_cmd

    for opt in value_options(train_cmd):
        for vname, value in VALUES.items():
            if opt == "--seed" and vname == "0":
                continue  # seed 0 is the default, not a bad value
            rest = ["--quiet"] + (["--steps", 1] if opt != "--steps" else [])
            cases.append(ProcCase("train", "train", f"{opt} {vname}", _cli("train", "--preset", "tiny", *rest, opt,
                                                                          value), cwd=d, mem_limit=TRAIN_AS_BYTES))
    for name, (marker, keep) in _hostile_markers(s, "train").items():
        cases.append(ProcCase("train", "train", f"{MARKER_ENV}={name}", _cli("train", "--preset", "tiny", "--steps",
                                                                               2, "--quiet"),
                              env={MARKER_ENV: str(marker)}, watch=keep, cwd=marker.parent if keep else d,
                              timeout=60, mem_limit=TRAIN_AS_BYTES))
    return cases, _cli("train", "--preset", "tiny", "--steps", 1, "--quiet")


def mark_step_cases(s: Surfaces) -> tuple[list[ProcCase], list]:
    """``mark_step`` and ``mark`` from a ``python -c`` one-liner with SWAPTRACE_MARKER naming a file of the user's:
    a bad step or a line that forges a step is refused by a one-line exception, the file left as it was; and
    ``mark_step()`` with each hostile marker (never a hang)."""
    cases = []
    calls = {"mark_step(-5)": "from swaptrace import mark_step; mark_step(-5)",
             "mark_step(2.9)": "from swaptrace import mark_step; mark_step(2.9)",
             "mark_step(True)": "from swaptrace import mark_step; mark_step(True)",
             "mark_step(10**30)": "from swaptrace import mark_step; mark_step(10**30)",
             "mark(newline+step)": 'from swaptrace.markers import mark; mark("a\\nswaptrace step 9")'}
    for name, code in calls.items():
        d = s.folder(f"mark-{name}")
        notes = d / "notes.txt"
        notes.write_bytes(NOTES)
        cases.append(ProcCase("mark_step", "mark_step", f"{name} marker=user-file", ["-c", code],
                              env={MARKER_ENV: str(notes)}, watch=[notes], cwd=d, one_liner=True, timeout=30))
    for name, (marker, keep) in _hostile_markers(s, "mark_step").items():
        if name == "user-file":
            continue  # above, with every call
        cases.append(ProcCase("mark_step", "mark_step", f"mark_step() marker={name}",
                              ["-c", "from swaptrace import mark_step; mark_step()"], env={MARKER_ENV: str(marker)},
                              watch=keep, cwd=marker.parent, one_liner=True, timeout=30))
    return cases, ["-c", "from swaptrace import mark_step; mark_step(3)"]


#: the commands the signals surface interrupts (its cases' command column)
SIGNAL_COMMANDS = ("signal emulate", "signal run --no-fio", "signal train", "signal capture -- sleep")


def signal_cases(s: Surfaces) -> list[ProcCase]:
    """Ctrl-C (SIGINT to the process group) and SIGTERM (to the process) once a command is at work: exit 130, one
    line after the signal, no ``.partial`` left, no process of its session (or the captured program) alive."""
    d = s.folder("signals-inputs")
    big = d / "big.access.parquet"
    r = invoke(["generate", "--preset", "tiny", "--steps", 1200, "-o", big], timeout=600)  # ~15 s of emulation
    assert r is not None and r.exit_code == 0, r and r.output
    cases = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        name = sig.name
        for when, ready in (("working", lambda out: _after_s(3)), ("writing", _partial_in)):
            out = s.folder(f"sig-emulate-{name}-{when}")
            cases.append(ProcCase("signals", "signal emulate", f"{name} {when}",
                                  _cli("emulate", big, "--memory-fraction", 0.3, "-o", out / "s.swapio.parquet"),
                                  sig=sig, ready=ready(out), cwd=out, timeout=120))
            out = s.folder(f"sig-run-{name}-{when}")
            cases.append(ProcCase("signals", "signal run --no-fio", f"{name} {when}",
                                  _cli("run", "--preset", "tiny", "--steps", 300, "--no-fio", "-o", out / "p"),
                                  sig=sig, ready=ready(out), cwd=out, timeout=180))
        out = s.folder(f"sig-train-{name}")
        cases.append(ProcCase("signals", "signal train", f"{name} working",
                              _cli("train", "--preset", "tiny", "--steps", 100000, "--quiet"), sig=sig,
                              ready=_torch_working(1.5), cwd=out, timeout=180, mem_limit=TRAIN_AS_BYTES))
        if os.geteuid() == 0:
            out = s.folder(f"sig-capture-{name}")
            token = f"{30 + len(cases) / 1000:.3f}"  # `sleep 30.0NN`: the captured program, found by its argument
            cases.append(ProcCase("signals", "signal capture -- sleep", f"{name} working",
                                  _cli("capture", "--memory", "1GiB", "--work-dir", out, "-o",
                                       out / "c.swapio.parquet", "--", "sleep", token),
                                  sig=sig, ready=_child_running(token, 1.0), token=token, cwd=out, timeout=180))
    return cases


class CliCase:
    """An in-process case of issue 39: ``argv`` (``{OUT}`` a fresh folder), the user's paths it must keep, the
    folder it runs in, a judge of an accepted case's output, and its control (good arguments)."""

    def __init__(self, surface: str, cmd: str, case: str, argv: list, watch=(), *, cwd: Path | None = None,
                 after=None, control: list | None = None):
        self.surface, self.cmd, self.case, self.argv = surface, cmd, case, argv
        self.watch, self.cwd, self.after, self.control = [Path(w) for w in watch], cwd, after, control


def _spellings(s: Surfaces, good: Path, name: str) -> dict[str, tuple[Path, Path | str, Path]]:
    """A copy of ``good`` per spelling of a path onto it: spelling -> (the input, the output's spelling, cwd).
    plain, ``./sub/../NAME`` (relative, from the copy's folder), a symbolic link and a hard link."""
    made = {}
    for spelling in ("plain", "dot-dot", "symlink", "hardlink"):
        d = s.folder(f"{name}-{spelling}")
        src = d / good.name
        shutil.copyfile(good, src)
        if spelling == "plain":
            out = src
        elif spelling == "dot-dot":
            (d / "sub").mkdir()
            out = "./sub/../" + good.name  # as typed: a Path would drop the "./"
        elif spelling == "symlink":
            out = d / f"link-{good.name}"
            out.symlink_to(src)
        else:
            out = d / f"hard-{good.name}"
            os.link(src, out)
        made[spelling] = (src, out, d)
    return made


def _reads_back_profile(expect_name: str | None = None):
    """An accepted runtime profile must read back (``generate --runtime`` takes it) with the name it was given."""
    def after(argv: list[str]) -> str | None:
        from swaptrace.workload.process import load_runtime_profile

        out = Path(argv[argv.index("-o") + 1])
        try:
            prof = load_runtime_profile(out)
        except Exception as exc:  # noqa: BLE001 -- any failure to read it back is the finding
            return f"the profile written does not read back: {' '.join(str(exc).split())}"
        if expect_name is not None and prof.name != expect_name:
            return f"the profile's name reads back as {prof.name!r}, not {expect_name!r}"
        return None
    return after


def _reads_back_device(expect_name: str | None = None):
    """An accepted fitted device must read back as a device TOML (what --device takes) with its name."""
    def after(argv: list[str]) -> str | None:
        from swaptrace.ssd.config import load_device

        out = Path(argv[argv.index("-o") + 1])
        try:
            cfg = load_device(str(out))
        except Exception as exc:  # noqa: BLE001
            return f"the device written does not read back: {' '.join(str(exc).split())}"
        name = getattr(cfg, "name", None)
        if expect_name is not None and name is not None and name != expect_name:
            return f"the device's name reads back as {name!r}, not {expect_name!r}"
        return None
    return after


#: names a user may type: a newline, quotes, a backslash
HOSTILE_NAMES = {"newline": "a\nb", "quote": 'my "fast" box', "newline+quote": 'x"\nname = "y',
                 "backslash": "C:\\drive"}


def runtime_profile_cases(s: Surfaces) -> list[CliCase]:
    """``runtime-profile``: every swapio damage a capture can also have, names with a newline or a quote, --steps
    beyond the capture's marks, a model that is not the one captured, and -o onto the capture under every spelling
    (the damaged captures of tests/damaged.py are the reader slot ``runtime-profile`` above)."""
    f = s.f
    cap = f["CAP"]
    control = ["runtime-profile", cap, "-o", "{OUT}/r.toml"]
    cases = []
    # a capture is a swapio stream: every damage of one that is not already a capture's
    from damaged import capture_variants, parquet_variants

    d = s.folder("rp-swapio-damage")
    for name, make in parquet_variants("swapio").items():
        if name in capture_variants() or name in parquet_variants("capture"):
            continue
        bad = make(cap, d / f"cap-{name}.swapio.parquet")
        cases.append(CliCase("runtime-profile", "runtime-profile", f"capture-swapio:{name}",
                             ["runtime-profile", bad, "-o", "{OUT}/r.toml"], [bad], control=control))
    for name, text in HOSTILE_NAMES.items():
        cases.append(CliCase("runtime-profile", "runtime-profile", f"--name {name}",
                             ["runtime-profile", cap, "-o", "{OUT}/r.toml", "--name", text], [cap],
                             after=_reads_back_profile(text), control=control))
    import pyarrow.parquet as pq

    steps = int(json.loads(pq.ParquetFile(cap).metadata.metadata[b"swaptrace"]).get("steps", 2))
    for n in (steps + 1, 1000, (1 << 32) - 1):
        cases.append(CliCase("runtime-profile", "runtime-profile", f"--steps {n} (capture marks {steps})",
                             ["runtime-profile", cap, "-o", "{OUT}/r.toml", "--steps", n], [cap],
                             after=_reads_back_profile(), control=control))
    for preset in ("demo", "criteo-kaggle", "criteo-terabyte"):
        cases.append(CliCase("runtime-profile", "runtime-profile", f"--preset {preset} (captured: tiny)",
                             ["runtime-profile", cap, "-o", "{OUT}/r.toml", "--preset", preset], [cap],
                             after=_reads_back_profile(), control=control))
    for spelling, (src, out, cwd) in _spellings(s, cap, "rp-out").items():
        cases.append(CliCase("runtime-profile", "runtime-profile", f"-o onto the capture ({spelling})",
                             ["runtime-profile", src, "-o", out, "--force"], [src], cwd=cwd, control=control))
    return cases


def generate_runtime_cases(s: Surfaces) -> list[CliCase]:
    """``generate --runtime FILE``: the profile with each field missing or wrong (text_variants are the reader slot
    ``generate --runtime`` above), and -o onto the profile under every spelling."""
    from swaptrace.workload.process import BYTE_FIELDS

    f = s.f
    good = f["rtprof"]
    control = ["generate", "--preset", "tiny", "--steps", 1, "--runtime", good, "-o", "{OUT}/g.access.parquet"]
    base_args = ["generate", "--preset", "tiny", "--steps", 1, "-o", "{OUT}/g.access.parquet", "--runtime"]
    import tomllib

    doc = tomllib.loads(good.read_text())

    def toml(d: dict) -> str:
        return "".join(f"{k} = {json.dumps(v)}\n" for k, v in d.items())

    bad: dict[str, str] = {f"missing:{k}": toml({x: v for x, v in doc.items() if x != k}) for k in BYTE_FIELDS}
    bad |= {"unknown-key": toml({**doc, "threads": 2}),
            "active-above-runtime": toml({**doc, "active_bytes": doc["runtime_bytes"] + 1}),
            "bytes-float": toml({**doc, "runtime_bytes": float(doc["runtime_bytes"]) + 0.5}),
            "bytes-2^61": toml({**doc, "step_bytes": 1 << 61}),
            "name-number": toml({**doc, "name": 5}),
            "write-cost-bool": toml({**doc, "write_cost": True}),
            "field-a-table": toml({k: v for k, v in doc.items() if k != "file_bytes"}) + "[file_bytes]\nx = 1\n",
            "no-fields": ""}
    d = s.folder("rt-fields")
    cases = []
    for name, text in bad.items():
        p = d / f"{name.replace(':', '-')}.toml"
        p.write_text(text)
        cases.append(CliCase("generate --runtime", "generate --runtime", name, [*base_args, p], [p], control=control))
    for spelling, (src, out, cwd) in _spellings(s, good, "rt-out").items():
        cases.append(CliCase("generate --runtime", "generate --runtime", f"-o onto the profile ({spelling})",
                             ["generate", "--preset", "tiny", "--steps", 1, "--runtime", src, "-o", out, "--force"],
                             [src], cwd=cwd, control=control))
    return cases


def ssd_fit_cases(s: Surfaces) -> list[CliCase]:
    """``ssd fit``: a run folder whose results file is not a file (the damaged results are the reader slot
    ``ssd fit`` above), -o inside the run folder, and device names with a newline or a quote."""
    f = s.f
    control = ["ssd", "fit", f["RUN"], "-o", "{OUT}/fit.toml"]
    cases = []

    def run_copy(name: str) -> Path:
        d = s.folder(f"fit-{name}") / "run"
        shutil.copytree(f["RUN"], d)
        return d

    broken = {}
    r = run_copy("results-fifo")
    (r / "results.parquet").unlink()
    os.mkfifo(r / "results.parquet")
    broken["results-fifo"] = r
    r = run_copy("results-link-to-fifo")
    (r / "results.parquet").unlink()
    (r / "results.parquet").symlink_to(f["fifo"])
    broken["results-link-to-fifo"] = r
    r = run_copy("results-dangling-link")
    (r / "results.parquet").unlink()
    (r / "results.parquet").symlink_to(r / "gone.parquet")
    broken["results-dangling-link"] = r
    r = run_copy("results-link-to-dev-zero")
    (r / "results.parquet").unlink()
    (r / "results.parquet").symlink_to("/dev/zero")
    broken["results-link-to-dev-zero"] = r
    r = run_copy("results-of-another-kind")
    shutil.copyfile(f["S"], r / "results.parquet")
    broken["results-a-swapio-stream"] = r
    r = run_copy("run-a-jobs-folder")
    shutil.rmtree(r)
    shutil.copytree(f["J"], r)
    broken["a-jobs-folder"] = r
    for name, run in broken.items():
        cases.append(CliCase("ssd fit", "ssd fit", f"run:{name}", ["ssd", "fit", run, "-o", "{OUT}/fit.toml"],
                             [run], control=control))
    for name, inside in {"results.parquet": "results.parquet", "raw-json": "raw/sweep_read_4k.json",
                         "new-file": "fit.toml", "the-run-folder": ".", "raw-folder": "raw"}.items():
        run = run_copy(f"o-{name}")
        out = run if inside == "." else run / inside
        cases.append(CliCase("ssd fit", "ssd fit", f"-o inside the run ({name})",
                             ["ssd", "fit", run, "-o", out, "--force"], [run], control=control))
    for name, text in HOSTILE_NAMES.items():
        cases.append(CliCase("ssd fit", "ssd fit", f"--name {name}",
                             ["ssd", "fit", f["RUN"], "-o", "{OUT}/fit.toml", "--name", text], [f["RUN"]],
                             after=_reads_back_device(text), control=control))
    return cases


#: the options of the steady-state preconditioning, a value each that would change something
STEADY_OPTIONS = {"--round": 5, "--ss-ramp": 5, "--steady-cap": 100, "--fill-cap": 100}


def steady_cases(s: Surfaces) -> list[CliCase]:
    """``fio run --steady``: its options without --steady (a dry run and a real one on a small file), a cap
    shorter than one round or than the ramp, and every bad value of each option with --steady (dry runs)."""
    f = s.f
    J = f["J"]

    def run(*more, dry: bool = True) -> list:
        return ["fio", "run", J, "--target", "{OUT}/t.dat", "--size", "8MiB", "--runtime", 1, "--jobs",
                "sweep_read_4k", "-o", "{OUT}/r", *(["--dry-run"] if dry else []), *more]

    control = run("--steady")
    cases = []
    for opt, value in STEADY_OPTIONS.items():
        for dry in (True, False):
            cases.append(CliCase("fio run --steady", "fio run --steady", f"{opt} without --steady"
                                 + (" (dry run)" if dry else ""), run(opt, value, dry=dry), [J], control=control))
    for name, more, dry in (("cap 30 < round 60", ("--round", 60, "--steady-cap", 30), True),
                            ("cap 1 < round 2", ("--round", 2, "--steady-cap", 1), False),
                            ("cap 60 <= ramp 120", ("--round", 10, "--steady-cap", 60, "--ss-ramp", 120), True)):
        cases.append(CliCase("fio run --steady", "fio run --steady", name + (" (dry run)" if dry else ""),
                             run("--steady", *more, dry=dry), [J], control=control))
    for opt in STEADY_OPTIONS:
        for vname, value in VALUES.items():
            if opt == "--ss-ramp" and vname == "0":
                continue  # no ramp is the default
            cases.append(CliCase("fio run --steady", "fio run --steady", f"{opt} {vname}",
                                 run("--steady", opt, value), [J], control=control))
    return cases


#: command -> (its arguments writing to the folder DIR, the file that marks the folder as its own, --force taken)
def _folder_writers(f) -> dict[str, tuple[list, str, bool]]:
    return {
        "run": (["run", "--preset", "tiny", "--steps", 2, "--no-fio", "--no-thesis", "-o", "{DIR}"], "pipeline.json",
                True),
        "designs": (["designs", f["T"], "-o", "{DIR}", "--memory-fraction", 0.5, "--device", "none"], "designs.json",
                    True),
        "fio jobs": (["fio", "jobs", f["S"], "-o", "{DIR}", "--sweep", "4k", "--max-requests", 100], "manifest.json",
                     True),
        "fio run": (["fio", "run", f["J"], "--target", "{OUT}/t.dat", "--size", "8MiB", "--runtime", 1, "--jobs",
                     "sweep_read_4k", "-o", "{DIR}"], "results.parquet", True),
        "sweep": (["sweep", f["sweep"], "--workers", 1, "-o", "{DIR}"], "_sweep.json", False),
        "report": (["report", f["P"], "-o", "{DIR}"], "report.md", False),
    }


def force_folder_cases(s: Surfaces, quick: bool) -> list[CliCase]:
    """``-o DIR --force`` (``report`` and ``sweep`` take no --force: they rewrite their own folders) where DIR
    holds the user's files, and the same with a file of the user's under the name the command marks its own
    folders with: refused, every file as it was."""
    cases = []
    for cmd, (argv, marker, takes_force) in _folder_writers(s.f).items():
        if quick and cmd == "sweep":
            continue
        for variant in ("user-files", f"user-files+own-{marker}"):
            d = s.folder(f"force-{cmd}-{variant}")
            (d / "thesis.docx").write_text("months of work")
            (d / "access.parquet").write_text("mine")
            (d / "notes.txt").write_bytes(NOTES)
            (d / "data").mkdir()
            (d / "data" / "results.csv").write_text("a,b\n1,2\n")
            if "+own" in variant:
                (d / marker).write_text("# my own notes\n" if marker.endswith(".md") else
                                        '{"mine": true}\n' if marker.endswith(".json") else "mine")
            args = [str(x).replace("{DIR}", str(d)) for x in argv] + (["--force"] if takes_force else [])
            control = [str(x).replace("{DIR}", "{OUT}/new") for x in argv]
            cases.append(CliCase("force folders", cmd, f"-o {variant}" + (" --force" if takes_force else ""), args,
                                 [d], control=control))
    return cases


class Selection:
    """Which cases run: ``--only`` words (any) in the surface or command, ``--case`` words (any) in the case's name,
    ``--rerun`` the cases an earlier ``--log`` scored other than good, ``--quick`` no sweep."""

    def __init__(self, a: argparse.Namespace):
        self.only, self.case, self.quick = a.only or [], a.case or [], a.quick
        self.rerun: set[tuple[str, str]] | None = None
        if a.rerun is not None:
            rows = [json.loads(line) for line in a.rerun.read_text().splitlines() if line.strip()]
            self.rerun = {(r["cmd"], r["case"]) for r in rows if r["outcome"] != "good"}

    def command(self, surface: str, cmd: str) -> bool:
        if self.quick and cmd.startswith("sweep"):
            return False
        return not self.only or any(w in cmd or w in surface for w in self.only)

    def __call__(self, surface: str, cmd: str, case: str) -> bool:
        if not self.command(surface, cmd):
            return False
        if self.case and not any(w in case for w in self.case):
            return False
        return self.rerun is None or (cmd, case) in self.rerun


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the dataset folder (no Dask) and the sweep rows")
    ap.add_argument("--only", action="append", help=f"only commands (or surfaces: {', '.join(SURFACES)}) containing "
                    "this word; repeat for any of several")
    ap.add_argument("--case", action="append", help="only cases whose name contains this word (repeatable)")
    ap.add_argument("--rerun", type=Path, default=None, help="only the cases a --log of an earlier pass scored other "
                    "than good")
    ap.add_argument("--log", type=Path, default=None, help="write every case as a JSON line: surface, command, case, "
                    "argv, outcome, detail and the first line of stderr")
    a = ap.parse_args()
    want = Selection(a)
    base = Path(tempfile.mkdtemp(prefix="hostile-"))
    started = time.perf_counter()
    f = setup(base, a.quick)
    run_dir = f["RUN"]
    scratch = base / "scratch"
    outcomes: list[tuple[str, str, str, str, str]] = []  # surface, command, case, outcome, detail
    log = a.log.open("w") if a.log is not None else None
    n = 0

    def record(surface: str, cmd: str, case: str, outcome: str, detail: str, first: str, argv) -> None:
        outcomes.append((surface, cmd, case, outcome, detail))
        if log is not None:
            log.write(json.dumps({"surface": surface, "cmd": cmd, "case": case, "argv": [str(x) for x in argv],
                                  "outcome": outcome, "detail": detail, "stderr": first}) + "\n")
            log.flush()

    def fill_for(out: Path):
        def fill(args):
            return [str(x).replace("{OUT}", str(out)).replace("{RUN}", str(run_dir))
                    .replace("{DSCOPY}", str(base / "dscopy")) for x in args]
        return fill

    def new_out() -> Path:
        nonlocal n
        n += 1
        out = base / f"out-{n}"
        out.mkdir()
        return out

    for cmd, kind, argv in reader_slots(f):
        if not want.command("readers", cmd):
            continue
        chosen = {v: p for v, p in variants(cmd, kind, f, scratch).items() if want("readers", cmd, v)}
        if not chosen:
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
        for vname, path in chosen.items():
            out = new_out()
            args = [str(x).replace("{X}", str(path)) for x in argv]
            outcome, detail, first = run_case(args, out, [f["T"], f["S"], f["P"]], base, fill_for(out))
            if failed and outcome == "good":
                outcome, detail = "no-control", failed
            record("readers", cmd, vname, outcome, detail, first, fill_for(out)(args))
            shutil.rmtree(out, ignore_errors=True)
    if f["DS"].exists():
        shutil.copytree(f["DS"], base / "dscopy")
        (base / "dscopy" / "notes.txt").write_text("mine")
    for cmd, case, argv, watch in writer_cases(f):
        if not want("writers", cmd, case):
            continue
        out = new_out()
        fill = fill_for(out)
        outcome, detail, first = run_case(argv, out, [Path(fill([w])[0]) for w in watch], base, fill)
        record("writers", cmd, case, outcome, detail, first, fill(argv))
        shutil.rmtree(out, ignore_errors=True)
    cases, controls = value_cases(f)
    cases = [c for c in cases if want("values", c[0], c[1])]
    failed_controls = {}
    for name, argv in controls.items():
        if not any(c[0] == name for c in cases):
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
        out = new_out()
        outcome, detail, first = run_case(argv, out, [f["T"], f["S"], f["P"], f["RUN"], f["CAP"]], base,
                                          fill_for(out))
        if cmd in failed_controls and outcome == "good":
            outcome, detail = "no-control", failed_controls[cmd]
        record("values", cmd, case, outcome, detail, first, fill_for(out)(argv))
        shutil.rmtree(out, ignore_errors=True)

    # issue 39: the surfaces met outside click's runner, and the readers and writers it named
    s = Surfaces(f, base)

    def process_surface(cases: list[ProcCase], control: list | None) -> None:
        cases = [c for c in cases if want(c.surface, c.cmd, c.case)]
        if not cases:
            return
        failed = None
        if control is not None:
            ctl = ProcCase(cases[0].surface, "control", "control", control, cwd=s.folder("control"), timeout=300,
                           mem_limit=cases[0].mem_limit)
            outcome, detail, first = run_process(ctl, base)
            if outcome != "accepted":  # a control must succeed (exit 0)
                failed = f"{outcome}: {detail}"
                print(f"control fails: {cases[0].surface}: {failed}")
        for c in cases:
            outcome, detail, first = run_process(c, base)
            if failed and outcome == "good":
                outcome, detail = "no-control", failed
            record(c.surface, c.cmd, c.case, outcome, detail, first, [c.shown()])

    if _torch_available():
        process_surface(*train_cases(s))
    else:
        print("train: torch is not installed (pip install -e '.[torch]'); its cases are left out")
    process_surface(*mark_step_cases(s))

    control_cache: dict[tuple, str | None] = {}

    def control_fails(argv: list) -> str | None:
        key = tuple(str(x) for x in argv)
        if key not in control_cache:
            out = base / "control"
            out.mkdir()
            r = invoke(fill_for(out)(argv), timeout=300)
            control_cache[key] = None if r is not None and r.exit_code == 0 else \
                "hang" if r is None else (r.output.strip().splitlines() or ["?"])[-1][:140]
            shutil.rmtree(out, ignore_errors=True)
            if control_cache[key]:
                print(f"control fails: {' '.join(key)}: {control_cache[key]}")
        return control_cache[key]

    builders = [runtime_profile_cases, generate_runtime_cases, ssd_fit_cases, steady_cases,
                lambda s: force_folder_cases(s, a.quick)]
    for build in builders:
        for c in build(s):
            if not want(c.surface, c.cmd, c.case):
                continue
            failed = control_fails(c.control) if c.control is not None else None
            out = new_out()
            fill = fill_for(out)
            outcome, detail, first = run_case(c.argv, out, [*c.watch, f["T"], f["S"], f["P"]], base, fill,
                                              cwd=c.cwd, after=c.after)
            if failed and outcome == "good":
                outcome, detail = "no-control", failed
            record(c.surface, c.cmd, c.case, outcome, detail, first, fill(c.argv))
            shutil.rmtree(out, ignore_errors=True)
    if any(want.command("signals", cmd) for cmd in SIGNAL_COMMANDS):
        sig_cases = [c for c in signal_cases(s) if c.cmd != "signal train" or _torch_available()]
        process_surface(sig_cases, None)

    by = collections.Counter(o for *_, o, _ in outcomes)
    for _, cmd, v, o, d in outcomes:
        if o != "good":
            print(f"{o:<12} {cmd:<24} {v:<34} {d}")
    print(f"\n{len(outcomes)} cases in {time.perf_counter() - started:.0f} s: " +
          ", ".join(f"{k} {c}" for k, c in by.most_common()))
    for surface in SURFACES:
        these = collections.Counter(o for su, *_, o, _ in outcomes if su == surface)
        if these:
            print(f"  {surface:<20} {sum(these.values()):>5}: " + ", ".join(f"{k} {c}" for k, c in these.most_common()))
    if log is not None:
        log.close()
    shutil.rmtree(base, ignore_errors=True)
    return 0 if not by.keys() - {"good", "accepted"} else 1


if __name__ == "__main__":
    sys.exit(main())
