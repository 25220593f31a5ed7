"""The Inspect AI task: a scripted agent played as Inspect's mock model scores as it does over the SDK's client.

Each run goes both ways on the same scenario and fleet: straight through the SDK's MCP client
(the server in memory, its --record middleware writing the record), and through Inspect
(`eval_async` on `radiance_task`: react(), Inspect's stdio MCP client, `radiance-mcp serve
--record` as a process). The verdicts (facts found, rules kept and broken, passed) must
match. The model is Inspect's mockllm, its outputs the scripted agent's calls (no network).
The task as shipped runs each scenario for 3 epochs: every epoch's record and answer, scored
again by `radiance-mcp eval --record --answer`, gets the Inspect scorer's report, and the
epochs reduce by the mean, pass_at_3 and pass_k_3. The tests that compare one run give epochs=1.
"""

from __future__ import annotations

import asyncio
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

from cli_run import CliRunner  # noqa: E402
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
    EPOCHS,
    MESSAGE_LIMIT,
    STORE_BINDING,
    STORE_NONCE,
    STORE_RECORD,
    TIME_LIMIT,
    countersign,
    merge_record,
    radiance_task,
    scripted_model,
)
from radiance_mcp.evals.record import (  # noqa: E402
    NONCE_ENV,
    RECORD_VERSION,
    Event,
    Recorder,
    chain_problem,
    read_record,
)
from radiance_mcp.evals.run import run_agent  # noqa: E402
from radiance_mcp.evals.scenario import Scenario, load_scenario, load_scenarios  # noqa: E402
from radiance_mcp.evals.score import Report, score  # noqa: E402
from radiance_mcp.evals.versions import SCORER_VERSION, scenario_set_version  # noqa: E402
from radiance_mcp.sources.config import load  # noqa: E402
from radiance_mcp.sources.runtime import Runtime  # noqa: E402

Play = Callable[[Client], Awaitable[str]]
ROOT = Path(__file__).resolve().parents[2]
TASK_FILE = ROOT / "evals" / "inspect_tasks.py"

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
    """One run (epochs=1 unless given) of the test's own scenario through Inspect."""
    task = radiance_task(scenario="pair-headroom", scenarios_dir=str(scenario_dir), **{"epochs": 1, **task_args})
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
        ("misspelled-reserves", "untraceable-reserve"),  # a call Inspect refused, merged into the record
    ],
)
async def test_every_epoch_scores_the_same_under_inspect_and_the_eval_command(
    agent: str, name: str, tmp_path: Path, cli: CliRunner
) -> None:
    [scenario] = [s for s in load_scenarios() if s.name == name]
    direct = (await run_agent(scenario, agent)).report.to_json()
    # The task as `inspect eval evals/inspect_tasks.py -T scenario=NAME` loads it: 3 epochs, one model for all.
    [log] = await eval_async(f"{TASK_FILE}@radiance", task_args={"scenario": name}, max_samples=1,
                             model=scripted_model(lambda client: AGENTS[agent](client, scenario).run()))
    assert log.status == "success", log.error
    assert [s.epoch for s in log.samples or []] == [1, 2, 3] == list(range(1, EPOCHS + 1))
    named = {"scorer_version": SCORER_VERSION, "scenario_set_version": scenario_set_version()}
    for sample in log.samples or []:
        result = (sample.scores or {})["radiance_scorer"]
        assert result.metadata is not None
        assert verdicts(result.metadata) == verdicts(direct), sample.epoch
        assert result.metadata["answer"] == direct["answer"] == "submitted"
        assert result.metadata["broken"] == ([] if agent == "reference" else [AGENTS[agent].breaks])
        assert {k: result.metadata[k] for k in named} == named
        # The same record and answer, scored by the eval command a person runs: the same report.
        record, answer = tmp_path / f"epoch-{sample.epoch}.jsonl", tmp_path / f"epoch-{sample.epoch}.txt"
        record.write_text("".join(json.dumps(e) + "\n" for e in sample.store[STORE_RECORD]), encoding="utf-8")
        answer.write_text(result.answer or "", encoding="utf-8")
        # The person holds what the harness kept: the nonce it gave the server binds the record for them too.
        done = cli("eval", "--scenario", name, "--record", str(record), "--answer", str(answer), "--json", cwd=ROOT,
                   env={NONCE_ENV: sample.store[STORE_NONCE]})
        assert done.returncode == (0 if agent == "reference" else 3), done.stderr
        by_cli = json.loads(done.stdout)
        assert {k: by_cli[k] for k in named} == named
        assert by_cli["reports"] == [{k: v for k, v in result.metadata.items() if k not in named}]
    # Inspect's summary, once per reducer: the pass rate with its standard error, each listed rule's share kept.
    summary = {(s.name, s.reducer): s.metrics for s in (log.results.scores if log.results else [])}
    assert {reducer for _, reducer in summary} == {"mean", "pass_at_3", "pass_k_3"}
    for reducer in ("mean", "pass_at_3", "pass_k_3"):
        passed = summary["passed", reducer]
        assert passed["accuracy"].value == (1.0 if agent == "reference" else 0.0)
        assert passed["stderr"].value == 0.0  # one scenario: no spread
        assert {"mean", "stderr"} <= set(summary["score", reducer]) and "stderr" in summary["rules", reducer]
        kept = {name.removeprefix("rule:"): m["mean"].value for (name, r), m in summary.items()
                if r == reducer and name.startswith("rule:")}
        assert kept == {rule: float(rule != AGENTS[agent].breaks) for rule in scenario.rules}
    assert log.eval.metadata == named and log.eval.task_version == f"scorer version {SCORER_VERSION}, scenario set " \
        f"{named['scenario_set_version']}"
    assert (log.eval.config.time_limit, log.eval.config.message_limit) == (TIME_LIMIT, MESSAGE_LIMIT) == (900, 120)


