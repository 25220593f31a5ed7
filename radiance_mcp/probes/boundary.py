"""boundary_probe: N concurrent prompts at max_model_len - gen, each asked for its head marker."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from fractions import Fraction

import httpx

from radiance_mcp.core.errors import InputError, ProbeError
from radiance_mcp.core.rules.probe_shape import (
    NO_LEDGER,
    ProbeExpectation,
    ProbeShape,
    checked_window,
    predict_boundary,
)
from radiance_mcp.core.rules.probe_verdicts import Verdict, alike, check_boundary_tokens, judge_boundary
from radiance_mcp.core.wording.payloads import ROUTES, generation
from radiance_mcp.core.wording.refusals import ApiDialect, dialect_for
from radiance_mcp.models.probes import (
    BoundaryPlan,
    BoundaryProbeInput,
    BoundaryProbeOutput,
    BoundaryRequestResult,
    Repeated,
)
from radiance_mcp.probes.client import ProbeClient, redact, resolve_endpoint
from radiance_mcp.probes.engine import Engine, ExtensionCounter
from radiance_mcp.probes.prompts import FOX_UNIT, Prompt, boundary_prompt, units_for_tokens
from radiance_mcp.sources.config import Fleet

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
"""MCP's report_progress(progress, total, message)."""

MIN_PROMPT_TOKENS = 32


def plan(
    args: BoundaryProbeInput, window: int, window_source: str | None, dialect: ApiDialect, bound: Bound
) -> BoundaryPlan:
    target = dialect.max_prompt_tokens(window, args.gen_tokens)
    if target < MIN_PROMPT_TOKENS:
        raise InputError(
            f"gen_tokens={args.gen_tokens} leaves {target} prompt tokens in a window of {window}: "
            f"the probe needs at least {MIN_PROMPT_TOKENS}; lower gen_tokens"
        )
    rule = dialect.edge_rule()
    if dialect.name == "unknown":
        rule = f"engine not yet known, so the strictest edge: {rule}"
    shape, prediction = bound.shape, bound.prediction
    return BoundaryPlan(
        n=args.n,
        max_model_len=window,
        window_source=window_source,
        gen_tokens=args.gen_tokens,
        tokens_per_prompt=target,
        total_prefill_tokens=args.n * target,
        chars_per_prompt=round(target * args.chars_per_token),
        dialect=dialect.name,
        edge_rule=rule,
        api=args.api,
        route=ROUTES[args.api],
        ledger=shape.source if shape else None,
        backed_seqs=shape.backed_seqs.count if shape and shape.backed_seqs else None,
        max_num_seqs=shape.seats.count if shape and shape.seats else None,
        over_shape=args.over_shape,
        predicted=prediction.verdict,
        ledger_lines=list(prediction.lines),
        checks_not_made=list(prediction.not_checked),
    )


@dataclass(frozen=True)
class Bound:
    """The service's ledger shape (None: no ledger) and what it predicts for this probe."""

    shape: ProbeShape | None
    prediction: ProbeExpectation
    window: int | None
    window_source: str | None


def bound_by_ledger(args: BoundaryProbeInput, shape: ProbeShape | None, no_ledger_reason: str) -> Bound:
    """Check n and max_model_len against the ledger before anything is sent (refusing what it rules out)."""
    window, source = checked_window(shape, args.max_model_len)
    prediction = predict_boundary(shape, args.n, over_shape=args.over_shape, no_ledger_reason=no_ledger_reason)
    return Bound(shape, prediction, window, source)


