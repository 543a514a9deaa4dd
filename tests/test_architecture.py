"""The import graph of the package, read from the source (AST), against docs/architecture.md's rules:
no cycle, ``theory`` imports nothing of the project, ``empirical`` nothing of ``bridge``, the bridge
core nothing of its publication layer ``initmem.bridge.study``, and every
in-function import outside ``initmem/cli`` says on its line or the line above why it is deferred."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Source folder -> the package it installs as (pyproject's package-dir).
PACKAGES = {
    "theory": "initmem.theory",
    "empirical": "initmem.empirical",
    "bridge": "initmem.bridge",
    "initmem": "initmem",
}


def project_modules() -> dict[str, Path]:
    """Every module of the package by dotted name."""
    out = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts]
            out[".".join([package, *[p for p in parts if p != "__init__"]])] = path
    return out


def _targets(module: str, path: Path, node, modules) -> list[str]:
    """The project modules an import statement names (a ``from P import m`` of a submodule is m)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("initmem")]
    base = node.module or ""
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join(package + ([base] if base else []))
    if not base.startswith("initmem"):
        return []
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:`` (never executed)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines |= {n.lineno for n in ast.walk(node) if isinstance(n, ast.stmt)}
    return lines


def _import_module_literal(node) -> str | None:
    """The project module an ``importlib.import_module("initmem....")`` call names, or None (a lazy
    import by a literal name is an edge too; one built from a variable is a package's own names)."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
        return None
    name = node.args[0].value
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if called == "import_module" and isinstance(name, str) and name.startswith("initmem."):
        return name
    return None


def import_graph() -> tuple[dict[str, set[str]], list[tuple[str, int, str]]]:
    """Edges ``module -> imported project modules`` (module level and in functions), and every
    in-function import as ``(module, line, source text)``."""
    modules = project_modules()
    edges: dict[str, set[str]] = {m: set() for m in modules}
    deferred = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_only(tree)
        in_functions = {
            id(n)
            for f in ast.walk(tree)
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for n in ast.walk(f)
        }
        for node in ast.walk(tree):
            if named := _import_module_literal(node):  # importlib.import_module("initmem.x")
                edges[module].add(named)
                continue
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in skip:
                continue
            edges[module] |= {t for t in _targets(module, path, node, modules) if t != module}
            if id(node) in in_functions:
                deferred.append((module, node.lineno, path))
    return edges, deferred


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (a list of modules, first repeated last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ("theory", "empirical", "bridge") else "root"


def test_the_import_graph_has_no_cycle():
    edges, _ = import_graph()
    assert len(edges) > 40  # every module was found
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges))


def test_rooms_import_only_downwards():
    edges, _ = import_graph()
    wrong = [
        f"{a} -> {b}"
        for a, targets in edges.items()
        for b in targets
        if (room(a) == "theory" and room(b) != "theory")
        or (room(a) == "empirical" and room(b) == "bridge")
    ]
    assert not wrong, wrong


#: The bridge's publication layer (the studies, their documents, calibration, synthetic sweeps).
STUDY = "initmem.bridge.study"


def imports_of_the_study(edges: dict[str, set[str]]) -> list[str]:
    """Every edge from a module outside :data:`STUDY` (the bridge core, the other rooms) into it."""
    inside = lambda m: m == STUDY or m.startswith(f"{STUDY}.")  # noqa: E731
    return [
        f"{a} -> {b}" for a, targets in edges.items() if not inside(a) for b in targets if inside(b)
    ]


def test_the_bridge_core_imports_nothing_of_the_study():
    edges, _ = import_graph()
    core = [m for m in edges if room(m) == "bridge" and not m.startswith(STUDY)]
    assert {"initmem.bridge.fits", "initmem.bridge.unit_decision", "initmem.bridge.fitting"} <= set(
        core
    )
    assert any(m.startswith(f"{STUDY}.") for m in edges)  # the study's modules were read too
    only_cli = [e for e in imports_of_the_study(edges) if not e.startswith("initmem.cli")]
    assert not only_cli, only_cli


def test_the_study_direction_check_finds_a_planted_import():
    edges = {"initmem.bridge.fits": {f"{STUDY}.seeds"}, f"{STUDY}.seeds": {"initmem.bridge.fits"}}
    assert imports_of_the_study(edges) == [f"initmem.bridge.fits -> {STUDY}.seeds"]


def _is_import(text: str) -> bool:
    return text.strip().startswith(("import ", "from "))


def test_every_in_function_import_outside_the_cli_says_why():
    _, deferred = import_graph()
    unexplained = []
    for module, line, path in deferred:
        if module.startswith("initmem.cli"):
            continue
        lines = path.read_text().splitlines()
        block = line - 1  # a comment may head a block of imports (or sit on one of them)
        while block > 1 and (
            _is_import(lines[block - 1])
            or not lines[block - 1].strip()
            and _is_import(lines[block - 2])  # a blank line between import groups
        ):
            block -= 1
        said = any("#" in text for text in lines[block:line])
        if not said and not lines[block - 1].strip().startswith("#"):
            unexplained.append(f"{path.relative_to(ROOT)}:{line}: {lines[line - 1].strip()}")
    assert not unexplained, unexplained


@pytest.mark.parametrize(
    ("edges", "cyclic"),
    [({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True), ({"a": {"b"}, "b": {"c"}, "c": set()}, False)],
)
def test_the_cycle_finder_finds_a_planted_cycle(edges, cyclic):
    assert (find_cycle(edges) is not None) == cyclic
