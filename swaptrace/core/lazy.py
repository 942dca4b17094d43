"""A package's names loaded on first use (PEP 562), so importing one light module of it stays light.

A package ``__init__`` that re-exports its modules' names eagerly makes ``import swaptrace.ssd.config`` pay for
``swaptrace.ssd.run`` (numpy, numba, pyarrow) as well: Python runs the package's ``__init__`` first. With
:func:`lazy_names` the package names the same things, each imported when first asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(namespace: dict[str, Any], table: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list]]:
    """``__getattr__`` and ``__dir__`` for a package whose ``table`` maps each name to the module defining it.

    Parameters
    ----------
    namespace : dict
        The package's ``globals()``; a name, once loaded, is stored there (later lookups skip this).
    table : dict
        Name -> absolute module name, e.g. ``{"replay": "swaptrace.ssd.run"}``.

    Returns
    -------
    tuple
        ``(__getattr__, __dir__)`` to assign at the package's top level.
    """
    package = namespace["__name__"]

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
