"""Cold start: a tool command against `python -c pass`, and the server against a one-tool MCPServer.

1. A tool command, whole process (issue 15: <= 5x): `radiance-mcp compute-ceiling` and
   `read-budget-table` on the 27-line example ledger, `check-serve-script` on a given script,
   against `python -c pass` with the same interpreter; beside them the shares of asyncio and
   of pydantic (imported, one model validated): pydantic alone is the least a command that
   validates its input costs, which no import order can undercut (these commands read only
   given text and files here, so they run with no event loop and load no asyncio); both
   together, the least of a command on an event loop (one that reads a host, say); and
   `python -S -c pass`, the interpreter without site (setuptools' editable install adds an
   import finder to every process of the venv, `python -c pass` included: about 13 ms of CPU
   here). Wall time from spawn to exit, and the child's CPU time (user + sys, from os.wait4),
   which a busy machine disturbs less.
2. The server (issue 2: <= 1.2x; issue 15: <= 1.1x): spawn to the tools/list answer over
   stdio, `radiance-mcp serve` against a minimal one-tool MCPServer script, both spawned by
   the SDK's own client (mcp.Client over StdioServerParameters) with the same interpreter;
   the clock stops when list_tools() returns (shutdown is not counted); the server's CPU
   time from spawn to exit beside it; then where radiance-mcp's start goes, in process.

Within each part the commands alternate, after one discarded warm-up each, so every one reads
warm .pyc files (written even when PYTHONDONTWRITEBYTECODE is set here, as an install would
have them); medians are compared.

    .venv/bin/python bench/bench_cold_start.py [--repeat 9] [--part cli|server]

Prints ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "radiance_mcp" / "examples" / "frank-archon.log"

PYDANTIC = """\
import argparse, json
from pydantic import BaseModel
class Figure(BaseModel):
    mib: int
print(Figure(mib=30969).model_dump_json())
"""
FLOOR = """\
import argparse, asyncio, json
from pydantic import BaseModel
class Figure(BaseModel):
    mib: int
async def run() -> Figure:
    return Figure(mib=30969)
print(asyncio.run(run()).model_dump_json())
"""
BREAKDOWN = """\
import json, sys, time
clock = time.process_time
marks = [("start", clock())]
import mcp.server.mcpserver
marks.append(("the SDK (both servers import it)", clock()))
from radiance_mcp.app import cli, server
from radiance_mcp.sources.config import load
from radiance_mcp.sources.runtime import Runtime
marks.append(("radiance_mcp's modules the server imports (no tool's code)", clock()))
built = server.build_server(Runtime(load(None)))
marks.append(("build_server: the 14 tools' published forms (kept), skills", clock()))
import anyio
anyio.run(built.list_tools)
marks.append(("the first tools/list", clock()))
anyio.run(built.call_tool, "compute_ceiling", {"log_text": open(sys.argv[1]).read()})
marks.append(("after it, the first call of compute_ceiling (imports its tools' code and models)", clock()))
print(json.dumps([(name, now - then) for (_, then), (name, now) in zip(marks, marks[1:])]))
"""
MINIMAL = '''\
from mcp.server.mcpserver import MCPServer

server = MCPServer("minimal")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


server.run("stdio")
'''


async def spawn_to_tools_list(args: list[str], cache: Path) -> tuple[float, float, int]:
    """Wall seconds from spawn to the tools/list answer, the server's CPU seconds to its exit, and its tool count."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    server = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT), env={"XDG_CACHE_HOME": str(cache)})
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the client has waited for the server's exit
    cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return elapsed, cpu_s, len(tools)


