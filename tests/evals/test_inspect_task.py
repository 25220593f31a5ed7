"""The Inspect AI task: a scripted agent played as Inspect's mock model scores as it does over the SDK's client.

Each run goes both ways on the same scenario and fleet: straight through the SDK's MCP client
(the server in memory, its --record middleware writing the record), and through Inspect
(`eval_async` on `radiance_task`: react(), Inspect's stdio MCP client, `radiance-mcp serve
--record` as a process). The verdicts (facts found, rules kept and broken, passed) must
match. The model is Inspect's mockllm, its outputs the scripted agent's calls (no network).
"""

from __future__ import annotations

import gc
import json
import math
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai", reason="the Inspect task needs the evals extra: pip install -e '.[evals]'")

from inspect_ai import eval_async  # noqa: E402
from inspect_ai.log import EvalLog  # noqa: E402
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser  # noqa: E402
from inspect_ai.tool import ToolCall, ToolCallError  # noqa: E402
from mcp import Client  # noqa: E402

from radiance_mcp.app.server import build_server  # noqa: E402
from radiance_mcp.core.errors import EvalError  # noqa: E402
from radiance_mcp.evals.agents import AGENTS  # noqa: E402
from radiance_mcp.evals.fleet import scenario_fleet  # noqa: E402
from radiance_mcp.evals.inspect_task import (  # noqa: E402
    STORE_RECORD,
    merge_record,
    radiance_task,
    scripted_model,
)
from radiance_mcp.evals.record import RECORD_VERSION, Event, Recorder, read_record  # noqa: E402
from radiance_mcp.evals.run import run_agent  # noqa: E402
from radiance_mcp.evals.scenario import Scenario, load_scenario, load_scenarios  # noqa: E402
from radiance_mcp.evals.score import Report, score  # noqa: E402
from radiance_mcp.sources.config import load  # noqa: E402
from radiance_mcp.sources.runtime import Runtime  # noqa: E402

Play = Callable[[Client], Awaitable[str]]
TASK_FILE = Path(__file__).resolve().parents[2] / "evals" / "inspect_tasks.py"

# Two warnings from inside Inspect (inspect-ai 0.3.285), not from this package: its retry set-up
# passes tenacity a deprecated argument on every generate, and an anyio memory stream of its run
# (none is opened here or in the bridge) is left to the garbage collector after eval_async returns
# in pytest-asyncio's loop; a script calling eval_async shows neither.
pytestmark = [
    pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function MemoryObjectReceiveStream:pytest.PytestUnraisableExceptionWarning"
    ),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function BaseEventLoop:pytest.PytestUnraisableExceptionWarning"
    ),
    pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"),
]

# A scenario in this test's own words: the demo fleet's frank-archon under another name, on one
# card: ceiling = settled free 2,058.24 - floor 209.19 + pair 29,120 = 30,969.05 MiB; without
# the floor, 2,058.24 + 29,120 = 31,178.24 MiB (the trap).
SCENARIO_TOML = """
name = "pair-headroom"
procedure = "radiance-kv-cache-resize"
question = "Team lyra-moe wants to know the largest weights+KV pair its one card can back. MiB, please."
rules = ["ledger_first", "engine_ceiling", "argument_names", "reserve_traced"]

facts = [ { name = "ceiling_mib", value = 30969, tolerance = 1.5 } ]
traps = [ { rule = "engine_ceiling", value = 31178, tolerance = 1.5, why = "free memory plus the pair" } ]

fleet.services = [ { like = "frank-archon", name = "lyra-moe" } ]
agent.task = "ceiling"
agent.service = "lyra-moe"
"""


def _json(result: Any) -> dict[str, Any]:
    """A tool result's output, read from its text content (the same JSON on both routes)."""
    return dict(json.loads(result.content[0].text))


