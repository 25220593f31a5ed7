"""Another engine's boot log, read for the ledger tools and the probes (I/O).

radiance's ledgers go through radiance_mcp.sources (streamed, cut on the host). A vLLM, SGLang
or llama.cpp log is read here as text, from the caller or a file on this machine, bounded,
off the event loop, and handed to the pure dialects (radiance_mcp.engines). Which engine
printed it is the service's `engine` setting in the fleet config, else told from the text.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

from radiance_mcp.engines import BootView, LedgerEngine, detect_ledger, read_engine_boot
from radiance_mcp.errors import SourceError
from radiance_mcp.ledger import Boot, Checkpoint, Origin, read_text
from radiance_mcp.models.ledger_ref import LedgerRef
from radiance_mcp.offload import run
from radiance_mcp.runtime import Runtime
from radiance_mcp.sources import check_regular, file_error, local_path, read_boot

MAX_ENGINE_LOG_BYTES = 256 * 1024 * 1024
"""An engine's start-up log is a few MiB; a larger file is read no further (name the boot's own lines)."""
DETECT_BYTES = 4 * 1024 * 1024
"""An unnamed file's engine is told from its first this many bytes (a start-up ledger is at a log's top)."""
CHUNK_BYTES = 1024 * 1024


def configured_engine(runtime: Runtime, ref: LedgerRef) -> LedgerEngine | None:
    """The engine the fleet config names for the service ref reads (None: not named, or no service)."""
    if ref.service is None or any(v is not None for v in (ref.log, ref.log_text, ref.container)):
        return None
    return runtime.fleet.service(ref.service).engine


def _read(path: Path, limit: int, *, whole: bool, checkpoint: Checkpoint) -> str:
    """Up to limit bytes of the file, in chunks (the checkpoint runs per chunk); whole: refuse a larger file."""
    chunks: list[bytes] = []
    size = 0
    with path.open("rb") as stream:
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
    return b"".join(chunks)[:limit].decode("utf-8", "replace")


def _read_boot(text: str, engine: LedgerEngine | None, label: str, boot: int, *, checkpoint: Checkpoint,
               ) -> BootView | None:
    name = engine or detect_ledger(text, source=label, checkpoint=checkpoint)
    if name == "radiance":
        return None
    return read_engine_boot(text, source=label, engine=name, boot=boot, checkpoint=checkpoint)


async def read_ledger(runtime: Runtime, ref: LedgerRef) -> Boot | BootView:
    """The boot ref names, in its engine's dialect: radiance's Boot (read by sources) or another engine's view.

    Caller text whose engine is not configured is told and read in one job off the event loop
    (one turn among the workers, as radiance's own reader takes).
    """
    if ref.log_text is not None and configured_engine(runtime, ref) is None:
        return await run(functools.partial(_inline, ref.log_text, ref.boot), label="log_text",
                         remedy="pass the boot's own lines, not a whole log of noise")
    view = await engine_boot(runtime, ref)
    return view if view is not None else await read_boot(runtime, ref)


def _inline(text: str, boot: int, *, checkpoint: Checkpoint) -> Boot | BootView:
    name = detect_ledger(text, source="log_text", checkpoint=checkpoint)
    if name == "radiance":
        return read_text(text, source="log_text", boot=boot, checkpoint=checkpoint)
    return read_engine_boot(text, source="log_text", engine=name, boot=boot, checkpoint=checkpoint)


async def engine_boot(runtime: Runtime, ref: LedgerRef) -> BootView | None:
    """The boot ref names, read in its engine's dialect; None for a radiance ledger (sources reads it).

    Text and files on this machine are read here; a vLLM, SGLang or llama.cpp log on a host is
    not read over SSH yet (the error says what to do instead).
    """
    engine = configured_engine(runtime, ref)
    if engine == "radiance":
        return None
    origin: Origin = "caller text"
    if ref.log_text is not None:
        text, label = ref.log_text, "log_text"
    else:
        path, label = _local(runtime, ref, engine)
        if path is None:
            return None
        origin = "local file"
        check_regular(path, label)
        try:
            if engine is None:
                head = await run(functools.partial(_read, path, DETECT_BYTES, whole=False), label=label,
                                 remedy="name the engine's start-up log")
                engine = await run(functools.partial(_detect, head, label), label=label, remedy="name the engine")
                if engine == "radiance":
                    return None
            text = await run(functools.partial(_read, path, MAX_ENGINE_LOG_BYTES, whole=True), label=label,
                             remedy="cut the boot you need out of the log")
        except OSError as exc:
            raise file_error(label, exc) from exc
    view = await run(functools.partial(_read_boot, text, engine, label, ref.boot), label=label,
                     remedy="pass the engine's start-up lines, not a whole log of noise")
    return replace(view, origin=origin) if view is not None else None


def _detect(text: str, label: str, *, checkpoint: Checkpoint) -> LedgerEngine:
    return detect_ledger(text, source=label, checkpoint=checkpoint)


def _local(runtime: Runtime, ref: LedgerRef, engine: LedgerEngine | None) -> tuple[Path | None, str]:
    """The file on this machine ref names; None where there is none to read here (a ledger on a host,
    radiance's unless the config says not, or a service with no log: sources says what is wrong)."""
    if ref.service is not None and ref.log is None and ref.container is None:
        entry = runtime.fleet.service(ref.service)
        if entry.log is None and entry.container is None:
            return None, ""
        if entry.host is None:
            assert entry.log is not None  # a container is read on its host
            path = Path(entry.log).expanduser()  # the operator's own path: no log root needed
            return path, str(path)
        on_host = True
    else:
        on_host = ref.host is not None
        if not on_host and ref.log is None:
            return None, ""
    if on_host:
        if engine is not None:
            raise SourceError(
                f"service {ref.service!r} runs {engine}, whose log is read from this machine only (a copy of it "
                "named by the service's log, or log=), or given as log_text: reading it on a host over SSH is not "
                "supported yet"
            )
        return None, ""
    assert ref.log is not None
    path = local_path(runtime, ref.log, "log")
    return path, str(path)