async def test_the_epochs_of_a_scenario_reduce_to_the_mean_pass_at_k_and_pass_k(scenario: Scenario,
                                                                               tmp_path: Path) -> None:
    """A model that does the procedure in 2 of 3 epochs: the mean 2/3, pass_at_3 1 (one passed), pass_k_3 0."""
    epochs = iter([careful, untraced_then_free_memory, careful])

    async def next_epoch(client: Client) -> str:
        return await next(epochs)(client)

    log = await over_inspect(tmp_path / "scenarios", next_epoch, epochs=3)
    assert [(s.epoch, (s.scores or {})["radiance_scorer"].value["passed"]) for s in log.samples or []] == [
        (1, 1.0), (2, 0.0), (3, 1.0)]
    summary = {(s.name, s.reducer): s.metrics for s in (log.results.scores if log.results else [])}
    assert summary["passed", "mean"]["accuracy"].value == pytest.approx(2 / 3)
    assert summary["passed", "pass_at_3"]["accuracy"].value == 1.0
    assert summary["passed", "pass_k_3"]["accuracy"].value == 0.0
    assert summary["rule:engine_ceiling", "mean"]["mean"].value == pytest.approx(2 / 3)
    [reduction] = [r for r in log.reductions or [] if r.reducer == "pass_k_3"]
    assert reduction.samples[0].value["rule:engine_ceiling"] == 0.0  # broken in one epoch of three


