"""Safe by construction: injected text stays data, only listed hosts and roots, host keys always checked.

Every string that can reach a remote command is tried with an injection corpus; a canary
file on the test host (and a 'pwned' file the payloads would create) shows nothing ran.
"""

from __future__ import annotations

from pathlib import Path

import asyncssh
import pytest
from remote_hosts import ledger, payloads
from ssh_hosts import LoopbackHost

from radiance_mcp.core.errors import ConfigError, InputError, RadianceMCPError, RemoteError, SourceError
from radiance_mcp.core.ledger import read_text
from radiance_mcp.models import ReadBudgetTableInput
from radiance_mcp.models.audit import CheckServeScriptInput
from radiance_mcp.sources.config import Fleet
from radiance_mcp.sources.ledgers import RemoteFileSource
from radiance_mcp.sources.remote import SSHPool, SSHTarget
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools.audit import check_serve_script
from radiance_mcp.tools.ledger import read_budget_table


async def read(runtime: Runtime, **args: object) -> None:
    await read_budget_table(runtime, ReadBudgetTableInput.model_validate(args))


async def test_injection_corpus_in_every_argument(ssh_host: LoopbackHost, example_text: str) -> None:
    """Container, host, log path, log root and a configured service: refused, or quoted and harmless."""
    runtime = Runtime(ssh_host.fleet())
    outcomes: dict[str, int] = {}
    try:
        for payload in payloads(ssh_host):
            attempts = [
                {"host": "testhost", "container": payload},
                {"host": payload, "log": f"{ssh_host.logs}/a.log"},
                {"host": "testhost", "log": f"{ssh_host.logs}/{payload}"},
                {"host": "testhost", "log": f"{ssh_host.logs}/{payload}.log"},
                {"host": "testhost", "log": payload},
            ]
            for args in attempts:
                with pytest.raises(RadianceMCPError) as caught:  # never a success, never a traceback
                    await read(runtime, **args)
                outcomes[type(caught.value).__name__] = outcomes.get(type(caught.value).__name__, 0) + 1
            # The payload as a configured log root and as a service's log (the operator's file).
            if "\n" not in payload and "\x00" not in payload and not payload.startswith("-"):
                root = f"{ssh_host.logs}/{payload}"
                fleet = ssh_host.fleet(services={"svc": {"host": "testhost", "log": f"{root}/a.log"}},
                                       log_roots=[root])
                for args in ({"service": "svc"}, {"host": "testhost", "log": f"{root}/a.log"}):
                    with pytest.raises(RadianceMCPError):
                        await read(Runtime(fleet, ssh_pool=runtime.ssh_pool), **args)
            ssh_host.assert_untouched()
    finally:
        if runtime.ssh_pool is not None:
            await runtime.ssh_pool.close()
    # Both kinds of refusal happened: rules here (InputError) and 'no such file' there (SourceError).
    assert outcomes.get("InputError", 0) > 0 and outcomes.get("SourceError", 0) > 0, outcomes


async def test_files_named_like_injections_are_read_as_files(ssh_host: LoopbackHost, pool: SSHPool,
                                                             example_text: str) -> None:
    """The names reach readlink, tail and grep on the host quoted: the right file is read."""
    text = ledger(example_text, boots=2)
    for payload in payloads(ssh_host):
        if "/" in payload or "\n" in payload or "\x00" in payload or payload == "..":
            continue
        path = ssh_host.write_log(text, name=f"x{payload}.log")
        source = RemoteFileSource(ssh_host.target(), str(path), pool, (str(ssh_host.logs),))
        boot = await source.read()
        local = read_text(text, source=source.label)
        assert [(h.key, h.line) for h in boot.hits] == [(h.key, h.line) for h in local.hits]
        ssh_host.assert_untouched()


async def test_a_container_name_is_checked_before_anything_is_sent(asyncssh_host: LoopbackHost) -> None:
    runtime = Runtime(asyncssh_host.fleet())
    before = asyncssh_host.connections()
    with pytest.raises(InputError, match="container="):
        await read(runtime, host="testhost", container="frank; touch x")
    assert asyncssh_host.connections() == before


