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
