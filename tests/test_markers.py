"""The marker protocol (swaptrace.markers): marks go only to the marker file of a capture running the program.

Each refusal of the module docstring's rule is tried with a value a user could have left in the environment:
their own file, /proc and /dev files, a folder, a FIFO nobody reads (guarded: a hang fails the test), a file
forged to look like a capture's, a capture that is not this program's. A real capture's file (a tracefs
instance named for this process) is written to and read back where the machine allows one (root, tracefs).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from marker_helpers import capture_marker, no_hang, reset_markers, tracefs_instances

from swaptrace import markers
from swaptrace.errors import ConfigError
from swaptrace.markers import MARKER_ENV, MAX_STEP, MarkerError, check_marker, mark, mark_step

needs_tracefs = pytest.mark.skipif(tracefs_instances() is None, reason="needs root and tracefs to make an instance")


@pytest.fixture(autouse=True)
def _fresh_markers():
    reset_markers()
    yield
    reset_markers()


def _refused(monkeypatch, value: str, *words: str) -> str:
    """mark_step under ``SWAPTRACE_MARKER=value`` raises one line naming the variable (and ``words``)."""
    monkeypatch.setenv(MARKER_ENV, value)
    with no_hang(), pytest.raises(MarkerError) as err:
        mark_step(3)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{MARKER_ENV}=") and isinstance(err.value, ValueError)
    for w in words:
        assert w in text
    assert markers._state["fd"] is None  # nothing was left open
    return text


def test_outside_a_capture_marks_do_nothing(monkeypatch):
    monkeypatch.delenv(MARKER_ENV, raising=False)
    assert check_marker() is None
    mark_step(0)
    mark_step()
    mark("end")
    monkeypatch.setenv(MARKER_ENV, "")
    mark_step(1)


def test_a_users_file_gets_no_step_lines(monkeypatch, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    monkeypatch.chdir(tmp_path)
    _refused(monkeypatch, "notes.txt", "trace_marker of a capture's tracefs instance")
    _refused(monkeypatch, str(notes), "trace_marker of a capture's tracefs instance")
    with pytest.raises(MarkerError):
        check_marker()
    assert notes.read_text() == "my notes\n"


@pytest.mark.parametrize("value", ["/proc/version", "/dev/full", "/dev/null", "/tmp", "/"])
def test_special_files_are_refused(monkeypatch, value):
    _refused(monkeypatch, value)


def test_a_fifo_without_a_reader_is_refused_at_once(monkeypatch, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _refused(monkeypatch, str(fifo))


def _forged(tmp_path, pid: int | None = None):
    """A folder laid out as a capture's tracefs instance (of this process by default), outside tracefs."""
    inst = tmp_path / "instances" / f"swaptrace-capture-{os.getpid() if pid is None else pid}-free"
    inst.mkdir(parents=True)
    return inst / "trace_marker"


def test_a_forged_fifo_is_never_opened(monkeypatch, tmp_path):
    path = _forged(tmp_path)
    os.mkfifo(path)
    _refused(monkeypatch, str(path), "a FIFO")


def test_a_fifo_swapped_in_after_the_check_does_not_block(monkeypatch, tmp_path):
    """A FIFO that appears between the check and the open (here: the check is shown a regular file): the open
    does not wait for a reader (O_NONBLOCK: ENXIO), and the refusal says why."""
    path = _forged(tmp_path)
    os.mkfifo(path)
    regular = os.stat(__file__)
    real_stat = os.stat
    monkeypatch.setattr(markers.os, "stat", lambda p, *a, **k: regular if str(p) == str(path) else real_stat(p, *a, **k))
    _refused(monkeypatch, str(path), "a FIFO without a reader")


def test_forged_special_files_are_refused_by_kind(monkeypatch, tmp_path):
    path = _forged(tmp_path)
    path.mkdir()
    _refused(monkeypatch, str(path), "a folder")


def test_a_forged_regular_file_is_not_tracefs(monkeypatch, tmp_path):
    path = _forged(tmp_path)
    path.write_text("untouched\n")
    _refused(monkeypatch, str(path), "not on tracefs")
    assert path.read_text() == "untouched\n"
    # a link named as a capture's marker, to a user's file: the link is resolved before the name is checked
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    path.unlink()
    path.symlink_to(notes)
    _refused(monkeypatch, str(path), "trace_marker of a capture's tracefs instance")
    assert notes.read_text() == "mine\n"


