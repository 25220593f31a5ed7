"""The edge: a scenario's fleet, started by the simulator, as a config file for ``radiance-mcp serve --config``.

    async with scenario_fleet(scenario) as config_path:
        ...   # radiance-mcp serve --config config_path, or build_server(Runtime(load(config_path)))

Ledgers, env files and serve scripts are written to a temporary directory, removed on exit;
the endpoints serve on 127.0.0.1 until then. ``running_fleet`` yields the SimFleet itself. A
scenario's ``fleet.logs`` (another engine's boot log) are written under the fleet's log root
(``hosts/enginebox/logs/``) and named in the config with their engine, a log and no endpoint.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import fields, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from radiance_mcp.core.errors import EvalError, RadianceMCPError
from radiance_mcp.evals.scenario import Scenario
from radiance_mcp.sim import DEFAULT_SERVICES, ServiceSpec, Shape, SimFleet

SERVICE_NAMES = tuple(s.name for s in DEFAULT_SERVICES)
"""The demo fleet's services: the names an answer may give a figure to (the scorer's ``services``)."""
TIME_SCALE = 0.001
"""The simulated clock for evals: a 22 s full-window prefill takes 22 ms."""
_SHAPE_FIELDS = {f.name for f in fields(Shape)} - {"model", "name"}


def _changed(shape: Shape, changes: Mapping[str, Any], where: str) -> Shape:
    unknown = sorted(set(changes) - _SHAPE_FIELDS)
    if unknown:
        raise EvalError(f"{where}: unknown shape field(s) {unknown}; the fields: {', '.join(sorted(_SHAPE_FIELDS))}")
    values = dict(changes)
    if "card_total_mib" in values:
        values["card_total_mib"] = Decimal(str(values["card_total_mib"]))
    if "card_extra_mib" in values:
        values["card_extra_mib"] = tuple(Decimal(str(v)) for v in values["card_extra_mib"])
    try:
        return replace(shape, **values)
    except (RadianceMCPError, TypeError) as exc:
        raise EvalError(f"{where}: {exc}") from None


def service_specs(scenario: Scenario) -> tuple[list[ServiceSpec], list[tuple[str, Shape]]]:
    """The services to start (each at its first boot) and the later boots to deploy, in order."""
    known = {spec.name: spec for spec in DEFAULT_SERVICES}
    specs: list[ServiceSpec] = []
    later: list[tuple[str, Shape]] = []
    for index, entry in enumerate(scenario.fleet.services):
        where = f"scenario {scenario.name}: fleet.services[{index}]"
        base = known.get(entry.like)
        if base is None:
            raise EvalError(f"{where}: like={entry.like!r} is not a service of the demo fleet ({', '.join(known)})")
        name = entry.name or base.name
        shape = _changed(replace(base.shape, name=name) if entry.name else base.shape, entry.shape, where)
        specs.append(replace(base, name=name, shape=shape, bare=entry.bare))
        for boot in entry.boots:
            shape = _changed(shape, boot, f"{where}.boots")
            later.append((name, shape))
    return specs, later


@contextlib.asynccontextmanager
async def running_fleet(scenario: Scenario, root: Path | None = None) -> AsyncIterator[SimFleet]:
    """The scenario's simulated fleet, every later boot deployed; under root, or a temporary directory."""
    specs, later = service_specs(scenario)
    with contextlib.ExitStack() as stack:
        where = root or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="radiance-eval-")))
        async with SimFleet.start(where, specs, time_scale=TIME_SCALE) as fleet:
            for name, shape in later:
                await fleet.redeploy(name, shape)
            _write_logs(scenario, fleet)
            yield fleet


def _write_logs(scenario: Scenario, fleet: SimFleet) -> None:
    """Each engine log of the scenario as a file under the fleet's log root, a service of its config."""
    if not scenario.fleet.logs:
        return
    folder = fleet.root / "hosts" / "enginebox" / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for log in scenario.fleet.logs:
        path = folder / f"{log.name}.log"
        path.write_text(log.text if log.text.endswith("\n") else log.text + "\n", encoding="utf-8")
        entries.append(f"\n[services.{log.name}]\nlog = {json.dumps(str(path))}\nengine = {json.dumps(log.engine)}\n")
    with fleet.config_path.open("a", encoding="utf-8") as config:
        config.write("".join(entries))


@contextlib.asynccontextmanager
async def scenario_fleet(scenario: Scenario, root: Path | None = None) -> AsyncIterator[Path]:
    """The path of the fleet config of the scenario's running simulated fleet."""
    async with running_fleet(scenario, root) as fleet:
        yield fleet.config_path
