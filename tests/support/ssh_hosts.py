"""Real SSH servers on 127.0.0.1 for the tests that reach a host; no transport is mocked.

tests/conftest.py imports the fixtures (asyncssh_host, sshd_host, ssh_host), so every test
directory (tests/remote, tests/step_shape, ...) shares one server of each kind per session
(under pytest-xdist, one per worker).

Two servers serve the same kind of test host directory:

- ``asyncssh``: an in-process asyncssh server (its own thread and event loop, port 0) that
  runs each command with a real /bin/sh in the host directory;
- ``sshd``: OpenSSH's sshd started from a throwaway config (key-only login as root,
  ``UsePAM no``, a free port, ``-D -e -f``); skipped with the reason when sshd is absent.

The host directory holds ledgers under logs/ (the host's log root), a ``podman`` stand-in
on the PATH that prints a fixture log per container, and a canary file that injection
attempts would remove (and a ``pwned`` file they would create).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from bounds import HANG_S

from radiance_mcp.sources.config import Fleet
from radiance_mcp.sources.remote import SSHTarget

CANARY_TEXT = "alive\n"

PODMAN_STAND_IN = """#!/bin/sh
# podman stand-in: `podman logs -- NAME` prints containers/NAME.log; records its argv.
printf '%s\\n' "$*" >> {fixtures}/argv.log
[ "$1" = logs ] || {{ echo "Error: the stand-in knows only 'logs'" >&2; exit 125; }}
shift
[ "$1" = -- ] && shift
case $1 in
  hang) touch {fixtures}/hang.started; exec sleep 20 ;;
  drop) touch {fixtures}/drop.started; exec sleep 20 ;;
esac
f={fixtures}/$1.log
[ -f "$f" ] || {{ echo "Error: no container with name or ID \\"$1\\" found: no such container" >&2; exit 125; }}
exec cat "$f"
"""


@dataclass
class LoopbackHost:
    """One SSH server on loopback and the directory it serves as its host."""

    kind: str
    port: int
    user: str
    root: Path
    """The host directory: logs/, containers/, bin/podman, canary."""
    identity: Path
    known_hosts: Path
    host_key_line: str
    """'ssh-ed25519 AAAA...' as a known_hosts line ends."""
    drop: Callable[[], None]
    """Cut every open connection from the server side (a host or network going away)."""
    connections: Callable[[], int]
    """How many connections the server has accepted so far."""
    extra: dict[str, Any] = field(default_factory=dict)
    forced_identity: Path | None = None
    """A client key whose logins run a forced command (`true`) instead of the one asked for."""
    commands: Callable[[], int] | None = None
    """How many commands the server has started so far (the asyncssh server counts them; sshd: None)."""

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def canary(self) -> Path:
        return self.root / "canary"

    @property
    def pwned(self) -> Path:
        return self.root / "pwned"

    def write_log(self, text: str, *, name: str | None = None) -> Path:
        """A new ledger file under the log root (unique name unless one is given)."""
        path = self.logs / (name or f"{uuid.uuid4().hex}.log")
        path.write_text(text)
        return path

    def write_container(self, name: str, text: str) -> None:
        (self.root / "containers" / f"{name}.log").write_text(text)

    def target(self, name: str = "testhost", **changes: Any) -> SSHTarget:
        fields: dict[str, Any] = {
            "name": name,
            "address": "127.0.0.1",
            "port": self.port,
            "user": self.user,
            "identity": str(self.identity),
            "known_hosts": str(self.known_hosts),
            "log_roots": (str(self.logs),),
        }
        fields.update(changes)
        return SSHTarget(**fields)

    def host_entry(self, **changes: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "address": "127.0.0.1",
            "port": self.port,
            "user": self.user,
            "identity": str(self.identity),
            "known_hosts": str(self.known_hosts),
            "log_roots": [str(self.logs)],
        }
        entry.update(changes)
        return entry

    def fleet(self, services: dict[str, dict[str, Any]] | None = None, **host_changes: Any) -> Fleet:
        return Fleet.model_validate(
            {"hosts": {"testhost": self.host_entry(**host_changes)}, "services": services or {}}
        )

    def assert_untouched(self) -> None:
        """The canary is still there, unchanged, and no injected command created its file."""
        assert self.canary.read_text() == CANARY_TEXT, "an injected command changed the canary"
        assert not self.pwned.exists(), "an injected command ran on the host"


def make_host_dir(root: Path) -> Path:
    for sub in ("logs", "containers", "bin"):
        (root / sub).mkdir(parents=True)
    (root / "canary").write_text(CANARY_TEXT)
    (root / "secret.txt").write_text("I   --not-a-ledger  secret\nI radiance boot: secret\n")
    (root / "logs" / "link-out.log").symlink_to(root / "secret.txt")  # planted in the root, points out
    podman = root / "bin" / "podman"
    podman.write_text(PODMAN_STAND_IN.format(fixtures=root / "containers"))
    podman.chmod(0o755)
    return root


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# A second client key whose logins run `true` whatever the client asks (a forced command, as
# some hosts set for a key): the program sent on stdin never runs.
FORCED_COMMAND_OPTION = 'command="true"'


def _host_path_env(root: Path) -> str:
    return f"{root / 'bin'}:/usr/local/bin:/usr/bin:/bin"


# ---------------------------------------------------------------------------------------
# The in-process asyncssh server


class _LoopThread:
    """An event loop in a daemon thread, so the server outlives each test's own loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout=30)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


