"""Imports point one way: core <- I/O <- tools <- MCP / CLI; the simulator beside, on the core.

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
CORE = frozenset({
    "radiance_mcp.ledger", "radiance_mcp.budget", "radiance_mcp.reserves", "radiance_mcp.capacity",
    "radiance_mcp.step_shape", "radiance_mcp.argv", "radiance_mcp.units", "radiance_mcp.constants",
    "radiance_mcp.errors",
    "radiance_mcp.planning",
})
"""The pure core: text and numbers in, records out. The packages in CORE_PACKAGES belong to it too (is_core)."""
CORE_PACKAGES = ("radiance_mcp.engines", "radiance_mcp.serve_script")
"""Core packages: every module under them is core."""
PURE_PROBE_PARTS = frozenset({"radiance_mcp.probes.dialects", "radiance_mcp.probes.payloads"})
"""The engines' refusal wording and the answer readers: pure, and the simulator writes refusals with
the same wording the probes read (one home per phrase), so it may import these two."""
DEMO = "radiance_mcp.sim.demo"
"""`radiance-mcp demo`: a person's walk-through that runs the simulated fleet and drives the server
over stdio as an MCP client; a CLI of its own, beside the simulator, not part of it."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def is_core(name: str) -> bool:
    return name in CORE or any(name == p or name.startswith(f"{p}.") for p in CORE_PACKAGES)


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


def test_the_walk_sees_every_layer() -> None:
    """The test reads the modules it claims to: the core, the I/O edge, the tools and the simulator."""
    assert {"radiance_mcp.ledger", "radiance_mcp.ledger_file", "radiance_mcp.server", "radiance_mcp.sim.engine",
            "radiance_mcp.engines.vllm", "radiance_mcp.probes.client"} <= set(MODULES)
    assert "radiance_mcp.ledger" in {m for m, _ in imports_of("radiance_mcp.budget")}
    # A function-level import is seen: the CLI loads the simulator only for --demo.
    assert any(m == "radiance_mcp.sim.demo" for m, _ in imports_of("radiance_mcp.cli"))


@pytest.mark.parametrize("name", sorted(n for n in MODULES if is_core(n)))
def test_the_core_imports_only_the_core_and_the_standard_library(name: str) -> None:
    """No I/O (ledger_file, sources, remote, probes, offload), MCP, CLI, httpx, asyncssh or simulator."""
    wrong = [
        f"line {line}: {module}"
        for module, line in imports_of(name)
        if (module.startswith("radiance_mcp") and module != "radiance_mcp" and not is_core(module))
        or (top_level(module) != "radiance_mcp" and top_level(module) not in sys.stdlib_module_names)
    ]
    assert not wrong, f"{name} (core) imports outside the core: {wrong}"


@pytest.mark.parametrize("name", sorted(PURE_PROBE_PARTS))
def test_the_probe_parts_the_simulator_shares_are_pure(name: str) -> None:
    wrong = [
        f"line {line}: {module}"
        for module, line in imports_of(name)
        if (module.startswith("radiance_mcp.") and not (is_core(module) or module in PURE_PROBE_PARTS))
        or (top_level(module) != "radiance_mcp" and top_level(module) not in sys.stdlib_module_names)
    ]
    assert not wrong, f"{name} imports outside the core: {wrong}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("radiance_mcp.sim") and n != DEMO))
def test_the_simulator_imports_only_the_core(name: str) -> None:
    """Beside the server, not on it: no I/O module, no tools, no MCP, no CLI, no SSH."""
    wrong = [
        f"line {line}: {module}"
        for module, line in imports_of(name)
        if (module.startswith("radiance_mcp.") and not (
            is_core(module) or module in PURE_PROBE_PARTS or module.startswith("radiance_mcp.sim")))
        or top_level(module) in {"mcp", "asyncssh", "httpx"}
    ]
    assert not wrong, f"{name} (simulator) imports beyond the core: {wrong}"


def test_the_demo_drives_the_server_from_outside() -> None:
    """The demo talks to the server over stdio like any client: it imports no tool, server or CLI code."""
    internal = {m for m, _ in imports_of(DEMO) if m.startswith("radiance_mcp.")}
    allowed = {"radiance_mcp.ledger_file"}
    wrong = sorted(m for m in internal if not (is_core(m) or m.startswith("radiance_mcp.sim") or m in allowed))
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
    assert "radiance_mcp/sim/demo.py::_walk" in sizes and "bench/bench_remote.py::main" in sizes  # the walk sees them
    too_long = [f"{name}: {lines} lines (limit {limit})" for name, (lines, limit) in sizes.items()
                if lines > limit and name not in LONG_ALLOWED]
    assert not too_long, "split into named steps, or add the entry to LONG_ALLOWED with its reason: " + "; ".join(
        too_long)
    stale = [name for name in LONG_ALLOWED if name not in sizes or sizes[name][0] <= sizes[name][1]]
    assert not stale, f"no longer past the limit (or gone): remove from LONG_ALLOWED: {stale}"
    assert all(reason.strip() for reason in LONG_ALLOWED.values())
