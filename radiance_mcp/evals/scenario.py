"""A scenario: a question about a simulated fleet, the facts a right answer holds, the rules a right run keeps.

One TOML file each under evals/scenarios/ (format in evals/README.md)::

    name = "resize-to-the-ceiling"
    procedure = "radiance-kv-cache-resize"        # a skill of skills/
    question = "How far can frank-archon's KV / VRAM pair grow?"
    rules = ["ledger_first", "engine_ceiling"]

    [[facts]]                                      # a figure, within a tolerance
    name = "ceiling_mib"
    value = 30969
    tolerance = 1
    [[facts]]                                      # a verdict: any of the phrases
    name = "verdict"
    any_of = ["fails its contract", "below its contract"]

    [[traps]]                                      # a figure only a wrong method gives
    rule = "engine_ceiling"
    value = 31178
    why = "the pair plus settled free, without the engine floor"

    [[fleet.services]]                             # the simulator builds the fleet from these
    like = "frank-archon"                          # a service of the demo fleet (sim.DEFAULT_SERVICES)
    shape = { vram_kv_mib = 3000 }                 # sim.Shape fields changed
    boots = [{ vram_kv_mib = 4096 }]               # later boots appended to its log, oldest first

    [[fleet.logs]]                                 # another engine's boot log, served as a service of the fleet
    name = "a40"
    engine = "vllm"                                # vllm, sglang or llama.cpp
    source = "https://github.com/..."              # the public thread the log was posted in
    text = "..."                                   # the log as the engine printed it (a TOML multi-line string)

    [agent]                                        # what the scripted agents do (a real agent reads the question)
    task = "ceiling"
    service = "frank-archon"

A scenario is in the ``dev`` split (the default) or ``split = "held-out"``: the held-out ones
are scenarios the scripted agents were not written against (``radiance-mcp eval --split
held-out``); nothing in agents.py names a scenario.

Pure: parsing and validation only (the fleet is started by radiance_mcp.evals.fleet).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from radiance_mcp.core.constants import KVDtype
from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.rules import BY_NAME, NAMES
from radiance_mcp.models.answer import Unit, Verdict

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "evals" / "scenarios"
"""The shipped scenarios (a checkout's evals/scenarios/)."""
PROCEDURES = ("radiance-kv-cache-resize", "radiance-step-shape-ledger-audit")
"""The skills of skills/ a scenario exercises."""
MAX_SCENARIO_BYTES = 256 * 1024

Task = Literal["ceiling", "free_vram", "pool", "audit", "serve_script", "rate", "arms", "count", "boundary",
               "verify", "engine"]
Split = Literal["dev", "held-out"]
SPLITS: tuple[Split, ...] = ("dev", "held-out")
"""``dev``: the scenarios the scripted agents were written against; ``held-out``: ones they were not."""
LogEngine = Literal["vllm", "sglang", "llama.cpp"]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Fact(_Strict):
    """A figure within a tolerance (value), or a verdict (any_of: one of the phrases, case-insensitive)."""

    name: str
    value: float | None = None
    tolerance: float = Field(0, ge=0)
    unit: Unit | None = None
    """The figure's unit; omitted: read off the name (_mib, _gib, _pct, _per_s), else a count."""
    any_of: tuple[str, ...] = ()
    verdict: Verdict | None = None
    """The submitted answer's verdict (models.answer.Verdict) that states it; omitted: read from its text."""
    services: tuple[str, ...] = ()
    """Whose figure it is; omitted: the service the question asks about (the agent plan's)."""
    why: str = ""

    def model_post_init(self, _: Any) -> None:
        if (self.value is None) == (not self.any_of):
            raise ValueError(f"fact {self.name!r}: give either value (a figure) or any_of (verdict phrases)")


class Trap(_Strict):
    """A figure only a wrong method gives: stating it breaks the rule."""

    rule: str
    value: float
    tolerance: float = Field(0, ge=0)
    unit: Unit = "MiB"
    why: str = ""


class FleetService(_Strict):
    like: str
    """A service of the demo fleet (radiance_mcp.sim.DEFAULT_SERVICES) to start from."""
    name: str | None = None
    shape: dict[str, Any] = Field(default_factory=dict)
    """sim.Shape fields changed for its first boot."""
    boots: tuple[dict[str, Any], ...] = ()
    """Later boots, oldest first, each Shape fields changed from the boot before; the last is the newest."""
    bare: bool = False
    """True: the fleet config names its endpoint alone (no ledger for the tools to read)."""


class EngineLog(_Strict):
    """Another engine's boot log (vLLM, SGLang, llama.cpp): the fleet serves it as a service's log, no endpoint."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
    engine: LogEngine
    text: str = Field(min_length=1, max_length=64 * 1024)
    source: str = Field(min_length=1)
    """Where the log was posted (tests/fixtures/ledgers/README.md names each thread); test data names its source."""


class Fleet(_Strict):
    services: tuple[FleetService, ...] = ()
    logs: tuple[EngineLog, ...] = ()

    def model_post_init(self, _: Any) -> None:
        if not self.services and not self.logs:
            raise ValueError("a fleet needs at least one service (fleet.services) or engine log (fleet.logs)")


class AgentPlan(_Strict):
    """What the scripted agents do on this scenario (a real agent reads only the question)."""

    task: Task
    service: str | None = None
    proven_service: str | None = None
    candidate_service: str | None = None
    reserve_mib: float | None = None
    reserve_label: str | None = None
    reserve_line: bool = False
    """True: the reserve the question asks for is one the ledger backs: the budget table's reserve candidate,
    cited by its line (reserve_mib is then not given)."""
    plan_boot: int | None = None
    """task verify: the boot the plan was made from (the deploy's boot is the newest)."""
    text: str | None = None
    arms: tuple[tuple[float, float], ...] = ()
    claim: Literal["plateau", "threshold"] | None = None
    quoted_rate: float | None = None
    """A rate the question quotes (the faulty agents repeat it)."""
    pool_mib: int | None = None
    seqs: int | None = None
    max_model_len: int | None = None
    kv_cache_dtype: KVDtype | None = None
    """The shape the question states, if it states one."""


class Scenario(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    procedure: Literal["radiance-kv-cache-resize", "radiance-step-shape-ledger-audit"]
    question: str = Field(min_length=1)
    facts: tuple[Fact, ...] = Field(min_length=1)
    traps: tuple[Trap, ...] = ()
    rules: tuple[str, ...] = Field(min_length=1)
    fleet: Fleet
    agent: AgentPlan
    split: Split = "dev"

    @field_validator("rules")
    @classmethod
    def _known_rules(cls, rules: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [r for r in rules if r not in NAMES]
        if unknown:
            raise ValueError(f"unknown rule(s) {unknown}; the rules: {', '.join(NAMES)}")
        return rules

    @property
    def asked_services(self) -> tuple[str, ...]:
        """The services the question asks about (the agent plan names them); none: the fleet."""
        plan = self.agent
        return tuple(s for s in (plan.service, plan.proven_service, plan.candidate_service) if s)

    @property
    def service_names(self) -> tuple[str, ...]:
        """The names of the fleet's services."""
        return (*(s.name or s.like for s in self.fleet.services), *(log.name for log in self.fleet.logs))

    def model_post_init(self, _: Any) -> None:
        unknown = [t.rule for t in self.traps if t.rule not in BY_NAME]
        if unknown:
            raise ValueError(f"trap rule(s) {unknown} unknown; the rules: {', '.join(BY_NAME)}")


def parse_scenario(text: str, source: str = "scenario") -> Scenario:
    """A scenario's TOML text -> Scenario, or EvalError naming the source, the key and the remedy."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EvalError(f"{source}: not TOML: {exc}") from None
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the file'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise EvalError(f"{source}: {problems} (the scenario format is in evals/README.md)") from None


def load_scenario(path: str | Path) -> Scenario:
    source = Path(path)
    try:
        raw = source.read_bytes()
    except OSError as exc:
        raise EvalError(f"scenario {source}: cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_SCENARIO_BYTES:
        raise EvalError(f"scenario {source}: {len(raw):,} bytes, more than {MAX_SCENARIO_BYTES:,}; a scenario is short")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise EvalError(f"scenario {source}: not UTF-8 text") from None
    scenario = parse_scenario(text, f"scenario {source}")
    if scenario.name != source.stem:
        raise EvalError(f"scenario {source}: its name {scenario.name!r} differs from the file's; name the file "
                        f"{scenario.name}.toml")
    return scenario


def scenario_files(directory: str | Path | None = None) -> list[Path]:
    """The scenario set's files: every *.toml of the directory (default: the shipped evals/scenarios/), by name."""
    return sorted((Path(directory) if directory is not None else SCENARIOS_DIR).glob("*.toml"))


def load_scenarios(directory: str | Path | None = None, split: Split | None = None) -> list[Scenario]:
    """Every scenario of the directory (scenario_files), by name; those of one split when given."""
    paths = scenario_files(directory)
    if not paths:
        raise EvalError(f"{directory if directory is not None else SCENARIOS_DIR}: holds no *.toml scenario")
    scenarios = [load_scenario(p) for p in paths]
    if split is not None:
        if split not in SPLITS:
            raise EvalError(f"split {split!r}: the splits are {', '.join(SPLITS)}")
        scenarios = [s for s in scenarios if s.split == split]
    return scenarios
