"""Ground truth: replay an access trace under the real Linux kernel.

:func:`capture` sets up swap on a loop device, a memory cgroup and a tracefs
instance, replays the trace with real loads and stores in a child process,
records every block request on the swap device and writes a ``swapio``
stream with ``source: kernel``. See :mod:`swaptrace.capture.session`.
"""

from swaptrace.core.lazy import lazy_names

#: each module -> the names it defines; each loaded on first use, so importing one light module of the package
#: (its options, its constants) does not load the rest (swaptrace.core.lazy)
_NAMES = {
    "host": ("check_privileges", "kernel_facts"),
    "leftovers": ("cleanup_leftovers", "find_leftovers"),
    "options": ("CaptureOptions",),
    "session": ("CaptureResult", "CaptureSession", "capture"),
}
__getattr__, __dir__ = lazy_names(globals(), _NAMES)

__all__ = ["CaptureOptions", "CaptureResult", "CaptureSession", "capture", "check_privileges", "cleanup_leftovers",
           "find_leftovers", "kernel_facts"]
