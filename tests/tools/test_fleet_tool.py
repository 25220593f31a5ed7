"""list_fleet: an agent that knows nothing finds the services, hosts and example ledgers in one call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from radiance_mcp.app.cli import main
from radiance_mcp.app.server import build_server
from radiance_mcp.core.constants import DEFAULT_MODEL, WORKED_CEILING_MIB
from radiance_mcp.sources.config import CONFIG_ENV, EXAMPLES_DIR, load
from radiance_mcp.sources.runtime import Runtime

FLEET = """
[server]
log_roots = ["{root}/logs"]

[models.tiny-moe]
rate_fp8_bytes_per_token = 4096
rate_bf16_bytes_per_token = 8192
per_seq_mib = 12
fixed_mib = 64

[hosts.rack7]
address = "10.1.7.20"
user = "svc-infer"
port = 2222
log_roots = ["/srv/engine/ledgers", "/var/tmp/boots"]

[services.west-chat]
host = "rack7"
container = "west-chat"
endpoint = "http://10.1.7.20:9100"
serve_script = "/srv/engine/bin/launch.sh"
env_file = "/srv/engine/etc/west.env"
model = "tiny-moe"

[services.bench-local]
log = "{root}/logs/bench.log"
"""


def fleet_file(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(FLEET.format(root=tmp_path), encoding="utf-8")
    return path


async def test_one_call_names_every_service_host_and_example(tmp_path: Path) -> None:
    runtime = Runtime(load(fleet_file(tmp_path)))
    async with Client(build_server(runtime)) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("list_fleet", {})
    tool = listed["list_fleet"]
    assert tool.annotations is not None and tool.annotations.read_only_hint and tool.annotations.idempotent_hint
    assert tool.annotations.open_world_hint is False and tool.input_schema.get("properties", {}) == {}
    assert not result.is_error and result.structured_content is not None
    out = result.structured_content
    services = {s["name"]: s for s in out["services"]}
    assert services["west-chat"] == {
        "name": "west-chat", "host": "rack7", "ledger": "container", "log": None, "container": "west-chat",
        "endpoint": "http://10.1.7.20:9100", "model": "tiny-moe", "serve_script": "/srv/engine/bin/launch.sh",
        "env_file": "/srv/engine/etc/west.env",
    }
    local = services["bench-local"]
    assert local["host"] is None and local["ledger"] == "log" and local["log"] == f"{tmp_path}/logs/bench.log"
    assert local["model"] == DEFAULT_MODEL.name and local["endpoint"] is None
    assert out["hosts"] == [{"name": "rack7", "address": "10.1.7.20", "user": "svc-infer", "port": 2222,
                             "log_roots": ["/srv/engine/ledgers", "/var/tmp/boots"]}]
    assert out["local_log_roots"] == [f"{tmp_path}/logs"]
    assert {"name": "frank-archon", "log": str(EXAMPLES_DIR / "frank-archon.log")} in out["examples"]
    assert out["notes"] == []


async def test_an_example_it_lists_reads_as_it_says_with_no_fleet() -> None:
    async with Client(build_server(Runtime(load(None)))) as client:
        out = (await client.call_tool("list_fleet", {})).structured_content
        assert out is not None and out["services"] == [] and out["hosts"] == []
        assert "names no services" in out["notes"][0]
        example = next(e for e in out["examples"] if e["name"] == "frank-archon")
        ceiling = await client.call_tool("compute_ceiling", {"log": example["log"]})
    assert ceiling.structured_content is not None and ceiling.structured_content["ceiling_mib"] == WORKED_CEILING_MIB


@pytest.mark.parametrize("tool", ["compute_ceiling", "check_serve_script", "token_count_probe"])
async def test_a_mistyped_service_points_to_list_fleet_not_to_the_config_path(tmp_path: Path, tool: str) -> None:
    runtime = Runtime(load(fleet_file(tmp_path)))
    arguments = {"service": "west_chat"}
    if tool == "token_count_probe":
        arguments["text"] = "a corpus sample"
    async with Client(build_server(runtime)) as client:
        result = await client.call_tool(tool, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error
    assert "service 'west_chat' is not in the fleet; known services: bench-local, west-chat" in text
    assert "list_fleet" in text and str(tmp_path) not in text


def test_the_cli_lists_the_fleet(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    assert main(["list-fleet", "--config", str(fleet_file(tmp_path)), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in out["services"]] == ["bench-local", "west-chat"]
    assert main(["list-fleet", "--config", str(fleet_file(tmp_path))]) == 0
    table = capsys.readouterr().out
    assert "west-chat" in table and "http://10.1.7.20:9100" in table and "10.1.7.20" in table
