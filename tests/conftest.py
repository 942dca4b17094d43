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


#: test files that run in ``make test``'s serial pass (one process, after the parallel one), with why:
#: they share something machine-wide that a second test at the same time would disturb
SERIAL_FILES = {
    "test_sweep.py": "starts Dask clusters of one worker per core",
    "test_datasets.py": "starts Dask clusters of one worker per core",
    "test_sweep_interrupt.py": "starts Dask clusters of one worker per core and signals their session",
    "test_train.py": "trains with every core (PyTorch's threads)",
    "test_train_torchrec.py": "trains with every core (PyTorch's threads) in a process-wide process group",
}
#: file-name prefixes of the same
SERIAL_PREFIXES = {
    "test_capture": "kernel captures take the machine-wide capture lock, swap and cgroups",
    "test_fio": "fio measures the disk",
}


def is_serial(item: pytest.Item) -> bool:
    """Whether ``item`` belongs to the serial pass: privileged, fio, or in a file listed above."""
    name = item.path.name
    return (item.get_closest_marker("privileged") is not None or item.get_closest_marker("fio") is not None
            or name in SERIAL_FILES or any(name.startswith(p) for p in SERIAL_PREFIXES))


def pytest_collection_modifyitems(config, items):  # pytest's hook signature
    """Mark the serial pass's tests ``serial`` (``make test`` runs ``-m "not serial"`` on every core first)."""
    for item in items:
        if is_serial(item):
            item.add_marker(pytest.mark.serial)

