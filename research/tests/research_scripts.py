"""The research scripts under test, loaded as modules (``research/NAME.py`` is a script, not a package).

Each is loaded once per process and registered in ``sys.modules`` under its name: a dataclass looks its module
up there while its class is made, and a script that imports another (``kernel_floor`` imports ``variants``)
then finds the one already loaded.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

RESEARCH = Path(__file__).resolve().parents[1]


def load(name: str) -> ModuleType:
    """``research/<name>.py`` as a module (the same one on every call)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, RESEARCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
