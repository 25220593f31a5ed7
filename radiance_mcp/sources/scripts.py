"""Where serve scripts and env files come from, and where their dry runs run: this machine or a host.

A ``ScriptSource`` reads files (each capped at SCRIPT_CAP_BYTES) and runs
``<script> <mode> --dry-run``; ``LocalScripts`` does it here, ``RemoteScripts`` on a host of the
fleet config over SSH (radiance_mcp.sources.remote), as sources/ledgers.py's ledger sources do for ledgers.
``script_source`` and ``runnable_script`` decide which, and what may be read or run.

The only process this module starts is the dry run, with an argv list (never a shell), a
validated mode name, a timeout and an output cap; the whole process group dies at the
timeout, over the cap or when the call is cancelled. On a host the same run goes through the
remote package's dry-run program, under the same limits, killed there at the timeout.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from radiance_mcp.core.constants import DRY_RUN_OUTPUT_CAP_BYTES, SCRIPT_CAP_BYTES
from radiance_mcp.core.errors import GuardRailError, InputError, SourceError
from radiance_mcp.sources.ledger_file import open_ledger
from radiance_mcp.sources.ledgers import check_regular, host_roots, local_path, read_error, resolve_local, ssh_target
from radiance_mcp.sources.offload import to_thread
from radiance_mcp.sources.runtime import Runtime

if TYPE_CHECKING:  # remote (and asyncssh with it) is imported on first remote read
    from radiance_mcp.sources.remote import DryRun, FileRequest, RemoteText, SSHTarget


@dataclass(frozen=True)
class ScriptRef:
    """A file an audit tool reads (or runs), before its checks."""

    argument: str
    """The tool argument or config key it came from ('script', 'services.x.serve_script'): messages name it."""
    path: str
    configured: bool = False
    """True: the operator's own path from the fleet config (its directory is allowed too)."""
    optional: bool = False
    """True: a missing file is no error (a file a script sources, the .env beside it)."""


@dataclass(frozen=True)
class ScriptFile:
    label: str
    """Where it was read, as messages name it: its path here, or host:path."""
    path: str
    """Its path, against which the source lines of a script resolve."""
    text: str
    remote: RemoteText | None = None
    """As the host sent it: a dry run there runs only while the script's bytes are still these."""


@dataclass(frozen=True)
class DryRunResult:
    command: list[str]
    exit_status: int | None
    stdout: bytes


class ScriptSource(Protocol):
    @property
    def host(self) -> str | None:
        """The fleet host the files are on; None for this machine."""
        ...

    @property
    def prefetch_beside(self) -> bool:
        """True where a read costs a round trip: the .env beside a script is fetched with it."""
        ...

    def where(self, path: str) -> str:
        """A path as messages name it."""
        ...

    def refusal(self, ref: ScriptRef) -> str | None:
        """Why read() would refuse this path before reading anything (outside the roots, ...); None: it would not."""
        ...

    async def read(self, refs: Sequence[ScriptRef]) -> list[ScriptFile | None]:
        """The files, in order, each checked and capped; None for an optional one not there."""
        ...

    async def dry_runs(self, script: ScriptFile, modes: Sequence[str], *, timeout_s: float) -> list[DryRunResult]:
        """'<script> <mode> --dry-run' for each mode: its argv, exit status and stdout, or a SourceError."""
        ...


def decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


# ---------------------------------------------------------------------------------------
# This machine


def read_small(path: Path, argument: str, *, follow_symlinks: bool = True) -> str:
    """A script or env file's text, refused above SCRIPT_CAP_BYTES.

    follow_symlinks=False for a path an agent named, resolved and checked against the log roots: it is
    opened as a ledger is (ledger_file.open_ledger), so a directory on it flipped to a symlink out of the
    roots after the check is refused, never read through.
    """
    label = f"{argument}={str(path)!r}"
    check_regular(path, label, argument)
    try:
        with open_ledger(path, follow_symlinks=follow_symlinks) as stream:
            data = stream.read(SCRIPT_CAP_BYTES + 1)
    except OSError as exc:
        raise read_error(label, exc, argument) from exc
    if len(data) > SCRIPT_CAP_BYTES:
        raise SourceError(
            f"{argument}={str(path)!r} is over {SCRIPT_CAP_BYTES // 1024:,} KiB: not a serve script or env file; "
            "name the right file"
        )
    return decode(data)