async def boundary_probe(
    fleet: Fleet,
    args: BoundaryProbeInput,
    *,
    shape: ProbeShape | None = None,
    no_ledger_reason: str = NO_LEDGER,
    transport: httpx.AsyncBaseTransport | None = None,
    progress: Progress | None = None,
) -> BoundaryProbeOutput:
    """Plan (default) or run the boundary probe; see the tool's docstring for the rule.

    Before anything is sent, gen_tokens is checked against the fewest tokens certain to hold a marker
    (check_boundary_tokens), and n and max_model_len against shape: the service's newest boot as the
    ledger tells it (None: no ledger, and no_ledger_reason says why).
    """
    endpoint = redact(resolve_endpoint(fleet, args.service))
    check_boundary_tokens(args.gen_tokens, args.n)
    bound = bound_by_ledger(args, shape, no_ledger_reason)
    if not args.execute:
        if bound.window is None:
            raise InputError(
                f"max_model_len is needed to plan the boundary probe and {no_ledger_reason}: pass the window "
                "(token_count_probe's window_tokens), or execute=true to have a refusal name it"
            )
        the_plan = plan(args, bound.window, bound.window_source, dialect_for(args.dialect), bound)
        return BoundaryProbeOutput(
            service=args.service, endpoint=endpoint, plan=the_plan, executed=False,
            verdict="plan only: nothing sent (execute=true sends the requests)", passed=None, retrieved=None,
            requests=[], count_method=None, unit_tokens=None, count_uncertainty_tokens=None, requests_sent=0,
            prefill_tokens_paid=0, wall_s=None, refusals=[], notes=[],
        )
    try:
        async with asyncio.timeout(args.total_timeout_s):
            async with ProbeClient.for_service(fleet, args.service, args.timeout_s, transport) as client:
                engine = Engine(
                    client, args.dialect, args.model, bound.window, window_source=bound.window_source,
                    max_window_tokens=args.max_window_tokens,
                )
                return await _execute(engine, args, bound, progress)
    except TimeoutError as exc:
        raise ProbeError(
            f"boundary_probe on {args.service!r}: not done within total_timeout_s={args.total_timeout_s:g} s; "
            "the requests in flight were cancelled"
        ) from exc


async def _execute(
    engine: Engine, args: BoundaryProbeInput, bound: Bound, progress: Progress | None
) -> BoundaryProbeOutput:
    """Learn the window, size every prompt to it, send them all at once, judge each answer."""
    client = engine.client
    counter = ExtensionCounter(engine, args.api)
    if engine.window_tokens is None:
        await engine.learn_window(args.api)
    assert engine.window_tokens is not None
    first_units = units_for_tokens(engine.window_tokens - args.gen_tokens, args.chars_per_token)
    built = [boundary_prompt(i, first_units) for i in range(args.n)]
    calibration = await counter.calibrate(built[0][0])
    the_plan = plan(args, engine.window_tokens, engine.window_source, engine.dialect, bound)
    unit, margin = calibration.unit_tokens, counter.uncertainty_tokens
    sized = await _sized(engine, counter, built, the_plan.tokens_per_prompt, unit)
    count_requests = client.requests_sent

    started = time.perf_counter()
    results = await _send_all(client, args, sized, margin, progress)
    wall = time.perf_counter() - started
    retrieved = sum(r.retrieved for r in results)
    paid = sum(r.prompt_tokens_reported or (r.prompt_tokens if r.status == 200 else 0) for r in results)
    engine.prefill_tokens_paid += paid
    plan_sent = the_plan.model_copy(
        update={"tokens_per_prompt": max(t for _, _, t in sized), "total_prefill_tokens": sum(t for _, _, t in sized)}
    )
    failures = sorted({r.verdict for r in results if not r.retrieved})
    if failures:
        engine.note("failed requests: " + ", ".join(failures))
    engine.note(f"{count_requests} counting requests (refusals or tokenize, no prefill) before the probe")
    return BoundaryProbeOutput(
        service=args.service, endpoint=client.endpoint, plan=plan_sent, executed=True,
        verdict=f"{retrieved}/{args.n} retrieved", passed=retrieved == args.n, retrieved=retrieved,
        requests=_collapse(results), count_method=counter.method, unit_tokens=float(unit),
        count_uncertainty_tokens=margin, requests_sent=client.requests_sent,
        prefill_tokens_paid=engine.prefill_tokens_paid, wall_s=round(wall, 3),
        refusals=Repeated.collapse(engine.refusals), notes=engine.notes,
    )


