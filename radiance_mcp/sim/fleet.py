"""A simulated fleet: radiance services on simulated hosts, their ledgers, endpoints and config.

Each simulated host is a directory that mirrors the host's filesystem (``<root>/hosts/<host>/``
holds ``home/dank/logs/frank_archon.log`` for the path ``/home/dank/logs/frank_archon.log`` on
that host). Each service boots a ``SimEndpoint`` that appends its boot ledger to its log file
and serves on 127.0.0.1; a refused boot writes its ledger and serves nothing. The generated
fleet TOML (``config_path``) names every service with its local log file, endpoint, env file
and serve script, for ``radiance-mcp serve --config``. The campaign rig's two modes share one
serve script (``scripts/qwen38-bf16.sh``, runnable with ``--dry-run``) and one env file; the
wide mode carries its own step.

    async with SimFleet.start(tmp_path) as fleet:
        fleet.config_path                 # the TOML for the MCP server
        fleet.services["frank-archon"]    # SimService: shape, log_path, endpoint
        fleet.endpoints["frank-archon"].url
        await fleet.redeploy("frank-archon", new_shape)   # a new boot in the same log

The SSH seam (issue 3): every service keeps the path of its log on its host (``remote_log``)
and every host its root directory, so an SSH fixture can serve ``host.root`` as that host's
filesystem; ``config_text(ssh={host: settings})`` then writes that host under ``[hosts]`` and
its services with ``host = ...`` and their remote paths instead of local files.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path

from radiance_mcp.core.errors import InputError
from radiance_mcp.sim.endpoint import SimEndpoint
from radiance_mcp.sim.engine import Shape
from radiance_mcp.sim.serving import Behaviour

CONFIG_NAME = "fleet.toml"
SCRIPTS_DIR = Path(__file__).parent / "scripts"
"""Serve scripts the simulated hosts carry, by file name."""
CAMPAIGN_WEIGHTS_MIB = 16_462
"""The campaign rig's stated weights: the seed does not give that rig's pair; at this figure its
65,536-token step leaves the KV cache the seed's 271.25 MiB (the simulator's calibration)."""


@dataclass(frozen=True)
class ServiceSpec:
    """One service of a fleet to start."""

    name: str
    host: str
    shape: Shape
    log: str
    """Absolute path of the ledger file on the host."""
    env_file: str | None = None
    """Absolute path of the env file on the host that owns the shape (written from the shape)."""
    note: str = ""
    serve_script: str | None = None
    """Absolute path on the host of its serve script (a copy of the one of that name in SCRIPTS_DIR)."""
    owns_env: bool = True
    """False for a mode that shares another's env file but carries a shape of its own: its env is not written."""
    cards: tuple[str, ...] = ()
    """The physical cards (host:index) its engine cards run on, written to the config's cards."""
    bare: bool = False
    """True: the config names its endpoint alone, so the tools read no ledger of it (its log is still written)."""


def _campaign(mnbt: int) -> Shape:
    return Shape(
        name="qwen38-bf16",
        vram_weights_mib=CAMPAIGN_WEIGHTS_MIB,
        seqs=8,
        max_model_len=32_768,
        max_num_batched_tokens=mnbt,
        kv_cache_dtype="bf16",
        spec=2,
        weights_total_mib=CAMPAIGN_WEIGHTS_MIB + Shape().host_pool_mib,
    )


DEFAULT_SERVICES: tuple[ServiceSpec, ...] = (
    ServiceSpec("frank-archon", "dankserver", Shape(), "/home/dank/logs/frank_archon.log",
                "/home/dank/scripts/frank-archon.env", "the reference boot of the resize procedure: 29,120 MiB pair"),
    ServiceSpec("qwen38-proven", "dankserver", _campaign(1_024), "/home/dank/logs/qwen38_bf16_proven.log",
                "/home/dank/scripts/qwen38-bf16.env", "campaign rig, mode proven: the step its env file owns (1,024)",
                serve_script="/home/dank/scripts/qwen38-bf16.sh"),
    ServiceSpec("qwen38-wide", "dankserver", _campaign(65_536), "/home/dank/logs/qwen38_bf16_wide.log",
                "/home/dank/scripts/qwen38-bf16.env",
                "campaign rig, mode wide: carries its own 65,536 step; refused, out of memory",
                serve_script="/home/dank/scripts/qwen38-bf16.sh", owns_env=False),
    ServiceSpec("twin", "gpubox", replace(Shape(name="twin"), tp=2, card_extra_mib=(Decimal(0), Decimal(64))),
                "/srv/radiance/logs/twin.log", "/srv/radiance/twin.env", "--tp 2; card 1 carries 64 MiB more",
                cards=("gpubox:0", "gpubox:1")),
    ServiceSpec("lowpool", "gpubox", replace(Shape(name="lowpool"), vram_kv_mib=3_000),
                "/srv/radiance/logs/lowpool.log", "/srv/radiance/lowpool.env",
                "KV pool below its contract: boots, refuses long requests; shares twin's card 1",
                cards=("gpubox:1",)),
)
"""The demo fleet: two hosts, five services."""


@dataclass(frozen=True)
class SimHost:
    name: str
    root: Path
    """This host's filesystem, mirrored: the host's /a/b is root/a/b."""

    def local(self, remote_path: str) -> Path:
        return self.root / remote_path.lstrip("/")


@dataclass
class SimService:
    spec: ServiceSpec
    host: SimHost
    endpoint: SimEndpoint

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def shape(self) -> Shape:
        return self.endpoint.shape

    @property
    def remote_log(self) -> str:
        return self.spec.log

    @property
    def log_path(self) -> Path:
        return self.host.local(self.spec.log)

    @property
    def env_path(self) -> Path | None:
        return self.host.local(self.spec.env_file) if self.spec.env_file else None

    @property
    def script_path(self) -> Path | None:
        return self.host.local(self.spec.serve_script) if self.spec.serve_script else None

    @property
    def url(self) -> str:
        return self.endpoint.url


