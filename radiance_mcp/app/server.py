"""MCP wiring only: every tool in its published form (published.py) becomes an MCP tool, every
skill (skills.py) a prompt and a resource; no logic lives here. A tool's code and models are
imported on its first call, so a start builds none of them.

Each tool's flat arguments are its input model's fields (so clients see a flat
inputSchema, with no other names allowed), its output model is the structured output
(outputSchema), the raw arguments of a call go to arguments.parse_arguments (unknown names
refused), and any RadianceMCPError becomes an error result with the same message, for the
agent to read, and a refusal's rule as data in its _meta (core.errors.REFUSAL_META).

The transports: ``run_stdio`` answers a line that is not a JSON-RPC message with a JSON-RPC
error (the SDK's stdio transport drops it, and the client waits for ever), and ``http_app``
serves streamable HTTP statelessly, with Host/Origin checks set from the bind address.
"""

from __future__ import annotations

import base64
import functools
import ipaddress
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.resources import FunctionResource, TextResource
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    ImageContent,
    JSONRPCError,
    TextContent,
    ToolAnnotations,
)
from pydantic import ValidationError
from starlette.types import ASGIApp

from radiance_mcp import __version__
from radiance_mcp.app import published, schemas, skills
from radiance_mcp.app.arguments import parse_arguments, unknown_tool
from radiance_mcp.core.errors import REFUSAL_META, RadianceMCPError
from radiance_mcp.sources.config import split_allowed_host
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools import tool_names, tool_spec

logger = logging.getLogger(__name__)

INSTRUCTIONS = """\
Tools for the radiance inference engine's KV-cache / VRAM resize and step-shape audit.
Start with list_fleet: it names the services to pass as `service`.
Read figures from the engine's boot ledger with these tools rather than estimating them:
the ceiling is the engine's (settled free minus its floor, plus the pair), never free
memory seen from outside; every reserve must cite a ledger line or be labelled personal.
"""

LEDGER_ARGUMENTS = """\
Ledger arguments (every tool that reads a boot ledger): one of service (a name list_fleet gives), log (a
ledger file under the log roots; on host, over SSH, if given), log_text (the caller's text: unverified) or
container with host (its podman logs); boot: -1 the newest, -2 the one before, 1 the oldest. wait_s: seconds
to wait for a settled boot (0: none), past the boot whose first_line / first_byte are after_line / after_byte.
audit_step_shape's proven_* and candidate_* are each side's source; unprefixed, one source for both sides.
reserves: each {mib, label} held below the ceiling cites its reserve_candidates line (line=N) or is
personal=true. outside_free, only where the log prints no free memory: {mib, label (where it was read),
card (omitted: every card)}, carried as unverified.
Probe arguments: service (a name list_fleet gives); dialect: auto (detected from the first refusal) or an
engine's; api: chat (thinking off) or completions; model: the served model's name; chars_per_token: filler
characters per token; max_window_tokens: the bound above an unknown window (a refusal names the window).
A field of a tool that words these otherwise says so in its own description.
"""
"""The shared ledger arguments in words, said once here rather than in every tool's schema (tools/list is paid
on every turn); models/ledger_ref.py FIELDS words a role's arguments where they differ."""


class RadianceTool(Tool):
    """The SDK's Tool, with our input model reading the raw arguments.

    The SDK validates a call against a model of the flat signature that drops every name it
    does not know (a misspelled ``reserve`` would run with no reserve at all), words errors
    as pydantic does, and prefixes each with 'Error executing tool <name>:'. This run keeps
    the flat inputSchema but hands the raw arguments to arguments.parse_arguments, and a
    RadianceMCPError's own message (argument, rule, remedy) reaches the agent as it is.
    """

    async def run(
        self, arguments: dict[str, Any], context: Context[Any, Any], convert_result: bool = False
    ) -> Any:
        try:
            result = await self.fn(arguments, context)
            return self.fn_metadata.convert_result(result) if convert_result else result
        except RadianceMCPError as exc:
            # The message for the agent; a refusal's rule, arithmetic and remedy as data beside it.
            logger.info("Tool %r failed: %r", self.name, str(exc))
            data = exc.refusal_data()
            return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True,
                                  _meta={REFUSAL_META: data} if data else None)
        except MCPError:
            raise  # a protocol error, answered as one (as the SDK's own run does)
        except Exception as exc:
            # A crash: the exception's text stays in the server's log, as in the SDK's own run.
            raise UnexpectedToolError(f"Error executing tool {self.name}") from exc


