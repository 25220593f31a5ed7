"""The session record: one JSON line per MCP event, written by ``radiance-mcp serve --record FILE``.

The record is all an eval needs besides the agent's final answer, whatever the agent: the
server writes it, so no adapter runs inside the agent. Format (version ``RECORD_VERSION``),
one JSON object per line, appended (several sessions may share a file)::

    {"version": 3, "session": "3f2a...", "seq": 0, "time": "2026-12-01T10:00:00.000+00:00",
     "kind": "session", "server_version": "0.9.0", "fleet": "fafb...", "bound": true, "nonce": "9c1e...",
     "mac": "51d0..."}
    {"version": 3, "session": "3f2a...", "seq": 1, "time": "...", "kind": "tool_call",
     "tool": "compute_ceiling", "arguments": {"service": "frank-archon"}, "ok": true,
     "result": {...structured output...}, "duration_s": 0.012, "mac": "..."}
    {"version": 3, "session": "3f2a...", "seq": 2, "time": "...", "kind": "tool_call",
     "tool": "compute_ceiling", "arguments": {...}, "ok": false,
     "error": "reserve 'safety' of 256.00 MiB is neither ...",
     "rule": "reserve_traced", "duration_s": 0.004, "mac": "..."}
    {"version": 3, "session": "3f2a...", "seq": 3, "time": "...", "kind": "prompt_get",
     "name": "radiance-kv-cache-resize", "arguments": {"service": "frank-archon"}, "ok": true, ...}
    {"version": 3, "session": "3f2a...", "seq": 5, "time": "...", "kind": "resource_read", "uri": "skill://...",
     "ok": true, "lost": 1, ...}

``session`` names the server session that wrote the line (a random id drawn at its start), so
the lines of two sessions sharing a file stay apart; ``seq`` counts the session's requests in
the order they arrived (a call answered later keeps its place); ``rule`` is the procedures'
rule a refusal names (its result's _meta, core.errors.REFUSAL_META). ``lost`` counts the session's events that
could not be written (a full disk, ``ulimit -f``) since its previous line. A result past
``MAX_RESULT_BYTES`` is left out (``result_bytes`` says how large it was), and so are arguments
that would make the line longer than ``MAX_LINE_BYTES`` (``arguments_bytes``).

The binding: ``fleet`` is the fingerprint of the fleet served (evals.fleet.fingerprint). A harness
gives the server a nonce (``NONCE_ENV``): the session line then says ``bound`` and names the nonce's
digest (``nonce_digest``), and every line carries a ``mac`` keyed by the nonce and chained to the
session's previous line (``line_mac``); without one the session line says ``"bound": false``.
evals.binding checks them. Version 2 is version 3 without the binding; version 1 is version 2
without ``session`` and ``lost``; the reader reads all three.

The writer is SDK server middleware (``Recorder``): it sees every request of stdio and HTTP
sessions alike. A record that cannot be written never costs a call: the call's result still
goes out, the failure is said once on stderr and in the next tool result, and recording
resumes when it can. Each line is written whole or not at all (a short write is cut back off,
under the file's lock, so another session's lines are never cut), and starts on a line of its
own even after a cut line another writer left.

The reader (``read_record``) skips a cut line (one that begins as an event and is not JSON)
and says so in its notes, as it does for the events a line says were lost and for a record of
several sessions (scored as one run); it refuses, with
the line and the remedy, any other line that is not JSON, a version it does not read, a line
past ``MAX_LINE_BYTES``, more than ``MAX_EVENTS`` events, or a record past ``MAX_RECORD_BYTES``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import stat
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from radiance_mcp.core.errors import REFUSAL_META, EvalError
from radiance_mcp.sources.config import Fleet

RECORD_VERSION = 3
READ_VERSIONS = (1, 2, 3)
"""The versions the reader reads: 1 is 2 without ``session`` and ``lost``; 2 is 3 without the binding (``fleet``,
``bound``, ``nonce``, ``mac``)."""
NONCE_ENV = "RADIANCE_MCP_RECORD_NONCE"
"""The variable a harness gives ``serve --record`` its nonce in (an environment variable, not an argument: no other
user's ps shows it)."""
MAX_LINE_BYTES = 4 * 1024 * 1024
"""The longest line the reader takes; the writer keeps under it by leaving a large result out."""
MAX_RESULT_BYTES = 1024 * 1024
"""A structured result larger than this is not written (the call, its arguments and outcome are)."""
MAX_EVENTS = 100_000
"""A record with more events than this is refused: no agent run makes that many calls."""
MAX_RECORD_BYTES = 64 * 1024 * 1024
"""A record larger than this is refused before it is read whole: an agent run's record is a few MiB at most."""

EventKind = Literal["session", "tool_call", "prompt_get", "resource_read"]
_RECORDED = {"tools/call": "tool_call", "prompts/get": "prompt_get", "resources/read": "resource_read"}
_EVENT_START = b'{"version"'
"""How every writer's line begins: a line that begins so and is not JSON is a cut line."""


class Event(BaseModel):
    """One line of a record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int
    session: str | None = None
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
    lost: int | None = None
    fleet: str | None = None
    bound: bool | None = None
    nonce: str | None = None
    mac: str | None = None


# ---------------------------------------------------------------------------------------
# The binding: what ties a record to its run (checked by evals.binding, judged by evals.score)

GENUINE = "record_genuine"
GENUINE_STATEMENT = ("The record is the server's, whole, of this run's one session on this scenario's fleet: no "
                     "line written by hand, reordered, forged, or taken from another run or session.")
Status = Literal["passed", "failed", "not made"]


class Check(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: Literal["complete", "fleet", "nonce", "replay", "probes"]
    status: Status
    text: str


class Binding(BaseModel):
    model_config = ConfigDict(frozen=True)

    checks: tuple[Check, ...] = ()

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == "failed")

    @property
    def complete(self) -> bool:
        return not any(c.name == "complete" and c.status == "failed" for c in self.checks)


def nonce_digest(nonce: str) -> str:
    """What the session line says of the harness's nonce: its digest, so the record never gives the nonce away."""
    return hashlib.sha256(f"radiance-mcp record nonce {nonce}".encode()).hexdigest()[:32]


def line_mac(nonce: str, previous: str, line: Mapping[str, Any]) -> str:
    """A bound line's mac: keyed by the nonce, over the line (without its mac) and the session's previous line's mac;
    only a writer that holds the nonce can write, reorder or leave out a line of the chain unseen."""
    body = json.dumps({k: v for k, v in line.items() if k != "mac"}, sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"))
    return hmac.new(nonce.encode(), f"{previous}\n{body}".encode("utf-8", "replace"), hashlib.sha256).hexdigest()[:32]


def sign(lines: Sequence[dict[str, Any]], nonce: str) -> list[dict[str, Any]]:
    """The lines bound to the nonce, each session's in their order: what Recorder(nonce=...) writes, for a harness
    that rewrites a record it made (the calibration set normalises what a run draws afresh)."""
    last: dict[str, str] = {}
    signed = []
    for line in lines:
        extra = {"bound": True, "nonce": nonce_digest(nonce)} if line.get("kind") == "session" else {}
        body = {k: v for k, v in line.items() if k != "mac"} | extra
        mac = line_mac(nonce, last.get(line.get("session") or "", ""), body)
        last[line.get("session") or ""] = mac
        signed.append({**body, "mac": mac})
    return signed


def _what(event: Event) -> str:
    """An event as a message names it: its kind and the tool, prompt or resource."""
    return " ".join(str(x) for x in (event.kind, event.tool or event.name or event.uri) if x)


def chain_problem(events: Sequence[Event], nonce: str) -> str | None:
    """The first line of a bound record whose mac does not chain under the nonce, if any (None: every line does)."""
    previous = ""
    for event in events:
        mac = line_mac(nonce, previous, event.model_dump(mode="json", exclude_unset=True))
        if event.mac != mac:
            said = "has no mac" if event.mac is None else "does not chain to the line above it"
            return (f"seq {event.seq} ({_what(event)}) {said}: a line the server holding the harness's nonce did not "
                    "write there (forged, edited, moved or copied)")
        previous = mac
    return None


def read_record(path: str | Path, notes: list[str] | None = None, cut: list[int] | None = None) -> list[Event]:
    """Every event of a record file, in file order; EvalError naming the line for anything else.

    A cut line is skipped, and said in ``notes`` when given (its number in ``cut``), as are the events a line
    says were lost and a record of more than one session.
    """
    source = Path(path)
    said = notes if notes is not None else []
    try:
        handle = source.open("rb")
    except OSError as exc:
        raise EvalError(f"record {source}: cannot be read ({exc.strerror}); pass the file --record wrote") from None
    events: list[Event] = []
    skipped = 0
    too_large = EvalError(f"record {source}: larger than {MAX_RECORD_BYTES:,} bytes; a record of one agent run is "
                          "far smaller: score one run's record (serve --record a new file for each run)")
    with handle:
        if os.fstat(handle.fileno()).st_size > MAX_RECORD_BYTES:  # a file: at once; a pipe: as it is read
            raise too_large
        number = total = 0
        while True:
            raw = handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            number += 1
            total += len(raw)
            if total > MAX_RECORD_BYTES:
                raise too_large
            if len(raw) > MAX_LINE_BYTES:
                raise EvalError(f"record {source}: line {number} is longer than {MAX_LINE_BYTES:,} bytes; a record "
                                "line is one MCP event, which the server keeps shorter: this is not a session record")
            if not raw.strip():
                continue
            where = f"record {source}: line {number}"
            try:
                event = parse_line(raw, where)
            except _CutLine:
                skipped += 1
                if cut is not None:
                    cut.append(number)
                said.append(f"{where}: skipped, an event cut mid-line (a write that stopped part-way: a full disk, "
                            "a killed server); the lines after it are read")
                continue
            if event.lost:
                said.append(f"{where}: the server could not write {event.lost:,} event(s) of this session before "
                            "this one (a full disk, ulimit -f): the score cannot see them")
            events.append(event)
            if len(events) > MAX_EVENTS:
                raise EvalError(f"record {source}: more than {MAX_EVENTS:,} events; score one session's record")
    if not events:
        but = f" but {skipped} cut line(s)" if skipped else ""
        raise EvalError(f"record {source}: holds no events{but}; start the server with --record {source} and run "
                        "the agent")
    sessions = sum(e.kind == "session" for e in events)
    if sessions > 1:
        said.append(f"record {source}: holds {sessions} sessions, scored as one run; to score one run alone, "
                    "serve --record a new file for each")
    return events


def read_run(path: str | Path, notes: list[str] | None = None) -> list[Event]:
    """The events of one run's record (read_record), or EvalError naming what shows it is not one
    (record_problem): the record a score stands on is the server's, of one session."""
    return check_run(read_record(path, notes), path)


def check_run(events: list[Event], path: str | Path) -> list[Event]:
    """The events, or EvalError naming what shows they are not one run's record (record_problem)."""
    problem = record_problem(events)
    if problem is not None:
        raise EvalError(f"record {path}: refused: {problem}; score the record the server wrote for this one run "
                        "(serve --record a new file for each)")
    return events


def record_problem(events: Sequence[Event]) -> str | None:
    """What shows a record is not one session as the server wrote it, if anything (None: nothing seen).

    The server's record of a run opens with its session line (seq 0), gives each of the session's
    requests its own ``seq`` (a call answered later is written later, keeping its place: seqs need
    not come in order, but never repeat), stamps each with an ISO time as it writes it (so the times
    never go back), and holds one session: a line before the session line, a ``seq`` repeated, a time
    that is no time or earlier than the line's above, or a second session (one agent credited with
    another's calls) is not that record. Version 1 lines name no session:
    they are one.
    """
    if not events:
        return "no events"
    first = events[0]
    if first.kind != "session" or first.seq != 0:
        return f"its first line (seq {first.seq}, {_what(first)}) is not the session line the server writes first"
    seen: set[int] = set()
    last: datetime | None = None
    for event in events:
        try:
            when = datetime.fromisoformat(event.time)
        except ValueError:
            return f"seq {event.seq}: time {event.time[:40]!r} is not the ISO time the server writes"
        if last is not None and when.tzinfo is not None and last.tzinfo is not None and when < last:
            return (f"seq {event.seq} out of order: written at {event.time}, before the line above it "
                    f"({last.isoformat(timespec='milliseconds')}); the server writes each line when it is answered, "
                    "in time order")
        last = when
        if event.session != first.session:
            return (f"two sessions ({first.session} and {event.session}): a record of one run holds one; "
                    "serve --record a new file for each run")
        if event is not first and event.kind == "session":
            return "a second session line: the server writes one, first"
        if event.seq in seen:
            return f"seq {event.seq} repeated: the server gives each request of a session its own"
        seen.add(event.seq)
    return None


class _CutLine(EvalError):
    """A line that begins as an event and is not JSON: a write that stopped part-way."""


def parse_line(raw: bytes, where: str) -> Event:
    """One record line -> Event, or EvalError saying what is wrong with it and what to do (_CutLine: cut)."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        kind = _CutLine if raw.startswith(_EVENT_START) else EvalError
        raise kind(f"{where}: not JSON: {str(exc)[:120]}; each line of a record is one JSON event") from None
    if not isinstance(data, dict):
        raise EvalError(f"{where}: a JSON {type(data).__name__}, not an event object")
    version = data.get("version")
    if version not in READ_VERSIONS:
        raise EvalError(f"{where}: record version {version!r}, this scorer reads versions "
                        f"{', '.join(map(str, READ_VERSIONS))}; score it with the radiance-mcp that wrote it, or "
                        "record the session again")
    if version >= 2 and not isinstance(data.get("session"), str):
        raise EvalError(f"{where}: no session id; every line of record version {version} names its session")
    try:
        return Event.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "the event"
        raise EvalError(f"{where}: {field}: {first['msg']}; not an event of record version {version}") from None


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


def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr gone: the notice still reaches the agent
        print(text, file=sys.stderr, flush=True)


def _not_a_file(mode: int) -> str | None:
    """What a path is when it is not a regular file (a record is read again, so it must be one)."""
    kinds = [(stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")]
    return next((name for test, name in kinds if test(mode)), None if stat.S_ISREG(mode) else "not a file")


class Recorder:
    """SDK server middleware appending one line per tools/call, prompts/get and resources/read to a file.

    ``MCPServer(..., middleware=[Recorder(path)])``; the file is opened for appending and the
    session's first line written at once, so a path that cannot be written (or is no regular
    file: a FIFO, /dev/full) is an error before the server starts. Later, a line that cannot be
    written is counted, never raised: the call it records is answered all the same.
    """

    def __init__(self, path: str | Path, server_version: str = "", *, fleet: str | None = None,
                 nonce: str | None = None) -> None:
        self.path = Path(path)
        self.session = uuid.uuid4().hex
        self._nonce = nonce or None
        self._mac = ""  # the mac of the session's last line written: the next line's chains to it
        remedy = "name a regular file in a directory that exists and you can write, e.g. run.jsonl"
        try:  # O_RDWR: to read the last byte; O_NONBLOCK: a FIFO or a device opens without waiting, to be refused
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o600)
        except OSError as exc:
            raise EvalError(f"--record {self.path}: cannot be opened for appending ({exc.strerror}); "
                            f"{remedy}") from None
        kind = _not_a_file(os.fstat(self._fd).st_mode)
        if kind is not None:
            os.close(self._fd)
            raise EvalError(f"--record {self.path}: is {kind}, not a regular file; {remedy}")
        self._lock = threading.Lock()
        self._seq = 0
        self._lost = 0  # events not written since the last line written: the next line says so (lost)
        self._notice: str | None = None  # what the next tool result tells the agent about the record
        try:
            bound = {"bound": True, "nonce": nonce_digest(nonce)} if nonce else {"bound": False}
            self._mac = self._append(self._event({"kind": "session", "server_version": server_version,
                                                  **({"fleet": fleet} if fleet else {}), **bound}, 0))
        except OSError as exc:
            os.close(self._fd)
            raise EvalError(f"--record {self.path}: cannot be written ({exc.strerror}); free space on its disk, "
                            f"raise the file size limit (ulimit -f), or {remedy}") from None

    @classmethod
    def serving(cls, path: str | Path, server_version: str, config: Fleet) -> Recorder:
        """``serve --record``'s writer: the record bound to the fleet served (its fingerprint) and to the nonce the
        harness gave in ``NONCE_ENV``, if any (else the session line says the record is unbound)."""
        from radiance_mcp.evals.fleet import fingerprint

        return cls(path, server_version, fleet=fingerprint(config), nonce=os.environ.get(NONCE_ENV))

    def close(self) -> None:
        os.close(self._fd)

    def _next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def _event(self, fields: dict[str, Any], seq: int) -> tuple[bytes, str]:
        """The line of one event and its mac (bound: chained to the last line written); arguments too large for a
        line are left out (arguments_bytes says how large)."""
        event = {"version": RECORD_VERSION, "session": self.session, "seq": seq, "time": _now(), **fields}
        if self._lost:
            event["lost"] = self._lost
        line = _line(event)
        if len(line) > MAX_LINE_BYTES and "arguments" in event:
            event["arguments_bytes"] = len(_line({"a": event.pop("arguments")}))
            line = _line(event)
        if self._nonce is None:
            return line, ""
        mac = line_mac(self._nonce, self._mac, json.loads(line))  # over the line as the reader reads it
        return _line({**event, "mac": mac}), mac

    def _append(self, written: tuple[bytes, str]) -> str:
        """Append one whole line or nothing (OSError): a short write is cut back off.

        Under the file's lock, which every Recorder takes, so the cut never reaches another
        session's line; a line that another writer left cut gets its newline first. Returns the line's mac.
        """
        line, mac = written
        with contextlib.suppress(OSError):  # a file system without locks: written unlocked
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            start = os.fstat(self._fd).st_size
            if start and os.pread(self._fd, 1, start - 1) != b"\n":
                line = b"\n" + line
            done = 0
            try:
                while done < len(line):
                    done += os.write(self._fd, line[done:])
            except OSError:
                if done:
                    with contextlib.suppress(OSError):  # left cut: the next line starts after a newline
                        os.ftruncate(self._fd, start)
                raise
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        return mac

    def write(self, fields: dict[str, Any], seq: int = 0) -> None:
        """Append one event, or count it lost: the failure is said once, on stderr and to the agent."""
        with self._lock:
            try:
                self._mac = self._append(self._event(fields, seq))
            except OSError as exc:
                if not self._lost:
                    self._notice = (f"radiance-mcp: the session record {self.path} cannot be written "
                                    f"({exc.strerror}): events go unrecorded until it can be, and the record "
                                    "counts them when it resumes; this call itself was answered in full")
                    _say(self._notice)
                self._lost += 1
                return
            if self._lost:
                _say(f"radiance-mcp: the session record {self.path} is written again; {self._lost} event(s) lost")
                self._lost = 0

    def _noticed(self, result: Any) -> Any:
        """The tool result with the pending notice about the record as one more text block, once."""
        if not isinstance(result, Mapping):  # the SDK hands the wire form to middleware
            return result
        with self._lock:
            notice, self._notice = self._notice, None
        if notice is None:
            return result
        return {**result, "content": [*(result.get("content") or ()), {"type": "text", "text": notice}]}

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
                refusal = (data.get("_meta") or data.get("meta") or {}).get(REFUSAL_META) or {}
                fields |= {"error": _text(data.get("content")), "rule": refusal.get("rule")}
            else:
                structured = data.get("structuredContent") or data.get("structured_content")
                if structured is not None:
                    size = len(json.dumps(structured, default=str))
                    fields |= {"result": structured} if size <= MAX_RESULT_BYTES else {"result_bytes": size}
        else:
            fields["ok"] = True
        self.write(fields, seq)
        return self._noticed(result) if kind == "tool_call" else result
