"""radiance-mcp doctor: one row per check of a fleet file, a table of 120 columns or JSON, exit 0 only when all hold.

Run as a person runs it (the CLI in this process, tests/support/cli_run.py) against real parts: the simulated
fleet's ledgers and endpoints (a module's own, in a thread), an asyncssh server on loopback for the hosts,
and a closed port for an endpoint that does not answer.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from cli_run import CliRunner
from ssh_hosts import LoopbackHost

from radiance_mcp.app.demo import background_fleet
from radiance_mcp.core.doctor import Reply, endpoint_check
from radiance_mcp.core.rules.probe_shape import api_said
from radiance_mcp.sim import SimFleet
from radiance_mcp.sources.config import CONFIG_ENV


@pytest.fixture(autouse=True)
def no_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimFleet]:
    with background_fleet(time_scale=0.0001) as fleet:
        yield fleet


def _toml(value: object) -> str:
    return json.dumps(value)  # a JSON string or list of strings is valid TOML


def write_config(path: Path, sim: SimFleet, names: list[str], roots: list[str] | None = None,
                 **changes: dict[str, Any]) -> Path:
    """A fleet file of the simulated fleet's services named (each as the demo's config writes it, with
    changes by service), under [server] log_roots (default: the fleet's own)."""
    lines = ["[server]", f"log_roots = {_toml(roots if roots is not None else [str(sim.root / 'hosts')])}"]
    for name in names:
        service = sim.services[name]
        entry: dict[str, Any] = {"log": str(service.log_path), "endpoint": service.url}
        if service.env_path is not None:
            entry["env_file"] = str(service.env_path)
        if service.script_path is not None:
            entry["serve_script"] = str(service.script_path)
        entry.update(changes.get(name.replace("-", "_"), {}))
        lines += ["", f"[services.{name}]", *(f"{k} = {_toml(v)}" for k, v in entry.items() if v is not None)]
    path.write_text("\n".join(lines) + "\n")
    return path


def doctor(cli: CliRunner, *argv: str) -> tuple[int, dict[str, Any], str]:
    """The doctor's exit status, its JSON and its table (two runs of the same command)."""
    shown = cli("doctor", *argv)
    ran = cli("doctor", *argv, "--json")
    assert ran.returncode == shown.returncode, ran.stderr
    return ran.returncode, json.loads(ran.stdout), shown.stdout


def rows(out: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(check["what"], check["subject"]): check for check in out["checks"]}


def assert_fits(table: str) -> None:
    wide = [line for line in table.splitlines() if len(line) > 120]
    assert not wide, wide
    assert "None" not in table


HOLDING = ["frank-archon", "lowpool", "qwen38-proven", "twin"]
"""The demo's services whose newest boot settled (qwen38-wide's refused)."""


def test_a_fleet_that_holds_exits_0_with_a_row_per_check(sim: SimFleet, cli: CliRunner, tmp_path: Path) -> None:
    code, out, table = doctor(cli, "--config", str(write_config(tmp_path / "fleet.toml", sim, HOLDING)))
    assert code == 0 and out["ok"] is True, table
    assert set(rows(out)) == {("log root", "server.log_roots[0]"), ("serve_script", "qwen38-proven"),
                              *((what, name) for name in HOLDING for what in ("env_file", "ledger", "endpoint"))}
    assert out["counts"] == {"ok": 14, "fail": 0, "skip": 0}
    ledger = rows(out)["ledger", "twin"]
    assert ledger["finding"] == "radiance, newest boot (boot 1 of 1) settled (lines 33, 34)"  # its two cards
    endpoint = rows(out)["endpoint", "frank-archon"]["finding"]
    assert endpoint.startswith(f"{sim.services['frank-archon'].url}: GET /v1/models answered 200 in ")
    assert endpoint.endswith("dialect radiance (owned_by 'radiance')")
    assert all(set(check) == {"what", "subject", "status", "finding", "remedy"} for check in out["checks"])
    assert_fits(table)
    assert table.splitlines()[0].split() == ["status", "check", "subject", "finding"]
    assert table.rstrip().endswith("14 checks: 14 ok, 0 failed, 0 skipped")


def test_the_demo_fleet_names_its_refused_boot_and_the_endpoint_it_leaves_dark(cli: CliRunner) -> None:
    code, out, table = doctor(cli, "--demo")
    assert code == 3 and out["ok"] is False
    failing = {key: check for key, check in rows(out).items() if check["status"] != "ok"}
    assert set(failing) == {("ledger", "qwen38-wide"), ("endpoint", "qwen38-wide")}
    ledger = failing["ledger", "qwen38-wide"]
    assert "this boot refused to start" in ledger["finding"] and "startup stopped: out of memory" in ledger["finding"]
    assert "Next: audit_step_shape" in ledger["finding"]  # the settled rule's own next step
    endpoint = failing["endpoint", "qwen38-wide"]
    assert "cannot connect" in endpoint["finding"]
    assert endpoint["remedy"].startswith("its newest boot refused to start")
    assert out["counts"] == {"ok": 16, "fail": 2, "skip": 0}
    assert_fits(table)
    assert any(line.startswith("fail    ledger        qwen38-wide") for line in table.splitlines()), table


def test_a_missing_log_and_log_roots_that_are_no_directories_fail(sim: SimFleet, cli: CliRunner,
                                                                  tmp_path: Path) -> None:
    missing = tmp_path / "logs" / "gone.log"
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    roots = [str(tmp_path / "nowhere"), str(a_file), str(tmp_path)]
    config = write_config(tmp_path / "fleet.toml", sim, ["frank-archon"], roots, frank_archon={"log": str(missing)})
    code, out, table = doctor(cli, "--config", str(config))
    assert code == 3 and out["ok"] is False
    found = rows(out)
    assert found["log root", "server.log_roots[0]"]["finding"] == f"{tmp_path / 'nowhere'}: no such directory"
    assert found["log root", "server.log_roots[1]"]["finding"] == f"{a_file}: not a directory"
    assert "create the directory" in found["log root", "server.log_roots[1]"]["remedy"]
    assert found["log root", "server.log_roots[2]"]["status"] == "ok"
    ledger = found["ledger", "frank-archon"]
    assert ledger == {"what": "ledger", "subject": "frank-archon", "status": "fail",
                      "finding": f"{missing}: no such file",
                      "remedy": "check the path or the service's log setting"}
    assert found["endpoint", "frank-archon"]["status"] == "ok"  # the service still answers
    assert_fits(table)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: nothing listens there


def test_an_endpoint_that_does_not_answer_fails_and_one_not_configured_is_skipped(
        sim: SimFleet, cli: CliRunner, tmp_path: Path) -> None:
    dark = f"http://127.0.0.1:{_closed_port()}"
    config = write_config(tmp_path / "fleet.toml", sim, ["frank-archon", "twin"],
                          frank_archon={"endpoint": dark}, twin={"endpoint": None})
    code, out, table = doctor(cli, "--config", str(config))
    assert code == 3
    endpoint = rows(out)["endpoint", "frank-archon"]
    assert endpoint["status"] == "fail" and endpoint["finding"].startswith(
        f"service 'frank-archon' ({dark}) GET /v1/models: cannot connect")
    assert rows(out)["endpoint", "twin"] == {
        "what": "endpoint", "subject": "twin", "status": "skip",
        "finding": "no endpoint in the fleet config: the probes cannot reach it", "remedy": None}
    assert rows(out)["ledger", "frank-archon"]["status"] == "ok"
    assert_fits(table)


def test_a_doctor_needs_a_fleet_file_and_demo_has_its_own(cli: CliRunner, tmp_path: Path) -> None:
    ran = cli("doctor")
    assert ran.returncode == 1 and "no fleet file to check: pass --config FILE or set RADIANCE_MCP_CONFIG" in ran.stderr
    ran = cli("doctor", "--demo", "--config", str(tmp_path / "fleet.toml"))
    assert ran.returncode == 1 and "--demo checks a simulated fleet with a config of its own" in ran.stderr


# ---------------------------------------------------------------------------------------
# Hosts: a real asyncssh server on loopback


def _host_fleet(host: LoopbackHost, tmp_path: Path, known_hosts: Path, example_text: str) -> Path:
    log = host.write_log(example_text)
    env = host.write_log("FRANK_ARCHON_MAX_SEQS=2\n", name="frank.env")
    entry = {**host.host_entry(), "known_hosts": str(known_hosts)}
    lines = ["[hosts.testhost]", *(f"{k} = {_toml(v)}" for k, v in entry.items()), "",
             "[services.remote-frank]", 'host = "testhost"', f"log = {_toml(str(log))}",
             f"env_file = {_toml(str(env))}"]
    path = tmp_path / "fleet.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_host_whose_key_is_verified_has_its_ledger_and_files_read_there(
        asyncssh_host: LoopbackHost, cli: CliRunner, tmp_path: Path, example_text: str) -> None:
    config = _host_fleet(asyncssh_host, tmp_path, asyncssh_host.known_hosts, example_text)
    code, out, table = doctor(cli, "--config", str(config))
    assert code == 0, table
    found = rows(out)
    assert found["host", "testhost"]["finding"] == (
        f"testhost (radiance@127.0.0.1:{asyncssh_host.port}): reachable over SSH, host key verified, logged in")
    assert found["ledger", "remote-frank"]["status"] == "ok"
    assert found["ledger", "remote-frank"]["finding"].startswith("radiance, newest boot")
    assert found["env_file", "remote-frank"]["finding"] == f"testhost:{asyncssh_host.logs}/frank.env: readable, 1 line"
    assert found["endpoint", "remote-frank"]["status"] == "skip"


