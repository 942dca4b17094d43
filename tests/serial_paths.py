"""The test files that hold ``make test``'s serial pass, so that pass collects only them.

Collecting every file to keep a tenth of the tests cost the serial pass about 8 s (the parameter tables of
the other files are built at collection). A file is listed when its name puts it in the serial pass
(:data:`SERIAL_FILES`, :data:`SERIAL_PREFIXES`) or its text names the ``privileged`` or ``fio`` marker.
``tests/conftest.py`` checks at every collection that each serial test lives in a listed file, so a test
made serial some other way fails the collection rather than being left out of both passes.

Run as a script, prints the files (paths from the repository's root), one per line.
"""

from __future__ import annotations

import re
from pathlib import Path

#: test files in the serial pass (one process, after the parallel one), with why: they share something
#: machine-wide that a second test at the same time would disturb
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

ROOT = Path(__file__).resolve().parents[1]
TEST_DIRS = ("tests", "research/tests")
_MARKER = re.compile(r"\bprivileged\b|mark\.fio\b")

#: the serial pass runs on two processes in lanes (``--serial-lanes``, tests/conftest.py). This lane holds every
#: file that uses what only one test on the machine may hold at a time (swap, cgroups, the capture lock, loop
#: devices, sysctls): its files run one after another in one process. Every other serial file is a lane of its
#: own, run whole by the other process beside it: fio, Dask and training share only the CPU and the disk with
#: the kernel lane and nothing machine-wide with each other.
KERNEL_LANE = "kernel"
_PRIVILEGED = re.compile(r"\bprivileged\b")


def by_name(name: str) -> bool:
    """Whether a file's name alone puts its tests in the serial pass."""
    return name in SERIAL_FILES or name.startswith(tuple(SERIAL_PREFIXES))


def lane(path: str) -> str:
    """The serial pass's lane of the test file at ``path`` (from the repository's root): :data:`KERNEL_LANE` for
    a capture file or one that names the ``privileged`` marker, else the path itself."""
    name = Path(path).name
    if name.startswith("test_capture") or _PRIVILEGED.search((ROOT / path).read_text()):
        return KERNEL_LANE
    return path


def serial_files() -> list[str]:
    """Paths (from the repository's root) of the test files that may hold serial tests."""
    out = []
    for folder in TEST_DIRS:
        for path in sorted((ROOT / folder).glob("test_*.py")):
            if by_name(path.name) or _MARKER.search(path.read_text()):
                out.append(str(path.relative_to(ROOT)))
    return out


if __name__ == "__main__":
    print("\n".join(serial_files()))
