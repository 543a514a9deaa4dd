"""The one mechanism for names that moved: each room's table ``old -> new``, removed in 0.2.

Each room keeps one table, ``DEPRECATED = {"initmem.room.module.old": "initmem.room.other.new"}``
(``empirical/deprecated.py``, ``bridge/deprecated.py``), and every module that lost names ends with
a PEP 562 ``__getattr__`` that returns :func:`moved`: the old name still works (``from module import
old`` included) and warns with a :class:`DeprecationWarning` naming the new home and the release that
removes it.
"""

from __future__ import annotations

import importlib
import warnings

#: The release that removes every deprecated name.
REMOVED_IN = "0.2"


def moved(module: str, name: str, table: dict[str, str]):
    """The object that ``module.name`` became (``table["module.name"]``, a dotted path), with a
    DeprecationWarning; AttributeError (the usual "no attribute") for a name not in ``table``."""
    old = f"{module}.{name}"
    if old not in table:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    home, _, attribute = table[old].rpartition(".")
    warnings.warn(
        f"{old} is deprecated: use {table[old]} (removed in {REMOVED_IN})",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(home), attribute)


__all__ = ["REMOVED_IN", "moved"]
