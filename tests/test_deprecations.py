"""Every deprecated name of every room's table still works, warns once with its new home and the
release that removes it, and is the very object of its new name."""

from __future__ import annotations

import importlib

import pytest

from initmem.bridge.deprecated import DEPRECATED as BRIDGE
from initmem.deprecation import REMOVED_IN
from initmem.empirical.deprecated import DEPRECATED as EMPIRICAL

TABLE = {**EMPIRICAL, **BRIDGE}


def _resolve(dotted: str):
    module, _, name = dotted.rpartition(".")
    return importlib.import_module(module), name


@pytest.mark.parametrize("old", sorted(TABLE))
def test_old_name_warns_and_is_the_new_object(old):
    module, name = _resolve(old)
    home, new_name = _resolve(TABLE[old])
    assert name not in vars(module)  # it really left the old module (else no warning)
    with pytest.warns(DeprecationWarning, match=rf"use {TABLE[old]} \(removed in {REMOVED_IN}\)"):
        value = getattr(module, name)
    assert value is getattr(home, new_name)


def test_an_unknown_name_is_still_an_attribute_error():
    import initmem.empirical.memory as memory

    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        memory.nothing_here  # noqa: B018
