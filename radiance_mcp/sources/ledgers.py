"""Where ledger text comes from: inline text, a local file, or over SSH a file or podman logs on a host.

``ledger_source`` is the one place a ledger reference (models.ledger_ref.LedgerRef, or a
service of the fleet config) becomes a source; a source turns it into a parsed ``Boot``, and
the parser never knows where the text came from. Every source has a ``label`` used in every
figure's provenance and every error. The path rules for files an agent names (log roots,
hosts of the fleet config) live here too; scripts.py reads serve scripts by the same rules.
"""

from __future__ import annotations

import errno
import functools
import os
import posixpath
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from radiance_mcp.core.boot import Boot, CutBoot, lines_bytes
from radiance_mcp.core.constants import CONTROL
from radiance_mcp.core.errors import InputError, SourceError
from radiance_mcp.core.ledger import parse_boot, read_text
from radiance_mcp.models.ledger_ref import LedgerRef
from radiance_mcp.sources.config import Fleet
from radiance_mcp.sources.ledger_file import index_file, read_file
from radiance_mcp.sources.offload import INLINE_CHARS, loopless, run
from radiance_mcp.sources.runtime import Runtime

if TYPE_CHECKING:  # remote (and asyncssh with it) is imported on first remote read; asyncio on an event loop
    import asyncio

    from radiance_mcp.sources.remote import LogRequest, SSHPool, SSHTarget


class LedgerSource(Protocol):
    @property
    def label(self) -> str:
        """Where the text comes from, as every figure's provenance and every error names it."""
        ...

    async def read(self, boot: int = -1) -> Boot:
        """Parse one boot of the ledger: -1 the newest (default), 1 the oldest."""
        ...


@dataclass(frozen=True)
class InlineSource:
    text: str
    label: str = "log_text"

    async def read(self, boot: int = -1) -> Boot:
        # origin: caller text, unverified (Boot's default)
        return await run(functools.partial(read_text, self.text, source=self.label, boot=boot), label=self.label,
                         remedy="pass the boot's own lines, not a whole log of noise")


@dataclass(frozen=True)
class LocalFileSource:
    path: Path
    follow_symlinks: bool = True
    """False for a path resolved and checked against the log roots (local_file): it is opened with no
    symlink followed (ledger_file.open_ledger), so the file read is the one checked."""

    @property
    def label(self) -> str:
        return str(self.path)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """The one boundary of a read of this file: checked first (check_regular says 'no such file' and the
        like), then any OSError of the reads inside said by read_error (the file renamed meanwhile...)."""
        check_regular(self.path, self.label)
        try:
            yield
        except OSError as exc:
            raise read_error(self.label, exc) from exc

    async def read(self, boot: int = -1) -> Boot:
        with self.reading():
            # Read from the end in blocks, off the event loop, stopped by a cancel or the time limit (offload.run).
            read = functools.partial(read_file, self.path, source=self.label, boot=boot,
                                     follow_symlinks=self.follow_symlinks)
            parsed = await run(read, label=self.label, remedy=SLOW_FILE_REMEDY)
        if parsed.lines_from_byte is not None and not loopless():  # no loop: a one-shot command, no later
            index_in_background(self.path, follow_symlinks=self.follow_symlinks)
        return replace(parsed, origin="local file")


SLOW_FILE_REMEDY = (
    "a boot log of 1 GiB reads in about a second, so this is no boot log (a sparse, growing or device-backed file): "
    "name the radiance service's boot log, or cut the boots you need out of it"
)

INDEX_DELAY_S = 0.5
"""A read whose lines counted from its boot (a large file) has the file indexed this long after it, in the
background: a one-shot CLI command schedules none (it runs without an event loop) or has ended by then, and
pays nothing; a server's next read of the file gives the file's own line numbers."""
_indexing: dict[Path, asyncio.Task[None]] = {}


def index_in_background(path: Path, *, follow_symlinks: bool = True) -> asyncio.Task[None]:
    """Count the file's lines up to its newest boot, soon, once at a time per file (ledger_file.index_file)."""
    import asyncio

    loop = asyncio.get_running_loop()
    task = _indexing.get(path)
    if task is None or task.done() or task.get_loop() is not loop:
        task = loop.create_task(_index_later(path, follow_symlinks))
        _indexing[path] = task
    return task