async def _sized(
    engine: Engine, counter: ExtensionCounter, built: list[tuple[Prompt, str]], target_tokens: int, unit: Fraction
) -> list[tuple[Prompt, str, int]]:
    """Every prompt counted, then resized in whole filler units (each adds `unit` tokens) to sit just
    under target_tokens less the count's uncertainty: (prompt, its marker, its tokens)."""
    margin = counter.uncertainty_tokens
    target = target_tokens - margin
    counts = await asyncio.gather(*(counter.count(prompt) for prompt, _ in built))
    sized: list[tuple[Prompt, str, int]] = []
    for (prompt, mark), tokens in zip(built, counts, strict=True):
        delta = math.floor((target - tokens) / unit)
        if prompt.units + delta < 1:
            raise InputError(f"the marker line and question alone take about {tokens - prompt.units * unit} "
                             "tokens, more than the window leaves; lower gen_tokens")
        sized.append((prompt.resized(prompt.units + delta), mark, round(tokens + delta * unit)))
    # The first prompt is counted again as sized: it checks that units add what they should here.
    recount = await counter.count(sized[0][0])
    if abs(recount - sized[0][2]) > 2 * margin:
        raise ProbeError(
            f"resized by whole filler units the first prompt should count {sized[0][2]} tokens but counts {recount}: "
            f"the filler ({FOX_UNIT!r}) does not add a steady number of tokens per unit on this engine"
        )
    sized[0] = (sized[0][0], sized[0][1], recount)
    exactness = "exactly" if margin == 0 else f"to +-{margin} tokens"
    engine.note(
        f"each prompt was counted {exactness} before sending ({counter.method}); one filler unit is "
        f"{float(unit):.4g} tokens, so prompts sit up to {math.ceil(unit) + margin} tokens under "
        f"the target of {target_tokens} (max_model_len - gen - the edge reserve)"
    )
    return sized


async def _send_all(
    client: ProbeClient, args: BoundaryProbeInput, sized: list[tuple[Prompt, str, int]], margin: int,
    progress: Progress | None,
) -> list[BoundaryRequestResult]:
    """Every sized prompt sent at once, each answer judged, progress reported as each one ends."""
    done = 0
    lock = asyncio.Lock()

    async def run(index: int, prompt: Prompt, mark: str, tokens: int) -> BoundaryRequestResult:
        nonlocal done
        result = await _ask(client, args, margin, index, prompt, mark, tokens)
        async with lock:
            done += 1
            if progress is not None:
                await progress(done, args.n, f"request {index + 1}/{args.n}: {result.verdict}")
        return result

    # A TaskGroup: cancelling the probe (or its total timeout) cancels every request in flight.
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(run(i, p, m, t)) for i, (p, m, t) in enumerate(sized)]
    return [task.result() for task in tasks]


async def _ask(
    client: ProbeClient, args: BoundaryProbeInput, margin: int, index: int, prompt: Prompt, mark: str, tokens: int
) -> BoundaryRequestResult:
    """One prompt sent, and its answer judged: was the head marker retrieved, or why not."""
    route, body = generation(args.api, prompt.text(), args.gen_tokens, args.model)
    started = time.perf_counter()
    try:
        answer = await client.post_json(route, body)
    except ProbeError as exc:
        verdict: Verdict = "timeout" if "no answer within" in str(exc) else "error"
        return BoundaryRequestResult(
            index=index, marker=mark, prompt_tokens=tokens, prompt_tokens_reported=None, status=None,
            refusal=None, finish_reason=None, tokens_generated=None, tokens_asked=args.gen_tokens,
            latency_s=round(time.perf_counter() - started, 3), retrieved=False, verdict=verdict,
            answer_start="", note=str(exc),
        )
    judged = judge_boundary(
        answer.status, answer.text, answer.data, mark, tokens, args.gen_tokens, args.dialect, margin
    )
    return BoundaryRequestResult(
        index=index, marker=mark, prompt_tokens=tokens, prompt_tokens_reported=judged.prompt_tokens_reported,
        status=answer.status, refusal=judged.refusal, finish_reason=judged.finish_reason,
        tokens_generated=judged.tokens_generated, tokens_asked=args.gen_tokens,
        latency_s=round(answer.latency_s, 3), retrieved=judged.retrieved, verdict=judged.verdict,
        answer_start=judged.answer_start, note=judged.note,
    )


def _collapse(results: list[BoundaryRequestResult]) -> list[BoundaryRequestResult]:
    """Requests with one outcome (verdict, status, finish, wording but for figures) as one entry with a count."""
    groups: dict[tuple[object, ...], list[BoundaryRequestResult]] = {}
    for r in results:
        key = (r.verdict, r.status, r.finish_reason, r.tokens_generated, alike(r.refusal), alike(r.note))
        groups.setdefault(key, []).append(r)
    return [
        group[0].model_copy(update={
            "count": len(group),
            "indices": [r.index for r in group],
            "latency_s_max": max((r.latency_s for r in group if r.latency_s is not None), default=None),
        })
        for group in groups.values()
    ]
