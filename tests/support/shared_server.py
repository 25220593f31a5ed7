"""One MCP server of the empty fleet per test process, for the tests that only call its tools.

``build_server`` makes every tool's schemas with pydantic, about 0.1 s of CPU a server; a few
hundred tests called it for the same server: ``build_server(Runtime(Fleet()))``, the server
`radiance-mcp serve` builds without a fleet file. ``empty_fleet_server()`` builds it once (per
pytest-xdist worker) and each test still opens its own session on it, ``Client(empty_fleet_server())``,
so no test sees another's session. Sharing it is safe because a tool call changes nothing in
the server or its runtime: the fleet is read, never written, and with no hosts there is no SSH
pool (a session's end closes the runtime: for this runtime, nothing). A test that changes the
server, its fleet or the environment its tools read builds its own.
"""

from __future__ import annotations

import functools

from mcp.server.mcpserver import MCPServer

from radiance_mcp.app.server import build_server
from radiance_mcp.sources.config import Fleet
from radiance_mcp.sources.runtime import Runtime


@functools.cache
def empty_fleet_server() -> MCPServer:
    """build_server(Runtime(Fleet())), built on first use and kept for the process."""
    return build_server(Runtime(Fleet()))
