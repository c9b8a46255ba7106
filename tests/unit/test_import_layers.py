"""The architecture's one-way dependencies, read from the code's own imports (lazy ones inside functions
included): no module of ctxbus takes part in an import circle, and the layers named in ARCHITECTURE.md never
import upwards."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "services"
PACKAGE = ROOT / "ctxbus"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The ctxbus modules a file imports (a ``from package import name`` counts the submodule when it is one)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
    return {m for m in found if m in modules}


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    return {name: _imports(path, modules) - {name} for name, path in files.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_takes_part_in_an_import_circle() -> None:
    assert _circles(import_graph()) == []


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


# (who, what it must never import): the layers of ARCHITECTURE.md
FORBIDDEN = [
    (("ctxbus.core", "ctxbus.contract"), ("ctxbus.adapters", "ctxbus.wiring", "ctxbus.components", "ctxbus.api")),
    (("ctxbus.core",), ("ctxbus.gateway", "ctxbus.hooks", "ctxbus.retriever", "ctxbus.injector", "ctxbus.cli")),
    (("ctxbus.components",), ("ctxbus.api", "ctxbus.wiring", "ctxbus.gateway", "ctxbus.cli")),
    (("ctxbus.api",), ("ctxbus.wiring", "ctxbus.gateway", "ctxbus.cli")),
    (("ctxbus.gateway",), ("ctxbus.api", "ctxbus.wiring", "ctxbus.cli")),
    (
        ("ctxbus.retriever", "ctxbus.injector", "ctxbus.recorder", "ctxbus.learning"),
        ("ctxbus.wiring", "ctxbus.api", "ctxbus.gateway", "ctxbus.cli", "ctxbus.bench"),
    ),
    (
        ("ctxbus.capture",),  # pure: capture rules import no I/O layer
        ("ctxbus.adapters", "ctxbus.wiring", "ctxbus.components", "ctxbus.api", "ctxbus.gateway", "ctxbus.cli"),
    ),
    (("ctxbus.adapters",), ("ctxbus.wiring", "ctxbus.api", "ctxbus.gateway", "ctxbus.cli", "ctxbus.bench")),
    # the MCP server is a client of the running stack: it never opens the store (no API, no components) itself
    (("ctxbus.mcpserver",), ("ctxbus.api", "ctxbus.components", "ctxbus.wiring", "ctxbus.cli")),
]


@pytest.mark.parametrize(("who", "never"), FORBIDDEN, ids=lambda v: "+".join(v) if isinstance(v, tuple) else v)
def test_layers_never_import_upwards(who: tuple[str, ...], never: tuple[str, ...]) -> None:
    graph = import_graph()
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if _under(module, who)
        for target in targets
        if _under(target, never)
    )
    assert wrong == []


def test_the_graph_sees_lazy_imports() -> None:
    """A check that cannot fail is no check: the graph reads imports inside functions too."""
    graph = import_graph()
    assert "ctxbus.adapters.embedding.onnx_minilm" in graph["ctxbus.components"]  # imported inside open_embedder
    assert "ctxbus.components" in graph["ctxbus.api"]
