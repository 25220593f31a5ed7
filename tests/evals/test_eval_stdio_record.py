"""A record written by a real session (the SDK's stdio client spawning `radiance-mcp serve --config ...
--record ...`, or its HTTP client on `serve --http --record`) scores the same as the in-memory run."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from bounds import HANG_S, until_hung
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from radiance_mcp import __version__
from radiance_mcp.app.server import build_server
from radiance_mcp.evals.agents import AGENTS
from radiance_mcp.evals.fleet import scenario_fleet
from radiance_mcp.evals.record import RECORD_VERSION, Recorder, read_record
from radiance_mcp.evals.run import run_agent
from radiance_mcp.evals.scenario import load_scenarios
from radiance_mcp.evals.score import Report, score
from radiance_mcp.sources.config import load
from radiance_mcp.sources.runtime import Runtime

SCENARIOS = {s.name: s for s in load_scenarios()}


def _outcome(report: Report) -> dict[str, object]:
    """What a run scored, without the temporary paths that differ between two fleets."""
    return {
        "passed": report.passed,
        "facts": [(f.name, f.found) for f in report.facts],
        "rules": [(r.name, r.kept, [(e.call, e.tool) for e in r.evidence]) for r in report.rules],
        "calls": report.calls,
    }


@pytest.mark.slow
@pytest.mark.parametrize(("scenario", "agent"), [
    ("untraceable-reserve", "reference"),
    ("untraceable-reserve", "floor-reserve"),  # a refusal, worked around: still broken, with the same evidence
    ("private-step-in-serve-script", "reference"),
])
async def test_a_stdio_record_scores_as_the_scripted_run(tmp_path: Path, scenario: str, agent: str) -> None:
    chosen = SCENARIOS[scenario]
    record = tmp_path / "session.jsonl"
    async with scenario_fleet(chosen, tmp_path / "fleet") as config:
        server = StdioServerParameters(command=sys.executable, args=[
            "-m", "radiance_mcp", "serve", "--config", str(config), "--record", str(record)])
        with (tmp_path / "server.log").open("w") as errlog:
            async with Client(stdio_client(server, errlog=errlog)) as client:
                answer = await AGENTS[agent](client, chosen).run()
    events = read_record(record)
    assert events[0].kind == "session" and events[0].version == RECORD_VERSION
    calls = [e for e in events if e.kind == "tool_call"]
    assert calls and all(e.duration_s is not None and e.arguments is not None for e in calls)
    over_stdio = score(chosen, events, answer)
    in_memory = (await run_agent(chosen, agent)).report
    assert _outcome(over_stdio) == _outcome(in_memory)
    # Every line is one JSON object of the documented version.
    lines = record.read_text().splitlines()
    assert len(lines) == len(events) and all(json.loads(line)["version"] == RECORD_VERSION for line in lines)


async def test_a_refusal_is_recorded_with_its_rule(tmp_path: Path) -> None:
    """serve --record's middleware on the SDK's in-memory client (the transport is not the point here:
    the stdio test above records a refusal worked around by floor-reserve, and scores it the same)."""
    chosen = SCENARIOS["untraceable-reserve"]
    record = tmp_path / "session.jsonl"
    async with scenario_fleet(chosen, tmp_path / "fleet") as config:
        recorder = Recorder(record, __version__)
        try:
            async with Client(build_server(Runtime(load(config)), middleware=[recorder])) as client:
                await client.call_tool("compute_ceiling", {"service": "frank-archon",
                                                           "reserves": [{"mib": 300, "label": "headroom for luck"}]})
                await client.call_tool("decode_probe", {"service": "frank-archon", "gen_tokens": 9})
                await client.call_tool("check_pool_contract", {"service": "frank-archon", "pool": 4096})
                prompt = (await client.list_prompts()).prompts[0]
                await client.get_prompt(prompt.name, {"service": "frank-archon"})
        finally:
            recorder.close()
    events = read_record(record)
    refused = [(e.tool, e.ok, e.rule) for e in events if e.kind == "tool_call"]
    assert refused == [("compute_ceiling", False, "reserve_traced"), ("decode_probe", False, "decode_tokens"),
                       ("check_pool_contract", False, "argument_names")]
    # The rule is data beside the message (the result's _meta), never appended to it.
    assert all(e.error and "[rule:" not in e.error for e in events if e.kind == "tool_call")
    assert [(e.kind, e.name) for e in events if e.kind == "prompt_get"] == [("prompt_get", prompt.name)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
async def test_an_http_session_is_recorded_too(tmp_path: Path) -> None:
    """serve --http --record: the same middleware, each stateless request one event."""
    chosen = SCENARIOS["pool-below-contract"]
    record = tmp_path / "http.jsonl"
    port = _free_port()
    async with scenario_fleet(chosen, tmp_path / "fleet") as config:
        proc = subprocess.Popen([sys.executable, "-m", "radiance_mcp", "serve", "--http", "--port", str(port),
                                 "--config", str(config), "--record", str(record)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in until_hung():
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                        break
                except OSError:
                    await anyio.sleep(0.05)
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                answer = await AGENTS["reference"](client, chosen).run()
        finally:
            proc.terminate()
            proc.wait(timeout=HANG_S)
    over_http = score(chosen, read_record(record), answer)
    assert over_http.passed
    assert _outcome(over_http) == _outcome((await run_agent(chosen, "reference")).report)
