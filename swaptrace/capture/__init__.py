"""Ground truth: replay an access trace under the real Linux kernel.

:func:`capture` sets up swap on a loop device, a memory cgroup and a tracefs
instance, replays the trace with real loads and stores in a child process,
records every block request on the swap device and writes a ``swapio``
stream with ``source: kernel``. See :mod:`swaptrace.capture.session`.
"""

from swaptrace.capture.host import check_privileges, kernel_facts
from swaptrace.capture.leftovers import cleanup_leftovers, find_leftovers
from swaptrace.capture.options import CaptureOptions
from swaptrace.capture.session import CaptureResult, CaptureSession, capture

__all__ = ["CaptureOptions", "CaptureResult", "CaptureSession", "capture", "check_privileges", "cleanup_leftovers",
           "find_leftovers", "kernel_facts"]
