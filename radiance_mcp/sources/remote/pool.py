"""The connection pool: one SSH connection per host entry, its limits, and the reads sent over it.

Connections are reused across tool calls and closed when idle; at most
Limits.channels_per_host commands run at once on one. Every command is ``REMOTE_COMMAND``
with a program on stdin (commands.py); its output is capped, timed and framed (framing.py).
Ledger reads of one host that arrive in the same turn of the event loop go as one command
(MAX_BATCH logs at most, MAX_SMALL_BATCH with the files the last read found small, which the host
reads in one pass together), and the last read of each file is remembered (kept.py: MAX_CHECKPOINTS
per host entry) so the next one reads only what was added. A read of another engine's log (vLLM, SGLang,
llama.cpp: read_engine_log) is a command of its own.

asyncssh is imported inside the functions that use it, so the server starts without loading it.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from radiance_mcp.core.boot import Boot, CutBoot, Line, lines_bytes
from radiance_mcp.core.errors import RemoteError
from radiance_mcp.sources.remote.answers import dry_run_result, engine_lines, file_text, section_boot
from radiance_mcp.sources.remote.commands import (
    build_command,
    build_dry_run_command,
    build_engine_command,
    build_files_command,
)
from radiance_mcp.sources.remote.connect import connect, reason
from radiance_mcp.sources.remote.framing import (
    REMOTE_COMMAND,
    Section,
    check_finished,
    new_nonce,
    parse_frames,
    parse_output,
)
from radiance_mcp.sources.remote.kept import Kept
from radiance_mcp.sources.remote.records import (
    DryRun,
    EngineLines,
    EngineRequest,
    FileRequest,
    LogRequest,
    ReadMark,
    RemoteText,
)
from radiance_mcp.sources.remote.targets import Limits, SSHTarget

if TYPE_CHECKING:
    import asyncssh


class _OverCap(Exception):
    pass


@dataclass(frozen=True)
class Doing:
    """What a command does, as its messages say it: "reading <what>", "running <what>"."""

    verb: str
    what: str
    timeout_s: float

    def __str__(self) -> str:
        return f"{self.verb} {self.what}"


@dataclass
class _Entry:
    connect_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(8))
    conn: asyncssh.SSHClientConnection | None = None
    busy: int = 0
    idle: asyncio.TimerHandle | None = None


@dataclass
class Transfer:
    """Bytes of command text sent and of output received, summed over the pool's commands."""

    sent_bytes: int = 0
    received_bytes: int = 0
    commands: int = 0
    continued: int = 0
    """File reads that went on from where the last read stopped (only the bytes since)."""


_ReadKey = tuple[SSHTarget, str, str, int, tuple[str, ...]]
"""What makes two log reads the same read: host entry, kind, path or container, boot, roots."""

MAX_BATCH = 16
"""Logs not known to be small read in one command at most, so a host's services (a handful) cost one
command a call, cold or warm: a command is a session and a shell started on the host, and a fleet's
hosts run theirs side by side. The host runs a command's reads one after the other; more logs go as
further commands on the same connection, which the host runs side by side (at most
Limits.channels_per_host at once)."""

MAX_SMALL_BATCH = 64
"""Reads in one command at most, the files the last read found small (at most Limits.small_file_bytes)
included: the host reads those in one awk pass at the end, with no process per file, so they cost about
what one small read does."""


@dataclass(eq=False)  # compared and hashed by identity
class _Batch:
    """Log reads of one host entry that go to the host as one command."""

    target: SSHTarget
    requests: list[LogRequest] = field(default_factory=list)
    large: int = 0
    """Of the requests, those not known to be small (MAX_BATCH at most)."""
    keys: list[_ReadKey] = field(default_factory=list)
    task: asyncio.Task[list[Section]] = field(init=False)
    waiters: int = 0


