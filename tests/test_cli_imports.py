"""A tool command loads only what its tool uses: the pure ones (ledger arithmetic, the audit on
given texts, the plan on a ledger) start without the MCP SDK, the HTTP stack or SSH, each in a
fresh interpreter as a person's shell runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from radiance_mcp.config import CONFIG_ENV

BootBuilder = Callable[..., str]

# The MCP SDK and its transports, HTTP (the probes' httpx, the SDK's httpx2) and SSH (asyncssh
# and the cryptography it loads): none of them has a part in a figure read from given text.
SERVER_SIDE = {"mcp", "mcp_types", "anyio", "starlette", "sse_starlette", "uvicorn", "httpx", "httpx2", "httpcore",
               "asyncssh", "cryptography"}

PROBE = """\
import json, sys
from radiance_mcp.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

# A two-card boot of another service, a wider window and a smaller pool than the example's.
FLAGS = {"max-model-len": "131072", "max-num-seqs": "3", "max-num-batched-tokens": "2048", "host-pool-mib": "7580",
         "tp": "2", "kv-cache-dtype": "fp8", "placement": "slab", "vram-weights-mib": "24000",
         "vram-kv-mib": "4096", "gpu-headroom-mib": "96"}
CARD = {"total": "31.86 GiB", "weights": "23.44 GiB", "kv": "4.00 GiB", "unclaimed": "1.42 GiB",
        "budgets": "27.44 GiB", "unaccounted": "4.42 GiB", "free": "3.01 GiB", "floor": "209.19 MiB",
        "headroom": "96.00 MiB", "static": "113.19 MiB"}
SCRIPT = """\
#!/bin/sh
. /srv/lab/inference.env
case "$1" in
  narrow) exec radiance --max-num-seqs "$LAB_SEATS" --max-num-batched-tokens "$LAB_STEP" ;;
  wide)   exec radiance --max-num-seqs "$LAB_SEATS" --max-num-batched-tokens 8192 ;;
esac
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
    (tmp_path / "gpu-box.log").write_text(boot_text(name="gpu-box", flags=FLAGS, cards=[CARD, CARD]))
    (tmp_path / "two.log").write_text(boot_text(name="gpu-box") + boot_text(name="gpu-box", flags=FLAGS))
    (tmp_path / "serve.sh").write_text(SCRIPT)
    (tmp_path / "inference.env").write_text("LAB_SEATS=3\nLAB_STEP=2048\n")
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (("read-budget-table", "--log", "gpu-box.log"), 0),
        (("compute-ceiling", "--log-text-file", "gpu-box.log", "--json"), 0),
        # 3 x 131,072 x 7,488 B = 2,808 MiB + 220 + 448 = 3,476 MiB > 1,024: the check runs and fails
        (("check-pool-contract", "--seqs", "3", "--max-model-len", "131072", "--kv-cache-dtype", "fp8",
          "--pool-mib", "1024"), 3),
        (("audit-step-shape", "--log", "two.log", "--proven-boot", "1", "--candidate-boot", "2"), None),
        (("check-serve-script", "--script-text-file", "serve.sh", "--env-text-file", "inference.env"), None),
        (("compare-dry-run", "--proven-argv", "radiance\n--max-num-batched-tokens\n2048\n",
          "--candidate-argv", "radiance\n--max-num-batched-tokens\n8192\n"), 3),
        (("plan-free-vram", "--log", "gpu-box.log"), 0),
        (("render-gates", "--log", "gpu-box.log", "--vram-kv-mib", "4608", "--env-prefix", "LAB"), None),
        (("compare-arms", "--arms", '[{"value": 2048, "rate": 41.5}, {"value": 4096, "rate": 41.9}]'), 0),
        (("list-fleet",), 0),
    ],
    ids=lambda value: value[0] if isinstance(value, tuple) else None,
)
def test_a_pure_command_loads_no_server_http_or_ssh_code(files: Path, argv: tuple[str, ...], code: int | None) -> None:
    status, modules = _run(files, *argv)
    if code is not None:
        assert status == code
    assert status in (0, 3)  # it ran to a verdict, past the imports a run makes on first use
    assert {name.split(".")[0] for name in modules} & SERVER_SIDE == set()
    # eval is declared in the parser; its modules load only when it runs.
    assert not {name for name in modules if name.startswith("radiance_mcp.evals")}
    if argv[0] == "check-serve-script":  # an audit command does not build the ledger tools' models
        assert "radiance_mcp.models.audit" in modules
        assert not {"radiance_mcp.models.ledger", "radiance_mcp.tools.ledger"} & modules


def test_a_ledger_command_does_not_load_the_other_families(files: Path) -> None:
    status, modules = _run(files, "compute-ceiling", "--log", "gpu-box.log")
    assert status == 0
    assert {"radiance_mcp.tools.ledger", "radiance_mcp.capacity"} <= modules
    assert not {"radiance_mcp.tools.audit", "radiance_mcp.tools.probes", "radiance_mcp.tools.gates",
                "radiance_mcp.serve_script", "radiance_mcp.step_shape", "radiance_mcp.server"} & modules



SERVE_PROBE = """\
import json, sys
import anyio
from radiance_mcp.config import load
from radiance_mcp.runtime import Runtime
from radiance_mcp.server import build_server
tools = anyio.run(build_server(Runtime(load(None))).list_tools)
print(json.dumps({"tools": len(tools), "modules": sorted(sys.modules)}))
"""

# What tools/list does not need: SSH and the probes' HTTP client (the SDK brings its own httpx2), the
# simulator and the evals, and the code only a tool's call runs (its picture, a serve script's parser,
# the step-shape audit, the argv comparison): each is loaded by the first call that uses it.
NOT_FOR_TOOLS_LIST = {"asyncssh", "httpx", "radiance_mcp.remote", "radiance_mcp.sim", "radiance_mcp.evals",
                      "radiance_mcp.probes.client", "radiance_mcp.serve_script", "radiance_mcp.step_shape",
                      "radiance_mcp.svg", "radiance_mcp.argv"}


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
