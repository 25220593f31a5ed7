"""What every tool shares: the Runtime (fleet and connections), the ToolSpec, the ledger sources.

Tool modules (tools.py, audit_tools.py, probes/tools.py) import from here, and tools.py
gathers their specs into the one registry, ``tools.TOOLS``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from radiance_mcp.config import Fleet
from radiance_mcp.errors import InputError, SourceError
from radiance_mcp.ledger import Boot, Line
from radiance_mcp.models import BootRef, LedgerArgs, LineRef
from radiance_mcp.sources import (
    InlineSource,
    LedgerSource,
    LocalFileSource,
    allowed_local_path,
    remote_source,
    resolve_local,
)


@dataclass
class Runtime:
    """What the tools share across calls: the fleet, and in extras the SSH pool (sources.SSH_POOL_KEY)."""

    fleet: Fleet
    trust_local_paths: bool = False
    """True for the CLI: a person naming a file on their own machine needs no log root."""
    extras: dict[str, Any] = field(default_factory=dict)


def local_path(runtime: Runtime, raw: str, argument: str) -> Path:
    """A file on this machine an input names: under the log roots, unless the CLI's user names it."""
    if runtime.trust_local_paths:
        return resolve_local(raw, argument)
    return allowed_local_path(raw, runtime.fleet.local_roots(), argument)


def ledger_source(
    runtime: Runtime, *, service: str | None, log: str | None, log_text: str | None,
    host: str | None = None, container: str | None = None,
) -> LedgerSource:
    """The source an input names: a configured service, a file or container on a host, a local file, or text."""
    if log_text is not None:
        return InlineSource(log_text)
    if host is not None or container is not None:
        if host is None:
            raise InputError("container needs host: the host (from the fleet config) where podman runs it")
        return remote_source(runtime.fleet, runtime.extras, host=host, log=log, container=container)
    if log is not None:
        return LocalFileSource(local_path(runtime, log, "log"))
    assert service is not None
    entry = runtime.fleet.service(service)
    if entry.host is not None:
        if entry.log is None and entry.container is None:
            raise SourceError(f"service {service!r} names no log or container in the fleet config; add one")
        return remote_source(runtime.fleet, runtime.extras, host=entry.host, log=entry.log,
                             container=entry.container, configured=True)
    if entry.log is None:
        raise SourceError(f"service {service!r} names no log in the fleet config; add log = \"/path/to/ledger.log\"")
    # The config is the operator's own file: its paths need no log root.
    return LocalFileSource(Path(entry.log).expanduser())


async def read_boot(runtime: Runtime, args: LedgerArgs) -> Boot:
    source = ledger_source(runtime, service=args.service, log=args.log, log_text=args.log_text,
                           host=args.host, container=args.container)
    return await source.read(args.boot)


def boot_ref(boot: Boot) -> BootRef:
    return BootRef(
        source=boot.source,
        boot=boot.index,
        boots_seen=boot.boots_seen,
        first_line=boot.first_line,
        last_line=boot.last_line,
        origin=boot.origin,
        verified=boot.origin != "caller text",
        lines_from_byte=boot.lines_from_byte,
    )


def line_ref(line: Line) -> LineRef:
    return LineRef(line=line.number, text=line.text)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    run: Callable[..., Coroutine[Any, Any, BaseModel]]
    read_only: bool = True
    open_world: bool = False
    idempotent: bool = True
    picture: Callable[[Any], str] | None = None
    """The output as an SVG picture: MCP image content beside the structured output, the CLI's --svg FILE."""
