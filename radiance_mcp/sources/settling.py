"""Waiting for a boot to settle (I/O: the ledger is read again until it has, or the bound ends).

Right after a restart the log holds the old boot, then the new one half-written. A ledger tool
given ``wait_s`` (models.ledger_ref.Settling) reads its boot again every POLL_S until that boot
is past the one ``after_line`` / ``after_byte`` name (a boot's identity: its first line and the
byte offset of that line in the file, which decides where it is known) and has printed all it
will (core.rules.settled.finished: refused, its settled or ready lines, or a later boot after
it). A boot at another place than the one named is a later boot, or the file shrank or was
replaced (rotation, copytruncate) and its boots are counted anew: either way it is the new boot.
A boot named as still in place but shorter than it was a moment ago was rewritten from the same
place: new too. While waiting, progress is reported about once a second; an MCP cancel stops
the wait (its sleep is cancelled). At the bound, the boot read last is returned (the tool judges
its state), or, when no boot past the one named has begun, BootNotSettled says so.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from radiance_mcp.core.boot import Boot
from radiance_mcp.core.errors import BootNotSettled, InputError, LedgerError, SourceError
from radiance_mcp.core.rules.settled import finished
from radiance_mcp.models.ledger_ref import Settling

POLL_S = 0.5
"""How often a waiting tool reads its boot again (a local read is a few ms, a host's one command; the finding's boot
settled 1.4 s after the half-written read)."""
REPORT_S = 1.0
"""How often it reports progress while it waits."""


class Progress(Protocol):
    """The MCP request context's progress report (tools.registry.Progress)."""

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        ...


async def read_settled(read: Callable[[], Awaitable[Boot]], wait: Settling, ctx: Progress | None = None) -> Boot:
    """The boot read() gives, once it is past wait's boot and has printed all it will (or at wait_s).

    wait_s 0 reads once: a boot past the one named is still required, an unfinished one returned as read.
    """
    start = time.monotonic()
    deadline, reported, longest, rewritten = start + wait.wait_s, start, 0, False
    while True:
        same = True
        try:
            boot: Boot | None = await read()
        except (LedgerError, SourceError):
            if time.monotonic() >= deadline:
                raise  # a file emptied or missing for the whole wait: its reader's error stands
            boot = None  # rotated: the new file is not there yet, or holds no boot yet
        if boot is not None:
            if boot.origin == "caller text" and wait.wait_s > 0:
                raise InputError("wait_s: log_text is the caller's text, which no wait changes; name the service, "
                                 "or its log or container, to wait for its boot")
            rewritten = rewritten or (_names(wait, boot) and boot.last_line < longest)  # a new boot in its place
            same = _names(wait, boot) and not rewritten
            longest = max(longest, boot.last_line)
            if not same and (finished(boot) or wait.wait_s == 0):
                return boot
        now = time.monotonic()
        if now >= deadline:
            if boot is None or same:
                raise BootNotSettled(_no_new_boot(boot, wait), "unsettled", ())
            return boot
        if ctx is not None and now - reported >= REPORT_S:
            reported = now
            await ctx.report_progress(now - start, wait.wait_s, _waiting(boot, wait))
        import asyncio  # only a wait sleeps: a pure command's call (wait_s 0) loads no event loop

        await asyncio.sleep(min(POLL_S, deadline - now))


def _names(wait: Settling, boot: Boot) -> bool:
    """Whether boot is the one wait names (False where it names none: any boot will do). Its byte offset decides
    where both are known (a large file's line numbers may be counted from the boot on one read and from the file's
    start on the next); else its first line."""
    if wait.after_byte is not None and boot.first_byte is not None:
        return boot.first_byte == wait.after_byte
    if wait.after_line is None and wait.after_byte is not None:
        raise InputError(f"after_byte={wait.after_byte}: {boot.where()} is read as lines, with no byte offsets (a "
                         "host's lines): name the boot to wait past by after_line, its first_line")
    return wait.after_line is not None and boot.first_line == wait.after_line


def _after(wait: Settling) -> str:
    at = [f"line {wait.after_line}"] if wait.after_line is not None else []
    at += [f"byte {wait.after_byte:,}"] if wait.after_byte is not None else []
    return f"the boot at {', '.join(at)}"


def _waiting(boot: Boot | None, wait: Settling) -> str:
    if boot is None:
        return "waiting for the log to hold a boot again"
    if _names(wait, boot):
        return f"waiting for a boot after {_after(wait)}: none has begun"
    return f"waiting for {boot.where()} to finish starting ({boot.state.status} so far)"


def _no_new_boot(boot: Boot | None, wait: Settling) -> str:
    where = boot.where() if boot is not None else "the log"
    return (f"{where}: no boot after {_after(wait)} began within wait_s={wait.wait_s:g} s; the boot read is still the "
            "one named (the service has not restarted, or it writes another log). Next: check the service restarted, "
            "then call again with a longer wait_s, or without after_line / after_byte to read the boot there is")