@dataclass(frozen=True)
class LocalScripts:
    runtime: Runtime
    host: ClassVar[None] = None
    prefetch_beside: ClassVar[bool] = False

    def where(self, path: str) -> str:
        return path

    def _path(self, ref: ScriptRef) -> Path:
        # The config is the operator's own file: its paths need no log root; an agent's path does.
        return Path(ref.path).expanduser() if ref.configured else local_path(self.runtime, ref.path, ref.argument)

    def refusal(self, ref: ScriptRef) -> str | None:
        try:
            self._path(ref)
        except InputError as exc:
            return str(exc)
        return None

    async def read(self, refs: Sequence[ScriptRef]) -> list[ScriptFile | None]:
        files: list[ScriptFile | None] = []
        for ref in refs:
            path = self._path(ref)
            if ref.optional and not path.is_file():
                files.append(None)
                continue
            text = await to_thread(partial(read_small, path, ref.argument, follow_symlinks=ref.configured))
            files.append(ScriptFile(str(path), str(path), text))
        return files

    async def dry_runs(self, script: ScriptFile, modes: Sequence[str], *, timeout_s: float) -> list[DryRunResult]:
        path = Path(script.path)
        results = []
        for mode in modes:
            command = script_command(path, mode)
            stdout, status = await run_dry_run(command, cwd=path.parent, timeout_s=timeout_s,
                                               cap_bytes=DRY_RUN_OUTPUT_CAP_BYTES)
            results.append(DryRunResult(command, status, stdout))
        return results


def script_command(script: Path, mode: str) -> list[str]:
    """'<script> <mode> --dry-run' as an argv list; a script without the exec bit runs under bash."""
    script = script.absolute()  # Security: a bare 'serve.sh' would be looked up on PATH, not the file read
    if os.access(script, os.X_OK):
        return [str(script), mode, "--dry-run"]
    bash = shutil.which("bash")
    if bash is None:
        raise SourceError(f"{script}: not executable and no bash on PATH to run it with; chmod +x it")
    return [bash, str(script), mode, "--dry-run"]


def _over_cap(shown: str, cap_bytes: int) -> SourceError:
    return SourceError(
        f"{shown}: printed more than {cap_bytes // 1024:,} KiB; a dry run prints one argv. Check that the mode "
        "honours --dry-run"
    )


def _timed_out(shown: str, timeout_s: float) -> SourceError:
    return SourceError(
        f"{shown}: no result within {timeout_s:g} s; a dry run should print its argv at once. Check that the "
        "mode honours --dry-run, or raise timeout_s"
    )


def _exited(shown: str, status: int, stderr: str) -> SourceError:
    tail = stderr.strip()
    return SourceError(
        f"{shown}: exited {status}" + (f"; stderr ends: {tail[-500:]!r}" if tail else "")
        + "; check the mode name against the script's modes (check_serve_script lists them)"
    )