def _tool(form: dict[str, Any], runtime: Runtime) -> RadianceTool:
    """A tool in its published form (published.load): a flat inputSchema of the input model's
    fields, no other names; its code and models are imported on its first call.

    Built directly rather than by the SDK's Tool.from_function, which would derive a second
    pydantic model of the arguments from a signature (its validation is not used: run reads the
    raw arguments with the input model) and build the output model's validator at start-up.
    """
    name = form["name"]
    # The SDK checks each structured output against output_model (its validator is built on the
    # first call; the field is read live); arg_model is the SDK's empty base, as run never validates through it.
    metadata = FuncMetadata(arg_model=ArgModelBase, output_schema=form["output_schema"])

    async def call(arguments: dict[str, Any], ctx: Context) -> CallToolResult:
        spec = tool_spec(name)  # the tool's family is imported on the first call of one of its tools
        metadata.output_model = spec.output_model
        args = parse_arguments(spec.name, spec.input_model, arguments)
        # A tool that asks for the request's context (a parameter annotated Context) gets it, e.g. for progress.
        context = {spec.context_param: ctx} if spec.context_param else {}
        output = await spec.run(runtime, args, **context)
        # The text content is the structured output as compact JSON: the SDK's own is a second, indented copy.
        data = output.model_dump(mode="json", by_alias=True)
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        content: list[Any] = [TextContent(type="text", text=text)]
        if spec.picture is not None:  # e.g. plan_free_vram's budget as SVG, beside the structured output
            svg = base64.b64encode(spec.picture(output).encode()).decode()
            content.append(ImageContent(type="image", data=svg, mime_type="image/svg+xml"))
        return CallToolResult(content=content, structured_content=data)

    # tools/list is paid on every turn: the published schemas are compact (no titles, no null
    # defaults) and the output's is its top level; the full output schema is a resource.
    return RadianceTool(
        fn=call,
        name=name,
        title=form["title"],
        description=form["description"],
        parameters=form["input_schema"],
        fn_metadata=metadata,
        is_async=True,
        context_kwarg="ctx",
        annotations=ToolAnnotations(
            title=form["title"],
            read_only_hint=form["read_only"],
            destructive_hint=False,
            idempotent_hint=form["idempotent"],
            open_world_hint=form["open_world"],
        ),
    )


def _output_schema_text(name: str) -> str:
    output_model = tool_spec(name).output_model
    return json.dumps(schemas.compact(output_model.model_json_schema()), separators=(",", ":"))


def output_schema_uri(name: str) -> str:
    return f"schema://{name}/output"


