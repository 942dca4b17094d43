"""``analysis/validate_real.py measure``: this boot's prices for ``predict``, phase by phase (commands recorded,
nothing run: the phases themselves are fio's and the timing model's, tested where they live)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analysis"))
import validate_real as vr  # noqa: E402  (analysis/validate_real.py, a script)


def test_measure_waits_for_quiet_then_profiles_idle_and_busy_and_prices_the_host(tmp_path, monkeypatch):
    calls, waits = [], []
    monkeypatch.setattr(vr, "sh", lambda *a, **k: calls.append(list(a)))
    import swaptrace.capture.stalls as stalls
    monkeypatch.setattr(stalls, "wait_quiet", lambda load, timeout, say=None: waits.append((load, timeout)) or
                        {"waited_s": 0.0, "load_start": 0.3, "quiet": True})
    out = tmp_path / "boot-x"
    stale = ROOT / "traces" / "timing-validation" / f"fio-run-{out.name}-loop-busy"
    stale.mkdir(parents=True, exist_ok=True)  # an earlier measurement's fio run: must not be reused
    (stale / "results.parquet").write_text("old")
    vr.main(["measure", "--results", str(out)])
    assert not stale.exists()
    assert waits == [(vr.QUIET_LOAD, vr.QUIET_WAIT_S)] * 3  # before each of the three phases
    timing = str(ROOT / "analysis" / "validate_timing.py")
    assert calls[0][1:] == [timing, "profile", "--loop", "--results", str(out)]
    assert calls[1][1:] == [timing, "profile", "--loop", "--busy-cpus", "2", "--results", str(out)]
    cost = calls[2]
    assert cost[1] == "time" and cost[cost.index("--device") + 1] == str(out / "disk-loop.toml")
    assert cost[cost.index("--save-costs") + 1] == str(out / "host-costs-loop.toml")
    assert cost[cost.index("--fault-overhead-runs") + 1] == str(vr.COST_RUNS) and "--measure-fault-overhead" in cost
    assert len(calls) == 3 and out.is_dir()


def test_make_validate_real_predicts_with_what_measure_wrote():
    make = (ROOT / "Makefile").read_text()
    rule = make[make.index("validate-real: "):].split("\n\n")[0]
    steps = [line.strip() for line in rule.splitlines()[1:]]
    assert [s.split()[2] for s in steps if s.startswith("$(PY)")] == ["record", "capture", "measure", "predict"]
    assert "this-boot/host-costs-loop.toml" in rule and "this-boot/disk-loop-busy-reads.toml" in rule
    assert vr.MEASURED == ROOT / "research" / "results" / "real-training" / "this-boot"