async def run_dry_run(command: list[str], *, cwd: Path, timeout_s: float, cap_bytes: int) -> tuple[bytes, int]:
    """Run one dry run: argv list, no shell, no stdin; stdout capped; the whole group killed on timeout,
    over the cap or when the call is cancelled.

    Returns stdout and the exit status; raises SourceError on a timeout, an oversized output
    or a non-zero exit, with the command and the end of stderr.
    """
    import asyncio

    shown = " ".join(command)
    try:
        proc = await asyncio.create_subprocess_exec(
            *command, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True,
        )
    except OSError as exc:
        raise SourceError(f"{shown}: cannot be started: {exc.strerror or exc}") from exc
    assert proc.stdout is not None and proc.stderr is not None
    stdout, stderr = proc.stdout, proc.stderr

    async def read_capped() -> bytes:
        data = bytearray()
        while chunk := await stdout.read(64 * 1024):
            data += chunk
            if len(data) > cap_bytes:
                raise _over_cap(shown, cap_bytes)
        return bytes(data)

    from radiance_mcp.sources.remote import STDERR_TAIL_BYTES

    async def read_tail() -> bytes:
        tail = b""
        while chunk := await stderr.read(64 * 1024):
            tail = (tail + chunk)[-STDERR_TAIL_BYTES:]
        return tail

    def kill() -> None:
        # The dry run's own process group (start_new_session): the script and anything it spawned.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    async def drain(stream: asyncio.StreamReader) -> None:
        while await stream.read(64 * 1024):
            pass

    async def reap(*streams: asyncio.StreamReader) -> None:
        """Kill the run and wait for its end. The pipes no one reads any more are read to their end, discarded:
        a pipe whose reader stopped is paused once its buffer fills, never sees its end of file, and
        proc.wait() (which waits for the pipes too) would never return. Shielded: a second cancel cannot
        leave the run unreaped (its transport would warn 'subprocess is still running' when collected)."""
        kill()
        await asyncio.shield(asyncio.gather(*(drain(s) for s in streams), proc.wait()))

    try:
        out, err, status = await asyncio.wait_for(asyncio.gather(read_capped(), read_tail(), proc.wait()), timeout_s)
    except TimeoutError:
        await reap(stdout, stderr)  # wait_for cancelled the readers
        raise _timed_out(shown, timeout_s) from None
    except SourceError:
        await reap(stdout)  # the output went over the cap: its reader stopped; the stderr reader reads on to the end
        raise
    except asyncio.CancelledError:
        await reap(stdout, stderr)  # the client gave up on the call: the run dies with it, not at its timeout
        raise
    if status != 0:
        raise _exited(shown, status, err.decode("utf-8", "replace"))
    return out, status


# ---------------------------------------------------------------------------------------
# A host of the fleet config


@dataclass(frozen=True)
class RemoteScripts:
    """Files on a host, read in one SSH round trip per read; dry runs in one more."""

    runtime: Runtime
    host: str
    prefetch_beside: ClassVar[bool] = True

    def where(self, path: str) -> str:
        return f"{self.host}:{path}"

    def refusal(self, ref: ScriptRef) -> str | None:
        try:
            _file_request(ssh_target(self.runtime.fleet, self.host), ref)
        except InputError as exc:
            return str(exc)
        return None

    async def read(self, refs: Sequence[ScriptRef]) -> list[ScriptFile | None]:
        """Every path is checked (host from the config, absolute, under the allowed roots) before anything
        is sent; the host checks again with symlinks resolved."""
        target = ssh_target(self.runtime.fleet, self.host)
        requests = [_file_request(target, ref) for ref in refs]
        texts = await self.runtime.pool().read_files(target, requests, cap_bytes=SCRIPT_CAP_BYTES)
        return [
            None if text is None else ScriptFile(self.where(text.path), ref.path, decode(text.data), text)
            for ref, text in zip(refs, texts, strict=True)
        ]

    async def dry_runs(self, script: ScriptFile, modes: Sequence[str], *, timeout_s: float) -> list[DryRunResult]:
        """script is a configured serve_script as read() returned it (the caller checked its text); the host
        runs it only while its bytes are still those."""
        assert script.remote is not None
        target = ssh_target(self.runtime.fleet, self.host)
        roots = host_roots(target, script.remote.path, configured=True)
        runs = await self.runtime.pool().dry_runs(target, script.remote, modes, roots, timeout_s=timeout_s,
                                                  cap_bytes=DRY_RUN_OUTPUT_CAP_BYTES)
        return [DryRunResult(list(run.command), run.exit_status, self._output(run)) for run in runs]

    def _output(self, run: DryRun) -> bytes:
        """A dry run's stdout from the host, or the error the local run would give, naming the host."""
        shown = f"{self.host}: {' '.join(run.command)}"
        if run.killed:
            raise _timed_out(f"{shown} (killed on the host)", run.timeout_s)
        if len(run.stdout) > DRY_RUN_OUTPUT_CAP_BYTES:
            raise _over_cap(shown, DRY_RUN_OUTPUT_CAP_BYTES)
        if run.exit_status is None:
            raise SourceError(f"{shown}: its exit status did not come back (a process it left behind kept writing "
                              "to stderr); run it by hand on the host to see")
        if run.exit_status != 0:
            raise _exited(shown, run.exit_status, run.stderr_tail)
        return run.stdout


