"""MCP wiring only: every entry of tools.TOOLS becomes an MCP tool; no logic lives here.

Each tool's flat arguments are its input model's fields (so clients see a flat
inputSchema), its output model is the structured output (outputSchema), and any
RadianceMCPError becomes the SDK's ToolError with the same message, for the agent to read.

The transports: ``run_stdio`` answers a line that is not a JSON-RPC message with a JSON-RPC
error (the SDK's stdio transport drops it, and the client waits for ever), and ``http_app``
serves streamable HTTP statelessly, with Host/Origin checks set from the bind address.
"""

from __future__ import annotations

import inspect
import ipaddress
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, ToolAnnotations
from pydantic import Field, ValidationError
from starlette.types import ASGIApp

from radiance_mcp import __version__
from radiance_mcp.config import describe_validation, split_allowed_host
from radiance_mcp.errors import RadianceMCPError
from radiance_mcp.sources import close_remote
from radiance_mcp.tools import TOOLS, Runtime, ToolSpec

INSTRUCTIONS = """\
Tools for the radiance inference engine's KV-cache / VRAM resize and step-shape audit.
Read figures from the engine's boot ledger with these tools rather than estimating them:
the ceiling is the engine's (settled free minus its floor, plus the pair), never free
memory seen from outside; every reserve must cite a ledger line or be labelled personal.
"""


def _tool_function(spec: ToolSpec, runtime: Runtime) -> Any:
    """A function whose signature is the input model's fields, flat, plus the MCP context."""
    parameters = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True),
            annotation=Annotated[info.annotation, *info.metadata, Field(description=info.description)],
        )
        for name, info in spec.input_model.model_fields.items()
    ]
    parameters.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context))
    wants_ctx = "ctx" in inspect.signature(spec.run).parameters  # e.g. boundary_probe reports progress

    async def call(ctx: Context, **arguments: Any) -> Any:
        try:
            args = spec.input_model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolError(f"{spec.name}: {describe_validation(exc)}") from exc
        try:
            if wants_ctx:
                return await spec.run(runtime, args, ctx=ctx)
            return await spec.run(runtime, args)
        except RadianceMCPError as exc:
            raise ToolError(str(exc)) from exc

    call.__signature__ = inspect.Signature(parameters, return_annotation=spec.output_model)  # type: ignore[attr-defined]
    call.__name__ = spec.name
    call.__doc__ = inspect.getdoc(spec.run)
    return call


def build_server(runtime: Runtime) -> MCPServer:
    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await close_remote(runtime.extras)  # SSH connections end with the server

    server: MCPServer = MCPServer("radiance-mcp", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan)
    for spec in TOOLS:
        server.add_tool(
            _tool_function(spec, runtime),
            name=spec.name,
            title=spec.title,
            annotations=ToolAnnotations(
                title=spec.title,
                read_only_hint=spec.read_only,
                destructive_hint=False,
                idempotent_hint=spec.idempotent,
                open_world_hint=spec.open_world,
            ),
            structured_output=True,
        )
    return server


# ---------------------------------------------------------------------------------------
# stdio


class _AnswerBadLines:
    """The SDK's stdio read stream, with each line that is not a JSON-RPC message answered.

    The SDK's stdio transport turns such a line (not JSON, a lone surrogate, a 5,000-digit
    number) into an exception on the read stream, which the server drops without a reply:
    the client then waits until its own timeout. Here it gets the JSON-RPC error at once
    (-32700 Parse error, or -32600 Invalid Request for JSON that is not a message; id null,
    since none could be read) and the server reads on.
    """

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner, self._write = inner, write
        self.last_context: Any = None

    async def receive(self) -> SessionMessage:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                self.last_context = getattr(self._inner, "last_context", None)
                return item  # type: ignore[no-any-return]
            await self._write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=_line_error(item))))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _AnswerBadLines:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _AnswerBadLines:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


def _line_error(exc: Exception) -> ErrorData:
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    if any(error["type"] == "json_invalid" for error in errors) or not errors:
        detail = errors[0]["msg"] if errors else str(exc)
        return ErrorData(code=PARSE_ERROR, message=f"Parse error: the line is not JSON ({detail[:200]}); "
                         "send one JSON-RPC message per line, UTF-8, numbers within 64-bit range")
    return ErrorData(code=INVALID_REQUEST, message="Invalid Request: the line is JSON but not a JSON-RPC 2.0 "
                     "message (jsonrpc, method, id or result missing or of the wrong type)")


def run_stdio(server: MCPServer) -> None:
    """Serve server over stdin/stdout until stdin ends."""
    lowlevel = server._lowlevel_server  # MCPServer.run_stdio_async does the same, with no hook for bad lines

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await lowlevel.run(_AnswerBadLines(read_stream, write_stream), write_stream,
                               lowlevel.create_initialization_options())

    anyio.run(serve)


# ---------------------------------------------------------------------------------------
# streamable HTTP

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def allowed_hosts(bind: str, extra: Sequence[str] = ()) -> list[str]:
    """The Host header values the server answers to: the bind address as clients write it in a URL
    (loopback binds also as 127.0.0.1, localhost and [::1]; 0.0.0.0 and :: as the loopback
    names only), and each of extra (names, or addresses behind a proxy), any port unless given."""
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(bind)
    except ValueError:
        address = None
    names: list[str] = []
    if address is None:
        names.append(bind)  # a host name (localhost is loopback too)
    elif not address.is_unspecified:
        names += [f"[{bind}]", f"[{address.compressed}]"] if address.version == 6 else [bind]
    if bind == "localhost" or address is not None and (address.is_loopback or address.is_unspecified):
        names += _LOOPBACK_NAMES
    hosts = [f"{name}:*" for name in dict.fromkeys(names)] + list(dict.fromkeys(names))
    for name in extra:
        host, port = split_allowed_host(name)
        hosts += [f"{host}:{port}"] if port else [host, f"{host}:*"]
    return list(dict.fromkeys(hosts))


def http_app(server: MCPServer, *, bind: str, extra_hosts: Sequence[str] = ()) -> ASGIApp:
    """The streamable HTTP app at /mcp: stateless, with DNS-rebinding protection from the bind address.

    Security: a page in a browser can make its own domain resolve to this machine (DNS
    rebinding) and post to the server; its requests then carry that domain as Host and its
    page as Origin. Each request must name the server by an allowed host and come from no
    page or a page of an allowed host (421 or 403 otherwise), whatever the bind and token.
    The SDK switches these checks on only for the exact binds 127.0.0.1, localhost and ::1.

    Stateless: each request is served on its own, with its own response stream (progress
    notifications travel on it), so no session is held between requests: a client that
    opens sessions and never closes them costs nothing, and a new client is always served.
    """
    hosts = allowed_hosts(bind, extra_hosts)
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                         allowed_origins=origins)
    return server.streamable_http_app(host=bind, transport_security=security, stateless_http=True)