def test_a_configured_container_must_be_a_plain_name(asyncssh_host: LoopbackHost) -> None:
    with pytest.raises(ValueError, match="container"):
        asyncssh_host.fleet(services={"svc": {"host": "testhost", "container": "x; touch y"}})


async def test_only_hosts_the_config_lists(asyncssh_host: LoopbackHost) -> None:
    runtime = Runtime(asyncssh_host.fleet())
    for host in ("127.0.0.1", "otherhost", "testhost.evil"):
        with pytest.raises(InputError, match=r"not a host of the fleet config; known hosts: testhost"):
            await read(runtime, host=host, log=f"{asyncssh_host.logs}/a.log")


async def test_a_symlink_out_of_the_root_is_refused_on_the_host(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    """logs/link-out.log points at ../secret.txt: only the host can see that, and it refuses."""
    source = RemoteFileSource(ssh_host.target(), str(ssh_host.logs / "link-out.log"), pool, (str(ssh_host.logs),))
    with pytest.raises(InputError, match=r"outside the allowed log roots.*log_roots"):
        await source.read()


async def test_an_agents_path_must_lie_under_the_hosts_roots(asyncssh_host: LoopbackHost) -> None:
    runtime = Runtime(asyncssh_host.fleet())
    with pytest.raises(InputError, match=r"outside the log roots of host testhost"):
        await read(runtime, host="testhost", log=str(asyncssh_host.root / "secret.txt"))
    with pytest.raises(InputError, match=r"lists no log_roots"):
        await read(Runtime(asyncssh_host.fleet(log_roots=[])), host="testhost",
                   log=f"{asyncssh_host.logs}/a.log")


async def test_a_path_that_is_not_utf8_is_an_input_error(asyncssh_host: LoopbackHost) -> None:
    """The CLI's argv holds a byte that is not UTF-8 as a lone surrogate; it cannot enter the command."""
    runtime = Runtime(asyncssh_host.fleet(), trust_local_paths=True)
    before = asyncssh_host.commands()
    try:
        with pytest.raises(InputError, match=r"^log='.*caf\\udce9\.log': .*UTF-8"):
            await read(runtime, host="testhost", log=f"{asyncssh_host.logs}/caf\udce9.log")
        with pytest.raises(InputError, match=r"^script='.*\\udce9.*UTF-8"):
            await check_serve_script(runtime, CheckServeScriptInput(host="testhost",
                                                                    script=f"{asyncssh_host.logs}/\udce9.sh"))
    finally:
        if runtime.ssh_pool is not None:
            await runtime.ssh_pool.close()
    assert asyncssh_host.commands() == before


# ---------------------------------------------------------------------------------------
# Host keys


async def _read_with(host: LoopbackHost, example_text: str, **changes: object) -> None:
    path = host.write_log(example_text)
    pool = SSHPool()
    try:
        await RemoteFileSource(host.target(**changes), str(path), pool, (str(host.logs),)).read()
    finally:
        await pool.close()


async def test_a_changed_host_key_is_refused(ssh_host: LoopbackHost, tmp_path: Path, example_text: str) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ssh_host.port} {other}\n")
    with pytest.raises(RemoteError) as caught:
        await _read_with(ssh_host, example_text, known_hosts=str(known))
    message = str(caught.value)
    assert "does not match the one recorded" in message
    assert f"ssh-keyscan -p {ssh_host.port} 127.0.0.1" in message and "ssh-keygen -lf" in message
    assert f"ssh-keygen -R 127.0.0.1 -f {known}" in message
    assert isinstance(caught.value.__cause__, asyncssh.HostKeyNotVerifiable)


async def test_an_unknown_host_is_refused(ssh_host: LoopbackHost, tmp_path: Path, example_text: str) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"elsewhere.example {ssh_host.host_key_line}\n")  # the right key, for another name
    with pytest.raises(RemoteError, match=r"REFUSED: the host's key is not in .*ssh-keyscan -p \d+ 127\.0\.0\.1"):
        await _read_with(ssh_host, example_text, known_hosts=str(known))