def _file_request(target: SSHTarget, ref: ScriptRef) -> FileRequest:
    from radiance_mcp.sources.remote import FileRequest, check_remote_path

    roots = host_roots(target, ref.path, configured=ref.configured)
    path = check_remote_path(ref.path, roots, target.name, argument=ref.argument)
    return FileRequest(path, roots, ref.argument, ref.optional)


# ---------------------------------------------------------------------------------------
# Which source, and what may be read or run


def script_source(runtime: Runtime, service: str | None, host: str | None) -> ScriptSource:
    """Where a service's files are (its host in the fleet config), or the host named; else this machine."""
    where = runtime.fleet.service(service).host if service is not None else host
    return RemoteScripts(runtime, where) if where is not None else LocalScripts(runtime)


def service_files(runtime: Runtime, service: str) -> tuple[ScriptRef, ScriptRef | None]:
    """A service's serve_script and env_file from the fleet config: the operator's own paths."""
    entry = runtime.fleet.service(service)
    on_host = entry.host is not None
    if entry.serve_script is None:
        hint = "(its absolute path on the service's host)" if on_host else "or pass script=..."
        raise InputError(
            f"service {service!r} names no serve_script in the fleet config; add serve_script = \"/path/to/script\" "
            + hint
        )
    # Messages name a host's file by its config key, a local one by the argument it stands for.
    script = ScriptRef(f"services.{service}.serve_script" if on_host else "script", entry.serve_script,
                       configured=True)
    env = None
    if entry.env_file is not None:
        env = ScriptRef(f"services.{service}.env_file" if on_host else "env_file", entry.env_file, configured=True)
    return script, env


def runnable_script(
    runtime: Runtime, *, service: str | None, script: str | None, host: str | None
) -> tuple[ScriptSource, ScriptRef]:
    """The serve script a dry run may run, and where.

    Security: running is not reading. The log roots let an agent read any file under them;
    executing any file under them would let it run whatever sits there. Over MCP only a
    serve_script the operator wrote into the config runs: a service's, or a path that is one
    of them (on a host, character for character one of that host's services'); the CLI runs
    what its user names.
    """
    if service is not None:
        return script_source(runtime, service, None), service_files(runtime, service)[0]
    assert script is not None
    if host is not None:
        return RemoteScripts(runtime, host), _configured_on_host(runtime, script, host)
    return LocalScripts(runtime), ScriptRef("script", str(_runnable_here(runtime, script)), configured=True)


def _runnable_here(runtime: Runtime, raw: str) -> Path:
    if runtime.trust_local_paths:
        return resolve_local(raw, "script")
    if not raw or not Path(raw).is_absolute():  # a control character: resolve_local's rule, just below
        raise InputError(f"script={raw!r}: give the absolute path of a configured serve script")
    path = resolve_local(raw, "script")
    configured = {
        Path(entry.serve_script).expanduser().resolve(): name
        for name, entry in runtime.fleet.services.items()
        if entry.serve_script and entry.host is None
    }
    if path not in configured:
        listed = ", ".join(f"{name} ({p})" for p, name in configured.items()) or "none"
        raise GuardRailError(
            f"script={raw!r} is not the serve_script of any service in the fleet config, so it is not run (its "
            f"text can still be checked with check_serve_script); configured serve scripts: {listed}. Name the "
            "service, or add serve_script = \"...\" to its entry"
        )
    return path


def _configured_on_host(runtime: Runtime, raw: str, host: str) -> ScriptRef:
    configured = {
        entry.serve_script: name
        for name, entry in runtime.fleet.services.items()
        if entry.host == host and entry.serve_script
    }
    if raw not in configured:
        listed = ", ".join(f"{name} ({path})" for path, name in configured.items()) or "none"
        raise GuardRailError(
            f"script={raw!r} on host {host!r} is not the serve_script of any service of that host in the "
            f"fleet config, so it is not run (its text can still be checked with check_serve_script); configured "
            f"serve scripts there: {listed}. Name the service, or add serve_script = \"...\" to its entry"
        )
    return ScriptRef(f"services.{configured[raw]}.serve_script", raw, configured=True)
