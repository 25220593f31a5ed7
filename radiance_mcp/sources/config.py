"""The fleet file: one TOML file naming services, hosts and model constants.

Found by ``--config`` or ``RADIANCE_MCP_CONFIG``; with neither, the server runs with an empty
fleet that may read only the example ledgers shipped in the package. Example::

    [server]
    log_roots = ["/var/log/radiance"]        # local ledger files must resolve under these
    allowed_hosts = ["mcp.example.lan"]       # names HTTP clients may use (Host header); see cli

    [models.my-model]                         # optional; the seed's model is built in
    rate_fp8_bytes_per_token = 7488
    rate_bf16_bytes_per_token = 14144
    per_seq_mib = 110
    fixed_mib = 448

    [hosts.dankserver]                        # an SSH target (or a ~/.ssh/config alias)
    address = "dankserver.lan"                # default: the table's name
    user = "dank"
    log_roots = ["/home/dank/logs"]           # remote paths allowed on this host

    [services.frank-archon]
    host = "dankserver"                       # omit for a ledger on this machine
    log = "/home/dank/logs/frank_archon.log"  # or: container = "frank-archon" (podman logs)
    endpoint = "http://127.0.0.1:8000"
    env_file = "/home/dank/scripts/frank-archon.env"
    model = "my-model"                        # default: the seed's model
    cards = ["dankserver:0"]                  # optional: the physical card(s), to see which services share one
    engine = "radiance"                       # or "vllm", "sglang", "llama.cpp"; default: told from the log

Every path in the file is absolute (from '/', or '~' for a file on this machine): a relative
path would resolve against whatever directory the server was started in, so the file checked
and the file used could differ. Every error names the file, the key and what is wrong.
"""

import ipaddress
import os
import stat
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from radiance_mcp.core.constants import CONTROL, DEFAULT_MODEL, LedgerEngine, ModelConstants
from radiance_mcp.core.errors import ConfigError
from radiance_mcp.models.ledger_ref import source_problem

CONFIG_ENV = "RADIANCE_MCP_CONFIG"
CONFIG_CAP_BYTES = 1024 * 1024
"""A fleet file is a few KiB; anything over 1 MiB is the wrong file."""
EXAMPLES_DIR = Path(__file__).parents[1] / "examples"
"""Always readable: the example ledgers the package ships."""

Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")]


class _Strict(BaseModel):
    # Built when a fleet is first validated, once, its parts within it (not each part on its own as well).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _absolute(path: str, *, home: bool, kind: str = "path") -> str:
    # Security: a relative path ("", ".", "logs", "serve.sh") resolves against the server's
    # working directory, which an MCP client may set to "/"; a relative script was read from
    # ./ but run from PATH. Only absolute paths are accepted, so each names one file.
    expanded = os.path.expanduser(path) if home else path
    if CONTROL.search(path):
        # Security: a newline in a path the config names would start a shell line where the path is written
        # into the gates' env and bats files; every other path that enters them is refused the same way.
        raise ValueError(f"{path[:200]!r} holds a control character (a NUL byte, newline, tab...); rename the "
                         f"{kind}, or write the path it has")
    if not expanded.startswith("/"):
        where = "write it from '/'" + (" or '~'" if home else " (a path on the host: '~' would expand here)")
        raise ValueError(f"{path!r} is not an absolute {kind}; {where}")
    return path


def _absolute_roots(roots: tuple[str, ...], *, home: bool) -> tuple[str, ...]:
    for root in roots:
        _absolute(root, home=home, kind="directory")
    return roots


def _absolute_or_none(path: str | None) -> str | None:
    return None if path is None else _absolute(path, home=True)


class ModelSpec(_Strict):
    rate_fp8_bytes_per_token: int = Field(gt=0)
    rate_bf16_bytes_per_token: int = Field(gt=0)
    per_seq_mib: int = Field(ge=0)
    fixed_mib: int = Field(ge=0)

    def constants(self, name: str) -> ModelConstants:
        return ModelConstants(
            name=name,
            rate_bytes_per_token=MappingProxyType(
                {"fp8": self.rate_fp8_bytes_per_token, "bf16": self.rate_bf16_bytes_per_token}
            ),
            per_seq_mib=self.per_seq_mib,
            fixed_mib=self.fixed_mib,
        )