async def _index_later(path: Path, follow_symlinks: bool) -> None:
    import asyncio

    try:
        await asyncio.sleep(INDEX_DELAY_S)
        # In a worker slot like any read: it takes turns with the calls, and stops at the read time limit.
        await run(functools.partial(index_file, path, follow_symlinks=follow_symlinks), label=str(path),
                  remedy=SLOW_FILE_REMEDY)
    except (OSError, SourceError):
        pass  # unreadable or too slow: reads go on citing lines from their boot's byte offset
    finally:
        if _indexing.get(path) is asyncio.current_task():
            del _indexing[path]


def file_error(label: str, exc: OSError, setting: str = "log") -> SourceError:
    """A local file that cannot be read, said with what to do about it (setting: the config key that names it;
    the remedy is the error's data too)."""
    if isinstance(exc, FileNotFoundError):
        remedy = f"check the path or the service's {setting} setting"
        return SourceError(f"{label}: no such file; {remedy}", remedy=remedy)
    if isinstance(exc, IsADirectoryError):
        remedy = f"name the {setting} file inside it"
        return SourceError(f"{label}: is a directory; {remedy}", remedy=remedy)
    if isinstance(exc, PermissionError):
        return SourceError(f"{label}: permission denied; the server's user cannot read it")
    return SourceError(f"{label}: cannot be read: {exc.strerror or exc}")


CHANGED_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EINVAL, errno.ESTALE})
"""What opening a file meets once the file, or a directory on its path, is renamed, removed or turned into a
symlink (open_ledger follows none on a checked path) or something not a regular file."""


def read_error(label: str, exc: OSError, setting: str = "log") -> SourceError:
    """An OSError met reading a local file after its check found it (check_regular): the file changed
    meanwhile (changed_error), else as file_error says."""
    return changed_error(label) if exc.errno in CHANGED_ERRNOS else file_error(label, exc, setting)


def changed_error(label: str) -> SourceError:
    """A local file, or a directory on its path, renamed, removed or replaced between its check and its read
    (a log rotated, a directory swapped for a symlink): nothing else was read in its place."""
    return SourceError(f"{label}: was renamed or removed while it was read (it, or a directory on its path, "
                       "changed after it was checked); call again")


def resolve_local(raw: str, argument: str) -> Path:
    """raw with '~' expanded and '..' and every symlink resolved; a symlink loop is an InputError.

    Every local path an input names passes here, so here an empty path, or one holding a control
    character (constants.CONTROL, the rule remote paths keep), is refused first. (Python 3.11 and
    3.12 raise RuntimeError for the loop; argument is the input that named it.) An OSError here is
    a part of the path renamed, or turned into a symlink or back, as it was resolved
    (os.path.realpath reads each link it met with lstat a moment later): a changed_error.
    """
    # Security: a file's name is written into what the tools return, the gate files among them,
    # which are shell: a newline in it would start a line of shell there. No ledger needs one.
    if not raw or CONTROL.search(raw):
        raise InputError(
            f"{argument}={raw!r}: a path must be non-empty and hold no NUL byte, newline or other control "
            "character; give a file's path, and rename the file if its name holds one"
        )
    try:
        return Path(os.path.expanduser(raw)).resolve()
    except RuntimeError as exc:
        raise InputError(
            f"{argument}={raw!r}: its symlinks form a loop, so it names no file; name the file itself"
        ) from exc
    except OSError as exc:
        raise changed_error(f"{argument}={raw!r}") from exc


def check_regular(path: Path, label: str, setting: str = "log") -> None:
    """The check before a local file is read: a SourceError if it is not there or cannot be looked at
    (file_error), or if it is a FIFO, socket or device (open() reports a directory).

    Security: opening a FIFO waits for a writer with no time limit, and a device may never
    end; a host refuses both ('not a regular file'), and so does this machine (open_ledger
    also opens a ledger without blocking, for a FIFO put there after this check).
    """
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and path.exists():  # there a moment later: renamed as it was looked at
            raise changed_error(label) from exc
        raise file_error(label, exc, setting) from exc
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise SourceError(f"{label}: not a regular file (a FIFO, socket or device); name the {setting} file itself")


def allowed_local_path(raw: str, roots: list[Path], argument: str = "log") -> Path:
    """The resolved path, if it lies under one of the roots; else an InputError naming them.

    Security: an agent could ask for '/etc/shadow' or 'roots/../../etc/shadow', or plant a
    symlink inside a root that points out of it. The path is resolved ('..' and every
    symlink) before it is compared, so only files really under a root are read.
    """
    resolved = resolve_local(raw, argument)
    if not Path(os.path.expanduser(raw)).is_absolute():
        raise InputError(
            f"{argument}={raw!r}: give an absolute path (relative paths depend on the server's directory)"
        )
    if any(resolved.is_relative_to(root) for root in roots):
        return resolved
    listed = ", ".join(str(r) for r in roots)
    raise InputError(
        f"{argument}={raw!r} resolves to {resolved}, outside the allowed log roots ({listed}); "
        "add its directory to [server] log_roots in the fleet config, or name a service instead"
    )