async def careful(client: Client) -> str:
    """Reads the table, then the ceiling, and states the engine's figure."""
    await client.call_tool("read_budget_table", {"service": "lyra-moe"})
    ceiling = _json(await client.call_tool("compute_ceiling", {"service": "lyra-moe"}))
    return f"lyra-moe: pair ceiling {ceiling['ceiling_mib']:,.2f} MiB on its binding card ({ceiling['binding_card']})."


async def misspells_reserves(client: Client) -> str:
    """Sends `reserve` (singular), is refused, drops the reserve and answers anyway."""
    reserve = [{"mib": 512, "label": "my margin for fragmentation", "personal": True}]
    first = await client.call_tool("compute_ceiling", {"service": "lyra-moe", "reserve": reserve})
    assert first.is_error, "a misspelled argument must be refused on either route"
    ceiling = _json(await client.call_tool("compute_ceiling", {"service": "lyra-moe"}))
    return f"Ceiling: {ceiling['ceiling_mib']:.0f} MiB"


async def untraced_then_free_memory(client: Client) -> str:
    """Hands in a reserve with no line, is refused, then quotes free memory plus the pair."""
    table = _json(await client.call_tool("read_budget_table", {"service": "lyra-moe"}))
    refused = await client.call_tool(
        "compute_ceiling", {"service": "lyra-moe", "reserves": [{"mib": 1024, "label": "safety"}]}
    )
    assert refused.is_error
    card = table["cards"][0]
    outside = card["free_mib"]["value"] + table["cards"][0]["pair_mib"]
    return f"About {outside:,.0f} MiB is free for the pair."


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "pair-headroom.toml").write_text(SCENARIO_TOML, encoding="utf-8")
    return load_scenario(folder / "pair-headroom.toml")


@pytest.fixture(autouse=True)
def _inspect_quiet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "inspect-logs"))
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    yield
    # An Inspect run leaves an asyncio event loop (and its self-pipe) unclosed somewhere in this
    # process (cause not found: a script running the same evals leaves none); collected later,
    # its ResourceWarning failed an unrelated test. Collect it here, under this module's filters.
    gc.collect()


async def over_sdk_client(scenario: Scenario, play: Play, record: Path) -> Report:
    """The run straight through the SDK's client: the server in memory with its recorder."""
    async with scenario_fleet(scenario) as config:
        recorder = Recorder(record, "test")
        try:
            async with Client(build_server(Runtime(load(config)), middleware=[recorder])) as client:
                answer = await play(client)
        finally:
            recorder.close()
    return score(scenario, read_record(record), answer)


async def over_inspect(scenario_dir: Path, play: Play, **task_args: Any) -> EvalLog:
    task = radiance_task(scenario="pair-headroom", scenarios_dir=str(scenario_dir), **task_args)
    [log] = await eval_async(task, model=scripted_model(play), max_samples=1)
    assert log.status == "success", log.error
    return log


def verdicts(report: dict[str, Any]) -> dict[str, Any]:
    return {
        "passed": report["passed"],
        "facts": {f["name"]: f["found"] for f in report["facts"]},
        "rules": {r["name"]: r["kept"] for r in report["rules"]},
    }


@pytest.mark.parametrize(
    ("play", "passed", "broken"),
    [
        (careful, True, set()),
        (misspells_reserves, False, {"argument_names"}),
        (untraced_then_free_memory, False, {"reserve_traced", "engine_ceiling"}),
    ],
    ids=["careful", "misspells-reserves", "untraced-then-free-memory"],
)
async def test_inspect_scores_as_the_sdk_route(
    scenario: Scenario, tmp_path: Path, play: Play, passed: bool, broken: set[str]
) -> None:
    direct = over_sdk_client(scenario, play, tmp_path / "direct.jsonl")
    expected = (await direct).to_json()
    log = await over_inspect(tmp_path / "scenarios", play)

    [sample] = log.samples or []
    result = sample.scores["radiance_scorer"] if sample.scores else None
    assert result is not None
    assert verdicts(result.metadata or {}) == verdicts(expected)
    assert expected["passed"] is passed and set(expected["broken"]) == broken

    value = result.value
    assert isinstance(value, dict)
    assert value["passed"] == float(passed)
    for rule in expected["rules"]:
        assert value[f"rule:{rule['name']}"] == float(rule["kept"]), rule["name"]
    assert math.isnan(value["rule:cold_rate"])  # a rule the run is not judged on: NaN, left out of metrics
    assert value["fact:ceiling_mib"] == float(play is not untraced_then_free_memory)
    # The evidence a person reads in Inspect's viewer names each broken rule.
    for name in broken:
        assert name in (result.explanation or "")


