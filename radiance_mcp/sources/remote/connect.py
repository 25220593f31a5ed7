"""Connecting to a host, with its key always verified against known_hosts.

asyncssh is imported inside the functions that use it, so the server starts without loading it.
Nothing here can turn host key checking off: ssh config's ``UserKnownHostsFile none`` is not
honoured, and asyncssh is never told not to verify (a known_hosts of None).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING

from radiance_mcp.core.errors import RemoteError
from radiance_mcp.sources.remote.targets import Limits, SSHTarget

if TYPE_CHECKING:
    import asyncssh


def reason(exc: BaseException) -> str:
    """An exception's text for a message, at most 200 characters."""
    text = str(exc).strip() or type(exc).__name__
    return text[:200]


_HANDSHAKE_TRIES = 3

_KEYSCAN_HELP = (
    "add the host's key out of band: run `ssh-keyscan {port_flag}{address} > /tmp/{name}.keys`, compare "
    "`ssh-keygen -lf /tmp/{name}.keys` with the fingerprint the host itself shows (on its console: "
    "`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`), and only if they match append the line to {known}"
)


def known_hosts_files(target: SSHTarget, configured: Sequence[str] | None) -> list[str]:
    """The known_hosts files to verify with: the fleet config's, ssh config's, or ~/.ssh/known_hosts.

    ssh config may say ``UserKnownHostsFile none`` (asyncssh would then skip verification);
    that is not honoured: the default file is used instead, so a key is always checked.
    """
    if target.known_hosts:
        return [os.path.expanduser(target.known_hosts)]
    files = [os.path.expanduser(f) for f in configured or () if f not in ("none", "/dev/null")]
    files = [f for f in files if os.path.isfile(f)]
    return files or [os.path.expanduser("~/.ssh/known_hosts")]


async def connect(target: SSHTarget, limits: Limits, *, what: str = "a ledger",
                  verb: str = "read") -> asyncssh.SSHClientConnection:
    """One verified, authenticated connection, or a RemoteError that names the host, the read and the remedy
    (the remedy also as the error's data: radiance-mcp doctor shows it in a column of its own)."""
    import asyncssh

    where = f"{target.where()}, to {verb} {what}"
    options = await _options(target, limits, where)
    configured = options.known_hosts
    files = known_hosts_files(target, configured if isinstance(configured, list) else None)
    # The address after ~/.ssh/config is applied (an alias's Hostname and Port).
    real_host = str(getattr(options, "host", "") or target.address)
    real_port = getattr(options, "port", None) or target.port
    port_flag = f"-p {real_port} " if real_port not in (None, 22) else ""
    help_text = _KEYSCAN_HELP.format(port_flag=port_flag, address=real_host, name=target.name, known=files[0])
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        remedy = f"{help_text} (or set known_hosts = ... for the host)"
        raise RemoteError(
            f"{where}: the known_hosts file {missing[0]} does not exist, so the host's key cannot be "
            f"verified and the connection is refused; {remedy}", remedy=remedy,
        )
    try:
        async with asyncio.timeout(limits.connect_timeout_s * 2):
            return await _handshake(target, options, files)
    except asyncssh.HostKeyNotVerifiable as exc:
        shown_files = " or ".join(files)
        if _host_listed(files, real_host, real_port if isinstance(real_port, int) else None):
            remedy = (f"To accept a new key, {help_text} after removing the old line "
                      f"(`ssh-keygen -R {real_host} -f {files[0]}`)")
            raise RemoteError(
                f"{where}: REFUSED: the host's key does not match the one recorded in {shown_files}. "
                "Either the host was reinstalled or someone is in the middle; do not remove the old line "
                f"until you know which. {remedy}", remedy=remedy,
            ) from exc
        raise RemoteError(
            f"{where}: REFUSED: the host's key is not in {shown_files}, so it cannot be verified; "
            f"{help_text}", remedy=help_text,
        ) from exc
    except asyncssh.PermissionDenied as exc:
        remedy = (f"check user and identity for the host in the fleet config or ~/.ssh/config, and that "
                  f"`ssh {target.address} true` works without a password")
        raise RemoteError(f"{where}: login refused ({reason(exc)}); {remedy}", remedy=remedy) from exc
    except TimeoutError as exc:
        remedy = "check that the host is up and reachable on its SSH port, then try again"
        raise RemoteError(f"{where}: no SSH connection within {limits.connect_timeout_s:g} s; {remedy}",
                          remedy=remedy) from exc
    except (asyncssh.Error, OSError) as exc:
        remedy = "check the address and port in the fleet config or ~/.ssh/config, and that sshd runs there"
        raise RemoteError(f"{where}: cannot connect ({reason(exc)}); {remedy}", remedy=remedy) from exc


async def _options(target: SSHTarget, limits: Limits, where: str) -> asyncssh.SSHClientConnectionOptions:
    """The host entry's settings over ssh config's (read off the event loop: it reads files)."""
    import asyncssh

    kwargs: dict[str, object] = {
        "host": target.address,
        "connect_timeout": limits.connect_timeout_s,
        "login_timeout": limits.connect_timeout_s,
        "keepalive_interval": 30,
        "keepalive_count_max": 3,
    }
    if target.port is not None:
        kwargs["port"] = target.port
    if target.user is not None:
        kwargs["username"] = target.user
    if target.identity is not None:
        kwargs["client_keys"] = [os.path.expanduser(target.identity)]
    config = [os.path.expanduser(target.ssh_config)] if target.ssh_config else ()
    try:
        return await asyncio.to_thread(asyncssh.SSHClientConnectionOptions, config=config, **kwargs)
    except (OSError, ValueError, asyncssh.Error) as exc:
        raise RemoteError(
            f"{where}: the SSH settings cannot be used ({reason(exc)}); check identity, the "
            "ssh config file and the host entry in the fleet config"
        ) from exc


async def _handshake(target: SSHTarget, options: asyncssh.SSHClientConnectionOptions,
                     files: list[str]) -> asyncssh.SSHClientConnection:
    """asyncssh.connect, tried again after a handshake the server dropped."""
    import asyncssh

    quiet = logging.getLogger("asyncssh")
    if quiet.level == logging.NOTSET:
        # asyncssh says every connection and channel at INFO: 1,500 lines on stderr for one plan of a
        # 1,000-service fleet, formatted by the server's log handler on the event loop (set a level to keep them).
        quiet.setLevel(logging.WARNING)
    for attempt in range(_HANDSHAKE_TRIES):
        try:
            return await asyncssh.connect(target.address, options=options, known_hosts=files)
        except (asyncssh.ConnectionLost, ConnectionResetError):
            # sshd drops handshakes beyond MaxStartups (10 at once by default) at random;
            # many host entries on one sshd meet that. A short pause, then again.
            if attempt == _HANDSHAKE_TRIES - 1:
                raise
            await asyncio.sleep(0.05 * (attempt + 1) * (1 + secrets.randbelow(100) / 100))
    raise AssertionError("unreachable")


def _host_listed(files: Sequence[str], host: str, port: int | None) -> bool:
    """True if known_hosts holds any key for this host: then the key it showed has changed."""
    import asyncssh

    try:
        known = asyncssh.read_known_hosts(list(files))
        host_keys, ca_keys, *_ = known.match(host, "", port if port not in (None, 22) else None)
    except (OSError, ValueError, asyncssh.Error):
        return False
    return bool(host_keys or ca_keys)
