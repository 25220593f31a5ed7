"""The session record: one JSON line per MCP event, written by ``radiance-mcp serve --record FILE``.

The record is all an eval needs besides the agent's final answer, whatever the agent: the
server writes it, so no adapter runs inside the agent. Format (version ``RECORD_VERSION``),
one JSON object per line, appended (several sessions may share a file)::

    {"version": 1, "seq": 0, "time": "2026-12-01T10:00:00.000+00:00", "kind": "session",
     "server_version": "0.9.0"}
    {"version": 1, "seq": 1, "time": "...", "kind": "tool_call", "tool": "compute_ceiling",
     "arguments": {"service": "frank-archon"}, "ok": true, "result": {...structured output...},
     "duration_s": 0.012}
    {"version": 1, "seq": 2, "time": "...", "kind": "tool_call", "tool": "compute_ceiling",
     "arguments": {...}, "ok": false, "error": "reserve 'safety' of 256.00 MiB is neither ... [rule: reserve_traced]",
     "rule": "reserve_traced", "duration_s": 0.004}
    {"version": 1, "seq": 3, "time": "...", "kind": "prompt_get", "name": "radiance-kv-cache-resize",
     "arguments": {"service": "frank-archon"}, "ok": true, "duration_s": 0.001}
    {"version": 1, "seq": 4, "time": "...", "kind": "resource_read", "uri": "skill://...", "ok": true, ...}

``seq`` counts the session's requests in the order they arrived (a call answered later keeps
its place); ``rule`` is the procedures' rule a refusal names (radiance_mcp.evals.rules).
A result past ``MAX_RESULT_BYTES`` is left out (``result_bytes`` says how large it was), and so
are arguments that would make the line longer than ``MAX_LINE_BYTES`` (``arguments_bytes``).

The writer is SDK server middleware (``Recorder``): it sees every request of stdio and HTTP
sessions alike. The reader (``read_record``) refuses, with the line and the remedy, a line
that is not JSON (a record cut mid-line), another version, or a line past ``MAX_LINE_BYTES``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from radiance_mcp.errors import EvalError
from radiance_mcp.evals.rules import rule_of_refusal

RECORD_VERSION = 1
MAX_LINE_BYTES = 4 * 1024 * 1024
"""The longest line the reader takes; the writer keeps under it by leaving a large result out."""
MAX_RESULT_BYTES = 1024 * 1024
"""A structured result larger than this is not written (the call, its arguments and outcome are)."""
MAX_EVENTS = 100_000
"""A record with more events than this is refused: no agent run makes that many calls."""

EventKind = Literal["session", "tool_call", "prompt_get", "resource_read"]
_RECORDED = {"tools/call": "tool_call", "prompts/get": "prompt_get", "resources/read": "resource_read"}


class Event(BaseModel):
    """One line of a record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int
    seq: int
    time: str
    kind: EventKind
    server_version: str | None = None
    tool: str | None = None
    name: str | None = None
    uri: str | None = None
    arguments: dict[str, Any] | None = None
    ok: bool | None = None
    result: dict[str, Any] | None = None
    result_bytes: int | None = None
    arguments_bytes: int | None = None
    error: str | None = None
    rule: str | None = None
    duration_s: float | None = None


def read_record(path: str | Path) -> list[Event]:
    """Every event of a record file, in file order; EvalError naming the line for anything else."""
    source = Path(path)
    try:
        handle = source.open("rb")
    except OSError as exc:
        raise EvalError(f"record {source}: cannot be read ({exc.strerror}); pass the file --record wrote") from None
    events: list[Event] = []
    with handle:
        number = 0
        while True:
            raw = handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise EvalError(f"record {source}: line {number} is longer than {MAX_LINE_BYTES:,} bytes; a record "
                                "line is one MCP event, which the server keeps shorter: this is not a session record")
            if not raw.strip():
                continue
            events.append(parse_line(raw, f"record {source}: line {number}", last=not raw.endswith(b"\n")))
            if len(events) > MAX_EVENTS:
                raise EvalError(f"record {source}: more than {MAX_EVENTS:,} events; score one session's record")
    if not events:
        raise EvalError(f"record {source}: holds no events; start the server with --record {source} and run the agent")
    return events


