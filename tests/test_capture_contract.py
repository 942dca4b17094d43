"""The two kinds of capture child keep the session's contract (no root: nothing is run)."""

from __future__ import annotations

import inspect

import pytest

from swaptrace.capture.command import CommandChild
from swaptrace.capture.contract import CaptureChild
from swaptrace.capture.options import CaptureOptions
from swaptrace.capture.replay import ReplayChild

CALLS = ("check_inputs", "warm_up", "prepare", "run_unlimited", "swap_bytes", "run_limited", "stream", "describe")


def _positional(fn) -> list[str]:
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


@pytest.mark.parametrize("kind", [ReplayChild, CommandChild])
def test_each_child_has_every_call_the_session_makes(kind):
    for name in CALLS:
        assert _positional(getattr(kind, name))[1:] == _positional(getattr(CaptureChild, name))[1:], name
    assert {n for n, v in vars(CaptureChild).items() if callable(v) and not n.startswith("_")} == set(CALLS)


def test_both_children_are_given_the_same_options():
    options = CaptureOptions.of(memory_fraction=0.5, progress=print)
    assert (options.memory_fraction, options.progress, options.unlimited_run) == (0.5, print, True)
    assert CaptureOptions.of(options, unlimited_run=False).memory_fraction == 0.5
    with pytest.raises(TypeError):
        CaptureOptions.of(window_s=1.0)  # a replay's or a program's own option is not a shared one
