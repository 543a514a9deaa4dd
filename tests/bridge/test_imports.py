"""``import initmem.bridge`` is cheap (its names load on first use, PEP 562), and every public name of
the bridge that README's API table shows still resolves from the path it shows."""

from __future__ import annotations

import re

from tests.empirical.test_imports import RESOLVE, ROOT, run

LIGHT = """
import sys
import initmem.bridge, initmem.bridge.study
print(sorted(m for m in ("pandas", "torch", "matplotlib", "initmem.bridge.fitting",
                         "initmem.bridge.study.unit_of_forgetting") if m in sys.modules))
"""

PUBLIC = (
    """
import initmem.bridge as bridge
from initmem.bridge import unit_study, fit

assert unit_study.__module__ == "initmem.bridge.study.unit_of_forgetting" and fit.__name__ == "fit"
assert set(bridge.__all__) <= set(dir(bridge))
for name in bridge.__all__:
    getattr(bridge, name)
"""
    + RESOLVE
)


def test_importing_the_bridge_loads_neither_pandas_nor_the_study():
    assert run(LIGHT) == "[]"


def test_every_public_bridge_name_of_the_readme_resolves():
    readme = (ROOT / "README.md").read_text()
    paths = sorted(set(re.findall(r"`(initmem\.bridge\.[A-Za-z_][\w.]*)", readme)))
    assert "initmem.bridge.study.unit_study" in paths and len(paths) >= 8
    assert run(PUBLIC, *paths) == f"ok {len(paths)}"
