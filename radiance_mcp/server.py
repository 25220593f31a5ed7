"""MCP wiring only: every entry of tools.TOOLS becomes an MCP tool, every skill (skills.py) a
prompt and a resource; no logic lives here.

Each tool's flat arguments are its input model's fields (so clients see a flat
inputSchema, with no other names allowed), its output model is the structured output
(outputSchema), the raw arguments of a call go to arguments.parse_arguments (unknown names
refused), and any RadianceMCPError becomes the SDK's ToolError with the same message, for the
agent to read.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.resources import TextResource
from mcp.server.mcpserver.tools import Tool
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from radiance_mcp import __version__, skills
from radiance_mcp.arguments import parse_arguments
from radiance_mcp.errors import RadianceMCPError
from radiance_mcp.runtime import Runtime
from radiance_mcp.tools import TOOLS, ToolSpec

INSTRUCTIONS = """\
Tools for the radiance inference engine's KV-cache / VRAM resize and step-shape audit.
Start with list_fleet: it names the services to pass as `service`.
Read figures from the engine's boot ledger with these tools rather than estimating them:
the ceiling is the engine's (settled free minus its floor, plus the pair), never free
memory seen from outside; every reserve must cite a ledger line or be labelled personal.
"""


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
            raise ToolError(str(exc)) from exc
        except MCPError:
            raise  # a protocol error, answered as one (as the SDK's own run does)
        except Exception as exc:
            # A crash: the exception's text stays in the server's log, as in the SDK's own run.
            raise UnexpectedToolError(f"Error executing tool {self.name}") from exc


def _tool(spec: ToolSpec, runtime: Runtime) -> RadianceTool:
    """The tool of one spec: a flat inputSchema of the input model's fields, no extra names."""

    async def call(arguments: dict[str, Any], ctx: Context) -> CallToolResult:
        args = parse_arguments(spec.name, spec.input_model, arguments)
        # A tool that asks for the request's context (a parameter annotated Context) gets it, e.g. for progress.
        context = {spec.context_param: ctx} if spec.context_param else {}
        output = await spec.run(runtime, args, **context)
        # The text content is the structured output as compact JSON: the SDK's own is a second, indented copy.
        data = output.model_dump(mode="json", by_alias=True)
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)

    # The SDK reads the published schema (and the structured output's) off this signature only.
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True),
                annotation=Annotated[info.annotation, *info.metadata, Field(description=info.description)],
            )
            for name, info in spec.input_model.model_fields.items()
        ],
        return_annotation=Annotated[CallToolResult, spec.output_model],  # the SDK publishes and checks it
    )
    call.__name__ = spec.name
    tool = RadianceTool.from_function(
        call,
        name=spec.name,
        title=spec.title,
        description=inspect.getdoc(spec.run),
        context_kwarg="ctx",
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=False,
            idempotent_hint=spec.idempotent,
            open_world_hint=spec.open_world,
        ),
        structured_output=True,
    )
    assert isinstance(tool, RadianceTool)  # from_function builds the class it is called on
    tool.parameters["additionalProperties"] = False  # what run enforces, for clients that read it
    return tool


JSON_BYTES_PER_CHAR = 12
"""The most bytes JSON may spend on one character of a string: an escaped astral character
('\\ud83d\\ude00', as Python's json.dumps writes it) is one character to maxLength, 12 bytes."""
ENVELOPE_BYTES = 64 * 1024
"""The JSON-RPC envelope around a call's arguments (method, id, tool name, _meta)."""


def _max_json_bytes(schema: dict[str, Any], defs: dict[str, Any]) -> int:
    """The largest JSON text a value of this schema can take; a string without maxLength is a bug."""
    if "$ref" in schema:
        return _max_json_bytes(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        return max(_max_json_bytes(arm, defs) for arm in schema["anyOf"])
    kind = schema.get("type")
    if "enum" in schema or "const" in schema:
        return max(len(json.dumps(v)) for v in schema.get("enum", [schema.get("const")]))
    if kind == "string":
        return 2 + JSON_BYTES_PER_CHAR * int(schema["maxLength"])
    if kind == "array":
        return 2 + int(schema["maxItems"]) * (1 + _max_json_bytes(schema["items"], defs))
    if kind == "object":
        return 2 + sum(len(name) + 4 + _max_json_bytes(prop, defs) for name, prop in schema["properties"].items())
    return 32  # a number, a boolean, null: bounded by the schema's maximum, a JSON number is short


def request_body_limit_bytes() -> int:
    """The HTTP transport's body limit: the largest call any tool's inputSchema allows.

    A call the schemas accept must reach the tool (and its clear errors), never the
    transport's plain-text 413; anything larger is refused before it is parsed.
    """
    largest = 0
    for spec in TOOLS:
        schema = spec.input_model.model_json_schema()
        try:
            largest = max(largest, _max_json_bytes(schema, schema.get("$defs", {})))
        except KeyError as exc:  # a programming error, caught by tests/hostile/test_arguments.py too
            raise RuntimeError(f"{spec.name}: an argument has no {exc.args[0]}; give every one a cap") from exc
    return ENVELOPE_BYTES + largest


def build_server(runtime: Runtime) -> MCPServer:
    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await runtime.close()  # SSH connections end with the server

    procedures = skills.load(spec.name for spec in TOOLS)
    server: MCPServer = MCPServer(
        "radiance-mcp",
        version=__version__,
        instructions=INSTRUCTIONS + skills.instructions(procedures),
        lifespan=lifespan,
        tools=[_tool(spec, runtime) for spec in TOOLS],
    )
    for skill in procedures:
        server.add_resource(TextResource(uri=skill.uri, name=skill.name, title=skill.title,
                                         description=skill.description, mime_type="text/markdown", text=skill.text))
        server.add_prompt(Prompt.from_function(_prompt(skill, runtime), name=skill.name, title=skill.title,
                                               description=skill.description))
    return server


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
