"""The OOM guard: a limited run's task waits for reclaim instead of being OOM-killed while swap is free.

Used by both kinds of capture child during their limited run (:mod:`swaptrace.capture.replay`,
:mod:`swaptrace.capture.command`); what it did goes into the run's ``kernel`` metadata.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from swaptrace.capture import cgroup as cg


class OomGuard:
    """Keep a v1 memory cgroup from OOM-killing the replay when reclaim merely lags.

    Legacy (v1) memcg reclaim cannot throttle on pages under writeback, so
    under heavy swap-out to a loop device it sometimes gives up and invokes the
    OOM killer although swap is free. With the killer disabled the faulting
    task instead waits; this thread notices (``under_oom 1``), raises the limit
    by ``nudge_bytes`` for a moment -- which wakes the task -- and sets it back,
    reclaiming in its own context. Stalls and the time spent above the limit
    are reported, so a reader can judge the perturbation.

    On a cgroup that cannot disable its OOM killer (v2) the guard does nothing
    and says so (``oom_killer_disabled: false``).

    Parameters
    ----------
    group : MemoryCgroup
        The limited run's group, its limit already set.
    limit_bytes : int
        That limit, in bytes: what the guard sets back after each nudge.
    nudge_bytes : int
        How far above the limit a stalled task is let go, in bytes.
    give_up_s : float, optional
        Seconds above the limit after which the guard enables the OOM killer again and stops
        (``oom_guard_gave_up``); without it the guard never gives up.
    """

    def __init__(self, group: cg.MemoryCgroup, limit_bytes: int, nudge_bytes: int = 1 << 20,
                 give_up_s: float | None = None):
        self.group, self.limit, self.nudge = group, int(limit_bytes), int(nudge_bytes)
        self.stalls = 0
        self.raised_s = 0.0
        #: after this long above the limit (the usage cannot get back under it: swap full, or memory that
        #: cannot be swapped) the guard lets the kernel's OOM killer act instead of waiting for ever
        self.give_up_s = give_up_s
        self.gave_up = False
        self._stop = threading.Event()
        self.active = group.disable_oom_killer()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="swaptrace-oom-guard")
        if self.active:
            self._thread.start()

    def _watch(self) -> None:
        raised_at = None
        while not self._stop.wait(0.002):
            try:
                if raised_at is None and self.group.under_oom():
                    self.stalls += 1
                    self.group.set_limit(self.limit + self.nudge)
                    raised_at = time.monotonic()
                elif raised_at is not None and time.monotonic() - raised_at > 0.002:
                    if self.give_up_s is not None and time.monotonic() - raised_at > self.give_up_s:
                        self.gave_up = True
                        self.group.enable_oom_killer()
                        with contextlib.suppress(OSError):
                            self.group.set_limit(self.limit)
                        break
                    self.group.set_limit(self.limit)  # EBUSY while usage cannot be pushed back yet
                    self.raised_s += time.monotonic() - raised_at
                    raised_at = None
            except OSError:
                continue
        if raised_at is not None:
            self.raised_s += time.monotonic() - raised_at

    def stop(self) -> dict[str, Any]:
        """End the watch; return ``oom_killer_disabled``, ``oom_stalls``, ``above_limit_s`` (seconds) and,
        with ``give_up_s``, ``oom_guard_gave_up`` (the run record's keys)."""
        self._stop.set()
        if self.active:
            self._thread.join(timeout=5)
        out = {"oom_killer_disabled": self.active, "oom_stalls": self.stalls, "above_limit_s": self.raised_s}
        if self.give_up_s is not None:
            out["oom_guard_gave_up"] = self.gave_up
        return out
