"""A package's names loaded on first use (PEP 562), so importing one light module of it stays light.

A package ``__init__`` that re-exports its modules' names eagerly makes ``import swaptrace.ssd.config`` pay for
``swaptrace.ssd.run`` (numpy, numba, pyarrow) as well: Python runs the package's ``__init__`` first. With
:func:`lazy_names` the package names the same things, each imported when first asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(namespace: dict[str, Any], modules: dict[str, tuple[str, ...]]) -> tuple[Callable[[str], Any],
                                                                                  Callable[[], list]]:
    """``__getattr__`` and ``__dir__`` for a package whose names are loaded from their modules on first use.

    Parameters
    ----------
    namespace : dict
        The package's ``globals()``; a name, once loaded, is stored there (later lookups skip this).
    modules : dict
        Module (relative to the package) -> the names it defines, e.g. ``{"run": ("replay", "synth")}``.

    Returns
    -------
    tuple
        ``(__getattr__, __dir__)`` to assign at the package's top level.
    """
    package = namespace["__name__"]
    table = {name: f"{package}.{module}" for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
