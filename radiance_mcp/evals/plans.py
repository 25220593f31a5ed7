"""The plan an answer gives, judged by the rule book, whether or not the run called render_gates.

Pure: the answer's plan (submitted through submit_answer, or the flags a line of its text
recommends: ``--vram-kv-mib 7,469 with --max-num-seqs 5``) and the run's successful tool
results in; the rule book's checks that fail, out. The plan is judged against what the run's
own tools returned for the service it plans: the ceiling (compute_ceiling's cards, less its
reserves) by ``capacity.pair_within_ceiling``, and the pool by ``capacity.pool_contract`` at the
model's constants check_pool_contract reported, in the dtype it priced (``contract_check``). A rule the results give
nothing to judge by (no ceiling read, no contract priced) is not judged here; a text line that
moves a flag (``--vram-kv-mib 5,120 -> 6,969``, an option compared) is no plan.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from radiance_mcp.core.constants import KVDtype, ModelConstants
from radiance_mcp.core.errors import RadianceMCPError
from radiance_mcp.core.rules import book, capacity
from radiance_mcp.evals.numbers import normalise
from radiance_mcp.evals.record import Event
from radiance_mcp.models.answer import PlanClaim

_FLAG = r"--{name}[ =]+(?P<value>\d{{1,3}}(?:,\d{{3}})+|\d+)(?!\d)(?![ ,]*(?:->|\u2192))"
_POOL = re.compile(_FLAG.format(name="vram-kv-mib"))
_SEQS = re.compile(_FLAG.format(name="max-num-seqs"))
_WINDOW = re.compile(_FLAG.format(name="max-model-len"))
_DTYPE = re.compile(r"--kv-cache-dtype[ =]+(?P<value>fp8|bf16)\b(?![ ,]*(?:->|\u2192))")


@dataclass(frozen=True)
class Plan:
    """The shape an answer recommends: what render_gates would render."""

    pool_mib: int
    seqs: int | None
    window: int | None
    dtype: str | None
    where: str
    """Where the answer gave it: 'submitted', or the line of its text."""


def _value(pattern: re.Pattern[str], line: str) -> str | None:
    match = pattern.search(line)
    return match.group("value").replace(",", "") if match else None


def plan_of(submitted: PlanClaim | None, text: str) -> Plan | None:
    """The submitted plan, else the last line of the text that recommends --vram-kv-mib (no arrow after it)."""
    if submitted is not None and submitted.pool_mib is not None:
        return Plan(int(submitted.pool_mib), submitted.seqs, submitted.max_model_len, submitted.kv_cache_dtype,
                    "the submitted plan")
    for line in reversed(normalise(text).splitlines()):
        if "->" in line or "\u2192" in line:
            continue
        pool = _value(_POOL, line)
        if pool is not None:
            seqs, window = _value(_SEQS, line), _value(_WINDOW, line)
            return Plan(int(pool), int(seqs) if seqs else None, int(window) if window else None,
                        _value(_DTYPE, line), f"the answer's line {line.strip()[:80]!r}")
    return None


def _last(calls: Sequence[Event], tool: str, service: str | None) -> dict[str, Any] | None:
    for call in reversed(calls):
        if call.ok and call.tool == tool and call.result and (
                service is None or (call.arguments or {}).get("service") in (None, service)):
            return call.result
    return None


def _ceiling(result: dict[str, Any]) -> capacity.Ceiling:
    cards = tuple(capacity.CardCeiling(int(c["card"]), Decimal(str(c["settled_free_mib"])),
                                       Decimal(str(c["engine_floor_mib"])), Decimal(str(c["pair_mib"])),
                                       int(c["ceiling_mib"]), str(c["derivation"]), c.get("max_pair_mib"))
                  for c in result["cards"])
    return capacity.Ceiling(cards, int(result["binding_card"]), int(result["ceiling_mib"]),
                            Decimal(str(result["pair_mib"])), int(result["headroom_mib"]), (),
                            int(result["max_pair_mib"]))


def _weights(result: dict[str, Any]) -> int | None:
    for source in result.get("sources") or ():
        match = re.search(r"--vram-weights-mib\s+(\d+)", str(source.get("text", "")))
        if match:
            return int(match.group(1))
    return None


def judge_plan(plan: Plan, calls: Sequence[Event], service: str | None) -> list[book.Check]:
    """The rule book's checks of the plan that fail, against the run's own results for the service."""
    failed: list[book.Check] = []
    try:
        ceiling = _last(calls, "compute_ceiling", service)
        weights = _weights(ceiling) if ceiling else None
        if ceiling is not None and weights is not None:
            failed.append(capacity.pair_within_ceiling(weights, plan.pool_mib, _ceiling(ceiling)))
        priced = _last(calls, "check_pool_contract", service)
        dtype = plan.dtype or (priced or {}).get("kv_cache_dtype")
        if priced is not None and plan.seqs is not None and dtype == priced["kv_cache_dtype"] in ("fp8", "bf16"):
            kv: KVDtype = "fp8" if dtype == "fp8" else "bf16"
            model = ModelConstants(str(priced["model"]), MappingProxyType({kv: int(priced["rate_bytes_per_token"])}),
                                   int(priced["per_seq_total_mib"]) // max(1, int(priced["seqs"])),
                                   int(priced["fixed_mib"]))
            window = plan.window or int(priced["max_model_len"])
            failed.append(capacity.contract_check(capacity.pool_contract(
                Decimal(plan.pool_mib), plan.seqs, window, kv, model)))
    except (KeyError, TypeError, ValueError, RadianceMCPError):
        pass  # a result that lacks what a check needs (another engine's, a forged one): not judged by it
    return [c for c in failed if c.verdict == "fail"]
