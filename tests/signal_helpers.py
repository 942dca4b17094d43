"""Children that take Ctrl-C the way a terminal's program does, whatever the test run inherited."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """``preexec_fn``: SIGINT back to its default in the child, so Python installs its KeyboardInterrupt handler.

    A background job of a non-interactive shell (``make test &``, ``nohup``) starts with SIGINT ignored, every
    descendant inherits that, and Python leaves an ignored SIGINT ignored: a test that sends SIGINT would then
    see the command run on (a capture not stopping, a sweep finishing with 0) instead of what Ctrl-C does.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