async def _run_command(process: asyncssh.SSHServerProcess[bytes], root: Path, commands: list[str]) -> None:
    """Run the client's command with a real /bin/sh in the host directory, stdin passed on as sshd does."""
    commands.append(process.command or "")
    env = {"PATH": _host_path_env(root), "HOME": str(root), "LANG": "C.UTF-8"}
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", process.command or "", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=root, env=env,
        start_new_session=True,
    )

    async def pump(reader: asyncio.StreamReader, writer: asyncssh.SSHWriter[bytes]) -> None:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()

    async def feed(reader: asyncssh.SSHReader[bytes], writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, asyncssh.Error):
            pass
        finally:
            writer.close()

    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    asyncio.ensure_future(feed(process.stdin, proc.stdin))
    work = asyncio.ensure_future(
        asyncio.gather(pump(proc.stdout, process.stdout), pump(proc.stderr, process.stderr), proc.wait())
    )
    closed = asyncio.ensure_future(process.wait_closed())
    try:
        done, _ = await asyncio.wait({work, closed}, return_when=asyncio.FIRST_COMPLETED)
        if work in done and work.exception() is None:
            process.exit(work.result()[2])
        elif work in done:
            process.close()  # the client went away mid-answer
    finally:
        # The client went away: no process of the command stays behind, `timeout`'s own
        # process group included (the command runs in a session of its own).
        _kill_session(proc.pid)
        await asyncio.wait({work}, timeout=10)  # the pipes reach EOF once the processes are gone
        closed.cancel()
        if not work.done():
            work.cancel()
        elif not work.cancelled():
            work.exception()


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session sid (all started by this fixture's command)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # after the name: state, ppid, pgrp, session
            try:
                os.kill(int(stat.parent.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="session")
def asyncssh_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackHost]:
    base = tmp_path_factory.mktemp("asyncssh-host")
    root = make_host_dir(base / "host")
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    identity = base / "client_key"
    identity.write_bytes(client_key.export_private_key())
    identity.chmod(0o600)
    forced_key = asyncssh.generate_private_key("ssh-ed25519")
    forced_identity = base / "forced_key"
    forced_identity.write_bytes(forced_key.export_private_key())
    forced_identity.chmod(0o600)
    authorized = (client_key.export_public_key().decode()
                  + f'{FORCED_COMMAND_OPTION} {forced_key.export_public_key().decode()}')
    accepted: list[asyncssh.SSHServerConnection] = []
    count = [0]
    commands: list[str] = []

    class Server(asyncssh.SSHServer):
        def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
            accepted.append(conn)
            count[0] += 1

        def connection_lost(self, exc: Exception | None) -> None:
            pass

    loop = _LoopThread()

    async def start() -> asyncssh.SSHAcceptor:
        return await asyncssh.listen(
            "127.0.0.1", 0, server_factory=Server, server_host_keys=[host_key],
            authorized_client_keys=asyncssh.import_authorized_keys(authorized),
            process_factory=lambda process: _run_command(process, root, commands), encoding=None,
        )

    acceptor = loop.run(start())
    port = acceptor.sockets[0].getsockname()[1]
    host_key_line = host_key.export_public_key().decode().strip()
    known_hosts = base / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_key_line}\n")

    def drop() -> None:
        async def abort_all() -> None:
            for conn in accepted:
                conn.abort()
            accepted.clear()

        loop.run(abort_all())

    yield LoopbackHost("asyncssh", port, "radiance", root, identity, known_hosts, host_key_line, drop, lambda: count[0],
                       forced_identity=forced_identity, commands=lambda: len(commands))

    async def stop() -> None:
        acceptor.close()
        await acceptor.wait_closed()
        for conn in accepted:
            conn.abort()

    loop.run(stop())
    loop.stop()