def warm_env() -> dict[str, str]:
    """This environment, less PYTHONDONTWRITEBYTECODE: a child writes and then reads .pyc files, as an install has."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def run_to_exit(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds from spawn to exit, the child's CPU seconds, and its exit status."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def cli_part(repeat: int) -> None:
    python = sys.executable
    tool = [python, "-m", "radiance_mcp"]
    commands = {
        "python -c pass": [python, "-c", "pass"],
        "python -S -c pass": [python, "-S", "-c", "pass"],
        "import asyncio": [python, "-c", "import asyncio"],
        "a pydantic model (floor)": [python, "-c", PYDANTIC],
        "pydantic + asyncio": [python, "-c", FLOOR],
        "compute-ceiling": [*tool, "compute-ceiling", "--log", str(EXAMPLE)],
        "read-budget-table": [*tool, "read-budget-table", "--log", str(EXAMPLE), "--json"],
        "check-serve-script": [*tool, "check-serve-script", "--script-text", "#!/bin/sh\nexec radiance --tp 1\n"],
    }
    env = warm_env()
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():
        run_to_exit(argv, env)  # warm-up, discarded (writes the .pyc files)
    for i in range(repeat):
        order = list(commands.items()) if i % 2 == 0 else list(reversed(commands.items()))
        for name, argv in order:
            seconds, cpu_s, status = run_to_exit(argv, env)
            if status not in (0, 3):
                raise SystemExit(f"{name} exited {status}: {' '.join(argv)}")
            wall[name].append(seconds)
            cpu[name].append(cpu_s)
    base_wall, base_cpu = statistics.median(wall["python -c pass"]), statistics.median(cpu["python -c pass"])
    print(f"a tool command, spawn to exit, {repeat} runs each (python {sys.version.split()[0]}; "
          f"the 27-line example ledger)")
    for name in commands:
        print(f"  {name:26s} wall median {statistics.median(wall[name]):.3f} s = "
              f"{statistics.median(wall[name]) / base_wall:5.2f}x   cpu median {statistics.median(cpu[name]):.3f} s = "
              f"{statistics.median(cpu[name]) / base_cpu:5.2f}x")
    print("  (ratios against python -c pass; target <= 5x. python -S skips site and its .pth hooks, such as an\n"
          "   editable install's import finder, which every process of this interpreter pays)")


async def server_part(repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        minimal = Path(tmp) / "minimal_server.py"
        minimal.write_text(MINIMAL)
        kept = Path(tmp) / "cache"  # the warm-up's start keeps the published forms here, as a first start does
        servers = {"radiance-mcp serve": ["-m", "radiance_mcp", "serve"], "minimal MCPServer": [str(minimal)],
                   "radiance-mcp serve, nothing kept": ["-m", "radiance_mcp", "serve"]}
        times: dict[str, list[float]] = {name: [] for name in servers}
        cpu: dict[str, list[float]] = {name: [] for name in servers}
        counts: dict[str, int] = {}
        for args in servers.values():
            await spawn_to_tools_list(args, kept)  # warm-up, discarded
        for i in range(repeat):
            order = list(servers.items()) if i % 2 == 0 else list(reversed(servers.items()))
            for name, args in order:
                # The first start after an install or upgrade: an empty cache directory of its own.
                cache = Path(tempfile.mkdtemp(dir=tmp)) if name.endswith("nothing kept") else kept
                elapsed, cpu_s, counts[name] = await spawn_to_tools_list(args, cache)
                times[name].append(elapsed)
                cpu[name].append(cpu_s)
        env = {**warm_env(), "XDG_CACHE_HOME": str(kept)}
        breakdown = [sys.executable, "-c", BREAKDOWN, str(EXAMPLE)]
        parts = [json.loads(subprocess.run(breakdown, capture_output=True, text=True, check=True, cwd=ROOT,
                                           env=env).stdout) for _ in range(repeat)]
    print(f"spawn to tools/list answer over stdio, {repeat} runs each (python {sys.version.split()[0]})")
    for name, values in times.items():
        print(f"  {name:32s} median {statistics.median(values):.3f} s  min {min(values):.3f}  max {max(values):.3f}  "
              f"cpu median {statistics.median(cpu[name]):.3f} s  ({counts[name]} tools)")
    print("  where radiance-mcp's start goes, in process (CPU, medians):")
    for index, (name, _) in enumerate(parts[0]):
        print(f"    {statistics.median(run[index][1] for run in parts) * 1e3:6.1f} ms  {name}")
    base = "minimal MCPServer"
    for name in ("radiance-mcp serve", "radiance-mcp serve, nothing kept"):
        ratio = statistics.median(times[name]) / statistics.median(times[base])
        pairs = [a / b for a, b in zip(times[name], times[base], strict=True)]
        cpu_ratio = statistics.median(cpu[name]) / statistics.median(cpu[base])
        print(f"  {name}: ratio of medians {ratio:.2f}x (median of paired ratios {statistics.median(pairs):.2f}x; "
              f"cpu, spawn to exit, {cpu_ratio:.2f}x)   (target <= 1.1x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--part", choices=("cli", "server"), default=None, help="run one part only")
    options = parser.parse_args()
    if options.part in (None, "cli"):
        cli_part(options.repeat)
    if options.part in (None, "server"):
        asyncio.run(server_part(options.repeat))


if __name__ == "__main__":
    main()
