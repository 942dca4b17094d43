"""A hostile user's pass over every command (issue 30): damaged, wrong and dangerous inputs and outputs.

Every command that reads a file gets, in each file slot: a missing path, an empty file, a folder, a FIFO, a
file of another kind, text junk, and every damaged variant of its kind from tests/damaged.py (cut short,
wrong types, out of range). Every command that writes gets: its output on its own input (with --force), an
existing folder of the user's files (with --force), a FIFO, two outputs on one path, an output inside the
input dataset folder and names whose temporary name would pass 255 bytes. Each case runs in-process
(click's runner) under a 60 s alarm and is scored:

- ``good``: exit 2, one ``Error:`` line, no traceback, nothing left behind, nothing of the user's changed;
- ``accepted``: exit 0 (the input was read as valid; listed so a person can judge each);
- ``traceback``, ``hang``, ``data-loss``, ``left-behind``, ``many-lines``, ``exit-N``: not handled well.

Run from the repository root:  PYTHONPATH=$PWD python research/hostile_pass.py [--quick] [--only WORD]
Prints one line per case that is not good, then the counts by outcome and by cause.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from click.testing import CliRunner  # noqa: E402
from damaged import damage  # noqa: E402

from swaptrace.cli import cli  # noqa: E402


class Hang(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
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
        ("ssd replay", "swapio", ["ssd", "replay", "{X}", "--device", "nvme-tlc", "--capacity", "1GiB",
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
    ]


GOOD = {"access": "T", "swapio": "S", "toml": None, "devprof": "devprof", "costs": "costs", "sweep": "sweep",
        "json": "model", "iolog": "iolog"}


def good_for(cmd: str, kind: str, f) -> Path:
    if kind == "toml":
        return {"generate --spec": f["spec"], "presets": f["spec"], "emulate --profile": f["kprof"]}.get(cmd, f["dev"])
    return f[GOOD[kind]]


def damage_kind(kind: str, cmd: str) -> str:
    if kind in ("access", "swapio"):
        return kind
    return "json" if kind == "json" else "iolog" if kind == "iolog" else "toml"


def variants(cmd, kind, f, scratch: Path) -> dict[str, Path]:
    good = good_for(cmd, kind, f)
    other = {"access": f["S"], "swapio": f["T"]}.get(kind, f["T"])
    v = {"missing": scratch / "nope" / "x.parquet", "empty": f["empty"], "folder": f["folder"], "fifo": f["fifo"],
         "wrong-kind": other, "junk": f["text"]}
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


def run_case(args, out: Path, watch: list[Path], base: Path, fill) -> tuple[str, str]:
    before = {p: digest(p) if p.is_dir() else (p.read_bytes() if p.exists() else None) for p in watch}
    base_before = set(digest(base))
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
    left = set(digest(base)) - base_before
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
    run_dir = base / "run"  # a `fio run` folder: the results of two sweep jobs on a small file
    r = invoke(["fio", "run", f["J"], "--target", base / "t.dat", "--size", "8MiB", "--runtime", 1, "--jobs",
                "sweep_read_4k,sweep_write_4k", "-o", run_dir], timeout=300)
    assert r is not None and r.exit_code == 0, r and r.output
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
        for vname, path in variants(cmd, kind, f, scratch).items():
            n += 1
            out = base / f"out-{n}"
            out.mkdir()
            args = [str(x).replace("{X}", str(path)) for x in argv]
            outcome, detail = run_case(args, out, [f["T"], f["S"], f["P"]], base, fill_for(out))
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
