"""The shipped kernel profile scored against stored kernel references: the calibration as a regression test.

docs/calibration.md claims the default (``swaptrace/profiles/linux-6.x-cgroup1.toml``: its ``[linux]``
settings and its ensemble) is within the calibration target, +-15 % of the kernel's median run, on pages in
and pages out at every stored budget and its four neighbours (x0.98 .. x1.02). Nothing re-checked that claim:
a change to the profile or to the emulator's reclaim path could move the scores silently. This test
re-derives them from the stored references (``research/results/*/calibration.json``, ``band`` rows: the
kernel's median run at each budget; research/variants.py reads them) with what ``swaptrace emulate`` does by
default: every ensemble member counted in one pass (:func:`swaptrace.emulate.run_members`) and the member
nearest the members' mean pages in and out scored (:func:`swaptrace.emulate.nearest_member`).

The tolerance is the calibration's own stated target (``calibrate.TARGET`` = 0.15, the profile's ``score``
lines), not one chosen here. The kernel's medians are stored numbers (captures need root and minutes), and
the emulator is deterministic, so the test itself has no noise: a value outside +-15 % is a regression.

Subset (CPU time; the whole 240 values take ~6 min on 2 shared cores): the ``demo`` references, 20 steps,
of the **third session** (budgets 11.25 / 13.75 / 16.25 / 18.75 %, captured after the profile's constants
were fixed: the held-out set its ``[[fit]]`` names, 40 values) and of the first session's held-out
``demo`` budgets (12.5, 17.5 %) and the second session's captures of them (20 + 20 values), 80 values in all
(~30 s). ``research/variants.py`` scores the rest.

It fails when a key constant changes (measured; see tools/mutation.py, module ``pagecache``): the
ensemble's write costs halved or doubled, ``fill_write_credit`` 6 -> 0, ``stats_flush_steps`` 1 -> 0.
The profile's ``[linux] write_cost`` alone is used only by ``--no-ensemble`` runs (the ensemble sets every
member's): :func:`test_single_run_within_its_stated_score` scores that run on the same subset against its
stated score (docs/calibration.md): at least 74 of the 80 values within +-15 % and no bias, its mean signed
error within two standard errors of 0. Measured (this subset; write cost -> values within +-15 %, mean
error): 2 -> 58, +7.4 %; 3 -> 65, +5.1 %; **4 -> 74, +1.1 %**; 5 -> 71, -2.1 %; 6 -> 73, -2.7 %; 8 -> 76,
-3.9 %: the count alone would not single out 4 (8 puts more values inside the target but under-predicts).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "research" / "results"
PROFILE = ROOT / "swaptrace" / "profiles" / "linux-6.x-cgroup1.toml"
#: (reference file, session label) scored here; see the module docstring for why these
SUBSET = (
    (RESULTS / "session-3-holdout" / "calibration.json", "third session (held out)"),
    (RESULTS / "holdout-demo" / "calibration.json", "first session, held-out demo budgets"),
    (RESULTS / "session-2" / "holdout-demo" / "calibration.json", "second session, held-out demo budgets"),
)
#: trace made as analysis/calibrate.py makes it: preset, steps, seed 0
TRACE = ("demo", 20)

sys.path[:0] = [str(ROOT / "research"), str(ROOT / "analysis")]


def _references():
    import variants  # research/variants.py: reads the band rows of a calibration.json

    refs = []
    for path, label in SUBSET:
        refs += variants.references(label, json.loads(path.read_text()))
    return refs


def score_profile(profile_path: Path, trace: Path, *, ensemble: bool = True) -> list[dict]:
    """``research/variants.score`` rows of the profile at ``profile_path`` on :data:`SUBSET` (demo, 20 steps)."""
    import variants

    from swaptrace.core.traceio import open_trace
    from swaptrace.emulate import EmulatorConfig, ensemble_configs, load_profile, nearest_member, run_members

    prof = load_profile(str(profile_path))
    tf = open_trace(trace, kind="access")
    footprint = int(tf.meta["footprint_pages"])
    nsteps = int(tf.meta["steps"])

    def emulate(ref, memory_bytes: int) -> tuple[int, int]:
        assert (ref.preset, ref.steps) == TRACE, ref
        cfg = EmulatorConfig.resolve(tf.meta, memory_bytes=memory_bytes, swap_bytes=ref.swap_bytes, profile=prof,
                                     policy="linux", readahead="vma")
        # --no-ensemble: the one run with the profile's [linux] write cost
        members = ensemble_configs(cfg, footprint, prof.ensemble) if ensemble else [cfg]
        runs = run_members(tf, members, nsteps=nsteps, first_step=int(tf.meta.get("first_step", 0)),
                           chunk_rows=1 << 20)
        c = runs.counters[nearest_member([(m.pages_in, m.pages_out) for m in runs.counters])]
        return c.pages_in, c.pages_out

    return variants.score(_references(), emulate, target=0.15)


@pytest.fixture(scope="module")
def demo_trace(tmp_path_factory):
    from swaptrace.workload.generate import generate_trace

    preset, steps = TRACE
    return generate_trace(preset, tmp_path_factory.mktemp("cal") / f"{preset}-{steps}.access.parquet",
                          steps=steps, seed=0)


def test_subset_covers_what_the_docstring_says():
    refs = _references()
    assert {(r.preset, r.steps) for r in refs} == {TRACE}
    assert sorted({round(r.fraction, 4) for r in refs}) == [0.1125, 0.125, 0.1375, 0.1625, 0.175, 0.1875]
    assert sum(2 * len(r.scales) for r in refs) == 80


@pytest.mark.slow
def test_shipped_profile_within_target_of_the_kernel(demo_trace):
    import variants

    rows = score_profile(PROFILE, demo_trace)
    bad = [(r["session"], r["fraction"], s, which, round(e, 3))
           for r in rows for which in ("err_pages_in", "err_pages_out")
           for s, e in zip(r["scales"], r[which], strict=True) if abs(e) > 0.15]
    totals = variants.totals(rows)
    assert sum(t["values"] for t in totals.values()) == 80
    assert not bad, f"outside +-15 % of the kernel's median run: {bad}"


@pytest.mark.slow
def test_single_run_within_its_stated_score(demo_trace):
    # the --no-ensemble run: its stated score (docs/calibration.md), at least 74 of the 80 values within the
    # calibration target, and unbiased: the mean signed error within 2 standard errors (sd / sqrt(80)) of 0
    import numpy as np

    rows = score_profile(PROFILE, demo_trace, ensemble=False)
    errs = np.array([e for r in rows for which in ("err_pages_in", "err_pages_out") for e in r[which]])
    assert errs.size == 80
    within = int((np.abs(errs) <= 0.15).sum())
    assert within >= 74, f"{within} of 80 within +-15 % of the kernel's median run (stated: 74)"
    se = errs.std(ddof=1) / np.sqrt(errs.size)
    assert abs(errs.mean()) <= 2 * se, f"mean error {errs.mean():+.3f}, 2 standard errors {2 * se:.3f}"
