"""list_fleet: what the fleet config names, so an agent can find a service before its first call.

It reads nothing but the config the server already loaded (and the names of the example
ledgers the package ships): no SSH, no HTTP, no ledger.
"""

from __future__ import annotations

from radiance_mcp.core.constants import DEFAULT_MODEL
from radiance_mcp.models.fleet import ExampleLedger, FleetHost, FleetService, ListFleetInput, ListFleetOutput
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools.registry import ToolFamily

FAMILY = ToolFamily()


def fleet_listing(fleet: Fleet) -> ListFleetOutput:
    services = [
        FleetService(
            name=name,
            host=s.host,
            ledger="log" if s.log else "container" if s.container else None,
            log=s.log,
            container=s.container,
            endpoint=s.endpoint,
            model=s.model or DEFAULT_MODEL.name,
            serve_script=s.serve_script,
            env_file=s.env_file,
        )
        for name, s in sorted(fleet.services.items())
    ]
    hosts = [
        FleetHost(name=name, address=h.address or name, user=h.user, port=h.port, log_roots=list(h.log_roots))
        for name, h in sorted(fleet.hosts.items())
    ]
    examples = [ExampleLedger(name=p.stem, log=str(p)) for p in sorted(EXAMPLES_DIR.glob("*.log"))]
    notes = []
    if not services:
        notes.append("the fleet config names no services: the ledger tools can still read an example ledger "
                     "(log=...) or pasted text (log_text=...)")
    return ListFleetOutput(services=services, hosts=hosts, local_log_roots=list(fleet.server.log_roots),
                           examples=examples, notes=notes)


@FAMILY.tool("List the fleet's services and hosts")
async def list_fleet(runtime: Runtime, args: ListFleetInput) -> ListFleetOutput:
    """List the services, hosts and example ledgers of the config.

    When: first; other tools take a service by name.
    """
    return fleet_listing(runtime.fleet)
