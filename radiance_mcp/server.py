"""MCP wiring only: every entry of tools.TOOLS becomes an MCP tool, every skill (skills.py) a
prompt and a resource; no logic lives here.

Each tool's flat arguments are its input model's fields (so clients see a flat
inputSchema), its output model is the structured output (outputSchema), and any
RadianceMCPError becomes the SDK's ToolError with the same message, for the agent to read.
"""

from __future__ import annotations

import base64
import functools
import inspect
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.resources import TextResource
from mcp_types import INVALID_PARAMS, CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from radiance_mcp import __version__, skills
from radiance_mcp.config import describe_validation
from radiance_mcp.errors import RadianceMCPError
from radiance_mcp.sources import close_remote
from radiance_mcp.tools import TOOLS, Runtime, ToolSpec

INSTRUCTIONS = """\
Tools for the radiance inference engine's KV-cache / VRAM resize and step-shape audit.
Start with list_fleet: it names the services to pass as `service`.
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

    procedures = skills.load(spec.name for spec in TOOLS)
    server: MCPServer = MCPServer("radiance-mcp", version=__version__, lifespan=lifespan,
                                  instructions=INSTRUCTIONS + skills.instructions(procedures))
    for skill in procedures:
        server.add_resource(TextResource(uri=skill.uri, name=skill.name, title=skill.title,
                                         description=skill.description, mime_type="text/markdown", text=skill.text))
        server.add_prompt(Prompt.from_function(_prompt(skill, runtime), name=skill.name, title=skill.title,
                                               description=skill.description))
    for spec in TOOLS:
        server.add_tool(
            _compact(_tool_function(spec, runtime), spec),
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


def _compact(call: Any, spec: ToolSpec) -> Any:
    """The tool, its result's text content compact JSON: the SDK's own is a second, indented copy."""

    @functools.wraps(call)
    async def compact(**arguments: Any) -> CallToolResult:
        output = await call(**arguments)
        data = output.model_dump(mode="json", by_alias=True)
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        content: list[Any] = [TextContent(type="text", text=text)]
        if spec.picture is not None:
            image = base64.b64encode(spec.picture(output).encode()).decode()
            content.append(ImageContent(type="image", data=image, mime_type="image/svg+xml"))
        return CallToolResult(content=content, structured_content=data)

    returns = Annotated[CallToolResult, spec.output_model]  # the SDK still publishes and checks the output schema
    compact.__signature__ = inspect.signature(call).replace(return_annotation=returns)  # type: ignore[attr-defined]
    return compact
