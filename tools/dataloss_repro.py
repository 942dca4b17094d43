"""Reproduce the data-loss cases of issue 30 (run from the repo root; prints one line per case).

Each case builds a user's folder, runs the command, and checks whether any file the user had was deleted or
changed. "LOST" means data loss; "kept" means the command left the user's files alone.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

PY = [sys.executable, "-m", "swaptrace.cli"]


def sh(*args, cwd):
    return subprocess.run([*PY, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600)


def digest(folder: Path) -> dict[str, str]:
    if folder.is_file():
        return {folder.name: hashlib.sha256(folder.read_bytes()).hexdigest()}
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in folder.rglob("*")}


def check(name, r, before: dict, folder: Path):
    after = digest(folder) if folder.exists() else {}
    lost = [k for k, v in before.items() if after.get(k) != v]
    verdict = "LOST " + ",".join(sorted(lost)[:4]) if lost else "kept"
    print(f"{name:<45} exit={r.returncode} {verdict} :: {(r.stderr.strip().splitlines() or [''])[-1][:110]}")
    return not lost


def main() -> int:
    base = Path(tempfile.mkdtemp(prefix="dataloss-"))
    T = base / "t.access.parquet"
    S = base / "t.swapio.parquet"
    assert sh("generate", "--preset", "tiny", "--steps", 2, "-o", T, cwd=base).returncode == 0
    assert sh("emulate", T, "--memory-fraction", "0.3", "-o", S, cwd=base).returncode == 0
    ok = True
    # 1. run into a folder of the user's own files
    P = base / "P"
    (P / "report").mkdir(parents=True)
    (P / "access.parquet").write_text("mine")
    (P / "mrc.csv").write_text("mine")
    (P / "report" / "notes.md").write_text("mine")
    before = digest(P)
    r = sh("run", "--preset", "tiny", "--steps", 2, "--no-fio", "--no-thesis", "-o", P, cwd=base)
    ok &= check("run -o foreign folder", r, before, P)
    # 2. fio jobs --force into a folder of unrelated files
    D = base / "D"
    D.mkdir()
    (D / "keep.txt").write_text("mine")
    before = digest(D)
    r = sh("fio", "jobs", S, "-o", D, "--force", "--max-requests", 100, "--sweep", "4k", cwd=base)
    ok &= check("fio jobs -o foreign --force", r, before, D)
    # 2b. fio jobs --force into its own folder holding an unrelated file too
    J = base / "J"
    assert sh("fio", "jobs", S, "-o", J, "--max-requests", 100, "--sweep", "4k", cwd=base).returncode == 0
    (J / "notes.txt").write_text("mine")
    before = {"notes.txt": digest(J)["notes.txt"]}
    r = sh("fio", "jobs", S, "-o", J, "--force", "--max-requests", 100, "--sweep", "4k", cwd=base)
    ok &= check("fio jobs -o own+notes --force", r, before, J)
    # 3. mrc T -o T --force
    T2 = base / "t2.access.parquet"
    T2.write_bytes(T.read_bytes())
    before = digest(T2)
    r = sh("mrc", T2, "-o", T2, "--force", cwd=base)
    ok &= check("mrc T -o T --force", r, before, T2)
    # 4. time -o X --save-costs X
    X = base / "x.out"
    r = sh("time", S, "--device", "nvme-tlc", "--compute", "none", "--fault-cpu-us", 1, "--reclaim-cpu-us", 1,
           "--write-cpu-us", 0, "-o", X, "--save-costs", X, cwd=base)
    print(f"{'time -o X --save-costs X':<45} exit={r.returncode} "
          f"{'both wrote one path' if r.returncode == 0 else 'refused'} :: {r.stderr.strip()[:110]}")
    ok &= r.returncode == 2
    # 5. fio profile RUN -o RUN/results.parquet --force (a fake run folder: results.parquet is what it reads)
    R = base / "run"
    R.mkdir()
    (R / "results.parquet").write_bytes(S.read_bytes())
    before = digest(R)
    r = sh("fio", "profile", R, "-o", R / "results.parquet", "--force", cwd=base)
    ok &= check("fio profile RUN -o RUN/results.parquet", r, before, R)
    # 6. emulate T -o T --force, export T -o T --force, designs -o a folder holding the input
    for args, target in ((("emulate", T2, "-o", T2, "--force", "--memory-fraction", 0.5), T2),
                         (("export", T2, "-o", T2, "--force"), T2),
                         (("report", base, "-o", base / "D", "--force"), D)):
        before = digest(target)
        r = sh(*args, cwd=base)
        ok &= check(" ".join(str(a).replace(str(base), "B") for a in args[:5]), r, before, target)
    print("ALL KEPT" if ok else "DATA LOSS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