def parse_line(raw: bytes | str, where: str, *, last: bool = False) -> Event:
    """One record line -> Event, or EvalError saying what is wrong with it and what to do."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        cut = " (no newline at its end: the record was cut mid-line, e.g. the server killed mid-write)" if last else ""
        raise EvalError(f"{where}: not JSON{cut}: {str(exc)[:120]}; each line of a record is one JSON event") from None
    if not isinstance(data, dict):
        raise EvalError(f"{where}: a JSON {type(data).__name__}, not an event object")
    version = data.get("version")
    if version != RECORD_VERSION:
        raise EvalError(f"{where}: record version {version!r}, this scorer reads version {RECORD_VERSION}; score it "
                        "with the radiance-mcp that wrote it, or record the session again")
    try:
        return Event.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "the event"
        raise EvalError(f"{where}: {field}: {first['msg']}; not an event of record version {RECORD_VERSION}") from None


# ---------------------------------------------------------------------------------------
# The writer


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _line(event: dict[str, Any]) -> bytes:
    text = json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
    return text.encode("utf-8", "replace")  # a lone surrogate from a client becomes '?', never a crash


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(value) if isinstance(value, Mapping) else {}


def _text(content: Any) -> str:
    return " ".join(str(item.get("text", "")) for item in content or () if isinstance(item, Mapping))


class Recorder:
    """SDK server middleware appending one line per tools/call, prompts/get and resources/read to a file.

    ``MCPServer(..., middleware=[Recorder(path)])``; the file is opened for appending at once,
    so a path that cannot be written is an error before the server starts.
    """

    def __init__(self, path: str | Path, server_version: str = "") -> None:
        self.path = Path(path)
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise EvalError(f"--record {self.path}: cannot be opened for appending ({exc.strerror}); name a file "
                            "in a directory that exists and you can write") from None
        self._lock = threading.Lock()
        self._seq = 0
        self.write({"kind": "session", "server_version": server_version})

    def close(self) -> None:
        os.close(self._fd)

    def _next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def write(self, fields: dict[str, Any], seq: int = 0) -> None:
        """Append one event; arguments too large for a line are left out (arguments_bytes says how large)."""
        event = {"version": RECORD_VERSION, "seq": seq, "time": _now(), **fields}
        line = _line(event)
        if len(line) > MAX_LINE_BYTES and "arguments" in event:
            event["arguments_bytes"] = len(_line({"a": event.pop("arguments")}))
            line = _line(event)
        with self._lock:
            os.write(self._fd, line)

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        kind = _RECORDED.get(getattr(ctx, "method", ""))
        if kind is None or getattr(ctx, "request_id", None) is None:
            return await call_next(ctx)
        seq, started = self._next_seq(), time.monotonic()
        params = _as_dict(getattr(ctx, "params", None))
        fields: dict[str, Any] = {"kind": kind}
        if kind == "tool_call":
            fields["tool"] = str(params.get("name", ""))
        elif kind == "prompt_get":
            fields["name"] = str(params.get("name", ""))
        else:
            fields["uri"] = str(params.get("uri", ""))
        if kind != "resource_read":
            arguments = params.get("arguments")
            fields["arguments"] = dict(arguments) if isinstance(arguments, Mapping) else {}
        try:
            result = await call_next(ctx)
        except BaseException as exc:
            fields |= {"ok": False, "error": str(exc)[:MAX_RESULT_BYTES], "duration_s": time.monotonic() - started}
            self.write(fields, seq)
            raise
        fields["duration_s"] = round(time.monotonic() - started, 6)
        data = _as_dict(result)
        if kind == "tool_call":
            failed = bool(data.get("isError") or data.get("is_error"))
            fields["ok"] = not failed
            if failed:
                error = _text(data.get("content"))
                fields |= {"error": error, "rule": rule_of_refusal(error)}
            else:
                structured = data.get("structuredContent") or data.get("structured_content")
                if structured is not None:
                    size = len(json.dumps(structured, default=str))
                    fields |= {"result": structured} if size <= MAX_RESULT_BYTES else {"result_bytes": size}
        else:
            fields["ok"] = True
        self.write(fields, seq)
        return result
