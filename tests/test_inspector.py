"""The server driven by the MCP Inspector CLI (npm @modelcontextprotocol/inspector 0.15.0, node 20): tools/list
over stdio (the Inspector spawns the server), the calls over HTTP to one server of the module.

.ci/run installs it with `npm install` in tests/inspector/; without it these tests skip.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from http_process import serve_http

from radiance_mcp.sources.config import EXAMPLES_DIR

INSPECTOR = Path(__file__).parent / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
EXAMPLE_LOG = str(EXAMPLES_DIR / "frank-archon.log")

pytestmark = [
    pytest.mark.inspector,
    pytest.mark.skipif(not INSPECTOR.exists(), reason="MCP Inspector not installed: cd tests/inspector && npm install"),
]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """One `radiance-mcp serve --http` for the calls over HTTP (tools/list goes over stdio, a process of its own)."""
    with serve_http() as url:
        yield url


def inspect(*method_args: str, server: Sequence[str] = (sys.executable, "-m", "radiance_mcp", "serve"),
            ) -> dict[str, object]:
    """The Inspector CLI's answer; server: the command it spawns over stdio, or the server's URL."""
    proc = subprocess.run(
        [str(INSPECTOR), "--cli", *server, *method_args],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_inspector_lists_tools_with_output_schema_and_annotations() -> None:
    tools = {tool["name"]: tool for tool in inspect("--method", "tools/list")["tools"]}  # type: ignore[attr-defined]
    for name in ("read_budget_table", "compute_ceiling", "check_pool_contract"):
        tool = tools[name]
        assert tool["outputSchema"]["type"] == "object"
        assert "ceiling_mib" in tools["compute_ceiling"]["outputSchema"]["properties"]
        assert tool["annotations"]["readOnlyHint"] is True
        assert tool["annotations"]["idempotentHint"] is True


def test_inspector_calls_compute_ceiling(server_url: str) -> None:
    result = inspect("--method", "tools/call", "--tool-name", "compute_ceiling", "--tool-arg", f"log={EXAMPLE_LOG}",
                     server=[server_url])
    structured = result["structuredContent"]
    assert structured["ceiling_mib"] == 30_969  # type: ignore[index]
    assert structured["derivation"] == "29,120 + (2,058 - 209) = 30,969 MiB/card"  # type: ignore[index]
    assert structured["cards"][0]["headroom_mib"] == 1_849  # type: ignore[index]


def test_inspector_calls_check_pool_contract(server_url: str) -> None:
    result = inspect(
        "--method", "tools/call", "--tool-name", "check_pool_contract",
        "--tool-arg", "pool_mib=3000", "--tool-arg", "seqs=2", "--tool-arg", "max_model_len=200000",
        "--tool-arg", "kv_cache_dtype=fp8", server=[server_url],
    )
    structured = result["structuredContent"]
    assert structured["required_mib"] == 3_524.45  # type: ignore[index]  # 2*200000*7488 B + 220 + 448
    assert structured["ok"] is False  # type: ignore[index]
    assert structured["margin_mib"] == -524.45  # type: ignore[index]


def test_inspector_shows_a_refusal_as_a_tool_error(server_url: str) -> None:
    result = inspect(
        "--method", "tools/call", "--tool-name", "compute_ceiling", "--tool-arg", "log=/etc/passwd",
        server=[server_url],
    )
    assert result["isError"] is True
    assert "outside the allowed log roots" in result["content"][0]["text"]  # type: ignore[index]
