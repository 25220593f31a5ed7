"""Helpers for the remote tests: the loopback host, its directory, and ledgers of several boots.

(A module of its own, not conftest.py, so the tests can import it by name.)
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from radiance_mcp.config import Fleet
from radiance_mcp.remote import SSHTarget

CANARY_TEXT = "alive\n"

# An older boot than the example's: a 28,096 MiB pair (24,000 + 4,096) settled at 2.51 GiB free,
# so its ceiling is (2,570.24 - 209.19) + 28,096 = 30,457 MiB, against the example's 30,969.
OLD_PAIR_MIB = 28_096
OLD_CEILING_MIB = 30_457
FILLER = "2026-10-13T12:00:00Z I req {n:05d} POST /v1/completions 200 prompt 1834 tok, decode 98.4 t/s\n"


def older_boot(example: str) -> str:
    text = re.sub(r"(--vram-kv-mib\s+)5120", r"\g<1>4096", example)
    text = re.sub(r"(vram_kv\s+)5\.00 GiB", r"\g<1>4.00 GiB", text)
    return text.replace("settled at 2.01 GiB", "settled at 2.51 GiB")


def ledger(example: str, boots: int = 3, filler: int = 5) -> str:
    """boots-1 older boots then the example (newest), each followed by request lines."""
    parts = []
    for number in range(boots):
        parts.append(example if number == boots - 1 else older_boot(example))
        parts.extend(FILLER.format(n=number * 1000 + i) for i in range(filler))
    return "".join(parts)

# {pwned} is a file the payload would create, {canary} one it would delete.
INJECTIONS = [
    "; touch {pwned}",
    "$(touch {pwned})",
    "`touch {pwned}`",
    "\ntouch {pwned}",
    "x\x00; touch {pwned}",
    "-oProxyCommand=touch {pwned}",
    "--help",
    "../../../../../../../..{canary}",
    "..",
    "'; touch {pwned}; '",
    '"; touch {pwned}; "',
    "\\'; touch {pwned}; echo \\'",
    "| touch {pwned}",
    "&& rm -f {canary}",
    "$IFS;rm${{IFS}}-f${{IFS}}{canary}",
    "*",
    "~root",
    "a b",
]


def payloads(host: LoopbackHost) -> list[str]:
    """The corpus with the host's own pwned and canary paths filled in."""
    return [p.format(pwned=host.pwned, canary=host.canary) for p in INJECTIONS]


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