def test_another_processs_capture_is_not_this_programs(monkeypatch, tmp_path):
    """A capture named for a pid that is not this process or an ancestor (a child of ours, still running)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        path = _forged(tmp_path, child.pid)
        path.write_text("")
        _refused(monkeypatch, str(path), f"pid {child.pid}", "not this program or its ancestor")
    finally:
        child.kill()
        child.wait()


def test_the_machine_wide_trace_marker_is_not_a_captures(monkeypatch):
    if not (tracefs := tracefs_instances()):
        pytest.skip("needs tracefs")
    _refused(monkeypatch, str(tracefs.parent / "trace_marker"), "trace_marker of a capture's tracefs instance")


@needs_tracefs
def test_a_capture_of_this_process_gets_the_marks(monkeypatch, tmp_path):
    with capture_marker(monkeypatch, tmp_path) as read:
        assert check_marker() == os.environ[MARKER_ENV]
        mark_step(0)
        mark_step()
        mark_step(MAX_STEP)
        mark("end")
        assert read() == ["swaptrace step 0", "swaptrace step 1", f"swaptrace step {MAX_STEP}", "swaptrace end"]


@needs_tracefs
def test_a_real_instance_of_a_capture_that_is_not_an_ancestor(monkeypatch, tmp_path):
    """A real tracefs instance, but named for a process that is not this program's capture."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    inst = tracefs_instances() / f"swaptrace-capture-{child.pid}-test"
    inst.mkdir()
    try:
        _refused(monkeypatch, str(inst / "trace_marker"), "not this program or its ancestor")
    finally:
        inst.rmdir()
        child.kill()
        child.wait()


@pytest.mark.parametrize("step, error", [
    (True, TypeError), (False, TypeError), (2.9, TypeError), (2.0, TypeError), ("3", TypeError), ([3], TypeError),
    (-5, ValueError), (-1, ValueError), (MAX_STEP + 1, ValueError), (1 << 63, ValueError),
])
def test_mark_step_takes_a_step_number(monkeypatch, step, error):
    monkeypatch.delenv(MARKER_ENV, raising=False)  # refused outside a capture too: a bug shows before the capture
    with pytest.raises(error) as err:
        mark_step(step)
    assert "\n" not in str(err.value) and "mark_step" in str(err.value)


def test_mark_step_bounds_are_the_capture_columns(monkeypatch):
    """The last step a mark may carry is stored as MAX_STEP + 1 = 2**32 - 1, the uint32 column's largest."""
    import numpy as np

    monkeypatch.delenv(MARKER_ENV, raising=False)
    assert MAX_STEP + 1 == np.iinfo(np.uint32).max
    mark_step(np.int64(7))
    mark_step(MAX_STEP)
    with pytest.raises(ValueError):
        mark_step()  # the next one would be MAX_STEP + 1


@pytest.mark.parametrize("label, error", [
    ("a\nswaptrace step 9", ValueError), ("end\r", ValueError), ("tab\there", ValueError), ("", ValueError),
    ("   ", ValueError), ("step 5", ValueError), ("start", ValueError), ("x" * 257, ValueError),
    (5, TypeError), (b"end", TypeError),
])
def test_mark_takes_one_line_that_is_not_the_captures_own(monkeypatch, label, error):
    monkeypatch.delenv(MARKER_ENV, raising=False)
    with pytest.raises(error) as err:
        mark(label)
    assert "\n" not in str(err.value)


def test_a_label_may_say_end_or_anything_printable(monkeypatch, tmp_path):
    with capture_marker(monkeypatch, tmp_path) as read:
        mark("end")
        mark("epoch 3 done ✓")
        mark("x" * 256)
        assert read() == ["swaptrace end", "swaptrace epoch 3 done ✓", "swaptrace " + "x" * 256]


def test_marker_error_is_a_value_error_and_train_makes_it_a_config_error(monkeypatch):
    from swaptrace.workload.train import marker_errors

    assert issubclass(MarkerError, ValueError)
    monkeypatch.setenv(MARKER_ENV, "/proc/version")
    with pytest.raises(ConfigError, match=MARKER_ENV), marker_errors():
        check_marker()


# -- swaptrace train under a stray SWAPTRACE_MARKER -----------------------------------------------------------------
@pytest.fixture
def never_built(monkeypatch):
    """Fail the test if train builds its model; a stand-in torch module when torch is not installed."""
    import swaptrace.workload.train as tr

    try:
        import torch  # noqa: F401
    except ImportError:
        monkeypatch.setitem(sys.modules, "torch", type(sys)("torch"))

    def boom(*args, **kwargs):
        raise AssertionError("the model was built before the marker file was checked")
    monkeypatch.setattr(tr, "build_model", boom)


@pytest.mark.parametrize("kind", ["notes", "fifo", "forged-fifo", "folder", "/dev/full", "/proc/version"])
def test_train_under_a_stray_marker_is_one_line_and_never_hangs(monkeypatch, tmp_path, never_built, kind):
    from cli_helpers import run_cli, the_error

    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    if kind == "notes":
        value = str(notes)
    elif kind == "fifo":
        value = str(tmp_path / "fifo")
        os.mkfifo(value)
    elif kind == "forged-fifo":
        value = str(_forged(tmp_path))
        os.mkfifo(value)
    elif kind == "folder":
        value = str(tmp_path)
    else:
        value = kind
    monkeypatch.setenv(MARKER_ENV, value)
    with no_hang():
        line = the_error(run_cli("train", "--preset", "tiny", "--steps", "2"))
    assert MARKER_ENV in line and "not the marker file of a swaptrace capture" in line
    assert notes.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == sorted(
        {"notes.txt", *(["fifo"] if kind == "fifo" else []), *(["instances"] if kind == "forged-fifo" else [])})
