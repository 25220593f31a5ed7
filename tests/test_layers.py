"""Imports point one way, folder by folder: core <- models, sources <- probes <- tools <- app; sim and evals beside.

Read with ast from every module's source (module-level, function-level and TYPE_CHECKING
imports alike), never by importing, so a lazy import inside a function cannot hide.

And sizes: no module past 600 lines, no function past 80 (radiance_mcp, bench, tests) unless
LONG_ALLOWED says why, read with ast the same way.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import radiance_mcp

PACKAGE_DIR = Path(radiance_mcp.__file__).parent
LAYERS: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "models": frozenset({"core"}),
    "sources": frozenset({"core", "models"}),
    "probes": frozenset({"core", "models", "sources"}),
    "tools": frozenset({"core", "models", "sources", "probes"}),
    "app": frozenset({"core", "models", "sources", "probes", "tools", "sim", "evals"}),
    "sim": frozenset({"core"}),
    "evals": frozenset({"core", "models", "sources", "sim", "app"}),
}
"""Each folder of the package, and the folders it may import besides itself (radiance_mcp's own
``__init__`` aside: the version). The map of the layers in radiance_mcp/__init__.py says the same."""
APP_FOR_EVALS = frozenset({"radiance_mcp.app.server", "radiance_mcp.app.skills"})
"""What evals takes of the app: the server it builds in one process, and the skills it scores against.
The CLI's `eval` command imports evals in turn (app -> evals); no module of either imports the other back."""
DEMO = "radiance_mcp.app.demo"
"""`radiance-mcp demo`: a person's walk-through that runs the simulated fleet and drives the server
over stdio as an MCP client, like any client: it imports no tool, server or CLI code."""
THIRD_PARTY: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "models": frozenset({"pydantic", "pydantic_core"}),
    "sim": frozenset({"starlette", "uvicorn"}),
}
"""Outside the standard library, what a folder may import (a folder not named here: anything installed): the core
nothing, the models pydantic, the simulator its HTTP server (never MCP, httpx or asyncssh)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def layer(name: str) -> str:
    """The folder a module of ours is in ('' for the package's own __init__ and __main__)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else ""


def imports_of(name: str) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import in the module, radiance_mcp names resolved to modules."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield (submodule if submodule in MODULES else base), node.lineno


def top_level(module: str) -> str:
    return module.partition(".")[0]


def test_every_module_is_in_a_layer() -> None:
    """No loose module beside the folders: the package's top holds its map (__init__) and __main__ alone."""
    loose = sorted(n for n in MODULES if not layer(n) and n not in {"radiance_mcp", "radiance_mcp.__main__"})
    assert not loose, f"put each in a layer folder ({', '.join(LAYERS)}): {loose}"
    folders = {p.name for p in PACKAGE_DIR.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(LAYERS), f"a folder of the package is not a layer of this test: {folders ^ set(LAYERS)}"


def test_the_walk_sees_every_layer() -> None:
    """The test reads the modules it claims to, in every folder, lazy imports included."""
    assert {layer(n) for n in MODULES} == {"", *LAYERS}
    assert "radiance_mcp.core.ledger" in {m for m, _ in imports_of("radiance_mcp.core.budget")}
    # A function-level import is seen: the CLI loads the demo only for `radiance-mcp demo`.
    assert any(m == DEMO for m, _ in imports_of("radiance_mcp.app.cli"))


@pytest.mark.parametrize("name", sorted(n for n in MODULES if layer(n)))
def test_imports_point_one_way(name: str) -> None:
    """A module imports its own folder, the folders below it (LAYERS) and what THIRD_PARTY allows it."""
    own = layer(name)
    allowed = LAYERS[own] | {own}
    wrong = []
    for module, line in imports_of(name):
        if top_level(module) == "radiance_mcp":
            target = layer(module)
            if module in {"radiance_mcp", "radiance_mcp.__init__"} or target in allowed and not (
                    own == "evals" and target == "app" and module not in APP_FOR_EVALS):
                continue
            wrong.append(f"line {line}: {module} ({target or 'top'})")
        elif top_level(module) not in sys.stdlib_module_names and own in THIRD_PARTY and (
                top_level(module) not in THIRD_PARTY[own]):
            wrong.append(f"line {line}: {module} (third party)")
    assert not wrong, f"{name} ({own}) may import {sorted(allowed)} only: {wrong}"


def test_the_package_top_imports_nothing_at_start() -> None:
    """`import radiance_mcp` (every module's first step) loads no layer: the map is text."""
    assert not [m for m, _ in imports_of("radiance_mcp") if top_level(m) == "radiance_mcp"]


def test_the_demo_drives_the_server_from_outside() -> None:
    """The demo talks to the server over stdio like any client: it imports no tool, server or CLI code."""
    internal = {m for m, _ in imports_of(DEMO) if m.startswith("radiance_mcp.")}
    allowed = {"radiance_mcp.sources.ledger_file", "radiance_mcp.app.tables"}  # tables: the terminal's width, wrap
    wrong = sorted(m for m in internal if not (layer(m) in {"core", "sim"} or m in allowed))
    assert not wrong, f"{DEMO} imports {wrong}"


# ---------------------------------------------------------------------------------------
# Sizes: a module holds one job, a function one step a reader can follow

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
"""From its 'def' line to its last, docstring included."""
REPO = PACKAGE_DIR.parent
SIZED_DIRS = ("radiance_mcp", "bench", "tests")
LONG_ALLOWED: dict[str, str] = {}
"""Modules (path) and functions (path::qualified name) past the limits, each with the reason it must be so."""


def _sizes() -> Iterator[tuple[str, int, int]]:
    """(module or path::function, its lines, the limit) for every module and function of SIZED_DIRS."""
    for directory in SIZED_DIRS:
        for path in sorted((REPO / directory).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            where = path.relative_to(REPO).as_posix()
            yield where, len(text.splitlines()), MAX_MODULE_LINES
            yield from _function_sizes(ast.parse(text, where), where)


def _function_sizes(node: ast.AST, prefix: str, separator: str = "::") -> Iterator[tuple[str, int, int]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{separator}{child.name}"
            if not isinstance(child, ast.ClassDef):
                assert child.end_lineno is not None
                yield name, child.end_lineno - child.lineno + 1, MAX_FUNCTION_LINES
            yield from _function_sizes(child, name, ".")
        else:
            yield from _function_sizes(child, prefix, separator)


def test_no_module_or_function_is_past_its_limit_without_a_written_reason() -> None:
    """Past 600 lines a module, past 80 a function, is split into named steps, or LONG_ALLOWED says why."""
    sizes = {name: (lines, limit) for name, lines, limit in _sizes()}
    assert "radiance_mcp/app/demo.py::_walk" in sizes and "bench/bench_remote.py::main" in sizes  # the walk sees them
    too_long = [f"{name}: {lines} lines (limit {limit})" for name, (lines, limit) in sizes.items()
                if lines > limit and name not in LONG_ALLOWED]
    assert not too_long, "split into named steps, or add the entry to LONG_ALLOWED with its reason: " + "; ".join(
        too_long)
    stale = [name for name in LONG_ALLOWED if name not in sizes or sizes[name][0] <= sizes[name][1]]
    assert not stale, f"no longer past the limit (or gone): remove from LONG_ALLOWED: {stale}"
    assert all(reason.strip() for reason in LONG_ALLOWED.values())