# ---------------------------------------------------------------------------------------
# Remote sources: a log file on a host and a container's `podman logs`, read over SSH.

def ssh_target(fleet: Fleet, host: str) -> SSHTarget:
    """The fleet config's entry for host, as an SSH target.

    Security: an agent may name only hosts the operator listed; an unlisted name, or an
    address, is refused here, so no tool call can point SSH (and its keys) anywhere else.
    """
    from radiance_mcp.sources.remote import SSHTarget

    entry = fleet.hosts.get(host) if isinstance(host, str) else None
    if entry is None:
        known = ", ".join(sorted(fleet.hosts)) or "none: the config lists no hosts"
        raise InputError(
            f"host={host!r} is not a host of the fleet config; known hosts: {known}. Only hosts listed "
            "under [hosts] can be read; add it there (with its log_roots) to read it"
        )
    return SSHTarget(
        name=host,
        address=entry.address or host,
        port=entry.port,
        user=entry.user,
        identity=entry.identity,
        known_hosts=entry.known_hosts or fleet.server.known_hosts,
        ssh_config=fleet.server.ssh_config,
        log_roots=entry.log_roots,
    )


@dataclass(frozen=True)
class RemoteFileSource:
    """A ledger file on a host: the requested boot is cut out there, one SSH command per read."""

    target: SSHTarget
    path: str
    pool: SSHPool = field(compare=False, repr=False)
    roots: tuple[str, ...] = ()
    """Directories the file's real path must lie under, checked on the host."""

    @property
    def label(self) -> str:
        return f"{self.target.name}:{self.path}"

    def request(self, boot: int) -> LogRequest:
        from radiance_mcp.sources.remote import LogRequest

        return LogRequest("file", self.path, boot, self.label, self.roots)

    async def read(self, boot: int = -1) -> Boot:
        return (await read_many([(self, boot)]))[0]


@dataclass(frozen=True)
class PodmanLogsSource:
    """A container's `podman logs` on a host, cut on the host like a file."""

    target: SSHTarget
    container: str
    pool: SSHPool = field(compare=False, repr=False)

    @property
    def label(self) -> str:
        return f"{self.target.name}:podman logs {self.container}"

    def request(self, boot: int) -> LogRequest:
        from radiance_mcp.sources.remote import LogRequest

        return LogRequest("podman", self.container, boot, self.label)

    async def read(self, boot: int = -1) -> Boot:
        return (await read_many([(self, boot)]))[0]


RemoteSource = RemoteFileSource | PodmanLogsSource


def _parse_cut(pool: SSHPool, target: SSHTarget, label: str, cut: CutBoot) -> Boot:
    """parse_boot of a small cut (at most offload.INLINE_CHARS), on the event loop, and kept in the pool
    (SSHPool.parses, per host entry): a warm read of an unchanged log gets the host's same lines again. 32
    services read at once spent more time handing their parses to threads and parsing the same lines anew
    than on the wire."""
    key = (target, label)
    kept = pool.parses.get(key)
    if kept is not None and kept[0] == cut.lines and (kept[1].index, kept[1].boots_seen) == (cut.index,
                                                                                            cut.boots_seen):
        parsed = kept[1]
    else:
        parsed = parse_boot(cut.lines, source=label, index=cut.index, boots_seen=cut.boots_seen)
    pool.parses.keep(key, (cut.lines, parsed), lines_bytes(cut.lines))
    return parsed


