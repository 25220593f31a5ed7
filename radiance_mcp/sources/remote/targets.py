"""Where a command goes and within which limits: a host entry as an SSH target, and the pool's limits."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SSHTarget:
    """One host entry of the fleet config, as an SSH target."""

    name: str
    """The host's name in the fleet file: every message names it."""
    address: str
    """Hostname, IP or ~/.ssh/config alias (Hostname, User, Port, IdentityFile are read there)."""
    port: int | None = None
    user: str | None = None
    identity: str | None = None
    known_hosts: str | None = None
    """The known_hosts file to verify the host key with; None: ssh config's, else ~/.ssh/known_hosts."""
    ssh_config: str | None = None
    """An ssh_config file to read instead of ~/.ssh/config."""
    log_roots: tuple[str, ...] = ()

    def where(self) -> str:
        at = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        shown = f"{at}{self.address}{port}"
        return self.name if shown == self.name else f"{self.name} ({shown})"


@dataclass(frozen=True)
class Limits:
    connect_timeout_s: float = 10.0
    """TCP connect, key exchange and login, together."""
    command_timeout_s: float = 60.0
    """One command (a ledger read, a file read; a first read of the newest boot of a 1 GiB log takes about
    0.2 s on the host, of boot=1 about half a second).
    Dry runs get their own limit per mode, plus this."""
    cap_bytes: int = 4 * 1024 * 1024
    """Output of one command (stdout + stderr); a boot's phrase lines are a few KiB."""
    idle_close_s: float = 120.0
    """A connection unused this long is closed."""
    channels_per_host: int = 8
    """Concurrent commands on one connection (OpenSSH's MaxSessions defaults to 10)."""
    count_before_bytes: int = 16 * 1024 * 1024
    """A boot counted from the end gets exact line numbers and its index when the bytes before it are
    at most this many (counting them costs a pass over them); past that its lines count from its marker."""
    engine_lines_bytes: int = 2 * 1024 * 1024
    """Lines of another engine's log (vLLM, SGLang, llama.cpp) sent at most: those holding one of its words,
    the newest kept when they are more (a start-up's are a few KiB; a request log may repeat a word)."""
    small_file_bytes: int = 1024 * 1024
    """A log file this small is read whole on every read, with the command's other small files in one awk pass
    (no checkpoint: checking one costs more)."""
