"""How a tool is declared: ``ToolFamily.tool``, a decorator beside the tool's code.

The decorator reads what the SDK's ``@server.tool()`` reads off a signature: the input model
(the annotation of the second parameter, after the Runtime), the output model (the return
annotation) and whether the tool wants the MCP request context (a parameter annotated
``Context``, whatever its name). The description is the function's docstring.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp.server.mcpserver import Context
from pydantic import BaseModel

Run = Callable[..., Coroutine[Any, Any, BaseModel]]
R = TypeVar("R", bound=Run)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    run: Run
    read_only: bool = True
    open_world: bool = False
    idempotent: bool = True
    context_param: str | None = None
    """The parameter of run annotated Context (the server passes the request's context there), if any."""
    picture: Callable[[Any], str] | None = None
    """The output as an SVG picture: MCP image content beside the structured output, the CLI's --svg FILE."""


def _is_context(hint: Any) -> bool:
    """Context, Context[...] (a subclass, as pydantic parametrises it) or either or None."""
    return any(isinstance(h, type) and issubclass(h, Context) for h in (hint, *typing.get_args(hint)))


class ToolFamily(list[ToolSpec]):
    """The tools of one module, in the order declared; tools/__init__.py gathers the families."""

    def tool(
        self, title: str, *, name: str | None = None, read_only: bool = True, open_world: bool = False,
        idempotent: bool = True, picture: Callable[[Any], str] | None = None,
    ) -> Callable[[R], R]:
        """Declare the decorated ``async def <name>(runtime: Runtime, args: <Input>) -> <Output>`` a tool.

        name defaults to the function's; read_only, open_world and idempotent become its MCP
        annotations (no tool is destructive); picture draws the output as SVG.
        """

        def register(run: R) -> R:
            hints = typing.get_type_hints(run)
            params = list(inspect.signature(run).parameters)
            self.append(ToolSpec(
                name=name or run.__name__,
                title=title,
                input_model=hints[params[1]],
                output_model=hints["return"],
                run=run,
                read_only=read_only,
                open_world=open_world,
                idempotent=idempotent,
                context_param=next((p for p in params[2:] if _is_context(hints.get(p))), None),
                picture=picture,
            ))
            return run

        return register