async def read_many(reads: Sequence[tuple[RemoteSource, int]]) -> list[Boot]:
    """Several (source, boot) reads, in order: one SSH command per host, the hosts in parallel.

    The step-shape audit reads two boots (or two logs) of one host in one round trip this way.
    """
    import asyncio

    groups: dict[tuple[int, SSHTarget], list[int]] = {}
    for position, (source, _boot) in enumerate(reads):
        groups.setdefault((id(source.pool), source.target), []).append(position)

    async def one_host(positions: list[int]) -> list[Boot]:
        first = reads[positions[0]][0]
        requests = [reads[p][0].request(reads[p][1]) for p in positions]
        cuts = await first.pool.read_logs(first.target, requests)
        boots = []
        for request, cut in zip(requests, cuts, strict=True):
            if sum(len(line.text) for line in cut.lines) <= INLINE_CHARS:
                parsed = _parse_cut(first.pool, first.target, request.label, cut)
            else:
                parse = functools.partial(parse_boot, cut.lines, source=request.label, index=cut.index,
                                          boots_seen=cut.boots_seen)
                parsed = await run(parse, label=request.label, remedy="name the radiance service's boot log")
            # Only phrase lines crossed the wire; the span is the boot's own, counted on the host.
            boots.append(replace(parsed, first_line=cut.first_line, last_line=cut.last_line,
                                 skipped_long_lines=cut.skipped_long_lines, origin="host",
                                 lines_from_byte=cut.lines_from_byte))
        return boots

    results = await asyncio.gather(*(one_host(positions) for positions in groups.values()))
    boots: list[Boot | None] = [None] * len(reads)
    for positions, parsed in zip(groups.values(), results, strict=True):
        for position, boot in zip(positions, parsed, strict=True):
            boots[position] = boot
    return [b for b in boots if b is not None]


def remote_source(
    runtime: Runtime, *, host: str, log: str | None = None, container: str | None = None, configured: bool = False,
) -> RemoteSource:
    """The remote source for a host and a log path or a container name (exactly one: the ledger
    reference's rule, kept by LedgerRef and the fleet file, sees to it).

    configured=True: the path is the operator's own, from a service in the fleet config,
    and its directory is allowed besides the host's log_roots; an agent's path must lie
    under the host's log_roots.
    """
    from radiance_mcp.sources.remote import check_container, check_remote_path

    target = ssh_target(runtime.fleet, host)
    pool = runtime.pool()
    if container is not None:
        return PodmanLogsSource(target, check_container(container), pool)
    assert log is not None
    roots = host_roots(target, log, configured=configured)
    return RemoteFileSource(target, check_remote_path(log, roots, host), pool, roots)


def host_roots(target: SSHTarget, path: str, *, configured: bool) -> tuple[str, ...]:
    """The directories a file on the host may lie under: the host's log_roots, and for a path
    the operator wrote into the fleet config (configured=True), its own directory too."""
    if configured and path.startswith("/"):
        return (*target.log_roots, posixpath.dirname(path) or "/")
    return target.log_roots


# ---------------------------------------------------------------------------------------
# A ledger reference, resolved: the one place a tool's ledger arguments become a source.


def local_path(runtime: Runtime, raw: str, argument: str) -> Path:
    """A file on this machine an input names: under the log roots, unless the CLI's user names it."""
    if runtime.trust_local_paths:
        return resolve_local(raw, argument)
    return allowed_local_path(raw, runtime.fleet.local_roots(), argument)


def local_file(runtime: Runtime, raw: str) -> LocalFileSource:
    """The ledger file on this machine a `log` input names (local_path): resolved, so read with no symlink
    followed; one planted after the check is refused, not read through."""
    return LocalFileSource(local_path(runtime, raw, "log"), follow_symlinks=False)


def ledger_source(runtime: Runtime, ref: LedgerRef) -> LedgerSource:
    """The source a reference names: a configured service, a file or container on a host, a local file, or text.

    ref has passed LedgerRef's rule (exactly one source; container with host; host with log or
    container); a service is looked up in the fleet config, whose paths are the operator's own.
    """
    if ref.log_text is not None:
        return InlineSource(ref.log_text)
    if ref.host is not None:
        return remote_source(runtime, host=ref.host, log=ref.log, container=ref.container)
    if ref.log is not None:
        return local_file(runtime, ref.log)
    assert ref.service is not None
    return service_source(runtime, ref.service)


def service_source(runtime: Runtime, service: str) -> LedgerSource:
    """The ledger the fleet config names for service: a file or container on its host, or a file here."""
    entry = runtime.fleet.service(service)
    if entry.host is not None:
        if entry.log is None and entry.container is None:
            raise SourceError(f"service {service!r} names no log or container in the fleet config; add one")
        return remote_source(runtime, host=entry.host, log=entry.log, container=entry.container, configured=True)
    if entry.log is None:
        raise SourceError(f"service {service!r} names no log in the fleet config; add log = \"/path/to/ledger.log\"")
    # The config is the operator's own file: its paths need no log root.
    return LocalFileSource(Path(entry.log).expanduser())


async def read_boot(runtime: Runtime, ref: LedgerRef) -> Boot:
    """The boot ref names, read from its source."""
    return await ledger_source(runtime, ref).read(ref.boot)