@pytest.mark.parametrize("known", ["unknown", "changed"])
def test_a_host_key_not_verified_fails_with_the_steps_to_add_it_and_nothing_is_read_there(
        known: str, asyncssh_host: LoopbackHost, cli: CliRunner, tmp_path: Path, example_text: str) -> None:
    known_hosts = tmp_path / "known_hosts"
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known_hosts.write_text(f"elsewhere.example {asyncssh_host.host_key_line}\n" if known == "unknown"
                           else f"[127.0.0.1]:{asyncssh_host.port} {other}\n")
    code, out, table = doctor(cli, "--config", str(_host_fleet(asyncssh_host, tmp_path, known_hosts, example_text)))
    assert code == 3
    host = rows(out)["host", "testhost"]
    port = asyncssh_host.port
    assert host["status"] == "fail"
    assert host["finding"].startswith(f"testhost (radiance@127.0.0.1:{port}), to check its login and host key: "
                                      "REFUSED: the host's key ")
    steps = (f"add the host's key out of band: run `ssh-keyscan -p {port} 127.0.0.1 > /tmp/testhost.keys`, compare "
             "`ssh-keygen -lf /tmp/testhost.keys` with the fingerprint the host itself shows")
    if known == "unknown":
        assert "is not in" in host["finding"] and host["remedy"].startswith(steps)
    else:
        assert "does not match the one recorded" in host["finding"]
        assert host["remedy"].startswith("To accept a new key, " + steps)
        assert host["remedy"].endswith(f"(`ssh-keygen -R 127.0.0.1 -f {known_hosts}`)")
    assert host["remedy"] not in host["finding"]  # said once, in its own field
    why = "host testhost failed its check (its row above): nothing is read there"
    assert rows(out)["ledger", "remote-frank"] == {"what": "ledger", "subject": "remote-frank", "status": "skip",
                                                   "finding": why, "remedy": None}
    assert rows(out)["env_file", "remote-frank"]["status"] == "skip"
    assert_fits(table)


