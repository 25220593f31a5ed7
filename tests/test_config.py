"""config: the fleet file; every error names the file, the key and what is wrong."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import MappingProxyType

import pytest

from radiance_mcp.core.constants import DEFAULT_MODEL, ModelConstants
from radiance_mcp.core.errors import ConfigError
from radiance_mcp.sources.config import CONFIG_ENV, EXAMPLES_DIR, Fleet, load

FULL = """\
[server]
log_roots = ["/var/log/radiance", "~/logs"]

[models.my-model]
rate_fp8_bytes_per_token = 8000
rate_bf16_bytes_per_token = 15000
per_seq_mib = 120
fixed_mib = 500

[hosts.dankserver]
address = "dankserver.lan"
user = "dank"
port = 2222
log_roots = ["/home/dank/logs"]

[services.frank-archon]
host = "dankserver"
log = "/home/dank/logs/frank_archon.log"
endpoint = "http://127.0.0.1:8000"
env_file = "/home/dank/scripts/frank-archon.env"
model = "my-model"

[services.local]
log = "/var/log/radiance/local.log"

[services.seed-model]
log = "/var/log/radiance/seed.log"
model = "Qwen3.8-Flash-Next w4"
"""


def write(tmp_path: Path, text: str | bytes, name: str = "fleet.toml") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_full_file(tmp_path: Path) -> None:
    fleet = load(write(tmp_path, FULL))
    assert fleet.path == tmp_path / "fleet.toml"
    assert sorted(fleet.services) == ["frank-archon", "local", "seed-model"]
    assert fleet.hosts["dankserver"].port == 2222
    assert fleet.model_constants("frank-archon") == ModelConstants(
        "my-model", MappingProxyType({"fp8": 8_000, "bf16": 15_000}), 120, 500
    )
    assert fleet.model_constants("local") is DEFAULT_MODEL  # no model: the seed's
    assert fleet.model_constants("seed-model") is DEFAULT_MODEL  # the seed's by name
    assert fleet.model_constants() is DEFAULT_MODEL
    assert fleet.local_roots() == [Path("/var/log/radiance"), Path("~/logs").expanduser().resolve(),
                                   EXAMPLES_DIR.resolve()]


def test_no_config_is_an_empty_fleet_that_reads_the_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    fleet = load()
    assert fleet == Fleet()
    assert fleet.local_roots() == [EXAMPLES_DIR.resolve()]
    with pytest.raises(ConfigError, match=r"service 'x' is not in the fleet \(no config file: pass --config or set "
                                          r"RADIANCE_MCP_CONFIG\); known services: none"):
        fleet.service("x")


def test_environment_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_ENV, str(write(tmp_path, FULL)))
    assert "local" in load().services
    monkeypatch.setenv(CONFIG_ENV, "")  # set but empty: no file
    assert load() == Fleet()


def test_unknown_service_names_the_known_ones_and_list_fleet_not_the_file(tmp_path: Path) -> None:
    # Issue 11: the config's path (the demo's is a temporary directory) stays out; list_fleet is the way on.
    path = write(tmp_path, FULL)
    with pytest.raises(ConfigError, match=r"service 'nope' is not in the fleet; "
                                          r"known services: frank-archon, local, seed-model\. list_fleet") as caught:
        load(path).service("nope")
    assert str(tmp_path) not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[server\n", r"is not valid TOML: .*line 1"),
        ('[serverr]\nlog_roots = ["/x"]\n', r"serverr: Extra inputs are not permitted"),
        ('[services.a]\nlogg = "/x.log"\n', r"services\.a\.logg: Extra inputs are not permitted"),
        ('[hosts.h]\nport = "ssh"\n', r"hosts\.h\.port: Input should be a valid integer"),
        ("[hosts.h]\nport = 70000\n", r"hosts\.h\.port: Input should be less than or equal to 65535"),
        ('[services.a]\nlog = "/x.log"\ncontainer = "a"\nhost = "h"\n[hosts.h]\n',
         r"services\.a: give either log \(a file\) or container \(podman logs\), not both"),
        ('[services.a]\ncontainer = "a"\n',
         r"services\.a: container needs host: the host \(from the fleet config\) where podman runs it"),
        ('[services.a]\nhost = "nope"\n', r"services\.a\.host names 'nope', which is not under \[hosts\]"),
        ('[services.a]\nmodel = "gpt"\n', r"services\.a\.model names 'gpt', which is not under \[models\]"),
        ('[services."bad name"]\nlog = "/x.log"\n', r"services\.bad name\.\[key\]: String should match pattern"),
        ("[models.m]\nrate_fp8_bytes_per_token = 0\nrate_bf16_bytes_per_token = 1\nper_seq_mib = 1\n"
         "fixed_mib = 1\n", r"models\.m\.rate_fp8_bytes_per_token: Input should be greater than 0"),
        ("[models.m]\nrate_fp8_bytes_per_token = 7488\n",
         r"models\.m\.rate_bf16_bytes_per_token: Field required; models\.m\.per_seq_mib: Field required"),
        ('[server]\nlog_roots = "/var/log"\n', r"server\.log_roots: Input should be a valid tuple"),
        # a relative root would resolve against the server's working directory (often '/'): refused
        ('[server]\nlog_roots = [""]\n', r"server\.log_roots: '' is not an absolute directory"),
        ('[server]\nlog_roots = ["logs"]\n', r"server\.log_roots: 'logs' is not an absolute directory"),
        ('[hosts.h]\nlog_roots = ["~/logs"]\n', r"hosts\.h\.log_roots: '~/logs' is not an absolute directory"),
        # a relative path names a different file in each working directory: a relative serve
        # script was read from ./ and then run from PATH
        ('[services.a]\nserve_script = "launch.sh"\n',
         r"services\.a: serve_script: 'launch\.sh' is not an absolute path; write it from '/' or '~'"),
        ('[services.a]\nserve_script = "./bin/launch.sh"\n', r"services\.a: serve_script: './bin/launch\.sh' is not"),
        ('[services.a]\nenv_file = "conf/a.env"\n', r"services\.a: env_file: 'conf/a\.env' is not an absolute path"),
        ('[services.a]\nlog = "a.log"\n', r"services\.a: log: 'a\.log' is not an absolute path"),
        ('[services.a]\nhost = "h"\nlog = "~/a.log"\n[hosts.h]\n',
         r"services\.a: log: '~/a\.log' is not an absolute path; write it from '/' \(a path on the host"),
        ('[hosts.h]\nidentity = "keys/id_ed25519"\n', r"hosts\.h\.identity: 'keys/id_ed25519' is not an absolute"),
        ('[hosts.h]\nknown_hosts = "known_hosts"\n', r"hosts\.h\.known_hosts: 'known_hosts' is not an absolute"),
        ('[server]\nknown_hosts = ".ssh/known_hosts"\n', r"server\.known_hosts: '\.ssh/known_hosts' is not an"),
        ('[server]\nssh_config = "ssh_config"\n', r"server\.ssh_config: 'ssh_config' is not an absolute path"),
        ('[server]\nallowed_hosts = ["http://mcp.lab.test"]\n',
         r"server\.allowed_hosts: 'http://mcp\.lab\.test' is not a host name or address"),
        ('[server]\nallowed_hosts = "mcp.lab.test"\n', r"server\.allowed_hosts: Input should be a valid tuple"),
    ],
    ids=["not toml", "unknown table", "unknown key", "wrong type", "out of range", "log and container",
         "container without host", "unknown host", "unknown model", "bad name", "zero rate", "missing keys",
         "roots not a list", "empty root", "relative root", "remote root with ~", "bare script",
         "dot script", "relative env", "relative log", "remote log with ~", "relative identity",
         "relative host known_hosts", "relative known_hosts", "relative ssh_config", "allowed host url",
         "allowed hosts not a list"],
)
def test_errors_name_file_key_and_problem(text: str, message: str, tmp_path: Path) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value).startswith(f"config file {path}")
    assert re.search(message, str(caught.value)), str(caught.value)
    assert "https://" not in str(caught.value)  # pydantic's URLs are left out


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: tmp / "missing.toml", r"config file .*missing\.toml does not exist; pass an existing --config"),
        (lambda tmp: write(tmp, b"\xff\xfe[server]\n"), r"config file .*fleet\.toml cannot be read: .*utf-8"),
        (lambda tmp: tmp, r"config file .* is a directory, not a regular file; pass the fleet TOML file itself"),
        (lambda tmp: _fifo(tmp), r"config file .*fleet\.fifo is a FIFO, socket or device, not a regular file"),
        (lambda tmp: Path("/dev/zero"), r"config file /dev/zero is a FIFO, socket or device, not a regular file"),
        (lambda tmp: write(tmp, "# padding\n" * 120_000), r"fleet\.toml is over 1,024 KiB, too large for a fleet file"),
        (lambda tmp: write(tmp, "x = " + "[" * 500 + "]" * 500 + "\n"),
         r"fleet\.toml nests arrays or tables too deeply to parse; a fleet file needs three levels"),
        (lambda tmp: write(tmp, "x = " + "{a = " * 500 + "1" + "}" * 500 + "\n"),
         r"fleet\.toml nests arrays or tables too deeply to parse"),
    ],
    ids=["missing", "not utf-8", "a directory", "a fifo (would block)", "a device", "over the cap",
         "arrays 500 deep", "inline tables 500 deep"],
)
def test_unreadable_files(make: object, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message):
        load(make(tmp_path))  # type: ignore[operator]


def _fifo(tmp: Path) -> Path:
    path = tmp / "fleet.fifo"
    os.mkfifo(path)  # no writer: a plain open() would wait for one for ever
    return path


def test_roots_are_resolved(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    fleet = load(write(tmp_path, f'[server]\nlog_roots = ["{tmp_path}/link", "{tmp_path}/real/../real"]\n'))
    assert fleet.local_roots()[:2] == [real, real]


def test_absolute_paths_and_allowed_hosts_load(tmp_path: Path) -> None:
    fleet = load(write(tmp_path, """\
[server]
known_hosts = "~/.ssh/known_hosts"
allowed_hosts = ["mcp.lab.test", "10.9.8.7:8443", "[fd00::7]"]

[hosts.h]
identity = "~/.ssh/id_lab"
known_hosts = "/etc/ssh/lab_known_hosts"

[services.local]
serve_script = "~/bin/launch.sh"
env_file = "/srv/lab/a.env"

[services.remote]
host = "h"
serve_script = "/opt/lab/launch.sh"
"""))
    assert fleet.server.allowed_hosts == ("mcp.lab.test", "10.9.8.7:8443", "[fd00::7]")
    assert fleet.services["local"].serve_script == "~/bin/launch.sh"  # '~' is this machine's home
    assert fleet.services["remote"].serve_script == "/opt/lab/launch.sh"
