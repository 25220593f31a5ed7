"""The demo fleet, its generated config, the demo itself and `serve --demo`, as a newcomer runs them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from cli_run import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from radiance_mcp.app.demo import background_fleet
from radiance_mcp.app.server import build_server
from radiance_mcp.core.constants import WORKED_CEILING_MIB
from radiance_mcp.core.rules import capacity
from radiance_mcp.sim import DEFAULT_SERVICES, Shape, SimFleet
from radiance_mcp.sources import config, ledger_file
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools import TOOLS


async def test_fleet_boots_every_service_and_writes_a_config_the_server_reads(tmp_path: Path) -> None:
    async with SimFleet.start(tmp_path, time_scale=0.0001) as fleet:
        fleet_config = config.load(fleet.config_path)
        assert set(fleet_config.services) == {spec.name for spec in DEFAULT_SERVICES}
        assert {s.host.name for s in fleet.services.values()} == {"dankserver", "gpubox"}
        for name, service in fleet.services.items():
            entry = fleet_config.service(name)
            assert entry.host is None and entry.log == str(service.log_path)  # host-less local files for now
            assert entry.endpoint == service.url
            boot = ledger_file.read_file(service.log_path, source=name)
            assert boot.require("boot_start").fields["name"] == service.shape.name
            assert service.endpoint.serving is (boot.first("startup_stopped") is None)
        assert not fleet.endpoints["qwen38-wide"].serving
        reading = capacity.read_budget(ledger_file.read_file(fleet.services["frank-archon"].log_path, source="f"))
        assert capacity.compute_ceiling(reading).ceiling_mib == WORKED_CEILING_MIB
        async with httpx.AsyncClient() as c:
            for name in ("frank-archon", "twin", "lowpool", "qwen38-proven"):
                assert (await c.get(f"{fleet.endpoints[name].url}/v1/models")).status_code == 200
        env = fleet.services["frank-archon"].env_path
        assert env is not None and "FRANK_ARCHON_MAX_SEQS=2" in env.read_text()
    assert not any(e.serving for e in fleet.endpoints.values())


async def test_redeploy_appends_a_boot_and_rewrites_the_env_file(tmp_path: Path) -> None:
    async with SimFleet.start(tmp_path, time_scale=0.0001) as fleet:
        service = await fleet.redeploy("frank-archon", replace(Shape(), vram_kv_mib=6_969, seqs=4))
        boot = ledger_file.read_file(service.log_path, source="f")
        assert boot.boots_seen == 2 and boot.require("backs").fields["seqs"] == "4"
        assert service.env_path is not None and "FRANK_ARCHON_VRAM_KV_MIB=6969" in service.env_path.read_text()


async def test_the_ssh_seam_writes_hosts_and_remote_paths(tmp_path: Path) -> None:
    async with SimFleet.start(tmp_path, time_scale=0.0001) as fleet:
        text = fleet.config_text(ssh={"dankserver": {"address": "127.0.0.1", "port": 2222, "user": "dank",
                                                     "log_roots": ["/home/dank/logs"]}})
        parsed = config.Fleet.model_validate(tomllib.loads(text))
        assert parsed.hosts["dankserver"].port == 2222
        assert parsed.service("frank-archon").host == "dankserver"
        assert parsed.service("frank-archon").log == "/home/dank/logs/frank_archon.log"
        assert parsed.service("twin").host is None  # gpubox stays local
        # The remote path, read from the host's mirrored root, is the local file.
        host = fleet.hosts["dankserver"]
        assert host.local("/home/dank/logs/frank_archon.log") == fleet.services["frank-archon"].log_path


@pytest.mark.slow
def test_radiance_mcp_demo_walks_every_step_as_a_newcomer_runs_it(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`radiance-mcp demo` in a bare environment: one run, every step checked (a run takes seconds).

    In this process (main(argv), the cli fixture), with an environment of PATH and HOME alone:
    the MCP server the walk spawns gets that environment, as it did from a demo process.
    """
    for name in list(os.environ):
        monkeypatch.delenv(name)
    done = cli("demo", cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, deadline_s=300)
    text = done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Every step came out as the procedures say." in text
    # No words a newcomer cannot look up:
    assert "seed" not in text.lower() and "phrasebook" not in text.lower()
    assert "29,120 + (2,058 - 209) = 30,969 MiB/card" in text
    assert "UNEXPECTED" not in text
    assert "I backs 4 sequences all at 200000 tokens at once" in text
    assert "4/4" in text
    assert "E startup stopped: out of memory" in text
    # Issue 11: the walk calls every tool the server has, the serve-script pair included.
    called = set(re.findall(r"^   > (\w+)\(", text, re.M))
    assert called == {spec.name for spec in TOOLS}
    assert "differs: argument 7: proven '1024', wide '65536'" in text
    assert "identical, byte for byte" in text
    assert max(map(len, text.splitlines())) <= 120  # wrapped within the terminal's columns (COLUMNS unset: 120)


def _path_without(tmp_path: Path, command: str) -> str:
    """A PATH of /usr/bin and /bin's programs but command, as on a machine without it."""
    bare = tmp_path / "bin"
    bare.mkdir()
    for folder in ("/bin", "/usr/bin"):
        for program in Path(folder).iterdir():
            if program.name != command and not (bare / program.name).exists():
                (bare / program.name).symlink_to(program)
    return str(bare)


