"""Shared fixtures and skip conditions.

Privileged tests carry ``@pytest.mark.privileged`` and call
:func:`require_root` (or the finer checks) so they skip with a reason on
machines that cannot run them.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # so tests can `import naive`

import serial_paths  # noqa: E402  (found through the path just added)


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (swap, loop devices, cgroups, tracefs)")


def require_fio() -> str:
    path = shutil.which("fio")
    if path is None:
        pytest.skip("fio is not installed (make setup installs it from Debian's packages when root)")
    return path


@pytest.fixture
def fio_bin() -> str:
    return require_fio()


def is_serial(item: pytest.Item) -> bool:
    """Whether ``item`` belongs to the serial pass: privileged, fio, or in a file ``serial_paths`` names."""
    return (item.get_closest_marker("privileged") is not None or item.get_closest_marker("fio") is not None
            or serial_paths.by_name(item.path.name))


def pytest_collection_modifyitems(config, items):  # pytest's hook signature
    """Mark the serial pass's tests ``serial`` (``make test`` runs ``-m "not serial"`` on every core first,
    then ``-m serial`` on the files ``tests/serial_paths.py`` lists, which must hold every serial test)."""
    listed = None
    for item in items:
        if is_serial(item):
            item.add_marker(pytest.mark.serial)
            listed = set(serial_paths.serial_files()) if listed is None else listed
            where = str(item.path.resolve().relative_to(serial_paths.ROOT))
            if where not in listed:
                raise pytest.UsageError(f"{item.nodeid} is a serial test in a file tests/serial_paths.py does not "
                                        "list: name the privileged or fio marker in its file, or list the file")



def pytest_addoption(parser):  # pytest's hook signature
    parser.addoption("--serial-lanes", action="store_true",
                     help="with -n 2: run the serial pass in its lanes (tests/serial_paths.py), the kernel's tests "
                          "one at a time in one process and the other serial files beside them")


def pytest_xdist_make_scheduler(config, log):  # xdist's hook signature
    """The serial pass's scheduler under ``--serial-lanes``: xdist's scope scheduling with a lane as the scope
    (every test of a lane runs in one process, in order). xdist's own ``--dist loadgroup`` cannot do this
    here: it marks a group by rewriting ``item._nodeid``, which pytest 9 no longer reads."""
    if not config.getoption("serial_lanes"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LaneScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return serial_paths.lane(nodeid.split("::", 1)[0])

    return LaneScheduling(config, log)
