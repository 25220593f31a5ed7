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
import hashlib
import json
import re
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import fields, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from radiance_mcp.core.errors import EvalError, RadianceMCPError
from radiance_mcp.evals.scenario import Scenario
from radiance_mcp.sim import DEFAULT_SERVICES, ServiceSpec, Shape, SimFleet
from radiance_mcp.sources.config import Fleet

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


# ---------------------------------------------------------------------------------------
# What a fleet is, with what each run of it draws afresh normalised

FINGERPRINT_FILE_BYTES = 8 * 1024 * 1024
"""The most of one ledger, env file or serve script a fingerprint reads: a simulated one is a few KiB."""
_PORT = re.compile(r"\b(127\.0\.0\.1|localhost|\[::1\]):\d{1,5}\b")
_PATH = re.compile(r"(?<![\w.~])/(?:[\w.+@%=,-]+/)+(?=[\w.+@%=,-])")
"""An absolute path's directories: a run's temporary directory, the checkout a package was installed from."""


def normal_text(text: str) -> str:
    """Text as any run of the same fleet writes it: each absolute path cut to its last part (the temporary
    directory a fleet runs in, the checkout) and each loopback port written as PORT."""
    return _PATH.sub(".../", _PORT.sub(lambda m: f"{m.group(1)}:PORT", text))


def normal(value: Any) -> Any:
    """A JSON value with every string normal_text."""
    if isinstance(value, str):
        return normal_text(value)
    if isinstance(value, list | tuple):
        return [normal(v) for v in value]
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items()}
    return value


def _file(path: str | None, remote: bool) -> str | None:
    """A local file's text, normalised; a remote one's (or one that cannot be read) its path, normalised."""
    if path is None:
        return None
    if not remote:
        with contextlib.suppress(OSError):
            with Path(path).open("rb") as file:
                return normal_text(file.read(FINGERPRINT_FILE_BYTES).decode("utf-8", "replace"))
    return normal_text(path)


def fingerprint(config: Fleet) -> str:
    """The fleet's fingerprint: a digest of each service's settings, and of its ledger, env file and serve script
    as they are now, with temporary paths and ports normalised (normal_text). The server writes it on its record's
    session line; the scorer takes it of the scenario's fleet, so a record of another fleet is named."""
    services = {}
    for name in sorted(config.services):
        service = config.services[name]
        remote = service.host is not None
        services[name] = {**normal(service.model_dump(mode="json", exclude={"log", "env_file", "serve_script"})),
                          **{key: _file(getattr(service, key), remote) for key in ("log", "env_file", "serve_script")}}
    text = json.dumps({"models": config.model_dump(mode="json")["models"], "services": services}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
