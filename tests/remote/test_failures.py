"""What goes wrong over SSH comes back as the project's own errors, naming host, read and remedy."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from bounds import until_hung
from remote_hosts import ledger
from ssh_hosts import LoopbackHost

from radiance_mcp.core.errors import LedgerError, RemoteError, SourceError
from radiance_mcp.sources.ledgers import PodmanLogsSource, RemoteFileSource
from radiance_mcp.sources.remote import Limits, SSHPool


def file_source(host: LoopbackHost, pool: SSHPool, path: Path | str, **changes: object) -> RemoteFileSource:
    return RemoteFileSource(host.target(**changes), str(path), pool, (str(host.logs),))


async def test_a_command_that_hangs_is_stopped(ssh_host: LoopbackHost) -> None:
    """`podman logs` that never ends: the read stops at the limit and says what to try.

    The command never ends, so any limit shows the stop; a short one waits less (the limit runs
    from the channel's opening, before the host's own `timeout` starts, whatever its length).
    """
    pool = SSHPool(Limits(command_timeout_s=0.3))
    source = PodmanLogsSource(ssh_host.target(), "hang", pool)
    try:
        with pytest.raises(RemoteError) as caught:
            await source.read()
    finally:
        await pool.close()
    message = str(caught.value)
    assert "testhost" in message and "podman logs hang" in message
    assert "took longer than 0.3 s and was stopped" in message and "try" in message


async def test_a_connection_that_drops_mid_read(ssh_host: LoopbackHost) -> None:
    started = ssh_host.root / "containers" / "drop.started"
    started.unlink(missing_ok=True)
    pool = SSHPool(Limits(command_timeout_s=60))
    source = PodmanLogsSource(ssh_host.target(), "drop", pool)
    try:
        reading = asyncio.ensure_future(source.read())
        for _ in until_hung():  # until the host has begun the read
            if started.exists() or reading.done():
                break
            await asyncio.sleep(0.05)
        assert started.exists()
        await asyncio.to_thread(ssh_host.drop)
        with pytest.raises(RemoteError) as caught:
            await reading
    finally:
        await pool.close()
    message = str(caught.value)
    assert "testhost" in message and "podman logs drop" in message
    assert "dropped" in message or "cut off" in message
    assert "try again" in message


async def test_a_pooled_connection_the_host_closed_is_replaced(ssh_host: LoopbackHost, pool: SSHPool,
                                                               example_text: str) -> None:
    source = file_source(ssh_host, pool, ssh_host.write_log(example_text))
    await source.read()
    await asyncio.to_thread(ssh_host.drop)
    for _ in range(200):  # until the client has seen the connection go
        if pool.open_connections() == 0:
            break
        await asyncio.sleep(0.02)
    boot = await source.read()
    assert boot.index == 1


async def test_the_output_cap(ssh_host: LoopbackHost, example_text: str) -> None:
    pool = SSHPool(Limits(cap_bytes=500))
    try:
        with pytest.raises(RemoteError, match=r"more than 500 bytes, the cap on one answer"):
            await file_source(ssh_host, pool, ssh_host.write_log(example_text)).read()
    finally:
        await pool.close()


async def test_a_forced_command_that_drops_the_program_is_named(ssh_host: LoopbackHost, pool: SSHPool,
                                                                example_text: str) -> None:
    """A key whose logins run `true` (command="true"): the program on stdin never runs, and the error says so."""
    assert ssh_host.forced_identity is not None
    path = ssh_host.write_log(example_text)
    with pytest.raises(RemoteError) as caught:
        await file_source(ssh_host, pool, path, identity=str(ssh_host.forced_identity)).read()
    message = str(caught.value)
    assert "sent nothing back" in message and "never ran there" in message
    assert "ForceCommand" in message and "echo echo ok | ssh <host> exec /bin/sh -s" in message


async def test_nothing_listens_on_the_port(asyncssh_host: LoopbackHost, example_text: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        pool = SSHPool()
        where = r"testhost \(.*127\.0\.0\.1:\d+\), to read testhost:.*a\.log"
        with pytest.raises(RemoteError, match=where + r": cannot connect .*sshd runs there"):
            await file_source(asyncssh_host, pool, asyncssh_host.logs / "a.log", port=port).read()


async def test_a_server_that_never_speaks_ssh(asyncssh_host: LoopbackHost) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()  # accepts into the backlog, never answers
        port = sock.getsockname()[1]
        pool = SSHPool(Limits(connect_timeout_s=0.2))  # the server never answers: any limit runs out
        with pytest.raises(RemoteError, match=r"no SSH connection within 0\.2 s"):
            await file_source(asyncssh_host, pool, asyncssh_host.logs / "a.log", port=port).read()


async def test_a_key_the_host_does_not_accept(ssh_host: LoopbackHost, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    stranger.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    stranger.chmod(0o600)
    pool = SSHPool()
    with pytest.raises(RemoteError, match=r"login refused .*check user and identity"):
        await file_source(ssh_host, pool, ssh_host.logs / "a.log", identity=str(stranger)).read()


async def test_an_identity_file_that_is_not_there(asyncssh_host: LoopbackHost, tmp_path: Path) -> None:
    pool = SSHPool()
    with pytest.raises(RemoteError, match=r"SSH settings cannot be used"):
        await file_source(asyncssh_host, pool, asyncssh_host.logs / "a.log", identity=str(tmp_path / "nokey")).read()


NOT_LEDGERS: list[tuple[Callable[[Path], Path], type[Exception], str]] = [
    (lambda logs: logs / "missing.log", SourceError, "no such file on host testhost"),
    (lambda logs: _mkdir(logs / "adir"), SourceError, "not a regular file"),
    (lambda logs: _write(logs / "empty.log", ""), LedgerError, "the log is empty"),
    (lambda logs: _write(logs / "prose.log", "hello\nworld\n"), LedgerError, "no radiance ledger phrase"),
]


async def test_files_that_are_not_ledgers(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    """Each refused on its own read, one after another through one pool (a login each would test nothing more)."""
    for make, error, words in NOT_LEDGERS:
        path = make(ssh_host.logs)
        with pytest.raises(error, match=words):
            await file_source(ssh_host, pool, path).read()


async def test_a_container_podman_does_not_know(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    with pytest.raises(SourceError, match=r"exited with status 125: .*no such container.*podman ps -a"):
        await PodmanLogsSource(ssh_host.target(), "ghost", pool).read()


async def test_a_failed_read_does_not_spoil_the_next(ssh_host: LoopbackHost, pool: SSHPool, example_text: str) -> None:
    """Two reads in one command: an error in one names that one; the pool stays usable."""
    good = file_source(ssh_host, pool, ssh_host.write_log(ledger(example_text, boots=2)))
    with pytest.raises(SourceError, match="missing.log"):
        await file_source(ssh_host, pool, ssh_host.logs / "missing.log").read()
    assert (await good.read()).index == 2


def _mkdir(path: Path) -> Path:
    path.mkdir(exist_ok=True)
    return path


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


async def test_a_forced_command_that_ends_before_the_program_is_sent_is_named(
        asyncssh_host: LoopbackHost, pool: SSHPool, example_text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The forced `true` ends, and the session closes, before the program is written: same message.

    The pause after the session opens stands for a busy client (a loaded machine); it makes
    the race that once made the test above flaky happen every time.
    """
    assert asyncssh_host.forced_identity is not None
    run_on = SSHPool._exec

    async def late_writer(self: SSHPool, conn: Any, *args: Any, **kwargs: Any) -> bytes:
        opened = conn.create_process

        async def open_then_pause(*a: Any, **k: Any) -> Any:
            process = await opened(*a, **k)
            await process.wait_closed()  # `true` has ended and the server has closed the session
            return process

        conn.create_process = open_then_pause
        return await run_on(self, conn, *args, **kwargs)

    monkeypatch.setattr(SSHPool, "_exec", late_writer)
    path = asyncssh_host.write_log(example_text)
    with pytest.raises(RemoteError, match="sent nothing back .* never ran there"):
        await file_source(asyncssh_host, pool, path, identity=str(asyncssh_host.forced_identity)).read()
