"""A tool command loads only what its tool uses: the pure ones (ledger arithmetic, the audit on
given texts, the plan on a ledger) start without the MCP SDK, the HTTP stack or SSH, and without
an event loop (no asyncio), each in a fresh interpreter as a person's shell runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pure_commands import PURE, BootBuilder, case_id, write_files

from radiance_mcp.sources.config import CONFIG_ENV

# The MCP SDK and its transports, HTTP (the probes' httpx, the SDK's httpx2) and SSH (asyncssh
# and the cryptography it loads): none of them has a part in a figure read from given text.
SERVER_SIDE = {"mcp", "mcp_types", "anyio", "starlette", "sse_starlette", "uvicorn", "httpx", "httpx2", "httpcore",
               "asyncssh", "cryptography"}
LOOP_SIDE = {"asyncio", "concurrent", "ssl"}
"""An event loop and what it brings (futures, thread pools, TLS): a command that reads only given
text and files here runs without one (offload.drive), so it loads none of them."""

PROBE = """\
import json, sys
from radiance_mcp.app.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _run(tmp_path: Path, *argv: str) -> tuple[int, set[str]]:
    """Exit status and the modules loaded, after one command in a fresh interpreter."""
    env = {name: value for name, value in os.environ.items() if name != CONFIG_ENV}
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=120)
    assert proc.stdout, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    return result["code"], set(result["modules"])


@pytest.fixture
def files(tmp_path: Path, boot_text: BootBuilder) -> Path:
    return write_files(tmp_path, boot_text)


@pytest.mark.slow
@pytest.mark.parametrize(("argv", "code"), PURE, ids=case_id)
def test_a_pure_command_loads_no_server_http_ssh_or_event_loop(
    files: Path, argv: tuple[str, ...], code: int | None
) -> None:
    status, modules = _run(files, *argv)
    if code is not None:
        assert status == code
    assert status in (0, 3)  # it ran to a verdict, past the imports a run makes on first use
    assert {name.split(".")[0] for name in modules} & SERVER_SIDE == set()
    assert {name.split(".")[0] for name in modules} & LOOP_SIDE == set()
    # eval is declared in the parser; its modules load only when it runs; the ledgers here are radiance's,
    # so no other engine's dialect (radiance_mcp.core.engines) loads either.
    assert not {name for name in modules if name.startswith(("radiance_mcp.evals", "radiance_mcp.core.engines"))}
    if argv[0] == "check-serve-script":  # an audit command does not build the ledger tools' models
        assert "radiance_mcp.models.audit" in modules
        assert not {"radiance_mcp.models.ledger", "radiance_mcp.tools.ledger"} & modules


@pytest.mark.slow
def test_a_ledger_command_does_not_load_the_other_families(files: Path) -> None:
    status, modules = _run(files, "compute-ceiling", "--log", "gpu-box.log")
    assert status == 0
    assert {"radiance_mcp.tools.ledger", "radiance_mcp.core.rules.capacity"} <= modules
    assert not {"radiance_mcp.tools.audit", "radiance_mcp.tools.probes", "radiance_mcp.tools.gates",
                "radiance_mcp.core.audit.serve_script", "radiance_mcp.core.audit.step_shape",
                "radiance_mcp.app.server"} & modules



SERVE_PROBE = """\
import json, sys
import anyio
from radiance_mcp.sources.config import load
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.app.server import build_server
tools = anyio.run(build_server(Runtime(load(None))).list_tools)
print(json.dumps({"tools": len(tools), "modules": sorted(sys.modules)}))
"""

# What tools/list does not need: SSH and the probes' HTTP client (the SDK brings its own httpx2), the
# simulator and the evals, and the code only a tool's call runs (its picture, a serve script's parser,
# the step-shape audit, the argv comparison): each is loaded by the first call that uses it.
NOT_FOR_TOOLS_LIST = {"asyncssh", "httpx", "radiance_mcp.sources.remote", "radiance_mcp.sim", "radiance_mcp.evals",
                      "radiance_mcp.probes.client", "radiance_mcp.core.audit.serve_script",
                      "radiance_mcp.core.audit.step_shape", "radiance_mcp.core.svg", "radiance_mcp.core.audit.argv"}


@pytest.mark.slow
def test_the_servers_start_loads_only_what_tools_list_needs(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if name != CONFIG_ENV}
    proc = subprocess.run([sys.executable, "-c", SERVE_PROBE], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=120)
    assert proc.stdout, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["tools"] == 14
    loaded = {prefix for prefix in NOT_FOR_TOOLS_LIST for name in result["modules"]
              if name == prefix or name.startswith(prefix + ".")}
    assert loaded == set()
