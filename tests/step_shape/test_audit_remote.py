"""audit_step_shape on a host: two logs (or two boots of one) in one SSH round trip.

A real asyncssh server on 127.0.0.1 (port 0, in the test's own loop) runs each command with
/bin/sh in a throwaway host directory and records it, so the test counts round trips.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh
import pytest

from radiance_mcp.audit_tools import AuditStepShapeInput, audit_step_shape
from radiance_mcp.config import Fleet
from radiance_mcp.errors import InputError
from radiance_mcp.sources import ssh_pool
from radiance_mcp.tools import Runtime


@dataclass
class Host:
    root: Path
    fleet: Fleet
    commands: list[str] = field(default_factory=list)


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[Host]:
    root = tmp_path / "host"
    (root / "logs").mkdir(parents=True)
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    identity = tmp_path / "client_key"
    identity.write_bytes(client_key.export_private_key())
    identity.chmod(0o600)
    commands: list[str] = []

    async def run(process: asyncssh.SSHServerProcess[bytes]) -> None:
        commands.append(process.command or "")
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", process.command or "", cwd=root, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "HOME": str(root), "LANG": "C.UTF-8"},
        )
        out, err = await proc.communicate()
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(proc.returncode or 0)

    acceptor = await asyncssh.listen(
        "127.0.0.1", 0, server_host_keys=[host_key], encoding=None, process_factory=run,
        authorized_client_keys=asyncssh.import_authorized_keys(client_key.export_public_key().decode()),
    )
    port = acceptor.sockets[0].getsockname()[1]
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode().strip()}\n")
    fleet = Fleet.model_validate({
        "hosts": {"dankserver": {"address": "127.0.0.1", "port": port, "user": "dank", "identity": str(identity),
                                 "known_hosts": str(known_hosts), "log_roots": [str(root / "logs")]}},
        "services": {"frank-archon": {"host": "dankserver", "log": str(root / "logs" / "frank_archon.log")}},
    })
    yield Host(root, fleet, commands)
    acceptor.close()
    await acceptor.wait_closed()


async def _audit(host: Host, args: AuditStepShapeInput) -> tuple[str, str, str]:
    runtime = Runtime(host.fleet)
    try:
        out = await audit_step_shape(runtime, args)
    finally:
        await ssh_pool(runtime.extras).close()
    return out.verdict, out.proven.ledger.source, out.candidate.ledger.source


async def test_two_logs_on_one_host_in_one_round_trip(host: Host, proven_text: str, refused_text: str) -> None:
    logs = host.root / "logs"
    (logs / "qwen38_bf16_fp8.log").write_text(proven_text)
    (logs / "qwen38_bf16_wide.log").write_text(refused_text)
    verdict, proven, candidate = await _audit(host, AuditStepShapeInput(
        host="dankserver", proven_log=str(logs / "qwen38_bf16_fp8.log"),
        candidate_log=str(logs / "qwen38_bf16_wide.log")))
    assert verdict == "refused"
    assert proven == f"dankserver:{logs / 'qwen38_bf16_fp8.log'}"
    assert candidate == f"dankserver:{logs / 'qwen38_bf16_wide.log'}"
    assert len(host.commands) == 1


async def test_two_boots_of_a_service_log_in_one_round_trip(host: Host, proven_text: str, refused_text: str) -> None:
    (host.root / "logs" / "frank_archon.log").write_text(proven_text + "I req 1 POST /v1/completions\n" + refused_text)
    verdict, _, _ = await _audit(host, AuditStepShapeInput(service="frank-archon"))
    assert verdict == "refused"
    assert len(host.commands) == 1


async def test_a_path_outside_the_hosts_roots_is_refused_before_any_command(host: Host) -> None:
    with pytest.raises(InputError):
        await _audit(host, AuditStepShapeInput(host="dankserver", log="/etc/passwd"))
    assert host.commands == []