# ---------------------------------------------------------------------------------------
# The pure rows: an endpoint's dialect


@pytest.mark.parametrize(("body", "said"), [
    ({"data": [{"id": "m", "owned_by": "vllm"}]}, ("vllm", "vllm")),
    ({"data": [{"id": "m", "owned_by": "sglang"}]}, ("sglang", "sglang")),
    ({"data": [{"id": "m", "owned_by": "llamacpp"}]}, ("llama.cpp", "llamacpp")),  # llama-server
    ({"data": [{"id": "m", "owned_by": "radiance"}]}, ("radiance", "radiance")),  # the simulator
    ({"data": [{"id": "m", "owned_by": "me"}]}, None),  # llama-cpp-python names no engine
    ({"data": []}, None),
    ({"data": "x"}, None),
    (["not", "a", "list"], None),
    (None, None),
])
def test_the_model_list_names_a_dialect_only_by_an_engine_s_own_owned_by(body: object, said: object) -> None:
    assert api_said(body) == said


def test_an_endpoint_that_speaks_another_dialect_than_its_ledger_fails() -> None:
    vllm = Reply("/v1/models", 200, {"data": [{"id": "m", "owned_by": "vllm"}]}, "{}", 0.01)
    check = endpoint_check("frank", "http://h:1", [vllm], "radiance", "its ledger's engine")
    assert check.status == "fail" and "the vllm dialect, but its ledger's engine names radiance" in check.finding
    assert endpoint_check("frank", "http://h:1", [vllm], "vllm", "the config's engine").status == "ok"
    health = [Reply("/v1/models", 404, None, "not found", 0.01), Reply("/health", 200, None, "ok", 0.01)]
    assert endpoint_check("frank", "http://h:1", health, None, "its ledger's engine").finding == (
        "http://h:1: GET /health answered 200 in 0.01 s; dialect told from its first refusal (the probes' 'auto')")
    down = [Reply("/v1/models", 503, None, "busy", 0.01), Reply("/health", 503, None, "busy", 0.01)]
    assert endpoint_check("frank", "http://h:1", down, None, "").status == "fail"
