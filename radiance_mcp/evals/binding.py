"""The edge: whether a record is bound to its run, checked against the scenario's fleet.

``bind(scenario, events, nonce=..., requests=..., cut=...)`` makes each check a score stands on
besides the record's own shape (record.record_problem), and says of each ``passed``, ``failed``
or ``not made`` (what it needs is missing: a record of format version 1 or 2 has no nonce, a run
scored outside a harness has no nonce to check against, or no request log); a check with nothing
to check (no probe result, no call to replay) passes::

    complete  the record lost no line: no ``lost`` count, no cut line, no seq missing; else the
              run is judged incomplete, never passed
    fleet     the session line's fleet fingerprint (evals.fleet.fingerprint) is the scenario's fleet's
    nonce     the session line names the nonce the harness gave, and every line's mac chains under
              it (record.chain_problem): a line forged, edited, moved, or copied from another session
    replay    each recorded call of a tool that is pure and deterministic given the fleet's ledgers
              (``REPLAYED``) gives the same outcome and result, called again on the scenario's fleet,
              temporary paths and ports normalised (evals.fleet.normal)
    probes    each probe result matches requests the simulated endpoints served (the request log the
              harness keeps beside the record, ``requests_path``)

A check that fails breaks ``record_genuine`` in the report (evals.score), naming the tool, seq and
the figure it found.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.fleet import fingerprint, normal, running_fleet
from radiance_mcp.evals.record import (
    MAX_LINE_BYTES,
    RECORD_VERSION,
    Binding,
    Check,
    Event,
    chain_problem,
    nonce_digest,
)
from radiance_mcp.evals.scenario import Scenario
from radiance_mcp.models.answer import TOOL as SUBMIT_ANSWER
from radiance_mcp.sim import SimFleet
from radiance_mcp.sources.config import load

REPLAYED = ("list_fleet", "read_budget_table", "compute_ceiling", "check_pool_contract", "audit_step_shape",
            "plan_free_vram", "render_gates", "check_serve_script", "compare_dry_run", "compare_arms")
"""The tools whose result is a function of their arguments and the fleet's ledgers, env files and serve scripts."""
PROBES = ("token_count_probe", "boundary_probe", "decode_probe")
"""The tools whose result is what the endpoints answered."""
MAX_REQUESTS = 100_000
"""The longest request log read: a run's probes send a few hundred requests."""

def requests_path(record: Path) -> Path:
    """Where a harness keeps the log of the requests the endpoints served, beside the record:
    RECORD.requests.jsonl."""
    return record.with_name(f"{record.stem}.requests.jsonl")


def served(fleet: SimFleet) -> list[dict[str, Any]]:
    """Every request the fleet's endpoints served, each with its service's name, in each endpoint's order."""
    return [{"service": name, **asdict(r)} for name, s in fleet.services.items() for r in s.endpoint.requests]


def write_requests(fleet: SimFleet, path: Path) -> None:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in served(fleet)), encoding="utf-8")