async def test_a_missing_known_hosts_file_is_refused(asyncssh_host: LoopbackHost, tmp_path: Path,
                                                     example_text: str) -> None:
    with pytest.raises(RemoteError, match=r"known_hosts file .* does not exist.*ssh-keyscan"):
        await _read_with(asyncssh_host, example_text, known_hosts=str(tmp_path / "nope"))


def _ssh_config(host: LoopbackHost, path: Path, known_hosts: str) -> Path:
    path.write_text(
        "Host fleetalias\n"
        "  HostName 127.0.0.1\n"
        f"  Port {host.port}\n"
        f"  User {host.user}\n"
        f"  IdentityFile {host.identity}\n"
        f"  UserKnownHostsFile {known_hosts}\n"
    )
    return path


async def test_an_ssh_config_alias_is_honoured(ssh_host: LoopbackHost, tmp_path: Path, example_text: str) -> None:
    """Address, port, user, identity and known_hosts all come from ~/.ssh/config's alias."""
    config = _ssh_config(ssh_host, tmp_path / "ssh_config", str(ssh_host.known_hosts))
    fleet = Fleet.model_validate({
        "server": {"ssh_config": str(config)},
        "hosts": {"fleetalias": {"log_roots": [str(ssh_host.logs)]}},
    })
    path = ssh_host.write_log(example_text)
    runtime = Runtime(fleet)
    try:
        table = await read_budget_table(
            runtime, ReadBudgetTableInput(host="fleetalias", log=str(path))
        )
    finally:
        await runtime.ssh_pool.close()
    assert table.cards[0].pair_mib == 29_120


async def test_ssh_config_cannot_turn_host_key_checking_off(ssh_host: LoopbackHost, tmp_path: Path,
                                                            example_text: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """'UserKnownHostsFile none' would make asyncssh skip the check; ~/.ssh/known_hosts is used instead."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "known_hosts").write_text("")
    config = _ssh_config(ssh_host, tmp_path / "ssh_config", "none")
    with pytest.raises(RemoteError, match=r"REFUSED: the host's key is not in .*\.ssh/known_hosts"):
        await _read_with(ssh_host, example_text, address="fleetalias", port=None, user=None, identity=None,
                         known_hosts=None, ssh_config=str(config))


def test_a_fleet_file_cannot_name_a_relative_host_root() -> None:
    with pytest.raises((ValueError, ConfigError)):
        Fleet.model_validate({"hosts": {"h": {"log_roots": ["logs"]}}})


def test_targets_come_only_from_the_config() -> None:
    """SSHTarget is what connects; sources build it from fleet.hosts only (see ssh_target)."""
    from radiance_mcp.sources.ledgers import ssh_target

    fleet = Fleet.model_validate({"hosts": {"h": {"address": "10.0.0.9", "port": 2222, "log_roots": ["/l"]}}})
    assert ssh_target(fleet, "h") == SSHTarget(name="h", address="10.0.0.9", port=2222, log_roots=("/l",))
    with pytest.raises(InputError):
        ssh_target(fleet, "10.0.0.9")
    assert SourceError  # the family a failed read belongs to


async def test_a_root_that_is_a_symlink_is_resolved_on_the_host(ssh_host: LoopbackHost, pool: SSHPool,
                                                                example_text: str) -> None:
    """A configured root may itself be a link (/home -> /data/home): files under its target are allowed."""
    link = ssh_host.root / "logs-link"
    if not link.exists():
        link.symlink_to(ssh_host.logs)
    path = ssh_host.write_log(example_text)
    source = RemoteFileSource(ssh_host.target(log_roots=(str(link),)), f"{link}/{path.name}", pool, (str(link),))
    assert (await source.read()).index == 1
    outside = RemoteFileSource(ssh_host.target(log_roots=(str(link),)), f"{link}/link-out.log", pool, (str(link),))
    with pytest.raises(InputError, match="outside the allowed log roots"):
        await outside.read()
