"""Issue 9 over SSH: figures read on a host say so, and a refused boot on a host is a finding (SDK client)."""

from __future__ import annotations

from typing import Any

from guard_ledgers import TWO_BOOTS
from mcp import Client
from ssh_hosts import LoopbackHost

from radiance_mcp.app.server import build_server
from radiance_mcp.sources.runtime import Runtime


async def test_a_hosts_ledger_is_verified_and_its_refused_boot_a_finding(ssh_host: LoopbackHost) -> None:
    ssh_host.write_log(TWO_BOOTS, name="qwen38_wide.log")
    ssh_host.write_container("qwen38-wide", TWO_BOOTS)
    fleet = ssh_host.fleet(services={
        "wide": {"host": "testhost", "log": str(ssh_host.logs / "qwen38_wide.log")},
        "wide-podman": {"host": "testhost", "container": "qwen38-wide"},
    })
    async with Client(build_server(Runtime(fleet))) as client:
        for service in ("wide", "wide-podman"):
            settled = await client.call_tool("compute_ceiling", {"service": service, "boot": -2})
            out: Any = settled.structured_content
            assert out["ceiling_mib"] == 30_969  # 29,120 + (2,058 - 209)
            assert (out["ledger"]["origin"], out["ledger"]["verified"]) == ("host", True)
            assert not any("unverified" in note for note in out["notes"])

            refused = await client.call_tool("compute_ceiling", {"service": service})
            text = refused.content[0].text  # type: ignore[union-attr]
            assert refused.is_error and "(boot 2 of 2, lines 19-37): this boot refused to start (line 35:" in text
            assert "audit_step_shape" in text

            pool = await client.call_tool("check_pool_contract", {"service": service})
            result: Any = pool.structured_content
            # the KV cache the refused boot funded, 271.25 MiB, against 8 x 32,768 bf16: 4,864 MiB
            assert (result["ok"], result["boot_status"], result["pool_mib"], result["required_mib"]) == (
                False, "refused", 271.25, 4_864)
            assert [line["line"] for line in result["refusal_lines"]] == [35, 36, 37]
            assert result["ledger"]["origin"] == "host"
