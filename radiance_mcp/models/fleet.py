"""list_fleet's models: what the fleet config names."""

from typing import Literal

from pydantic import Field

from radiance_mcp.models.base import Input, Output


class ListFleetInput(Input):
    pass


class FleetService(Output):
    name: str = Field(description="Pass it as `service` to every other tool.")
    host: str | None = Field(description="The host it runs on (null: this machine).")
    ledger: Literal["log", "container"] | None = Field(
        description="Where its boot ledger is read: a log file, or a container's podman logs (null: none configured)."
    )
    log: str | None
    container: str | None
    endpoint: str | None = Field(description="The URL the probes talk to (null: the probes cannot reach it).")
    model: str = Field(description="Whose pool-contract constants apply.")
    serve_script: str | None
    env_file: str | None


class FleetHost(Output):
    name: str
    address: str = Field(description="Hostname, IP or ssh alias the server connects to.")
    user: str | None
    port: int | None
    log_roots: list[str] = Field(description="Directories on the host whose files may be read by path.")


class ExampleLedger(Output):
    name: str
    log: str = Field(description="Pass it as `log` to any ledger tool.")


class ListFleetOutput(Output):
    services: list[FleetService]
    hosts: list[FleetHost]
    local_log_roots: list[str] = Field(description="Directories on this machine whose files may be read by path.")
    examples: list[ExampleLedger] = Field(description="Example ledgers shipped with the server, always readable.")
    notes: list[str]