@pytest.mark.slow
def test_without_bats_the_demo_names_gates_that_outlive_it(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint to run the gates with bats names files that are there once the demo has exited, and its
    command runs them as written (with the bats of this machine)."""
    for name in list(os.environ):
        monkeypatch.delenv(name)
    env = {"PATH": _path_without(tmp_path, "bats"), "HOME": str(tmp_path)}
    root = Path(__file__).parents[2]  # the MCP server the walk spawns imports this checkout's package
    plain = cli("demo", cwd=root, env=env, deadline_s=300)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    hint = plain.stdout.split("(bats is not installed", 1)[1].split(")", 1)[0]
    assert "--gates-dir DIR" in hint, hint  # no file of the removed directory is named
    gates = tmp_path / "gates"
    kept = cli("demo", "--gates-dir", str(gates), cwd=root, env=env, deadline_s=300)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    command = kept.stdout.split("run them with:\n", 1)[1].splitlines()[0].strip()  # on a line of its own
    assert "(bats is not installed)" in kept.stdout
    assert {p.name for p in gates.iterdir()} == {"frank-archon.env", "frank-archon.bats"}
    assert str(gates / "frank-archon.bats") in command
    if shutil.which("bats") is not None:
        ran = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, check=False)
        assert ran.returncode == 0 and "ok 2 pool >= contract" in ran.stdout, ran.stdout + ran.stderr


@pytest.mark.slow
async def test_the_campaign_rigs_serve_script_is_checked_and_dry_run_by_service(tmp_path: Path) -> None:
    async with SimFleet.start(tmp_path, time_scale=0.0001) as fleet:
        entry = config.load(fleet.config_path).service("qwen38-proven")
        script = fleet.services["qwen38-proven"].script_path
        assert script is not None and entry.serve_script == str(script) and script.stat().st_mode & 0o111
        assert entry.env_file == config.load(fleet.config_path).service("qwen38-wide").env_file
        async with Client(build_server(Runtime(config.load(fleet.config_path)))) as client:
            check = (await client.call_tool("check_serve_script", {"service": "qwen38-proven"})).structured_content
            dry = (await client.call_tool("compare_dry_run", {"service": "qwen38-wide", "proven_mode": "proven",
                                                              "candidate_mode": "wide"})).structured_content
    assert check is not None and dry is not None
    assert not check["ok"] and check["modes_with_findings"] == ["run_wide"]
    assert check["sources_env_file"] is True
    (finding,) = check["findings"]
    assert (finding["kind"], finding["flag"], finding["value"]) == ("literal", "max-num-batched-tokens", "65536")
    # The env file owns the proven shape: 8 seats at 32,768 tokens with a 1,024-token step.
    owned = {o["flag"]: (o["variable"], o["value"]) for o in check["owned"]}
    assert owned["max-num-seqs"] == ("QWEN38_BF16_MAX_SEQS", "8")
    assert owned["max-num-batched-tokens"] == ("QWEN38_BF16_MAX_BATCHED_TOKENS", "1024")
    assert dry["verdict"] == "differs" and dry["first_difference"]["index"] == 7
    assert [(c["flag"], c["proven"], c["candidate"]) for c in dry["flag_changes"]] == [
        ("--max-num-batched-tokens", "1024", "65536")
    ]
    assert dry["proven"]["argv"][:2] == ["radiance", "serve"] and dry["proven"]["exit_status"] == 0


@pytest.mark.slow
async def test_serve_demo_serves_the_fleet_to_any_mcp_client_over_stdio() -> None:
    """`radiance-mcp serve --demo`, one server process: ledgers by service, the fleet, the rig's dry runs."""
    server = StdioServerParameters(command=sys.executable, args=["-m", "radiance_mcp", "serve", "--demo"])
    async with Client(server) as client:
        result = await client.call_tool("compute_ceiling", {"service": "frank-archon"})
        twin = await client.call_tool("read_budget_table", {"service": "twin"})
        listed = (await client.call_tool("list_fleet", {})).structured_content
        dry = await client.call_tool("compare_dry_run", {"service": "qwen38-proven", "proven_mode": "proven",
                                                         "candidate_mode": "wide"})
    assert result.structured_content is not None and result.structured_content["ceiling_mib"] == WORKED_CEILING_MIB
    assert twin.structured_content is not None and len(twin.structured_content["cards"]) == 2
    assert listed is not None and dry.structured_content is not None
    rig = {s["name"]: s for s in listed["services"] if s["name"].startswith("qwen38")}
    assert set(rig) == {"qwen38-proven", "qwen38-wide"}
    assert all(s["serve_script"] and s["env_file"] and s["ledger"] == "log" for s in rig.values())
    assert dry.structured_content["summary"].startswith("differs: argument 7: proven '1024', wide '65536'")


def test_background_fleet_starts_and_stops() -> None:
    with background_fleet(time_scale=0.0001) as fleet:
        url = fleet.endpoints["frank-archon"].url
        assert httpx.get(f"{url}/health").json() == {"status": "ok"}
        assert fleet.config_path.exists()
    assert not fleet.config_path.exists()  # the temporary directory went with it
