"""config: the fleet file; every error names the file, the key and what is wrong."""

from __future__ import annotations

import re
from pathlib import Path
from types import MappingProxyType

import pytest

from radiance_mcp.config import CONFIG_ENV, EXAMPLES_DIR, Fleet, load
from radiance_mcp.constants import DEFAULT_MODEL, ModelConstants
from radiance_mcp.errors import ConfigError

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
    ],
    ids=["not toml", "unknown table", "unknown key", "wrong type", "out of range", "log and container",
         "container without host", "unknown host", "unknown model", "bad name", "zero rate", "missing keys",
         "roots not a list", "empty root", "relative root", "remote root with ~"],
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
        (lambda tmp: tmp, r"config file .* cannot be read: .*directory"),
    ],
    ids=["missing", "not utf-8", "a directory"],
)
def test_unreadable_files(make: object, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message):
        load(make(tmp_path))  # type: ignore[operator]


def test_roots_are_resolved(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    fleet = load(write(tmp_path, f'[server]\nlog_roots = ["{tmp_path}/link", "{tmp_path}/real/../real"]\n'))
    assert fleet.local_roots()[:2] == [real, real]
