"""Another engine's boot log, read for the ledger tools and the probes (I/O).

radiance's ledgers go through radiance_mcp.sources.ledgers (streamed, cut on the host). A vLLM, SGLang
or llama.cpp log is read here: caller text, or a file on this machine (bounded, off the event
loop), or a file or a container's `podman logs` on a host over SSH, where the host greps the
log for the engine's words and sends only those lines, numbered as in the log
(remote/programs/engine_read.sh); the pure dialects (radiance_mcp.core.engines) read them. Which
engine printed it is the service's `engine` setting in the fleet config, else told from the
text. A log on a host whose engine is not named goes to radiance's reader first (radiance's
own ledgers cost nothing more); when that finds no radiance ledger, read_ledger reads the
log's lines of every engine and tells the engine from them.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import threading
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from radiance_mcp.core.boot import Boot, StopCheck
from radiance_mcp.core.constants import LedgerEngine
from radiance_mcp.core.errors import LedgerError, SourceError
from radiance_mcp.core.ledger import holds_radiance_words, read_text
from radiance_mcp.models.ledger_ref import LedgerRef
from radiance_mcp.sources.ledger_file import RACY_NS, open_ledger
from radiance_mcp.sources.ledgers import (
    LocalFileSource,
    RemoteFileSource,
    RemoteSource,
    local_file,
    read_boot,
    remote_source,
)
from radiance_mcp.sources.offload import run
from radiance_mcp.sources.runtime import Runtime

if TYPE_CHECKING:  # remote (and asyncssh with it) loads on first remote read, the dialects on another engine's log
    from radiance_mcp.core.boot import Boot
    from radiance_mcp.core.engines import EngineName
    from radiance_mcp.sources.remote import EngineLines

MAX_ENGINE_LOG_BYTES = 256 * 1024 * 1024
"""An engine's start-up log is a few MiB; a larger file is read no further (name the boot's own lines)."""
DETECT_BYTES = 4 * 1024 * 1024
"""An unnamed file's engine is told from its first this many bytes (a start-up ledger is at a log's top)."""
HEAD_BYTES = 4096
HEAD_PLACES = tuple(range(0, DETECT_BYTES, DETECT_BYTES // 4)) + (DETECT_BYTES - HEAD_BYTES,)
"""Where HEAD_BYTES of a file are compared with those its engine was told from: its start and four more places of
its first DETECT_BYTES (a rotated or rewritten log differs there, or in its inode, or is shorter)."""
CHUNK_BYTES = 1024 * 1024
REMEDY = "pass the engine's start-up lines, not a whole log of noise"


def configured_engine(runtime: Runtime, ref: LedgerRef) -> LedgerEngine | None:
    """The engine the fleet config names for the service ref reads (None: not named, or no service)."""
    if ref.service is None or any(v is not None for v in (ref.log, ref.log_text, ref.container)):
        return None
    return runtime.fleet.service(ref.service).engine


def _read(source: LocalFileSource, limit: int, *, whole: bool, checkpoint: StopCheck) -> bytes:
    """Up to limit bytes of the file, in chunks (the checkpoint runs per chunk); whole: refuse a larger file."""
    chunks: list[bytes] = []
    size = 0
    path = source.path
    with open_ledger(path, follow_symlinks=source.follow_symlinks) as stream:
        while size <= limit:
            checkpoint()
            chunk = stream.read(CHUNK_BYTES)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    if whole and size > limit:
        raise SourceError(
            f"{path}: over {limit // (1024 * 1024)} MiB, more than an engine's start-up log; cut the boot you need "
            "out of it (its lines from the engine's first start-up line on)"
        )
    return b"".join(chunks)[:limit]


@dataclass(frozen=True)
class _Head:
    """A file as its engine was told from it: which file (device, inode), its size and mtime, when it was told,
    and a CRC of its bytes at HEAD_PLACES in its first DETECT_BYTES."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    seen_ns: int
    crc: int

    @classmethod
    def of(cls, fd: int) -> _Head:
        st = os.fstat(fd)
        crc = 0
        for place in HEAD_PLACES:
            crc = zlib.crc32(os.pread(fd, HEAD_BYTES, place), crc)
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, time.time_ns(), crc)

    def still(self, now: _Head) -> bool:
        """now is the file told from: the same file, not shorter, the same bytes at HEAD_PLACES. One that was
        shorter than DETECT_BYTES (bytes added to it fall in the head) also keeps its size and its mtime, which
        was RACY_NS older than the telling (a file the file system dates in steps of 2 s may change unseen)."""
        if (now.device, now.inode, now.crc) != (self.device, self.inode, self.crc) or now.size < self.size:
            return False
        return self.size >= DETECT_BYTES or (
            now.size == self.size and now.mtime_ns == self.mtime_ns and self.seen_ns - self.mtime_ns >= RACY_NS)


