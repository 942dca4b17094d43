"""What killed captures leave behind, found by name and removed.

Everything a capture creates -- cgroups, the tracefs instance, the swap file on its loop device,
the work folder, the note of the ``kernel.task_delayacct`` value it changed -- is named ``swaptrace-capture-<pid>...`` with the pid of the capturing process.
A capture killed outright (SIGKILL) cannot undo its set-up; the next capture (or ``swaptrace
capture --cleanup``) finds the names whose pid no longer runs a capture and removes them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from swaptrace.capture import cgroup as cg
from swaptrace.capture import tracing
from swaptrace.capture.swapdev import remove_swap_leftovers
from swaptrace.capture.taskstats import delayacct_leftovers, restore_delayacct_leftovers
from swaptrace.core import blockdev

#: the start of the name of everything a capture creates; the capturing process's pid follows
PREFIX = "swaptrace-capture-"
#: where the work folder (swap file, scratch files) goes unless the caller names another folder
DEFAULT_WORK_BASE = Path("/var/tmp")


def _pid_of(name: str) -> int | None:
    rest = name[len(PREFIX):] if name.startswith(PREFIX) else ""
    digits = ""
    for ch in rest:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else None


def owner_alive(name: str) -> bool:
    """Whether the capture that created ``name`` (``swaptrace-capture-<pid>...``) still runs."""
    pid = _pid_of(name)
    if pid is None:
        return False
    if pid == os.getpid():
        return True
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"python" in cmdline or b"swaptrace" in cmdline


def find_leftovers(work_base: Path | None = None) -> list[str]:
    """Names of everything a dead capture left behind (nothing is changed)."""
    found = [f"tracefs instance {p}" for p in tracing.list_instances(PREFIX) if not owner_alive(p.name)]
    found += [f"cgroup {p}" for p in cg.list_groups(PREFIX) if not owner_alive(p.name)]
    for loop, backing in blockdev.loop_devices().items():
        name = Path(backing.replace(" (deleted)", "")).name
        if PREFIX in name and not owner_alive(name):
            found.append(f"{'swap+' if loop in blockdev.swap_areas() else ''}loop {loop} ({backing})")
    for base in {DEFAULT_WORK_BASE, Path(work_base or DEFAULT_WORK_BASE)}:
        if base.is_dir():
            found += [f"folder {p}" for p in base.glob(PREFIX + "*") if not owner_alive(p.name)]
    found += [f"task_delayacct note {p}" for p in delayacct_leftovers(owner_alive)]
    return found


def cleanup_leftovers(work_base: Path | None = None) -> list[str]:
    """Remove what dead captures left behind, in undo order; return what was removed."""
    removed = []
    for p in cg.list_groups(PREFIX):  # first: kill orphaned replays so swapoff has nothing to swap in
        if not owner_alive(p.name):
            cg.remove_group(p)
            removed.append(f"cgroup {p}")
    for p in tracing.list_instances(PREFIX):
        if not owner_alive(p.name):
            tracing.remove_instance(p)
            removed.append(f"tracefs instance {p}")
    removed += remove_swap_leftovers(PREFIX, owner_alive)
    for base in {DEFAULT_WORK_BASE, Path(work_base or DEFAULT_WORK_BASE)}:
        if base.is_dir():
            for p in base.glob(PREFIX + "*"):
                if not owner_alive(p.name):
                    shutil.rmtree(p, ignore_errors=True)
                    removed.append(f"folder {p}")
    removed += restore_delayacct_leftovers(owner_alive)  # kernel.task_delayacct as it was before
    return removed