class Host(_Strict):
    address: str | None = None
    """Hostname, IP or ~/.ssh/config alias; default: the host's name in the file."""
    port: int | None = Field(default=None, ge=1, le=65535)
    user: str | None = None
    identity: str | None = None
    known_hosts: str | None = None
    log_roots: tuple[str, ...] = ()
    """Absolute directories on the host under which ledger files may be read."""

    @field_validator("log_roots")
    @classmethod
    def _roots_absolute(cls, roots: tuple[str, ...]) -> tuple[str, ...]:
        return _absolute_roots(roots, home=False)  # '~' would expand here, not on the host

    @field_validator("identity", "known_hosts")
    @classmethod
    def _files_absolute(cls, path: str | None) -> str | None:
        return _absolute_or_none(path)  # files on this machine


class Service(_Strict):
    host: Name | None = None
    log: str | None = None
    container: Name | None = None
    endpoint: str | None = None
    env_file: str | None = None
    serve_script: str | None = None
    model: str | None = None
    cards: tuple[Annotated[str, Field(min_length=1, max_length=100)], ...] = ()
    """The physical cards its card 0, 1, ... are, e.g. ["gpubox:0"]: services naming one card share it."""
    engine: LedgerEngine | None = None
    """The engine that serves it: its boot ledger is read in that engine's dialect, and the probes speak it.
    None: told from the log's own lines."""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if len(set(self.cards)) != len(self.cards):
            raise ValueError(f"cards names a card twice ({', '.join(self.cards)}); list each card once, in order")
        # The ledger reference's rule; a service on a host may name no ledger (an endpoint only).
        given = [name for name in ("log", "container") if getattr(self, name)]
        problem = source_problem(given, bool(self.host), required=False, host_alone=True,
                                 count="give either log (a file) or container (podman logs), not both")
        if problem:
            raise ValueError(problem)
        for key in ("log", "env_file", "serve_script"):
            path = getattr(self, key)
            if path is not None:
                try:
                    _absolute(path, home=self.host is None)  # on a host, '~' would expand here
                except ValueError as exc:
                    raise ValueError(f"{key}: {exc}") from None
        return self


class ServerSettings(_Strict):
    log_roots: tuple[str, ...] = ()
    known_hosts: str | None = None
    ssh_config: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    """Host names (or addresses) HTTP clients may reach the server by, beyond its bind address."""

    @field_validator("log_roots")
    @classmethod
    def _roots_absolute(cls, roots: tuple[str, ...]) -> tuple[str, ...]:
        return _absolute_roots(roots, home=True)

    @field_validator("known_hosts", "ssh_config")
    @classmethod
    def _files_absolute(cls, path: str | None) -> str | None:
        return _absolute_or_none(path)

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            split_allowed_host(name)
        return names