_told: OrderedDict[str, tuple[_Head, LedgerEngine]] = OrderedDict()
"""The engine told from each local file not named in the config, the MAX_TOLD most recently read: a warm read of a
fleet of such files read and decoded the first 4 MiB of every one, each call (5 s of 1,000 services' call)."""
_told_lock = threading.Lock()
MAX_TOLD = 4096


def _told_engine(source: LocalFileSource, *, checkpoint: StopCheck) -> LedgerEngine:
    """The engine that printed a local file, told from its first DETECT_BYTES, or as told before if the file is
    still the one it was told from (_Head.still)."""
    with open_ledger(source.path, follow_symlinks=source.follow_symlinks) as stream:
        now = _Head.of(stream.fileno())
    key = str(source.path)
    with _told_lock:
        known = _told.get(key)
        if known is not None and known[0].still(now):
            _told.move_to_end(key)
            return known[1]
    head = _read(source, DETECT_BYTES, whole=False, checkpoint=checkpoint)
    engine = _engine_of(head.decode("utf-8", "replace"), source.label, checkpoint=checkpoint)
    with _told_lock:
        _told[key] = (now, engine)  # as it was before the head was read: a file grown meanwhile is told again
        _told.move_to_end(key)
        while len(_told) > MAX_TOLD:
            _told.popitem(last=False)
    return engine


def line_offset(raw: bytes, number: int) -> int:
    """The byte offset of line `number` (1-based, lines split at b'\\n' as the dialects count them) in raw."""
    if number <= 1:
        return 0
    found = next(itertools.islice(re.finditer(b"\n", raw), number - 2, None), None)
    return found.end() if found is not None else len(raw)


def _engine_of(text: str, label: str, *, checkpoint: StopCheck) -> LedgerEngine:
    """engines.detect_ledger, which a text holding radiance's own words skips: radiance's ledgers load no dialect."""
    if holds_radiance_words(text):
        return "radiance"
    from radiance_mcp.core.engines import detect_ledger

    return detect_ledger(text, source=label, checkpoint=checkpoint)


def _read_boot(text: str, engine: LedgerEngine | None, label: str, boot: int, *, checkpoint: StopCheck,
               ) -> Boot | None:
    name = engine or _engine_of(text, label, checkpoint=checkpoint)
    if name == "radiance":
        return None
    from radiance_mcp.core.engines import read_engine_boot

    return read_engine_boot(text, source=label, engine=name, boot=boot, checkpoint=checkpoint)


async def read_ledger(runtime: Runtime, ref: LedgerRef) -> Boot:
    """The boot ref names, in its engine's dialect: radiance's Boot (read by sources) or another engine's view.

    Caller text whose engine is not configured is told and read in one job off the event loop
    (one turn among the workers, as radiance's own reader takes). A log on a host whose engine
    is not named is radiance's unless radiance's reader finds no ledger in it and its lines of
    vLLM, SGLang or llama.cpp tell another engine (one more command, on that path only).
    """
    if ref.log_text is not None and configured_engine(runtime, ref) is None:
        return await run(functools.partial(_inline, ref.log_text, ref.boot), label="log_text",
                         remedy="pass the boot's own lines, not a whole log of noise")
    view = await engine_boot(runtime, ref)
    if view is not None:
        return view
    try:
        return await read_boot(runtime, ref)
    except LedgerError:
        where = _where(runtime, ref) if configured_engine(runtime, ref) is None else None
        if where is None or isinstance(where, LocalFileSource):
            raise
        view = await remote_boot(where, None, ref.boot)
        if view is None:
            raise  # the lines read as radiance's: its reader's error stands
        return view