class SSHPool:
    """SSH connections, one per host entry, reused across tool calls and closed when idle."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.checkpoints: Kept[ReadMark] = Kept()
        self.small_files: Kept[None] = Kept()
        """Files the last read found small."""
        self.parses: Kept[tuple[tuple[Line, ...], Boot]] = Kept()
        """Per log read, its last cut's lines and their parse (sources.ledgers.read_many keeps them): an
        unchanged log's warm read gets the same lines again."""
        self.transfer = Transfer()
        self._entries: dict[SSHTarget, _Entry] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: dict[SSHTarget, _Batch] = {}
        """Per host entry, the batch that calls of this loop turn join (its command not yet sent)."""
        self._inflight: dict[_ReadKey, tuple[_Batch, int]] = {}
        """Each read waiting or running, and where its answer will be."""

    # -- public ------------------------------------------------------------------------

    async def read_logs(self, target: SSHTarget, requests: Sequence[LogRequest]) -> list[CutBoot]:
        """Cut the requested boot of each log on the host, in one command with the host's other reads.

        Fan-out: the reads of every call that reaches here in the same turn of the event loop
        (many services read at once, say) go to the host together, MAX_BATCH logs per command
        (MAX_SMALL_BATCH with the files the last read found small: the host reads those in one pass),
        the commands side by side on the one connection; a read identical to one already
        waiting or running (same log or container, boot and roots) is not sent again, it shares
        that read's answer (so it may miss lines written after that read began). A command is
        stopped only when every call waiting on it is cancelled.
        """
        places = [self._enlist(target, request) for request in requests]
        batches = list(dict.fromkeys(batch for batch, _ in places))
        for batch in batches:
            batch.waiters += 1
        try:
            answers = {batch: await asyncio.shield(batch.task) for batch in batches}
        finally:
            for batch in batches:
                batch.waiters -= 1
                if batch.waiters == 0 and not batch.task.done():
                    batch.task.cancel()  # no call waits for it any more: stop the command
        return [section_boot(answers[batch][position], request, target.name)
                for (batch, position), request in zip(places, requests, strict=True)]

    def _enlist(self, target: SSHTarget, request: LogRequest) -> tuple[_Batch, int]:
        """The batch (and place in it) that will answer this read: a running or waiting identical one, or new."""
        self._bind_loop()
        key = (target, request.kind, request.name, request.boot, request.roots)
        found = self._inflight.get(key)
        if found is not None and not found[0].task.done():
            return found
        large = not (request.kind == "file" and (target, request.name) in self.small_files)
        batch = self._pending.get(target)
        if (batch is None or batch.task.done() or len(batch.requests) >= MAX_SMALL_BATCH
                or large and batch.large >= MAX_BATCH):
            batch = _Batch(target)
            self._pending[target] = batch
            batch.task = asyncio.get_running_loop().create_task(self._run_batch(batch))
            # Forget the batch however it ends: answered, failed, or cancelled before it began.
            batch.task.add_done_callback(functools.partial(self._forget, batch))
        batch.requests.append(request)
        batch.large += large
        batch.keys.append(key)
        self._inflight[key] = (batch, len(batch.requests) - 1)
        return self._inflight[key]

    async def _run_batch(self, batch: _Batch) -> list[Section]:
        await asyncio.sleep(0)  # the calls started in this turn of the loop join the batch first
        if self._pending.get(batch.target) is batch:
            del self._pending[batch.target]
        return await self._read_sections(batch.target, batch.requests)

    def _forget(self, batch: _Batch, _task: object = None) -> None:
        if self._pending.get(batch.target) is batch:
            del self._pending[batch.target]
        for key in batch.keys:
            if self._inflight.get(key, (None, 0))[0] is batch:
                del self._inflight[key]

    async def _read_sections(self, target: SSHTarget, requests: Sequence[LogRequest]) -> list[Section]:
        """One command for the requests; each section with the lines the last read kept put back."""
        nonce = new_nonce()
        resumes = [self.checkpoints.get((target, r.name)) if r.kind == "file" else None for r in requests]
        small = [r.kind == "file" and (target, r.name) in self.small_files for r in requests]
        command = build_command(requests, nonce=nonce, checkpoints=resumes,
                                timeout_s=self.limits.command_timeout_s,
                                count_before_bytes=self.limits.count_before_bytes,
                                small_file_bytes=self.limits.small_file_bytes, small=small)
        what = ", ".join(r.label for r in requests)
        output = await self.run(target, command, what=what)
        sections, finished = parse_output(output, nonce=nonce, count=len(requests))
        check_finished(output, finished, target, what)
        for request, section, previous in zip(requests, sections, resumes, strict=True):
            if request.kind == "file":
                self._note_size((target, request.name), section.whole)
            if section.unchanged and previous is not None and previous.tail_line is not None:
                # Nothing added since the last read of the newest boot: its answer again.
                self.transfer.continued += 1
                section.lines, section.skipped = list(previous.lines), previous.skipped
                section.index = section.boots_seen = previous.boot
                section.span = (previous.line, previous.tail_line - 1)
                if previous.base is not None:
                    section.base = (previous.base, 1)
                if section.stat and section.stat != previous.stat:  # found settled now: the next read need not check
                    self.checkpoints.keep((target, request.name), replace(previous, stat=section.stat),
                                          lines_bytes(previous.lines))
                continue
            if section.continued:
                # The host read only what was added since the last read: put the known lines first.
                if previous is None or previous.tail_line is None:
                    section.failure = (f"{request.label}: host {target.name} went on from a read this server "
                                       "did not make; try again")
                    continue
                self.transfer.continued += 1
                section.lines[:0] = previous.lines
                section.skipped = None if section.skipped is None else section.skipped + previous.skipped
            if request.kind == "file":
                self._remember((target, request.name), section, previous)
        return sections

    async def read_engine_log(self, target: SSHTarget, request: EngineRequest) -> EngineLines:
        """The lines of another engine's log (a file or a container) that hold one of its words, in one command.

        The host greps the whole log and sends those lines numbered as in it, at most
        Limits.engine_lines_bytes of them (the newest, saying how many older ones it left).
        """
        nonce = new_nonce()
        command = build_engine_command(request, nonce=nonce, timeout_s=self.limits.command_timeout_s,
                                       cap_bytes=self.limits.engine_lines_bytes)
        output = await self.run(target, command, what=request.label)
        sections, finished = parse_output(output, nonce=nonce, count=1)
        check_finished(output, finished, target, request.label)
        return engine_lines(sections[0], request, target.name)

    async def read_files(self, target: SSHTarget, requests: Sequence[FileRequest], *,
                         cap_bytes: int) -> list[RemoteText | None]:
        """Read each file (a serve script, its env file), at most cap_bytes each, in one command."""
        nonce = new_nonce()
        command = build_files_command(requests, nonce=nonce, cap_bytes=cap_bytes)
        what = " and ".join(f"{target.name}:{r.path}" for r in requests)
        output = await self.run(target, command, what=what)
        frames, finished = parse_frames(output, nonce=nonce, count=len(requests))
        check_finished(output, finished, target, what)
        return [file_text(frame, request, target.name, cap_bytes) for frame, request in zip(frames, requests,
                                                                                           strict=True)]

    async def dry_runs(self, target: SSHTarget, script: RemoteText, modes: Sequence[str], roots: Sequence[str], *,
                       timeout_s: float, cap_bytes: int) -> list[DryRun]:
        """'<script> <mode> --dry-run' for each mode, in one command; each killed on the host at timeout_s.

        script is the file as read_files returned it: the host runs it only while its cksum
        is still the one read, so the text that was checked is the text that runs.
        """
        nonce = new_nonce()
        command = build_dry_run_command(script.path, script.cksum, modes, roots, nonce=nonce, timeout_s=timeout_s,
                                        cap_bytes=cap_bytes)
        limit_s = math.ceil(timeout_s)
        what = " and ".join(f"`{script.path} {mode} --dry-run`" for mode in modes)
        # The host kills each run at limit_s; this is the backstop should the host not answer.
        output = await self.run(target, command, what=what, verb="running",
                                timeout_s=len(modes) * limit_s + self.limits.command_timeout_s)
        frames, finished = parse_frames(output, nonce=nonce, count=len(modes))
        check_finished(output, finished, target, what)
        return [dry_run_result(frame, mode, script.path, roots, target.name, nonce=nonce, timeout_s=limit_s)
                for frame, mode in zip(frames, modes, strict=True)]

    def _note_size(self, key: tuple[SSHTarget, str], small: bool) -> None:
        """Remember whether the file was small (read whole), the most recent last."""
        self.small_files.pop(key)
        if small:
            self.small_files.keep(key, None)

    def _remember(self, key: tuple[SSHTarget, str], section: Section, previous: ReadMark | None) -> None:
        """Keep the newest marker (and, for the newest boot, its lines so far) for the next read."""
        anchor = section.checkpoint
        if anchor is None:
            if section.error:
                self.checkpoints.pop(key)
            return
        same_anchor = previous is not None and (
            previous.inode, previous.offset, previous.line, previous.boot, previous.text, previous.base) == (
            anchor.inode, anchor.offset, anchor.line, anchor.boot, anchor.text, anchor.base)
        if section.tail is None and same_anchor and previous is not None:
            anchor = previous  # an older boot was read: where the newest one stopped still holds
        elif section.tail is not None and section.index == anchor.boot and section.skipped is not None:
            offset, line, cksum = section.tail
            kept = tuple(item for item in section.lines if item.number < line)
            anchor = replace(anchor, tail_offset=offset, tail_line=line, tail_cksum=cksum, lines=kept,
                             skipped=section.skipped, stat=section.stat)
        self.checkpoints.keep(key, anchor, lines_bytes(anchor.lines))

    async def run(self, target: SSHTarget, script: str, *, what: str, verb: str = "reading",
                  timeout_s: float | None = None) -> bytes:
        """Run one sh script on the host (REMOTE_COMMAND, script on stdin); its stdout, within the limits.

        what and verb name the work in every message ("reading <what>"); timeout_s replaces
        the limits' command timeout for this command.
        """
        doing = Doing(verb, what, timeout_s if timeout_s is not None else self.limits.command_timeout_s)
        entry = self._entry(target)
        async with entry.slots:
            entry.busy += 1
            if entry.idle is not None:
                entry.idle.cancel()
                entry.idle = None
            try:
                reused = entry.conn is not None and not entry.conn.is_closed()
                conn = await self._connection(target, entry, doing)
                try:
                    return await self._exec(conn, target, script, doing)
                except _ChannelRefused:
                    if not reused:
                        raise
                    # A pooled connection the host has since closed: one fresh try.
                    self._drop(entry)
                    conn = await self._connection(target, entry, doing)
                    return await self._exec(conn, target, script, doing)
            except _ChannelRefused as exc:
                raise RemoteError(
                    f"{target.where()}: the host refused to start the command {doing} ({exc}); "
                    "check that the SSH user may run commands (no ForceCommand, a login shell) and try again"
                ) from exc.__cause__
            finally:
                entry.busy -= 1
                if entry.busy == 0 and entry.conn is not None:
                    loop = asyncio.get_running_loop()
                    entry.idle = loop.call_later(self.limits.idle_close_s, self._close_idle, entry)

    async def close(self) -> None:
        """Close every connection (the server's shutdown; idle ones close by themselves)."""
        entries = list(self._entries.values())
        self._entries.clear()
        for entry in entries:
            if entry.idle is not None:
                entry.idle.cancel()
            conn, entry.conn = entry.conn, None
            if conn is not None:
                conn.close()
                await conn.wait_closed()

    def open_connections(self) -> int:
        return sum(1 for e in self._entries.values() if e.conn is not None and not e.conn.is_closed())

    # -- connections --------------------------------------------------------------------

    def _bind_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # Connections and reads belong to the loop that made them (the CLI runs one loop per call).
            self._entries.clear()
            self._pending.clear()
            self._inflight.clear()
            self._loop = loop

    def _entry(self, target: SSHTarget) -> _Entry:
        self._bind_loop()
        entry = self._entries.get(target)
        if entry is None:
            entry = _Entry(slots=asyncio.Semaphore(self.limits.channels_per_host))
            self._entries[target] = entry
        return entry

    def _drop(self, entry: _Entry) -> None:
        conn, entry.conn = entry.conn, None
        if conn is not None:
            conn.abort()

    def _close_idle(self, entry: _Entry) -> None:
        entry.idle = None
        if entry.busy == 0 and entry.conn is not None:
            conn, entry.conn = entry.conn, None
            conn.close()

    async def _connection(self, target: SSHTarget, entry: _Entry, doing: Doing) -> asyncssh.SSHClientConnection:
        async with entry.connect_lock:
            if entry.conn is not None and not entry.conn.is_closed():
                return entry.conn
            entry.conn = await connect(target, self.limits, what=doing.what,
                                       verb="read" if doing.verb == "reading" else "run")
            return entry.conn

    async def _exec(self, conn: asyncssh.SSHClientConnection, target: SSHTarget, script: str, doing: Doing) -> bytes:
        import asyncssh

        limits = self.limits
        out = bytearray()
        err = bytearray()
        received = [0]

        async def pump(reader: asyncssh.SSHReader[bytes], buf: bytearray) -> None:
            while chunk := await reader.read(65536):
                received[0] += len(chunk)
                if received[0] > limits.cap_bytes:
                    raise _OverCap
                buf += chunk

        process: asyncssh.SSHClientProcess[bytes] | None = None
        self.transfer.commands += 1
        self.transfer.sent_bytes += len(REMOTE_COMMAND) + len(script)
        try:
            async with asyncio.timeout(doing.timeout_s):
                try:
                    process = await conn.create_process(REMOTE_COMMAND, encoding=None)
                except (asyncssh.ChannelOpenError, asyncssh.DisconnectError, BrokenPipeError,
                        ConnectionResetError) as exc:
                    raise _ChannelRefused(str(exc)) from exc
                try:
                    process.stdin.write(script.encode())
                    process.stdin.write_eof()
                except BrokenPipeError:
                    # The session ended before its program arrived (a forced command such as
                    # `true` can end that fast): its exit status and empty answer say so below.
                    pass
                except (asyncssh.DisconnectError, ConnectionResetError) as exc:
                    raise _ChannelRefused(str(exc)) from exc
                await asyncio.gather(pump(process.stdout, out), pump(process.stderr, err))
                completed = await process.wait()
        except TimeoutError as exc:
            _stop(process)
            raise RemoteError(
                f"{target.where()}: {doing} took longer than {doing.timeout_s:g} s and was "
                "stopped; the host may be overloaded, or podman may hang there (try the read by hand over ssh); "
                "try again later"
            ) from exc
        except _OverCap as exc:
            _stop(process)
            raise RemoteError(
                f"{target.where()}: {doing} sent more than {limits.cap_bytes:,} bytes, the cap on one "
                "answer, and was stopped; a boot's ledger lines are a few KiB: is this the radiance boot log?"
            ) from exc
        except _ChannelRefused:
            raise
        except asyncio.CancelledError:
            _stop(process)  # the client gave up on the call: the command stops there and then too
            raise
        except (asyncssh.Error, OSError) as exc:
            self._drop_conn(conn)
            raise RemoteError(
                f"{target.where()}: the connection dropped while {doing} ({reason(exc)}); "
                "it was not finished; try again, and check the host and the network if it repeats"
            ) from exc
        finally:
            self.transfer.received_bytes += received[0]
        status = completed.exit_status
        if status is None and completed.exit_signal is None:
            self._drop_conn(conn)
            raise RemoteError(
                f"{target.where()}: the session {doing} ended without an exit status (the connection or "
                "the session dropped); try again, and check the host and the network if it repeats"
            )
        if status != 0 and not out:
            said = err.decode("utf-8", "replace").strip().splitlines()
            tail = f": {said[-1][:300]!r}" if said else ""
            how = f"signal {completed.exit_signal[0]}" if completed.exit_signal else f"status {status}"
            raise RemoteError(
                f"{target.where()}: the command {doing} ended with {how}{tail}; the host needs POSIX "
                "sh, grep, awk and coreutils (readlink -f, head -c, tail -c) on the SSH user's PATH"
            )
        return bytes(out)

    def _drop_conn(self, conn: asyncssh.SSHClientConnection) -> None:
        for entry in self._entries.values():
            if entry.conn is conn:
                self._drop(entry)



class _ChannelRefused(Exception):
    """The command could not be started on the connection (it may have been closed by the host)."""


def _stop(process: asyncssh.SSHClientProcess[bytes] | None) -> None:
    if process is None:
        return
    try:
        process.kill()  # the host's shell gets SIGKILL where sshd allows signals
    except OSError:
        pass
    process.close()