class Fleet(_Strict):
    server: ServerSettings = ServerSettings()
    models: dict[str, ModelSpec] = {}
    hosts: dict[Name, Host] = {}
    services: dict[Name, Service] = {}
    path: Path | None = None
    """The file this fleet was read from (None for the empty default)."""

    @model_validator(mode="after")
    def _references(self) -> Self:
        for name, service in self.services.items():
            if service.host and service.host not in self.hosts:
                raise ValueError(f"services.{name}.host names {service.host!r}, which is not under [hosts]")
            if service.model and service.model not in self.models and service.model != DEFAULT_MODEL.name:
                raise ValueError(f"services.{name}.model names {service.model!r}, which is not under [models]")
        return self

    def service(self, name: str) -> Service:
        try:
            return self.services[name]
        except KeyError:
            known = ", ".join(sorted(self.services)) or "none: the config names no services"
            # No path in the message: an agent has no use for it, and the demo's is a temporary directory.
            where = "" if self.path else " (no config file: pass --config or set RADIANCE_MCP_CONFIG)"
            raise ConfigError(
                f"service {name!r} is not in the fleet{where}; known services: {known}. "
                "list_fleet (CLI: radiance-mcp list-fleet) shows each with its host, ledger and endpoint"
            ) from None

    def model_constants(self, service: str | None = None) -> ModelConstants:
        """The pool-contract constants of the service's model; the seed's model by default."""
        model = self.service(service).model if service else None
        if model is None or model == DEFAULT_MODEL.name and model not in self.models:
            return DEFAULT_MODEL
        return self.models[model].constants(model)

    def local_roots(self) -> list[Path]:
        """Directories local ledger files must resolve under, symlinks resolved."""
        roots = [Path(os.path.expanduser(r)).resolve() for r in self.server.log_roots]
        return [*roots, EXAMPLES_DIR.resolve()]


def load(path: str | os.PathLike[str] | None = None) -> Fleet:
    """Read the fleet file named by path, else by RADIANCE_MCP_CONFIG; an empty fleet without either."""
    chosen = path if path is not None else os.environ.get(CONFIG_ENV) or None
    if chosen is None:
        return Fleet()
    import tomllib  # here: a command without a fleet file never parses TOML

    file = Path(chosen).expanduser()
    try:
        data = tomllib.loads(_read_config(file).decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {file} does not exist; pass an existing --config") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {file} cannot be read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {file} is not valid TOML: {exc}") from exc
    except RecursionError:
        raise ConfigError(
            f"config file {file} nests arrays or tables too deeply to parse; a fleet file needs three levels "
            "([services.NAME] key = value): check it is the right file"
        ) from None
    try:
        return Fleet.model_validate({**data, "path": file})
    except ValidationError as exc:
        raise ConfigError(f"config file {file}: {describe_validation(exc)}") from exc


def _read_config(file: Path) -> bytes:
    """The file's bytes, refusing what is not a regular file or is over CONFIG_CAP_BYTES.

    A FIFO would block start-up until something writes to it, and a device may never end:
    the file is opened without blocking and checked before anything is read.
    """
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, socket or device"
            raise ConfigError(f"config file {file} is {kind}, not a regular file; pass the fleet TOML file itself")
        data = os.read(fd, CONFIG_CAP_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > CONFIG_CAP_BYTES:
        raise ConfigError(
            f"config file {file} is over {CONFIG_CAP_BYTES // 1024:,} KiB, too large for a fleet file; "
            "pass the fleet TOML file itself"
        )
    return data


def split_allowed_host(name: str) -> tuple[str, int | None]:
    """An allowed host as a Host header carries it ('name', '10.0.0.5', '[fd00::5]') and its port, if given.

    Raises ValueError, naming the rule, for anything else (a URL, a wildcard, a path).
    """
    host, port = name, ""
    if name.startswith("["):
        host, _, port = name.partition("]")
        host += "]"
        if port and not port.startswith(":"):
            host = ""  # text after the bracket that is not ':port'
        port = port[1:]
    elif name.count(":") == 1:
        host, port = name.split(":")
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        address = None
    valid = (
        (address.version == 6) == host.startswith("[") if address
        else 0 < len(host) <= 253 and host[0] != "-"
        and all(ch.isascii() and (ch.isalnum() or ch in ".-_") for ch in host)
    )
    if not valid or port and not (port.isdigit() and 1 <= int(port) <= 65535) or name.endswith(":"):
        raise ValueError(
            f"{name!r} is not a host name or address with an optional ':port' (an IPv6 address in brackets); "
            "give the name clients put in the server's URL, e.g. mcp.example.lan or 10.0.0.5:8000"
        )
    return host, int(port) if port else None


def describe_validation(exc: ValidationError) -> str:
    """pydantic's errors as 'key.path: problem' lines, without its URLs."""
    parts = []
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"]) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{key}: {message}")
    return "; ".join(parts)