@pytest.mark.parametrize(
    ("agent", "name"),
    [
        ("reference", "resize-to-the-ceiling"),
        ("reference", "free-vram-shared-cards"),  # plan_free_vram's result carries a picture beside its JSON
        ("misspelled-reserves", "untraceable-reserve"),
    ],
)
async def test_a_scripted_agent_scores_the_same_under_inspect(agent: str, name: str) -> None:
    [scenario] = [s for s in load_scenarios() if s.name == name]
    direct = (await run_agent(scenario, agent)).report.to_json()
    # The task as `inspect eval evals/inspect_tasks.py -T scenario=NAME` loads it.
    [log] = await eval_async(f"{TASK_FILE}@radiance", task_args={"scenario": name}, max_samples=1,
                             model=scripted_model(lambda client: AGENTS[agent](client, scenario).run()))
    assert log.status == "success", log.error
    [sample] = log.samples or []
    result = (sample.scores or {})["radiance_scorer"]
    assert verdicts(result.metadata or {}) == verdicts(direct)
    assert result.metadata is not None and result.metadata["answer"] == direct["answer"] == "submitted"
    assert result.metadata["broken"] == ([] if agent == "reference" else [
        AGENTS[agent].breaks])
    # Inspect's own summary of the run: the pass rate, and each listed rule's share kept.
    summary = {s.name: s.metrics for s in (log.results.scores if log.results else [])}
    assert summary["passed"]["accuracy"].value == (1.0 if agent == "reference" else 0.0)
    kept = {name.removeprefix("rule:"): m["mean"].value for name, m in summary.items() if name.startswith("rule:")}
    assert set(kept) == set(scenario.rules)
    assert kept == {rule: float(rule != AGENTS[agent].breaks) for rule in scenario.rules}


def test_inspect_eval_on_the_command_line_with_a_scripted_agent(tmp_path: Path) -> None:
    """`inspect eval` as a person types it; -T agent=... plays the model, so no model service is needed."""
    logs = tmp_path / "cli-logs"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "inspect"), "eval", "evals/inspect_tasks.py", "--model", "mockllm/model",
         "-T", "agent=misspelled-reserves", "-T", "scenario=untraceable-reserve", "--log-dir", str(logs),
         "--log-format", "json", "--no-ansi"],
        capture_output=True, text=True, timeout=600, check=False, cwd=TASK_FILE.parents[1],
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [path] = logs.glob("*.json")
    log = json.loads(path.read_text(encoding="utf-8"))  # the log file as written, read without Inspect
    assert log["status"] == "success", log.get("error")
    [sample] = log["samples"]
    value = sample["scores"]["radiance_scorer"]["value"]
    assert value["passed"] == 0.0 and value["rule:argument_names"] == 0.0
    assert value["rule:reserve_traced"] == 1.0 and value["fact:ceiling_mib"] == 1.0


def test_an_unknown_scripted_agent_is_refused_with_the_names_there_are() -> None:
    with pytest.raises(EvalError, match=r"-T agent=referense: no such scripted agent; the agents: reference, "):
        radiance_task(scenario="resize-to-the-ceiling", agent="referense")


