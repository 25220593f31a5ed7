"""Where ledger text comes from: inline text, a local file, or over SSH a file or podman logs on a host.

A source turns "which ledger" into a parsed ``Boot``; the parser never knows where the text
came from. Every source has a ``label`` used in every figure's provenance and every error.
"""

from __future__ import annotations

import asyncio
import functools
import os
import posixpath
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from radiance_mcp.config import Fleet
from radiance_mcp.errors import InputError, SourceError
from radiance_mcp.ledger import Boot, parse_boot, read_file, read_text
from radiance_mcp.offload import run

if TYPE_CHECKING:  # remote (and asyncssh with it) is imported on first remote read
    from radiance_mcp.remote import DryRun, FileRequest, LogRequest, RemoteText, SSHPool, SSHTarget


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

    @property
    def label(self) -> str:
        return str(self.path)

    async def read(self, boot: int = -1) -> Boot:
        check_regular(self.path, self.label)
        try:
            # Streamed in chunks, off the event loop, stopped by a cancel or the time limit (offload.run).
            parsed = await run(functools.partial(read_file, self.path, source=self.label, boot=boot),
                               label=self.label, remedy=SLOW_FILE_REMEDY)
            return replace(parsed, origin="local file")
        except OSError as exc:
            raise file_error(self.label, exc) from exc


SLOW_FILE_REMEDY = (
    "a boot log of 1 GiB reads in about a second, so this is no boot log (a sparse, growing or device-backed file): "
    "name the radiance service's boot log, or cut the boots you need out of it"
)


def file_error(label: str, exc: OSError, setting: str = "log") -> SourceError:
    """A local file that cannot be read, said with what to do about it (setting: the config key that names it)."""
    if isinstance(exc, FileNotFoundError):
        return SourceError(f"{label}: no such file; check the path or the service's {setting} setting")
    if isinstance(exc, IsADirectoryError):
        return SourceError(f"{label}: is a directory; name the {setting} file inside it")
    if isinstance(exc, PermissionError):
        return SourceError(f"{label}: permission denied; the server's user cannot read it")
    return SourceError(f"{label}: cannot be read: {exc.strerror or exc}")


def resolve_local(raw: str, argument: str) -> Path:
    """raw with '~' expanded and '..' and every symlink resolved; a symlink loop is an InputError.

    (Python 3.11 and 3.12 raise RuntimeError for the loop; argument is the input that named it.)
    """
    try:
        return Path(os.path.expanduser(raw)).resolve()
    except RuntimeError as exc:
        raise InputError(
            f"{argument}={raw!r}: its symlinks form a loop, so it names no file; name the file itself"
        ) from exc


def check_regular(path: Path, label: str, setting: str = "log") -> None:
    """A SourceError if path is a FIFO, socket or device (open() reports a directory or a missing file).

    Security: opening a FIFO waits for a writer with no time limit, and a device may never
    end; a host refuses both ('not a regular file'), and so does this machine.
    """
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # open() meets the same error, and file_error words it
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise SourceError(f"{label}: not a regular file (a FIFO, socket or device); name the {setting} file itself")


def allowed_local_path(raw: str, roots: list[Path], argument: str = "log") -> Path:
    """The resolved path, if it lies under one of the roots; else an InputError naming them.

    Security: an agent could ask for '/etc/shadow' or 'roots/../../etc/shadow', or plant a
    symlink inside a root that points out of it. The path is resolved ('..' and every
    symlink) before it is compared, so only files really under a root are read.
    """
    if not raw or "\x00" in raw:
        raise InputError(f"{argument}={raw!r}: a path must be non-empty and hold no NUL byte")
    path = Path(os.path.expanduser(raw))
    if not path.is_absolute():
        raise InputError(
            f"{argument}={raw!r}: give an absolute path (relative paths depend on the server's directory)"
        )
    resolved = resolve_local(raw, argument)
    if any(resolved.is_relative_to(root) for root in roots):
        return resolved
    listed = ", ".join(str(r) for r in roots)
    raise InputError(
        f"{argument}={raw!r} resolves to {resolved}, outside the allowed log roots ({listed}); "
        "add its directory to [server] log_roots in the fleet config, or name a service instead"
    )


# ---------------------------------------------------------------------------------------
# Remote sources: a log file on a host and a container's `podman logs`, read over SSH.

SSH_POOL_KEY = "ssh_pool"
"""The key of the SSH connection pool in Runtime.extras (shared by every tool call)."""


def ssh_pool(extras: dict[str, Any]) -> SSHPool:
    """The Runtime's SSH pool, made on first use; connections close when idle."""
    from radiance_mcp.remote import SSHPool

    pool = extras.get(SSH_POOL_KEY)
    if not isinstance(pool, SSHPool):
        pool = extras[SSH_POOL_KEY] = SSHPool()
    return pool


