"""A resize plan as one value, and every rule of the book that can judge it from a boot (pure).

plan_free_vram emits ResizePlans, render_gates renders one, and both judge it here with the same
inputs, so an option offered is a plan the gates accept: the pair under the ceiling less the
reserves, the pool over its contract, the sampler rows inside their bound, and each shared
physical card's headroom spent once with its co-tenants' planned growth.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from radiance_mcp.core.boot import Line
from radiance_mcp.core.constants import KVDtype, ModelConstants
from radiance_mcp.core.errors import InputError
from radiance_mcp.core.rules import capacity, sampler, shared
from radiance_mcp.core.rules.book import Check
from radiance_mcp.core.rules.contract import token_contract


@dataclass(frozen=True)
class ResizePlan:
    """The pair and shape a deploy sets: what render_gates renders and verify_deploy holds against a boot."""

    weights_mib: int
    pool_mib: int
    seqs: int
    window: int
    dtype: KVDtype | None
    """None: another engine's, whose rate is its boot's (its cache type is set on the engine)."""
    spec: int | None
    """Draft tokens per step (None: no speculative decoding known)."""

    @property
    def pair_mib(self) -> int:
        return self.weights_mib + self.pool_mib


@dataclass(frozen=True)
class Cotenant:
    """Another service on a shared card, as the gates read it: its pair now, and its env file where there is one."""

    pair_now_mib: Decimal
    env_file: str | None
    prefix: str | None


@dataclass(frozen=True)
class Standing:
    """What a plan is judged against: its boot's ceiling (with the reserves), the pair now, the model's
    constants, the sampler line, and the physical cards it shares with the co-tenants' planned growth."""

    ceiling: capacity.Ceiling
    pair_now_mib: Decimal
    model: ModelConstants
    spec_line: Line | None = None
    shared_cards: Sequence[shared.SharedCard] = ()
    cotenant_growth_mib: Mapping[str, int] | None = None
    service: str = ""
    cotenants: Mapping[str, Cotenant] | None = None
    notes: tuple[str, ...] = ()
    """What the standing could not read (a co-tenant's env file), said beside the plan."""
    rate: Decimal | None = None
    """Another engine's KV bytes per token (its own KV pair's): its pool's contract is counted in tokens at it
    (contract.token_contract); None: radiance's, at the model's constants."""


def contract_of(plan: ResizePlan, standing: Standing) -> capacity.PoolContract:
    """The plan's pool contract by its engine's rule: radiance's at the model's constants per dtype, another
    engine's in tokens at its own rate."""
    if standing.rate is not None:
        return token_contract(Decimal(plan.pool_mib), plan.seqs, plan.window, standing.rate)
    if plan.dtype is None:
        raise InputError("kv_cache_dtype is needed: radiance's pool is priced per --kv-cache-dtype; pass it")
    return capacity.pool_contract(Decimal(plan.pool_mib), plan.seqs, plan.window, plan.dtype, standing.model)


def judge(plan: ResizePlan, standing: Standing) -> tuple[Check, ...]:
    """Every rule the plan can be judged by from its boot, in the order the gates refuse them."""
    contract = contract_of(plan, standing)
    checks = [
        capacity.pair_within_ceiling(plan.weights_mib, plan.pool_mib, standing.ceiling),
        capacity.contract_check(contract),
        *([sampler.sampler_rows(plan.seqs, plan.spec, standing.spec_line)] if standing.rate is None else []),
    ]
    binding = standing.ceiling.binding_card
    held = sum((r.mib for r in standing.ceiling.reserves if r.card in (None, binding)), Decimal(0))
    growth = {standing.service: math.ceil(plan.pair_mib - standing.pair_now_mib),
              **(standing.cotenant_growth_mib or {})}
    for card in standing.shared_cards:
        on_card = {v.service for v in card.views}
        checks.append(shared.shared_card(card, {n: g for n, g in growth.items() if n in on_card}, held))
    return tuple(checks)
