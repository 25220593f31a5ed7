"""Cold start: spawn to the tools/list answer over stdio, radiance-mcp against a minimal one-tool MCPServer.

Target (issue 2): at most 1.2x the minimal server, measured in the same run. Both are spawned
by the SDK's own client (mcp.Client over StdioServerParameters) with the same interpreter; the
clock runs from before the spawn until list_tools() returns (shutdown is not counted). The
two alternate, after one discarded warm-up each (so both read warm .pyc files), and the
medians are compared.

    .venv/bin/python bench/bench_cold_start.py [--repeat 9]

Prints ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent

MINIMAL = '''\
from mcp.server.mcpserver import MCPServer

server = MCPServer("minimal")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


server.run("stdio")
'''


async def spawn_to_tools_list(args: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    async with Client(StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))) as client:
        tools = (await client.list_tools()).tools
        elapsed = time.perf_counter() - start
    return elapsed, len(tools)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=9)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        minimal = Path(tmp) / "minimal_server.py"
        minimal.write_text(MINIMAL)
        servers = {"radiance-mcp serve": ["-m", "radiance_mcp", "serve"], "minimal MCPServer": [str(minimal)]}
        times: dict[str, list[float]] = {name: [] for name in servers}
        counts: dict[str, int] = {}
        for args in servers.values():
            await spawn_to_tools_list(args)  # warm-up, discarded
        for i in range(options.repeat):
            order = list(servers.items()) if i % 2 == 0 else list(reversed(servers.items()))
            for name, args in order:
                elapsed, counts[name] = await spawn_to_tools_list(args)
                times[name].append(elapsed)
    print(f"spawn to tools/list answer over stdio, {options.repeat} runs each (python {sys.version.split()[0]})")
    for name, values in times.items():
        print(f"  {name:20s} median {statistics.median(values):.3f} s  min {min(values):.3f}  max {max(values):.3f}  "
              f"({counts[name]} tools)")
    ratio = statistics.median(times["radiance-mcp serve"]) / statistics.median(times["minimal MCPServer"])
    pairs = [a / b for a, b in zip(times["radiance-mcp serve"], times["minimal MCPServer"], strict=True)]
    print(f"  ratio of medians {ratio:.2f}x (median of paired ratios {statistics.median(pairs):.2f}x)"
          "   (target <= 1.2x)")


if __name__ == "__main__":
    asyncio.run(main())
