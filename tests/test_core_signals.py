"""sigterm_as_interrupt: SIGTERM (and SIGHUP) as Ctrl-C inside the block, the old handlers back after it."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from swaptrace.core.signals import sigterm_as_interrupt


def test_sigterm_raises_keyboard_interrupt_and_the_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match=f"signal {int(signal.SIGTERM)}"), sigterm_as_interrupt() as on:
        assert on
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == before


def test_hangup_only_when_asked():
    seen = []
    old = signal.signal(signal.SIGHUP, lambda signum, frame: seen.append(signum))
    try:
        with sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGHUP)  # not asked for: the handler in place answers
        assert seen == [signal.SIGHUP]
        with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt(hangup=True):
            os.kill(os.getpid(), signal.SIGHUP)
        assert seen == [signal.SIGHUP]
    finally:
        signal.signal(signal.SIGHUP, old)


def test_outside_the_main_thread_nothing_is_installed():
    before = signal.getsignal(signal.SIGTERM)
    got = []

    def worker():
        with sigterm_as_interrupt(hangup=True) as on:
            got.append((on, signal.getsignal(signal.SIGTERM)))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert got == [(False, before)] and signal.getsignal(signal.SIGTERM) == before
