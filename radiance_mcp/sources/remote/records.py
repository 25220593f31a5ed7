"""What is asked of a host and what comes back: plain records, no I/O.

A LogRequest (a ledger file or a container's log) comes back as a core.ledger.CutBoot; the pool keeps a
ReadMark per file so the next read scans only what is new. An EngineRequest (another engine's
log) comes back as EngineLines. A FileRequest (a serve script,
its env file) comes back as RemoteText; a dry run of one mode as a DryRun.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from radiance_mcp.core.boot import Line
from radiance_mcp.core.engines import EngineName

STDERR_TAIL_BYTES = 2_048
"""The end of a dry run's stderr that comes back, for the message when it fails."""


@dataclass(frozen=True)
class ReadMark:
    """Where the last read of a file found its boot marker, so the next read scans from there."""

    inode: str
    offset: int
    """Byte offset of the marker line: the read after this one starts its pass here."""
    line: int
    boot: int
    text: str
    """The marker line as the host has it: the next read checks it is still there, unchanged."""
    tail_offset: int | None = None
    """Where the last read of this (the newest) boot stopped: a line start; the next read goes on there."""
    tail_line: int | None = None
    tail_cksum: str = ""
    """cksum of the 4 KiB before tail_offset: the next read checks they are unchanged."""
    lines: tuple[Line, ...] = ()
    """The boot's phrase lines before tail_line, as the last read cut them."""
    skipped: int = 0
    base: int | None = None
    """None: line numbers (line, tail_line, lines) are the file's. Else they count from 1 at the line
    that starts at this byte offset, and boot counts from 1 at the boot that holds it."""
    stat: str = ""
    """"<device> <inode> <size> <mtime> <ctime>" as the host's stat gave them when the read stopped at the
    file's end (tail_offset) and the file was settled (commands.SETTLE_S): a read that finds the same sends
    the last answer back. Empty: not known; the bytes are checked instead."""


@dataclass(frozen=True)
class LogRequest:
    kind: Literal["file", "podman"]
    name: str
    """The file's path or the container's name, already checked."""
    boot: int
    label: str
    roots: tuple[str, ...] = ()
    """Files: the directories the real path must lie under, checked on the host."""


@dataclass(frozen=True)
class EngineRequest:
    """A vLLM, SGLang or llama.cpp log to read on a host: a file (path and roots checked) or a container."""

    kind: Literal["file", "podman"]
    name: str
    label: str
    roots: tuple[str, ...] = ()
    engine: EngineName | None = None
    """The engine whose words the host greps for (engines.engine_words); None: every engine's and radiance's."""


@dataclass(frozen=True)
class EngineLines:
    """An engine log's lines that hold one of the words, numbered as in the log, as the host sent them."""

    lines: tuple[Line, ...]
    skipped_long_lines: int
    """Lines holding a word that were over MAX_LINE_BYTES (not sent)."""
    last_line: int
    """The log's last line number (its lines without a word included)."""
    dropped_lines: int = 0
    """Older lines holding a word that were not sent: the lines sent were over the read's cap."""


@dataclass(frozen=True)
class FileRequest:
    """A script or env file to read on a host (path and roots already checked by check_remote_path)."""

    path: str
    roots: tuple[str, ...]
    argument: str
    """The tool argument (or config key) it came from: every message names it."""
    optional: bool = False
    """True: a missing file is no error (the .env beside a script, when none was named)."""


@dataclass(frozen=True)
class RemoteText:
    """A file's bytes as the host sent them, and its cksum there ("<crc> <bytes>")."""

    path: str
    data: bytes
    cksum: str


@dataclass(frozen=True)
class DryRun:
    """One '<script> <mode> --dry-run' on a host: its stdout (at most the cap + 1 bytes) and exit status."""

    mode: str
    command: tuple[str, ...]
    stdout: bytes
    exit_status: int | None
    """None: the status did not come back (a process the script left behind kept writing)."""
    stderr_tail: str
    timeout_s: int
    """The limit the host ran it under (`timeout -s KILL`)."""

    @property
    def killed(self) -> bool:
        """Killed by the host's time limit: timeout's SIGKILL (137), or its own 124."""
        return self.exit_status in (124, 137)