def _inline(text: str, boot: int, *, checkpoint: StopCheck) -> Boot:
    view = _read_boot(text, None, "log_text", boot, checkpoint=checkpoint)
    return read_text(text, source="log_text", boot=boot, checkpoint=checkpoint) if view is None else view


async def engine_boot(runtime: Runtime, ref: LedgerRef) -> Boot | None:
    """The boot ref names, read in its engine's dialect; None for a radiance ledger (sources reads it).

    Text, files on this machine and, for a named engine, files and containers on a host are
    read here; a log on a host whose engine is not named is left to radiance's reader (None):
    read_ledger tells the engine when that reader finds no radiance ledger.
    """
    engine = configured_engine(runtime, ref)
    if engine == "radiance":
        return None
    if ref.log_text is not None:
        return await run(functools.partial(_read_boot, ref.log_text, engine, "log_text", ref.boot), label="log_text",
                         remedy=REMEDY)
    where = _where(runtime, ref)
    if where is None:
        return None
    if not isinstance(where, LocalFileSource):
        return await remote_boot(where, engine, ref.boot) if engine is not None else None
    label = where.label
    with where.reading():
        if engine is None:
            engine = await run(functools.partial(_told_engine, where), label=label, remedy="name the engine")
            if engine == "radiance":
                return None
        raw = await run(functools.partial(_read, where, MAX_ENGINE_LOG_BYTES, whole=True), label=label,
                        remedy="cut the boot you need out of the log")
    view = await run(functools.partial(_file_boot, raw, engine, label, ref.boot), label=label, remedy=REMEDY)
    return replace(view, origin="local file") if view is not None else None


def _file_boot(raw: bytes, engine: LedgerEngine | None, label: str, boot: int, *, checkpoint: StopCheck) -> Boot | None:
    """_read_boot on a file's bytes, with where its boot starts in them (the boot's identity)."""
    view = _read_boot(raw.decode("utf-8", "replace"), engine, label, boot, checkpoint=checkpoint)
    return replace(view, first_byte=line_offset(raw, view.first_line)) if view is not None else None


def _where(runtime: Runtime, ref: LedgerRef) -> LocalFileSource | RemoteSource | None:
    """Where the log ref names is: a file on this machine, a file or container on a host, or None where
    there is none to read here (no log, caller text: sources says what is wrong)."""
    if ref.service is not None and ref.log is None and ref.container is None:
        entry = runtime.fleet.service(ref.service)
        if entry.log is None and entry.container is None:
            return None
        if entry.host is None:
            assert entry.log is not None  # a container is read on its host
            return LocalFileSource(Path(entry.log).expanduser())  # the operator's own path: no log root needed
        return remote_source(runtime, host=entry.host, log=entry.log, container=entry.container, configured=True)
    if ref.host is not None:
        return remote_source(runtime, host=ref.host, log=ref.log, container=ref.container)
    if ref.log is None:
        return None
    return local_file(runtime, ref.log)


async def remote_boot(source: RemoteSource, engine: EngineName | None, boot: int) -> Boot | None:
    """The boot of an engine's log on a host: its lines holding the engine's words (every engine's and
    radiance's when engine is None: told from them; None when they are radiance's), read here."""
    from radiance_mcp.sources.remote import EngineRequest

    if isinstance(source, RemoteFileSource):
        request = EngineRequest("file", source.path, source.label, source.roots, engine)
    else:
        request = EngineRequest("podman", source.container, source.label, engine=engine)
    sent = await source.pool.read_engine_log(source.target, request)
    return await run(functools.partial(_read_lines, sent, engine, source.label, boot), label=source.label,
                     remedy=REMEDY)


def _read_lines(sent: EngineLines, engine: EngineName | None, label: str, boot: int, *,
                checkpoint: StopCheck) -> Boot | None:
    name = engine or _engine_of("\n".join(line.text for line in sent.lines), label, checkpoint=checkpoint)
    if name == "radiance":
        return None
    from radiance_mcp.core.engines import read_engine_lines

    view = read_engine_lines(sent.lines, source=label, engine=name, boot=boot, last_line=sent.last_line,
                             skipped=sent.skipped_long_lines, dropped=sent.dropped_lines, checkpoint=checkpoint)
    return replace(view, origin="host")