async def test_the_misspelled_call_never_reaches_the_server_but_is_in_the_record(
    scenario: Scenario, tmp_path: Path
) -> None:
    log = await over_inspect(tmp_path / "scenarios", misspells_reserves)
    [sample] = log.samples or []
    events = [Event.model_validate(e) for e in sample.store[STORE_RECORD]]
    calls = [e for e in events if e.kind == "tool_call"]
    assert [(e.tool, e.ok) for e in calls] == [("compute_ceiling", False), ("compute_ceiling", True)]
    assert calls[0].rule == "argument_names" and "reserve" in (calls[0].arguments or {})
    assert "before it reached the server" in (calls[0].error or "")
    assert calls[1].result is not None and round(calls[1].result["ceiling_mib"]) == 30969
    assert [e.seq for e in events] == list(range(len(events)))


async def test_a_run_stopped_by_the_message_limit_is_scored_with_what_it_did(
    scenario: Scenario, tmp_path: Path
) -> None:
    async def never_answers(client: Client) -> str:
        while True:
            await client.call_tool("read_budget_table", {"service": "lyra-moe"})

    log = await over_inspect(tmp_path / "scenarios", never_answers, message_limit=8)
    [sample] = log.samples or []
    assert sample.limit is not None and sample.limit.type == "message"
    result = (sample.scores or {})["radiance_scorer"]
    value = result.value
    assert isinstance(value, dict)
    assert value["passed"] == 0.0 and value["fact:ceiling_mib"] == 0.0
    assert value["rule:ledger_first"] == 1.0  # the ledger was read: that much is kept
    calls = [e for e in sample.store[STORE_RECORD] if e["kind"] == "tool_call"]
    assert len(calls) >= 3 and {c["tool"] for c in calls} == {"read_budget_table"}


def test_an_unknown_scenario_is_refused_with_the_names_there_are(scenario: Scenario, tmp_path: Path) -> None:
    with pytest.raises(EvalError, match=r"scenario=pair-headroom2: no such scenario; the scenarios: pair-headroom"):
        radiance_task(scenario="pair-headroom2", scenarios_dir=str(tmp_path / "scenarios"))


def test_a_turn_of_parallel_calls_keeps_the_servers_order_and_inspects_refusal() -> None:
    def event(seq: int, tool: str, kind: str = "tool_call") -> Event:
        return Event(version=RECORD_VERSION, seq=seq, time="t", kind=kind, tool=tool if kind == "tool_call" else None,
                     arguments={}, ok=True)

    # The model asked for three calls in one turn; Inspect refused the middle one (a typo'd
    # argument); the server saw the other two in the opposite order.
    turn = ChatMessageAssistant(content="", tool_calls=[
        ToolCall(id="a", function="read_budget_table", arguments={"service": "s"}),
        ToolCall(id="b", function="compute_ceiling", arguments={"servce": "s"}),
        ToolCall(id="c", function="plan_free_vram", arguments={}),
    ])
    answers = [
        ChatMessageTool(content="{}", tool_call_id="a", function="read_budget_table"),
        ChatMessageTool(content="", tool_call_id="b", function="compute_ceiling", error=ToolCallError(
            "parsing", "Found 1 validation errors parsing tool input arguments:\n- Additional properties are not "
            "allowed ('servce' was unexpected)")),
        ChatMessageTool(content="{}", tool_call_id="c", function="plan_free_vram"),
    ]
    submit = ChatMessageAssistant(content="", tool_calls=[ToolCall(id="d", function="submit", arguments={})])
    server = [event(0, "", "session"), event(1, "plan_free_vram"), event(2, "read_budget_table")]

    merged = merge_record(server, [ChatMessageUser(content="q"), turn, *answers, submit])

    assert [(e.kind, e.tool, e.ok, e.rule) for e in merged] == [
        ("session", None, True, None),
        ("tool_call", "compute_ceiling", False, "argument_names"),
        ("tool_call", "plan_free_vram", True, None),
        ("tool_call", "read_budget_table", True, None),
    ]
    assert [e.seq for e in merged] == [0, 1, 2, 3]
