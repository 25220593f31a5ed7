"""The schemas tools/list publishes, built straight from each tool's models (published.input_schema,
published.output_schema), are the ones the SDK's own Tool.from_function derives from the flat
signature of the input model's fields and the output model: the start-up shortcut changes no
byte an agent reads."""

from __future__ import annotations

import inspect
import json
from typing import Annotated, Any

import pytest
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult
from pydantic import Field

from radiance_mcp.app import schemas
from radiance_mcp.app.server import build_server
from radiance_mcp.sources.config import Fleet
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools import TOOLS, ToolSpec


def _sdk_tool(spec: ToolSpec) -> Tool:
    """The tool as the SDK derives it from a function whose keyword arguments are the input model's fields."""

    async def call(**arguments: Any) -> CallToolResult:
        raise AssertionError("never called")

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
        return_annotation=Annotated[CallToolResult, spec.output_model],
    )
    return Tool.from_function(call, name=spec.name, structured_output=True)


def _text(schema: dict[str, Any] | None) -> str:
    return json.dumps(schema, separators=(",", ":"))  # key order included: the bytes on the wire


@pytest.mark.parametrize("spec", TOOLS, ids=lambda spec: spec.name)
async def test_published_schemas_are_the_sdks_derivation(spec: ToolSpec) -> None:
    server = build_server(Runtime(Fleet()))
    listed = next(tool for tool in await server.list_tools() if tool.name == spec.name)  # as the server sends it
    sdk = _sdk_tool(spec)
    expected_input = schemas.compact({**sdk.parameters, "additionalProperties": False}, arguments=True)
    assert _text(listed.input_schema) == _text(expected_input)
    assert sdk.output_schema is not None
    assert _text(listed.output_schema) == _text(schemas.shallow(sdk.output_schema))