def test_inspect_eval_on_the_command_line_with_a_scripted_agent(tmp_path: Path) -> None:
    """`inspect eval` as a person types it; -T agent=... plays the model, so no model service is needed; -T sets
    the epochs, their reducers and the limits."""
    logs = tmp_path / "cli-logs"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "inspect"), "eval", "evals/inspect_tasks.py", "--model", "mockllm/model",
         "-T", "agent=misspelled-reserves", "-T", "scenario=untraceable-reserve", "-T", "epochs=2",
         "-T", "reducer=mean,pass_k_2", "-T", "time_limit=300", "-T", "message_limit=60",
         "--log-dir", str(logs), "--log-format", "json", "--no-ansi"],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [path] = logs.glob("*.json")
    log = json.loads(path.read_text(encoding="utf-8"))  # the log file as written, read without Inspect
    assert log["status"] == "success", log.get("error")
    config = log["eval"]["config"]
    assert (config["epochs"], config["epochs_reducer"]) == (2, ["mean", "pass_k_2"])
    assert (config["time_limit"], config["message_limit"]) == (300, 60)
    assert log["eval"]["metadata"] == {"scorer_version": SCORER_VERSION, "scenario_set_version": scenario_set_version()}
    assert [s["epoch"] for s in log["samples"]] == [1, 2]
    for sample in log["samples"]:
        value = sample["scores"]["radiance_scorer"]["value"]
        assert value["passed"] == 0.0 and value["rule:argument_names"] == 0.0
        assert value["rule:reserve_traced"] == 1.0 and value["fact:ceiling_mib"] == 1.0
    assert {s["reducer"] for s in log["results"]["scores"]} == {"mean", "pass_k_2"}


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
    # The harness chained its refusal in: the record as stored is bound to the nonce it gave, both calls replayed.
    checks = {c["name"]: (c["status"], c["text"]) for c in sample.store[STORE_BINDING]["checks"]}
    assert checks["nonce"] == ("passed", "bound to the harness's nonce, every line chained")
    assert checks["replay"] == ("passed", "2 call(s) replayed, each the same")
    assert chain_problem(events, sample.store[STORE_NONCE]) is None


def test_a_server_record_that_does_not_chain_is_never_countersigned(tmp_path: Path) -> None:
    nonce = "a" * 32
    recorder = Recorder(tmp_path / "r.jsonl", "test", nonce=nonce)
    recorder.write({"kind": "tool_call", "tool": "read_budget_table", "arguments": {}, "ok": True}, seq=1)
    recorder.close()
    genuine = read_record(tmp_path / "r.jsonl")
    edited = [genuine[0], genuine[1].model_copy(update={"tool": "compute_ceiling"})]  # a line changed after the fact
    turn = ChatMessageAssistant(content="", tool_calls=[ToolCall(id="a", function="read_budget_table", arguments={})])
    for server, chained in ((genuine, True), (edited, False)):
        kept = countersign(server, merge_record(server, [turn]), nonce)
        assert (chain_problem(kept, nonce) is None) is chained
    assert countersign(edited, edited, nonce) == edited  # kept as it came, its forged line unsigned


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


async def test_a_run_stopped_by_the_time_limit_is_scored_with_what_it_did(
    scenario: Scenario, tmp_path: Path
) -> None:
    async def stalls(client: Client) -> str:
        await client.call_tool("read_budget_table", {"service": "lyra-moe"})
        await asyncio.Event().wait()  # a model that never answers again
        return "never"

    log = await over_inspect(tmp_path / "scenarios", stalls, time_limit=5, epochs=2)
    assert [s.epoch for s in log.samples or []] == [1, 2]
    for sample in log.samples or []:  # the second epoch starts afresh, though the first one's agent never ended
        assert sample.limit is not None and sample.limit.type == "time", sample.epoch
        value = (sample.scores or {})["radiance_scorer"].value
        assert isinstance(value, dict)
        assert value["passed"] == 0.0 and value["fact:ceiling_mib"] == 0.0
        assert value["rule:ledger_first"] == 1.0
        assert [c["tool"] for c in sample.store[STORE_RECORD] if c["kind"] == "tool_call"] == ["read_budget_table"]


@pytest.mark.parametrize(("args", "message"), [
    ({"epochs": 0}, "-T epochs=0: a scenario runs at least once"),
    ({"epochs": 2, "reducer": "pass_k_3"}, "-T reducer=pass_k_3: needs 3 epochs; -T epochs=2 gives 2"),
])
def test_epochs_and_reducers_that_cannot_be_are_refused(args: dict[str, Any], message: str) -> None:
    with pytest.raises(EvalError, match=message):
        radiance_task(scenario="resize-to-the-ceiling", **args)


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
