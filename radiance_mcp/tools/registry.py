"""How a tool is declared: ``ToolFamily.tool``, a decorator beside the tool's code.

The decorator reads what the SDK's ``@server.tool()`` reads off a signature: the input model
(the annotation of the second parameter, after the Runtime), the output model (the return
annotation) and whether the tool wants to report progress (a parameter annotated ``Progress``,
whatever its name: the server passes the MCP request's context there, the CLI a terminal line).
The description is the function's docstring. Declaring a tool imports neither the MCP SDK nor
asyncio, so a CLI subcommand loads only what its tool uses.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

Run = Callable[..., Coroutine[Any, Any, BaseModel]]
R = TypeVar("R", bound=Run)


class Progress(Protocol):
    """Where a long tool reports its progress: the SDK's request Context is one."""

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None: ...


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
    """The parameter of run annotated Progress (the server passes the request's context there), if any."""
    picture: Callable[[Any], str] | None = None
    """The output as an SVG picture: MCP image content beside the structured output, the CLI's --svg FILE."""


def _is_progress(hint: Any) -> bool:
    """Progress, or Progress | None."""
    return hint is Progress or Progress in typing.get_args(hint)


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
                context_param=next((p for p in params[2:] if _is_progress(hints.get(p))), None),
                picture=picture,
            ))
            return run

        return register
