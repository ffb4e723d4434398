"""The project's import graph, read from the source with `ast` (nothing is imported).

Every import counts: module level, inside functions (deferred) and under TYPE_CHECKING, since
each one is a dependency a reader has to follow. `import a.b` and `from a.b import c` are an
edge to the deepest project module they name (`a.b.c` when it is a module, else `a.b`); the
parent packages they also initialise are not edges, so a package's `__init__` that re-exports
its modules is no circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

Graph = dict[str, set[str]]


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the given top-level packages."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported_names(module: str, path: Path) -> Iterable[str]:
    """Every dotted name an import statement of this file reaches for (absolute)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                yield f"{source}.{alias.name}"


def import_graph(root: Path, packages: Iterable[str]) -> Graph:
    """module -> the project modules it imports (self-imports left out)."""
    files = module_files(root, packages)

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: Graph = {}
    for module, path in files.items():
        targets = {resolve(name) for name in _imported_names(module, path)}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def grouped(graph: Graph, group_of: dict[str, str] | None = None) -> Graph:
    """The graph between groups of modules (e.g. apps), given module -> group."""
    group_of = group_of or {}
    out: Graph = {}
    for module, targets in graph.items():
        source = group_of.get(module, module)
        out.setdefault(source, set())
        out[source].update(group_of.get(t, t) for t in targets if group_of.get(t, t) != source)
    return out


def cycles(graph: Graph) -> list[list[str]]:
    """One circle per strongly connected component of more than one node, as a path that
    starts and ends at the component's first module by name (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_circle(graph, component) for component in components]


def _circle(graph: Graph, component: set[str]) -> list[str]:
    """A shortest path from the component's first node back to itself, inside the component."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for target in sorted(graph[node] & component):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    nxt.append(target)
        frontier = nxt
    raise AssertionError("a strongly connected component always has a circle")  # pragma: no cover
