"""Public names of a package loaded on first use (PEP 562), the one mechanism of every room.

A package lists its public names with their home modules and ends with
``__getattr__, __dir__ = lazy_names(__name__, HOMES)``: ``import package`` costs nothing, and
``package.name`` imports the home module once, then keeps the name in the package's namespace.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_names(
    package: str, homes: dict[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``(__getattr__, __dir__)`` pair of ``package`` for ``homes``: public name -> its module,
    relative to ``package`` (``"fitting"``) or absolute (``"initmem.empirical.curves"``). An unknown
    name raises the usual AttributeError."""

    def __getattr__(name: str):
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        home = homes[name] if homes[name].startswith("initmem.") else f"{package}.{homes[name]}"
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return __getattr__, __dir__


__all__ = ["lazy_names"]