def read_requests(path: Path) -> list[dict[str, Any]] | None:
    """The request log at path (None: there is none); EvalError naming a line that is not a request."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalError(f"request log {path}: cannot be read ({exc})") from None
    requests = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            request = json.loads(raw[:MAX_LINE_BYTES])
        except ValueError:
            request = None
        if not isinstance(request, dict) or not isinstance(request.get("service"), str):
            raise EvalError(f"request log {path}: line {number} is not a served request; the harness writes one "
                            "JSON object per request, naming its service")
        requests.append(request)
        if len(requests) > MAX_REQUESTS:
            raise EvalError(f"request log {path}: more than {MAX_REQUESTS:,} requests; keep one run's log")
    return requests


def _session(events: Sequence[Event]) -> Event | None:
    return next((e for e in events if e.kind == "session"), None)


def completeness(events: Sequence[Event], cut: int = 0) -> Check:
    """Failed when the record lost lines: a ``lost`` count, a cut line, a seq missing."""
    found = []
    lost = sum(e.lost or 0 for e in events)
    if lost:
        found.append(f"{lost} event(s) the server could not write (lost)")
    if cut:
        found.append(f"{cut} line(s) cut mid-line")
    seqs = {e.seq for e in events}
    missing = sorted(set(range(max(seqs, default=0) + 1)) - seqs)
    if missing:
        shown = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
        found.append(f"seq {shown} missing")
    if found:
        return Check(name="complete", status="failed", text="incomplete: " + "; ".join(found) + ": the score "
                     "cannot see what the run did there, so it is not passed")
    return Check(name="complete", status="passed", text="every line of the session is in the record")


def fleet_check(events: Sequence[Event], expected: str) -> Check:
    session = _session(events)
    if session is None or session.version < 3:
        return Check(name="fleet", status="not made", text="a record of version < 3 names no fleet fingerprint")
    if session.fleet != expected:
        return Check(name="fleet", status="failed", text=f"from another fleet: the session line's fingerprint is "
                     f"{session.fleet}, this scenario's fleet's is {expected}")
    return Check(name="fleet", status="passed", text=f"the scenario's fleet ({expected})")


def nonce_check(events: Sequence[Event], nonce: str | None) -> Check:
    """Passed when the record is bound to the harness's nonce; not made when there is none to check against.
    Failed when the harness gave one and the record is of a version before 3: its server wrote version 3, so the
    record is not that server's (a forger's rewrite as version 2 dodged the nonce before)."""
    session = _session(events)
    if session is None or session.version < 3:
        if nonce is None:
            return Check(name="nonce", status="not made", text="a record of version < 3 carries no nonce")
        version = session.version if session is not None else min((e.version for e in events), default=0)
        what = f"a record of version {version}" if events else "an empty record"
        return Check(name="nonce", status="failed", text=f"{what} where the harness gave "
                     f"its server a nonce: that server writes version {RECORD_VERSION}, bound to it (not the record "
                     "it wrote); score an archived older record without the harness's nonce")
    if nonce is None:
        said = "bound to a nonce" if session.bound else "unbound (made outside a harness)"
        return Check(name="nonce", status="not made", text=f"the record is {said}; no harness nonce to check it by")
    if not session.bound or session.nonce is None:
        return Check(name="nonce", status="failed", text="unbound: the harness gave the server a nonce, the "
                     "record names none (not the record that server wrote)")
    if session.nonce != nonce_digest(nonce):
        return Check(name="nonce", status="failed", text=f"a wrong nonce: the session line names {session.nonce}, "
                     f"the harness gave {nonce_digest(nonce)}")
    problem = chain_problem([e for e in events if e.session == session.session], nonce)
    if problem:
        return Check(name="nonce", status="failed", text=problem)
    return Check(name="nonce", status="passed", text="bound to the harness's nonce, every line chained")


_FIGURE = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _held(text: str) -> list[float]:
    """The figures a line of prose holds, in order of size: what it says, whatever its wording."""
    return sorted(float(m.group(0).replace(",", "")) for m in _FIGURE.finditer(text))


def _difference(recorded: Any, replayed: Any, where: str = "result") -> str | None:
    """The first figure or line of the recorded result the tool's does not hold, named by its place, if any.

    Figures and lines, not wording: a number or a one-word value (a verdict, a unit) is compared as it is, a
    ledger line (``{"line": n, "text": ...}``) whole, prose by the figures it holds; a field or item only the
    tool's result has is one a later version added, and one only the record has is refused (it could ground a
    figure the tool never gave).
    """
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for key in sorted(recorded):
            if key not in replayed:
                return f"{where}.{key} is in the record, the tool's result has no {key}"
            ledger_line = key == "text" and isinstance(recorded.get("line"), int)
            found = (f"{where}.text is {recorded[key]!r}, the tool quotes {replayed[key]!r}"
                     if ledger_line and recorded[key] != replayed[key] else
                     _difference(recorded[key], replayed[key], f"{where}.{key}"))
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(replayed, list):
        if len(recorded) > len(replayed):
            return f"{where} holds {len(recorded)} item(s), the tool returns {len(replayed)}"
        for index, (a, b) in enumerate(zip(recorded, replayed, strict=False)):
            found = _difference(a, b, f"{where}[{index}]")
            if found:
                return found
        return None
    if isinstance(recorded, str) and isinstance(replayed, str) and (" " in recorded or " " in replayed):
        same = _held(recorded) == _held(replayed)
    else:
        same = recorded == replayed
    return None if same else (f"{where} is {json.dumps(recorded)[:120]}, the tool returns "
                              f"{json.dumps(replayed)[:120]}")


@contextlib.asynccontextmanager
async def replayer(config_path: Path) -> AsyncIterator[Any]:
    """An MCP client of a server on the fleet, to replay calls with (one for many records: it keeps what it
    learnt of each tool's output schema)."""
    from mcp import Client  # the server and its client, only to replay

    from radiance_mcp.app.server import build_server
    from radiance_mcp.sources.runtime import Runtime

    async with Client(build_server(Runtime(load(config_path)))) as client:
        yield client


async def replay(events: Sequence[Event], client: Any) -> Check:
    """Each recorded call of a REPLAYED tool called again through the client (``replayer``) on the scenario's
    fleet: the same outcome and result."""
    replayable = [e for e in events if e.kind == "tool_call" and e.tool in REPLAYED and e.arguments is not None
                  and e.arguments_bytes is None and e.time]  # an Inspect refusal (no time) never reached the server
    calls = [e for e in replayable if not _names_a_file(e.arguments or {})]
    files = [f"seq {e.seq}" for e in replayable if e not in calls]
    aside = (f"; {len(files)} not replayed ({', '.join(files[:5])}): they name a file by its path, which the "
             "scenario's fleet may not hold as the run's did") if files else ""
    if not calls:
        return Check(name="replay", status="passed", text="no call of a tool that can be replayed" + aside)
    for call in calls:
        result = await client.call_tool(str(call.tool), call.arguments)
        ok = not result.is_error
        if ok != call.ok:
            said = "answers" if ok else "refuses"
            return Check(name="replay", status="failed", text=f"seq {call.seq} {call.tool}: recorded "
                         f"{'answered' if call.ok else 'refused'}, the tool {said} these arguments")
        if ok and call.result is not None:
            found = _difference(normal(call.result), normal(result.structured_content or {}))
            if found:
                return Check(name="replay", status="failed", text=f"seq {call.seq} {call.tool}: a result the "
                             f"tool would not have returned: {found}")
    return Check(name="replay", status="passed", text=f"{len(calls)} call(s) replayed, each the same{aside}")


def _names_a_file(arguments: Mapping[str, Any]) -> bool:
    """An argument is a path (a ledger named by its file, not by its service)."""
    return any(isinstance(v, str) and v.startswith(("/", "~")) for v in arguments.values())


def _probe_figures(tool: str, result: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """What served requests must hold for a probe result: (where in the result, request field, value)."""
    if tool == "decode_probe":
        pairs = [("generated_tokens", "completion_tokens"), ("prompt_tokens", "prompt_tokens")]
        return [(a, b, result[a]) for a, b in pairs if isinstance(result.get(a), int)]
    if tool == "boundary_probe":
        return [(f"requests[{n}].prompt_tokens_reported", "prompt_tokens", r["prompt_tokens_reported"])
                for n, r in enumerate(result.get("requests") or ()) if isinstance(r, dict)
                and isinstance(r.get("prompt_tokens_reported"), int)]
    if tool == "token_count_probe" and result.get("method") == "refusal" and isinstance(result.get("tokens"), int):
        return [("tokens", "prompt_tokens", result["tokens"])]
    return []


def probe_check(events: Sequence[Event], requests: Sequence[Mapping[str, Any]] | None) -> Check:
    """Each successful probe result matched by served requests: as many as it says it sent (over the run's probes
    of that service), and one holding each figure the result reports."""
    probes = [e for e in events if e.kind == "tool_call" and e.tool in PROBES and e.ok and e.result]
    if not probes:
        return Check(name="probes", status="passed", text="no probe result to match")
    if requests is None:
        return Check(name="probes", status="not made", text="no request log beside the record")
    by_service: dict[str, list[Mapping[str, Any]]] = {}
    for request in requests:
        by_service.setdefault(str(request.get("service")), []).append(request)
    sent: dict[str, int] = {}
    for call in probes:
        result = call.result or {}
        service = str(result.get("service") or (call.arguments or {}).get("service"))
        mine = by_service.get(service, [])
        sent[service] = sent.get(service, 0) + (result.get("requests_sent") or 0)
        if sent[service] > len(mine):
            return Check(name="probes", status="failed", text=f"seq {call.seq} {call.tool}: no matching served "
                         f"request: the run's probes of {service} say they sent {sent[service]}, its endpoint "
                         f"served {len(mine)}")
        for where, field, value in _probe_figures(str(call.tool), result):
            if not any(r.get(field) == value for r in mine):
                return Check(name="probes", status="failed", text=f"seq {call.seq} {call.tool}: no matching served "
                             f"request: result.{where} is {value}, no request {service}'s endpoint served has "
                             f"{field} {value}")
    return Check(name="probes", status="passed", text=f"{len(probes)} probe result(s), each matched by served "
                 "requests")


@contextlib.asynccontextmanager
async def _fleet(scenario: Scenario, fleet: SimFleet | None) -> AsyncIterator[SimFleet]:
    if fleet is not None:
        yield fleet
        return
    async with running_fleet(scenario) as started:
        yield started


async def bind(scenario: Scenario, events: Sequence[Event], *, nonce: str | None = None,
               requests: Sequence[Mapping[str, Any]] | None = None, cut: int = 0, fleet: SimFleet | None = None,
               expected_fleet: str | None = None, client: Any = None) -> Binding:
    """Every check of the record against the scenario's fleet (started for it, unless a running one is given;
    expected_fleet: its fingerprint as it was when the run began, when the harness took it then; client: a
    ``replayer`` of that fleet, to share among records)."""
    calls = [e for e in events if e.tool != SUBMIT_ANSWER]
    async with contextlib.AsyncExitStack() as stack:
        running = await stack.enter_async_context(_fleet(scenario, fleet))
        expected = expected_fleet or fingerprint(load(running.config_path))
        client = client or await stack.enter_async_context(replayer(running.config_path))
        checks = (completeness(events, cut), fleet_check(events, expected), nonce_check(events, nonce),
                  await replay(calls, client), probe_check(calls, requests))
    return Binding(checks=checks)


def evidence(binding: Binding | None) -> Iterable[str]:
    """What the failed checks found, one line each."""
    return [] if binding is None else [f"{c.name}: {c.text}" for c in binding.failed]
