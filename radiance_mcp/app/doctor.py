"""`radiance-mcp doctor`: a fleet file checked before a tool call fails on it (the reads; core.doctor the rows).

For a loaded fleet config it checks, all at once, each check within a bound taken from the limits of the
read it makes:

- each log root of [server] log_roots: a directory on this machine;
- each service's env_file and serve_script: readable, here or on its host (sources.scripts reads them, as
  the audit tools do);
- each host: an SSH login with its host key verified against known_hosts (sources.remote.connect, which
  never skips the check); an unknown or changed key fails with the steps to add it out of band;
- each service's ledger, read as every tool reads it (sources.engine_logs.read_ledger): its engine and its
  newest boot's state (a local log that is not there fails here);
- each service's endpoint: GET /v1/models, then /health if that is not answered (no prompt, so no prefill),
  and the dialect it speaks against the one its config or ledger names.

What a check needs and did not get is skipped, naming why (the files and ledger of a service on a host whose
check failed). A table that fits the terminal's columns (tables.width()), or JSON; exit 0 when every check
holds, 3 when one fails (the CLI's 'a check that ran and failed'); a config that cannot be loaded is the
CLI's error (1).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from radiance_mcp.app.tables import width, wrap
from radiance_mcp.core.doctor import (
    HEALTH_ROUTE,
    MODELS_ROUTE,
    DoctorRow,
    Reply,
    RootKind,
    counts,
    endpoint_check,
    failed,
    file_check,
    holds,
    host_check,
    ledger_check,
    root_check,
    skipped,
)
from radiance_mcp.core.errors import ConfigError, RadianceMCPError
from radiance_mcp.core.rules.probe_shape import NO_LEDGER, api_of
from radiance_mcp.models.ledger_ref import LedgerRef
from radiance_mcp.probes.client import CONNECT_TIMEOUT_S, ProbeClient
from radiance_mcp.sources.config import CONFIG_ENV, load
from radiance_mcp.sources.engine_logs import read_ledger
from radiance_mcp.sources.offload import READ_TIMEOUT_S, to_thread
from radiance_mcp.sources.remote.targets import Limits
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.sources.scripts import ScriptRef, script_source

if TYPE_CHECKING:
    from radiance_mcp.core.boot import Boot

LIMITS = Limits()
HOST_BOUND_S = LIMITS.connect_timeout_s * 2
"""A host's login: connect()'s own bound (TCP, key exchange and login, a dropped handshake tried again)."""
READ_BOUND_S = HOST_BOUND_S + max(LIMITS.command_timeout_s, READ_TIMEOUT_S)
"""A ledger or file read: a login and one command on a host, or one local read (offload's limit)."""
ENDPOINT_BOUND_S = 2 * CONNECT_TIMEOUT_S
"""An endpoint's two GETs at most, each within the probes' connect timeout."""
CONCURRENT_ENDPOINTS = 64
"""Endpoints asked at once: one HTTP client each, so a fleet of 1,000 services holds 64 sockets, not 1,000."""
FILE_KEYS = ("env_file", "serve_script")
SUBJECT_COLUMNS = 24
"""The subject column at most (a service's name); a longer one wraps."""


def run_doctor(config: str | None, *, as_json: bool) -> int:
    """DoctorRow the fleet file and print the rows (a table, or JSON): 0 when every check holds, else 3."""
    fleet = load(config)
    if fleet.path is None:
        raise ConfigError(f"no fleet file to check: pass --config FILE or set {CONFIG_ENV} (or --demo, to check "
                          "the simulated fleet)")
    runtime = Runtime(fleet, trust_local_paths=True)

    async def run() -> list[DoctorRow]:
        try:
            return await examine(runtime)
        finally:
            await runtime.close()

    checks = asyncio.run(run())
    print(as_json_text(checks) if as_json else table(checks))
    return 0 if holds(checks) else 3


async def examine(runtime: Runtime) -> list[DoctorRow]:
    """Every check of the fleet, concurrently: the log roots, the hosts, then each service's files, ledger and
    endpoint (a service's after its host's check, its endpoint after its ledger, whose engine it is held to)."""
    fleet = runtime.fleet
    hosts = {name: asyncio.ensure_future(_bounded(_host(runtime, name), _alone, "host", name, HOST_BOUND_S))
             for name in sorted(fleet.hosts)}
    endpoints = asyncio.Semaphore(CONCURRENT_ENDPOINTS)
    roots = [root_check(f"server.log_roots[{i}]", root, await to_thread(_root_kind, root))
             for i, root in enumerate(fleet.server.log_roots)]
    services = await asyncio.gather(*(_service(runtime, name, hosts, endpoints) for name in sorted(fleet.services)))
    return [*roots, *[await task for task in hosts.values()], *(check for found in services for check in found)]


async def _service(runtime: Runtime, name: str, hosts: Mapping[str, Awaitable[DoctorRow]],
                   endpoints: asyncio.Semaphore) -> list[DoctorRow]:
    entry = runtime.fleet.services[name]
    keys = [key for key in FILE_KEYS if getattr(entry, key) is not None]
    if entry.host is not None and (await hosts[entry.host]).status != "ok":
        why = f"host {entry.host} failed its check (its row above): nothing is read there"
        found = [skipped(key, name, why) for key in keys]
        ledger, boot = skipped("ledger", name, why), None
    else:
        files = (_bounded(_file(runtime, name, key), _alone, key, name) for key in keys)
        found, (ledger, boot) = await asyncio.gather(asyncio.gather(*files),
                                                     _bounded(_ledger(runtime, name), _no_boot, "ledger", name))
    async with endpoints:
        endpoint = await _bounded(_endpoint(runtime, name, boot), _alone, "endpoint", name, ENDPOINT_BOUND_S)
    if endpoint.status == "fail" and boot is not None and boot.refused:
        endpoint = replace(endpoint, remedy="its newest boot refused to start (its ledger row): nothing serves "
                           "until a boot settles")
    return [*found, ledger, endpoint]


T = TypeVar("T")


def _alone(check: DoctorRow) -> DoctorRow:
    return check


def _no_boot(check: DoctorRow) -> tuple[DoctorRow, Boot | None]:
    return check, None


async def _bounded(check: Awaitable[T], failure: Callable[[DoctorRow], T], what: str, subject: str,
                   bound_s: float = READ_BOUND_S) -> T:
    """The check's result, else its failure: the error's message, or its bound passed."""
    try:
        async with asyncio.timeout(bound_s):
            return await check
    except RadianceMCPError as exc:
        return failure(failed(what, subject, exc))
    except TimeoutError:
        return failure(DoctorRow(what, subject, "fail", f"no result within {bound_s:g} s",
                             "check that it is up and reachable, then run the doctor again"))


def _root_kind(root: str) -> RootKind:
    path = Path(root).expanduser()
    return "directory" if path.is_dir() else "other" if path.exists() else "missing"


async def _host(runtime: Runtime, name: str) -> DoctorRow:
    """One login, its host key verified (connect's rule: never skipped), then closed."""
    from radiance_mcp.sources.ledgers import ssh_target
    from radiance_mcp.sources.remote import connect

    target = ssh_target(runtime.fleet, name)
    conn = await connect(target, runtime.pool().limits, what="its login and host key", verb="check")
    conn.close()
    await conn.wait_closed()
    return host_check(name, target.where())


async def _file(runtime: Runtime, name: str, key: str) -> DoctorRow:
    """A service's env_file or serve_script, read where it is as the audit tools read it (capped, checked)."""
    entry = runtime.fleet.services[name]
    path = getattr(entry, key)
    source = script_source(runtime, name, None)
    # Messages name a host's file by its config key, a local one by its key alone (as sources.scripts does).
    [read] = await source.read([ScriptRef(f"services.{name}.{key}" if entry.host else key, path, configured=True)])
    assert read is not None  # not optional
    return file_check(key, name, source.where(path), read.text.count("\n"))


async def _ledger(runtime: Runtime, name: str) -> tuple[DoctorRow, Boot | None]:
    """The service's newest boot, read as every tool reads it, in its engine's dialect."""
    entry = runtime.fleet.services[name]
    if entry.log is None and entry.container is None:
        return skipped("ledger", name, NO_LEDGER), None
    boot = await read_ledger(runtime, LedgerRef(service=name))
    return ledger_check(name, boot), boot


async def _endpoint(runtime: Runtime, name: str, boot: Boot | None) -> DoctorRow:
    """GET /v1/models, and /health when that is not answered 200: never a prompt."""
    entry = runtime.fleet.services[name]
    if entry.endpoint is None:
        return skipped("endpoint", name, "no endpoint in the fleet config: the probes cannot reach it")
    engine = entry.engine or (boot.engine if boot is not None else None)
    expected_from = "the config's engine" if entry.engine else "its ledger's engine"
    async with ProbeClient.for_service(runtime.fleet, name, CONNECT_TIMEOUT_S) as client:
        replies = []
        for route in (MODELS_ROUTE, HEALTH_ROUTE):
            answer = await client.get_json(route)
            replies.append(Reply(route, answer.status, answer.data, answer.text, answer.latency_s))
            if answer.status == 200:
                break
    return endpoint_check(name, client.endpoint, replies, api_of(engine, boot), expected_from)


# ---------------------------------------------------------------------------------------
# Output


def as_json_text(checks: Sequence[DoctorRow]) -> str:
    """{"ok": every check holds, "counts": {"ok", "fail", "skip"}, "checks": [one object per row]}."""
    return json.dumps({"ok": holds(checks), "counts": counts(checks), "checks": [asdict(c) for c in checks]},
                      indent=2)


def table(checks: Sequence[DoctorRow], columns: int | None = None) -> str:
    """The rows as a table of at most columns (tables.width()) characters a line: status, check, subject and
    finding, the subject and finding wrapped in their columns, a remedy below its finding; then the counts."""
    heads = ("status", "check", "subject", "finding")
    widths = [max([len(heads[0]), *(len(c.status) for c in checks)]),
              max([len(heads[1]), *(len(c.what) for c in checks)]),
              min(SUBJECT_COLUMNS, max([len(heads[2]), *(len(c.subject) for c in checks)]))]
    room = (width() if columns is None else columns) - sum(widths) - 2 * len(widths)  # the finding's column

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(cells, [*widths, 0], strict=True)).rstrip()

    lines = [line(heads)]
    for check in checks:
        subject = wrap(check.subject, widths[2])
        finding = wrap(check.finding, room)
        if check.remedy:
            finding += wrap(f"remedy: {check.remedy}", room, indent="  ")
        for i in range(max(len(subject), len(finding))):
            first = i == 0
            lines.append(line([check.status if first else "", check.what if first else "",
                               subject[i] if i < len(subject) else "", finding[i] if i < len(finding) else ""]))
    tally = counts(checks)
    lines.append(f"\n{len(checks)} checks: {tally['ok']} ok, {tally['fail']} failed, {tally['skip']} skipped")
    return "\n".join(lines)