# ---------------------------------------------------------------------------------------
# OpenSSH sshd

SSHD_CONFIG = """\
ListenAddress 127.0.0.1
Port {port}
HostKey {dir}/host_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
MaxStartups 200:30:400
MaxSessions 64
# The podman stand-in first on the PATH. SHLVL=1 keeps bash from sourcing root's ~/.bashrc
# for each command (bash does so for sshd sessions at the first shell level): it is this
# machine's shell setup, not the host under test.
SetEnv PATH={path} SHLVL=1
"""


@pytest.fixture(scope="session")
def sshd_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackHost]:
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.access(sshd, os.X_OK):
        pytest.skip("OpenSSH's sshd is not installed (/usr/sbin/sshd): `apt-get install -y openssh-server`")
    if os.geteuid() != 0:
        pytest.skip("the sshd fixture logs in as root with a key: run the tests as root")
    # sshd refuses to start without its privilege-separation directory.
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    base = tmp_path_factory.mktemp("sshd-host")
    root = make_host_dir(base / "host")
    for name in ("host_key", "client_key", "forced_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(base / name)],
                       check=True)
    (base / "authorized_keys").write_text(
        (base / "client_key.pub").read_text() + f"{FORCED_COMMAND_OPTION} {(base / 'forced_key.pub').read_text()}"
    )
    host_key_line = " ".join((base / "host_key.pub").read_text().split()[:2])
    log = base / "sshd.log"
    proc: subprocess.Popen[bytes] | None = None
    for _attempt in range(3):  # the free port may be taken between the probe and sshd's bind
        port = _free_port()
        config = base / "sshd_config"
        config.write_text(SSHD_CONFIG.format(port=port, dir=base, path=_host_path_env(root)))
        with log.open("ab") as sink:
            proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], stdout=sink, stderr=sink)
        deadline = time.monotonic() + HANG_S
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        if proc.poll() is None:
            break
    if proc is None or proc.poll() is not None:
        pytest.fail(f"sshd did not start: {log.read_text()[-2000:]}")
    known_hosts = base / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_key_line}\n")
    listener = proc.pid

    def children() -> list[int]:
        found = subprocess.run(["pgrep", "-P", str(listener)], capture_output=True, text=True).stdout
        return [int(pid) for pid in found.split()]

    def drop() -> None:
        # Each connection is served by a child of our sshd; killing those cuts the connections.
        for pid in children():
            os.kill(pid, signal.SIGKILL)

    def connections() -> int:
        return log.read_text(errors="replace").count("Accepted publickey")

    yield LoopbackHost("sshd", port, "root", root, base / "client_key", known_hosts, host_key_line, drop, connections,
                       {"log": log}, forced_identity=base / "forced_key")
    proc.terminate()
    proc.wait(timeout=HANG_S)


@pytest.fixture(params=["asyncssh", pytest.param("sshd", marks=pytest.mark.sshd)])
def ssh_host(request: pytest.FixtureRequest) -> LoopbackHost:
    """Each test that takes this runs against both servers."""
    host: LoopbackHost = request.getfixturevalue(f"{request.param}_host")
    return host
