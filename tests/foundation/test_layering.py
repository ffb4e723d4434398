"""No import circles between the project's modules or apps, and the layering of
docs/architecture.md ("Packages and what they may import"): scheduler/ imports nothing of the
project, gpu_agent/ only scheduler/, the load generator nothing, the console never gpu_agent/,
and the product never lab/ (the experiments) nor tools/: neither is in the Docker image
(`manage.py headline` runs from the image, tests/headline/test_headline_image.py). lab/ may
import everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.foundation.imports import Graph, cycles, grouped, import_graph

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("scheduler", "gpu_agent", "loadgen", "console")

# What each top-level package may import of the project (besides itself).
MAY_IMPORT = {
    "scheduler": set(),
    "gpu_agent": {"scheduler"},
    "loadgen": set(),
    "console": {"scheduler", "loadgen"},
}


@pytest.fixture(scope="module")
def graph() -> Graph:
    return import_graph(ROOT, [*PRODUCT, "lab", "tools"])


def app_of(module: str) -> str:
    """console.<app>.* -> console.<app>; console's own modules and other packages stay whole
    (console.settings, console.celery) or go by top-level name (scheduler, gpu_agent...)."""
    parts = module.split(".")
    if parts[0] != "console":
        return parts[0]
    if len(parts) > 2 or (len(parts) == 2 and (ROOT / "console" / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return module


def test_no_module_imports_in_a_circle(graph: Graph) -> None:
    found = cycles(graph)
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_app_or_package_imports_in_a_circle(graph: Graph) -> None:
    apps = grouped(graph, {module: app_of(module) for module in graph})
    found = cycles(apps)
    assert not found, "circles between apps:\n" + "\n".join(" -> ".join(c) for c in found)


def wrong_imports(graph: Graph, package: str) -> list[str]:
    allowed = MAY_IMPORT[package] | {package}
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.split(".")[0] == package
        for target in targets
        if target.split(".")[0] not in allowed
    )


@pytest.mark.parametrize("package", PRODUCT)
def test_each_package_imports_only_what_design_2_allows(graph: Graph, package: str) -> None:
    allowed = MAY_IMPORT[package] | {package}
    wrong = wrong_imports(graph, package)
    assert not wrong, f"{package} may import only {sorted(allowed)} of the project:\n" + "\n".join(
        wrong
    )


def test_the_checker_sees_deferred_relative_and_type_only_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg.a import f\n")  # a facade is no circle
    (package / "a.py").write_text("def f():\n    from pkg.sub import b\n    return b\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..c import C\n"
    )
    (package / "c.py").write_text("from . import a\nC = a\n")
    graph = import_graph(tmp_path, ["pkg"])
    assert graph["pkg"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]]
    (package / "c.py").write_text("C = 1\n")
    assert cycles(import_graph(tmp_path, ["pkg"])) == []


def test_lab_imports_the_product_and_nothing_imports_lab(graph: Graph) -> None:
    """The experiments call the product (lab.headline runs console.bench.headline), never the
    other way round: the image ships the product alone."""
    assert any(
        module.startswith("lab.") and target.startswith("console.bench.headline")
        for module, targets in graph.items()
        for target in targets
    )
    into_lab = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.split(".")[0] in PRODUCT
        for target in targets
        if target.split(".")[0] == "lab"
    )
    assert not into_lab, "the product imports lab/:\n" + "\n".join(into_lab)


def test_a_console_module_importing_lab_or_tools_is_refused(tmp_path: Path) -> None:
    (tmp_path / "console" / "bench").mkdir(parents=True)
    (tmp_path / "lab" / "headline").mkdir(parents=True)
    (tmp_path / "tools").mkdir()
    for init in ("console", "console/bench", "lab", "lab/headline", "tools"):
        (tmp_path / init / "__init__.py").write_text("")
    (tmp_path / "lab" / "headline" / "search.py").write_text("X = 1\n")
    (tmp_path / "tools" / "vllm_env.py").write_text("Y = 1\n")
    (tmp_path / "console" / "bench" / "run.py").write_text(
        "def f():\n    from lab.headline.search import X\n    import tools.vllm_env\n    return X\n"
    )
    graph = import_graph(tmp_path, ["console", "lab", "tools"])
    assert wrong_imports(graph, "console") == [
        "console.bench.run -> lab.headline.search",
        "console.bench.run -> tools.vllm_env",
    ]
    (tmp_path / "console" / "bench" / "run.py").write_text("import scheduler\n")
    assert wrong_imports(import_graph(tmp_path, ["console", "lab", "tools"]), "console") == []
