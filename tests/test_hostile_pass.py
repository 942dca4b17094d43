"""The hostile pass's own scoring of real processes (tools/hostile_pass.py): a case is called what it is.

The pass runs many commands and reports what they did; a scoring bug would hide a failing command or blame a good
one. Each test runs a tiny ``python -c`` program through :func:`run_process` and checks the outcome it is given.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import hostile_pass as hp  # noqa: E402

#: a command that answers a signal as swaptrace's CLI does: one line, exit 130
ANSWERS = ("import signal, sys, time\n"
           "def stop(*a):\n    print('Interrupted; partial outputs were removed.', file=sys.stderr); sys.exit(130)\n"
           "signal.signal(signal.SIGTERM, stop); signal.signal(signal.SIGINT, stop)\n"
           "print('working', file=sys.stderr, flush=True)\ntime.sleep(30)\n")


def _one_liner(code: str, tmp_path: Path, **kw) -> hp.ProcCase:
    return hp.ProcCase("t", "t", "t", ["-c", code], cwd=tmp_path, one_liner=True, timeout=kw.pop("timeout", 30), **kw)


@pytest.mark.parametrize(("code", "outcome"), [
    ("raise ValueError('step must be a whole number >= 0, got -5')", "good"),
    ("raise ValueError('a\\nswaptrace step 9')", "many-lines"),
    ("pass", "accepted"),
    ("import sys; sys.exit(3)", "exit-3"),
])
def test_one_liner_outcomes(tmp_path, code, outcome):
    assert hp.run_process(_one_liner(code, tmp_path), tmp_path)[0] == outcome


def test_a_changed_file_is_data_loss_and_names_what_was_appended(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_bytes(hp.NOTES)
    code = f"open({str(notes)!r}, 'a').write('swaptrace step 0\\n'); raise OSError('refused')"
    outcome, detail, _ = hp.run_process(_one_liner(code, tmp_path, watch=[notes]), tmp_path)
    assert outcome == "data-loss" and "swaptrace step 0" in detail


def test_no_answer_in_time_is_a_hang_and_the_process_is_gone(tmp_path):
    c = _one_liner("import time; time.sleep(60)", tmp_path, timeout=1)
    assert hp.run_process(c, tmp_path)[0] == "hang"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_answered_in_one_line_with_130_is_good(tmp_path, sig):
    c = hp.ProcCase("signals", "t", "t", ["-c", ANSWERS], cwd=tmp_path, sig=sig, ready=hp._after_s(1), timeout=30)
    outcome, detail, first = hp.run_process(c, tmp_path)
    assert (outcome, detail, first) == ("good", "Interrupted; partial outputs were removed.", "working")


def test_a_process_killed_by_sigterm_is_the_wrong_exit(tmp_path):
    c = hp.ProcCase("signals", "t", "t", ["-c", "import time; time.sleep(30)"], cwd=tmp_path, sig=signal.SIGTERM,
                    ready=hp._after_s(0.5), timeout=30)
    outcome, detail, _ = hp.run_process(c, tmp_path)
    assert outcome == "exit-143" and "SIGTERM" in detail


def test_a_partial_left_after_a_signal_is_left_behind(tmp_path):
    code = ANSWERS.replace("sys.exit(130)", "open('.out.1.x.partial', 'w'); sys.exit(130)")
    c = hp.ProcCase("signals", "t", "t", ["-c", code], cwd=tmp_path, sig=signal.SIGINT, ready=hp._after_s(1),
                    timeout=30)
    outcome, detail, _ = hp.run_process(c, tmp_path)
    assert outcome == "left-behind" and ".partial" in detail


def test_a_child_that_outlives_the_command_is_left_behind_and_ended(tmp_path):
    code = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "raise SystemExit(2)")
    c = hp.ProcCase("t", "t", "t", ["-c", code], cwd=tmp_path, timeout=30)
    outcome, detail, _ = hp.run_process(c, tmp_path)
    assert outcome == "left-behind" and "process" in detail
