"""audit_step_shape on a host: two logs (or two boots of one) in one SSH round trip, on both servers.

The boots are the simulator's seed pair at 8 x 32,768 (fp8): --max-num-batched-tokens 1,024
boots, 65,536 refuses with out of memory.
"""

from __future__ import annotations

import pytest
from ssh_hosts import LoopbackHost

from radiance_mcp.core.errors import InputError
from radiance_mcp.models.audit import AuditStepShapeInput
from radiance_mcp.sim import EngineModel, Shape
from radiance_mcp.sources.remote import SSHPool
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools.audit import audit_step_shape

PROVEN_TEXT = EngineModel(Shape(seqs=8, max_model_len=32_768, spec=2)).ledger_text()
REFUSED_TEXT = EngineModel(Shape(seqs=8, max_model_len=32_768, spec=2, max_num_batched_tokens=65_536)).ledger_text()


def runtime_for(host: LoopbackHost, pool: SSHPool) -> Runtime:
    fleet = host.fleet(services={"frank-archon": {"host": "testhost", "log": str(host.logs / "frank_archon.log")}})
    return Runtime(fleet, ssh_pool=pool)


def commands(host: LoopbackHost) -> int | None:
    """Commands the server started (None where only the client counts: sshd)."""
    return host.commands() if host.commands is not None else None


async def test_two_logs_on_one_host_in_one_round_trip(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    proven = ssh_host.write_log(PROVEN_TEXT)
    candidate = ssh_host.write_log(REFUSED_TEXT)
    before = commands(ssh_host)
    out = await audit_step_shape(runtime_for(ssh_host, pool), AuditStepShapeInput(
        host="testhost", proven_log=str(proven), candidate_log=str(candidate)))
    assert out.verdict == "refused"
    assert out.inherit == {"--max-num-batched-tokens": "1024"}
    assert out.proven.ledger.source == f"testhost:{proven}"
    assert out.candidate.ledger.source == f"testhost:{candidate}"
    assert pool.transfer.commands == 1
    if before is not None:
        assert commands(ssh_host) == before + 1


async def test_two_boots_of_a_service_log_in_one_round_trip(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    ssh_host.write_log(PROVEN_TEXT + "I req 1 POST /v1/completions\n" + REFUSED_TEXT, name="frank_archon.log")
    before = commands(ssh_host)
    out = await audit_step_shape(runtime_for(ssh_host, pool), AuditStepShapeInput(service="frank-archon"))
    assert out.verdict == "refused"
    assert (out.proven.ledger.boot, out.candidate.ledger.boot, out.candidate.ledger.boots_seen) == (1, 2, 2)
    assert pool.transfer.commands == 1
    if before is not None:
        assert commands(ssh_host) == before + 1


async def test_a_path_outside_the_hosts_roots_is_refused_before_any_command(ssh_host: LoopbackHost,
                                                                           pool: SSHPool) -> None:
    connections = ssh_host.connections()
    with pytest.raises(InputError, match="outside the log roots of host testhost"):
        await audit_step_shape(runtime_for(ssh_host, pool), AuditStepShapeInput(host="testhost", log="/etc/passwd"))
    assert pool.transfer.commands == 0 and ssh_host.connections() == connections