def env_text(shape: Shape) -> str:
    """The env file that owns a shape (PHRASEBOOK section 6: the per-service variables)."""
    prefix = re.sub(r"[^A-Z0-9]+", "_", shape.name.upper()).strip("_")
    values = {
        "MAX_SEQS": shape.seqs,
        "MAX_MODEL_LEN": shape.max_model_len,
        "MAX_BATCHED_TOKENS": shape.max_num_batched_tokens,
        "HOST_POOL_MIB": shape.host_pool_mib,
        "GPU_HEADROOM_MIB": shape.gpu_headroom_mib,
        "VRAM_WEIGHTS_MIB": shape.vram_weights_mib,
        "VRAM_KV_MIB": shape.vram_kv_mib,
        "KV_CACHE_DTYPE": shape.kv_cache_dtype,
        "TP": shape.tp,
    }
    lines = [f"# {shape.name}: written by the simulated fleet"]
    lines += [f"{prefix}_{key}={value}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise InputError(f"cannot write {value!r} to the fleet TOML")


@dataclass
class SimFleet:
    root: Path
    hosts: dict[str, SimHost]
    services: dict[str, SimService]
    config_path: Path
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def endpoints(self) -> dict[str, SimEndpoint]:
        return {name: service.endpoint for name, service in self.services.items()}

    @classmethod
    @contextlib.asynccontextmanager
    async def start(
        cls,
        root: Path,
        services: Sequence[ServiceSpec] = DEFAULT_SERVICES,
        *,
        time_scale: float = 0.01,
        behaviour: Behaviour | None = None,
    ) -> AsyncIterator[SimFleet]:
        """Start every service under root (each boots and, unless refused, serves); stop them on exit.

        Each endpoint gets its own copy of ``behaviour`` (default: radiance's own).
        """
        root = Path(root)
        hosts: dict[str, SimHost] = {}
        fleet_services: dict[str, SimService] = {}
        for spec in services:
            if spec.name in fleet_services:
                raise InputError(f"two services are named {spec.name!r}")
            host = hosts.setdefault(spec.host, SimHost(spec.host, root / "hosts" / spec.host))
            endpoint = SimEndpoint(
                spec.shape,
                behaviour=replace(behaviour) if behaviour else Behaviour(),
                time_scale=time_scale,
                ledger_path=host.local(spec.log),
            )
            fleet_services[spec.name] = SimService(spec, host, endpoint)
        fleet = cls(root, hosts, fleet_services, root / CONFIG_NAME, {s.name: s.note for s in services})
        try:
            for service in fleet_services.values():
                await service.endpoint.start()
                fleet._write_env(service)
                fleet._write_script(service)
            fleet.write_config()
            yield fleet
        finally:
            await asyncio.gather(*(service.endpoint.stop() for service in fleet_services.values()))

    def _write_script(self, service: SimService) -> None:
        if service.script_path is not None:
            service.script_path.parent.mkdir(parents=True, exist_ok=True)
            source = SCRIPTS_DIR / service.script_path.name
            service.script_path.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
            service.script_path.chmod(0o755)

    def _write_env(self, service: SimService) -> None:
        if service.env_path is not None and service.spec.owns_env:
            service.env_path.parent.mkdir(parents=True, exist_ok=True)
            service.env_path.write_text(env_text(service.shape), encoding="utf-8")

    async def redeploy(self, name: str, shape: Shape) -> SimService:
        """Deploy a new shape for a service: its env file is rewritten and it boots again."""
        service = self.services[name]
        await service.endpoint.restart(shape)
        self._write_env(service)
        return service

    def config_text(self, ssh: Mapping[str, Mapping[str, object]] | None = None) -> str:
        """The fleet TOML. Hosts named in ``ssh`` (settings of config.Host) are written as SSH hosts."""
        ssh = ssh or {}
        lines = [
            "# The simulated radiance fleet (radiance_mcp.sim): ledgers under the hosts/ directory.",
            "[server]",
            f"log_roots = {_toml([str(self.root / 'hosts')])}",
        ]
        for name, settings in ssh.items():
            if name not in self.hosts:
                raise InputError(f"ssh names host {name!r}, which the fleet does not have ({', '.join(self.hosts)})")
            lines += ["", f"[hosts.{name}]"] + [f"{key} = {_toml(value)}" for key, value in settings.items()]
        for service in self.services.values():
            remote = service.host.name in ssh
            lines += ["", f"[services.{service.name}]"]
            if service.spec.bare:
                lines.append(f"endpoint = {_toml(service.url)}")
                continue
            if remote:
                lines.append(f"host = {_toml(service.host.name)}")
            lines.append(f"log = {_toml(service.remote_log if remote else str(service.log_path))}")
            lines.append(f"endpoint = {_toml(service.url)}")
            if service.spec.env_file:
                env = service.spec.env_file if remote else str(service.env_path)
                lines.append(f"env_file = {_toml(env)}")
            if service.spec.serve_script:
                script = service.spec.serve_script if remote else str(service.script_path)
                lines.append(f"serve_script = {_toml(script)}")
            if service.spec.cards:
                lines.append(f"cards = {_toml(service.spec.cards)}")
        return "\n".join(lines) + "\n"

    def write_config(self, ssh: Mapping[str, Mapping[str, object]] | None = None) -> Path:
        self.config_path.write_text(self.config_text(ssh), encoding="utf-8")
        return self.config_path