async def close_remote(extras: dict[str, Any]) -> None:
    """Close the Runtime's SSH connections: the end of a CLI command, or the server's shutdown."""
    pool = extras.get(SSH_POOL_KEY)
    if pool is not None:
        await pool.close()


def ssh_target(fleet: Fleet, host: str) -> SSHTarget:
    """The fleet config's entry for host, as an SSH target.

    Security: an agent may name only hosts the operator listed; an unlisted name, or an
    address, is refused here, so no tool call can point SSH (and its keys) anywhere else.
    """
    from radiance_mcp.remote import SSHTarget

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
        from radiance_mcp.remote import LogRequest

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
        from radiance_mcp.remote import LogRequest

        return LogRequest("podman", self.container, boot, self.label)

    async def read(self, boot: int = -1) -> Boot:
        return (await read_many([(self, boot)]))[0]


RemoteSource = RemoteFileSource | PodmanLogsSource


async def read_many(reads: Sequence[tuple[RemoteSource, int]]) -> list[Boot]:
    """Several (source, boot) reads, in order: one SSH command per host, the hosts in parallel.

    The step-shape audit reads two boots (or two logs) of one host in one round trip this way.
    """
    groups: dict[tuple[int, SSHTarget], list[int]] = {}
    for position, (source, _boot) in enumerate(reads):
        groups.setdefault((id(source.pool), source.target), []).append(position)

    async def one_host(positions: list[int]) -> list[Boot]:
        first = reads[positions[0]][0]
        requests = [reads[p][0].request(reads[p][1]) for p in positions]
        cuts = await first.pool.read_logs(first.target, requests)
        boots = []
        for request, cut in zip(requests, cuts, strict=True):
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
    fleet: Fleet, extras: dict[str, Any], *, host: str, log: str | None = None, container: str | None = None,
    configured: bool = False,
) -> RemoteSource:
    """The remote source for a host and a log path or a container name.

    configured=True: the path is the operator's own, from a service in the fleet config,
    and its directory is allowed besides the host's log_roots; an agent's path must lie
    under the host's log_roots.
    """
    from radiance_mcp.remote import check_container, check_remote_path

    target = ssh_target(fleet, host)
    if (log is None) == (container is None):
        raise InputError(
            f"host={host!r}: give either log (a file on the host) or container (its podman logs), exactly one"
        )
    pool = ssh_pool(extras)
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
# Serve scripts on a host: read a script and its env file, run two modes' dry runs.


@dataclass(frozen=True)
class RemotePath:
    """A file an audit tool reads (or runs) on a host, before its checks."""

    argument: str
    """The tool argument or config key it came from ('script', 'services.x.serve_script'): messages name it."""
    path: str
    configured: bool = False
    """True: the operator's own path from the fleet config (its directory is allowed too)."""
    optional: bool = False
    """True: a missing file is no error (the .env beside a script, when none was named)."""


def _file_request(target: SSHTarget, ref: RemotePath) -> FileRequest:
    from radiance_mcp.remote import FileRequest, check_remote_path

    roots = host_roots(target, ref.path, configured=ref.configured)
    path = check_remote_path(ref.path, roots, target.name, argument=ref.argument)
    return FileRequest(path, roots, ref.argument, ref.optional)


def remote_path_refusal(fleet: Fleet, host: str, ref: RemotePath) -> str | None:
    """Why read_remote_files would refuse this path before sending anything (None: it would not)."""
    try:
        _file_request(ssh_target(fleet, host), ref)
    except InputError as exc:
        return str(exc)
    return None


async def read_remote_files(
    fleet: Fleet, extras: dict[str, Any], host: str, refs: Sequence[RemotePath], *, cap_bytes: int
) -> list[RemoteText | None]:
    """The files on host, at most cap_bytes each, in one SSH round trip; None for an optional one not there.

    Every path is checked (host from the config, absolute, under the allowed roots) before
    anything is sent; the host checks again with symlinks resolved.
    """
    target = ssh_target(fleet, host)
    requests = [_file_request(target, ref) for ref in refs]
    return await ssh_pool(extras).read_files(target, requests, cap_bytes=cap_bytes)


async def run_remote_dry_runs(
    fleet: Fleet, extras: dict[str, Any], host: str, script: RemoteText, modes: Sequence[str], *,
    timeout_s: float, cap_bytes: int,
) -> list[DryRun]:
    """'<script> <mode> --dry-run' for each mode on host, in one SSH round trip.

    script is a configured serve_script as read_remote_files returned it (the caller checked
    its text); the host runs it only while its bytes are still those.
    """
    target = ssh_target(fleet, host)
    roots = host_roots(target, script.path, configured=True)
    return await ssh_pool(extras).dry_runs(target, script, modes, roots, timeout_s=timeout_s, cap_bytes=cap_bytes)