class RadianceServer(MCPServer):
    """The SDK's server, answering a misspelled tool name with the closest one, as arguments are."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        names = [tool.name for tool in await self.list_tools()]
        if name not in names:
            raise ToolError(unknown_tool(name, names))
        return await super().call_tool(name, arguments, context)


def build_server(runtime: Runtime, *, middleware: Sequence[Any] = (), submit_answer: bool = False) -> MCPServer:
    """The MCP server of the runtime's fleet; middleware wraps every request (e.g. evals.record.Recorder);
    submit_answer: offer the submit_answer tool too (serve --record: the answer as data, for the eval)."""

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await runtime.close()  # SSH connections end with the server

    forms = published.load()
    procedures = skills.load(tool_names())
    server: MCPServer = RadianceServer(
        "radiance-mcp",
        version=__version__,
        instructions=INSTRUCTIONS + LEDGER_ARGUMENTS + skills.instructions(procedures),
        lifespan=lifespan,
        tools=[*(_tool(tool, runtime) for tool in forms["tools"]), *([_answer_tool()] if submit_answer else [])],
        middleware=list(middleware),
    )
    for name in tool_names():
        server.add_resource(FunctionResource(  # the text is made on read: start-up is the client's wait
            uri=output_schema_uri(name), name=f"{name} output", mime_type="application/schema+json",
            description=f"The full JSON schema of {name}'s structured output (tools/list gives its top level).",
            fn=functools.partial(_output_schema_text, name),
        ))
    for skill in procedures:
        server.add_resource(TextResource(uri=skill.uri, name=skill.name, title=skill.title,
                                         description=skill.description, mime_type="text/markdown", text=skill.text))
        server.add_prompt(Prompt.from_function(_prompt(skill, runtime), name=skill.name, title=skill.title,
                                               description=skill.description))
    return server


def _answer_tool() -> RadianceTool:
    """submit_answer (models.answer): the answer as data, checked as every tool's arguments are, and echoed as read."""
    from radiance_mcp.models import answer

    async def call(arguments: dict[str, Any], ctx: Context) -> CallToolResult:
        parsed = parse_arguments(answer.TOOL, answer.SubmitAnswerInput, arguments)
        data = answer.SubmitAnswerOutput(answer=parsed).model_dump(mode="json", exclude_none=True)
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)

    return RadianceTool(
        fn=call, name=answer.TOOL, title="Submit the answer", description=answer.DESCRIPTION,
        parameters=published.input_schema(answer.SubmitAnswerInput),
        fn_metadata=FuncMetadata(arg_model=ArgModelBase, output_schema=published.output_schema(
            answer.SubmitAnswerOutput), output_model=answer.SubmitAnswerOutput),
        is_async=True, context_kwarg="ctx",
        annotations=ToolAnnotations(title="Submit the answer", read_only_hint=True, destructive_hint=False,
                                    idempotent_hint=False, open_world_hint=False),
    )


def _prompt(skill: skills.Skill, runtime: Runtime) -> Callable[..., str]:
    """The skill's prompt function, its errors (an unknown service) passed to the client word for word."""
    render = skills.prompt_function(skill, runtime.fleet)

    @functools.wraps(render)
    def prompt(**arguments: Any) -> str:
        try:
            return render(**arguments)
        except RadianceMCPError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from exc

    return prompt


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


def settle_heap() -> None:
    """Before a server's loop: what start-up made (the imports, the server, the fleet) is collected once and then
    left out of every later collection (gc.freeze). The whole-fleet plan_free_vram of 1,000 services paid one or
    two full collections of those ~300,000 objects a call; frozen, the tool's run took 0.65-0.74 s of CPU against
    0.77-1.0 s (bench/bench_fleet_answer.py --freeze). Only the serving loops call it: a test process builds many
    servers and must not keep them for ever."""
    import gc

    gc.collect()
    gc.freeze()


def run_stdio(server: MCPServer) -> None:
    """Serve server over stdin/stdout until stdin ends (the heap settled first: settle_heap)."""
    settle_heap()
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
    # The SDK logs 'Terminating session: None' at INFO for every stateless request: noise, and a
    # reader that never drains stderr would block the server in write(2).
    for name in ("mcp.server.streamable_http", "mcp.server.streamable_http_manager"):
        logging.getLogger(name).setLevel(logging.WARNING)
    hosts = allowed_hosts(bind, extra_hosts)
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                         allowed_origins=origins)
    # The body limit follows the schemas: a call they allow never meets a plain-text 413.
    return server.streamable_http_app(host=bind, transport_security=security, stateless_http=True,
                                      max_request_body_size=published.load()["body_limit_bytes"])
