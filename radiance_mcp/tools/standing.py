"""What a resize plan is judged against, read from the fleet: the physical cards a service shares and each
co-tenant's headroom and planned growth (its env file), and the rules on a boot as it runs.

plan_free_vram and render_gates both build their rules_plan.Standing from here, so the rule book judges an
option offered and a plan rendered with the same inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from radiance_mcp.core.boot import Boot, Line
from radiance_mcp.core.constants import ModelConstants
from radiance_mcp.core.errors import GuardRailError, RadianceMCPError
from radiance_mcp.core.rules import book, capacity, contract, sampler
from radiance_mcp.core.rules import plan as rules_plan
from radiance_mcp.core.rules import shared as shared_rule
from radiance_mcp.models.ledger_ref import LedgerRef
from radiance_mcp.sources.engine_logs import read_ledger
from radiance_mcp.sources.env_files import EnvRead, service_env
from radiance_mcp.sources.offload import gather
from radiance_mcp.sources.runtime import Runtime


def headroom_views(name: str, ranks: Sequence[capacity.RankCeiling], physical: Sequence[str],
                   ) -> list[shared_rule.CardHeadroom]:
    """A service's cards as the shared-card rule reads them, named by the config's cards in order; none where the
    config names another number of cards than the boot has (its sharing is then unknown)."""
    if len(physical) != len(ranks):
        return []
    return [shared_rule.CardHeadroom(name, r.card.card, physical[i], r.card.headroom_mib, r.card.floor_mib)
            for i, r in enumerate(ranks)]


async def shared_cards(runtime: Runtime, service: str, boot: Boot,
                       ) -> tuple[list[shared_rule.SharedCard], dict[str, Decimal]]:
    """The physical cards service (its boot given) shares with other services of the config, each with its
    headroom counted once (their newest boots), and each co-tenant's pair now. A co-tenant whose boot gives no
    ceiling leaves the card unknown: refused (shared_card), as its headroom cannot be counted once."""
    fleet = runtime.fleet
    mine = fleet.services[service].cards
    others = sorted(n for n, s in fleet.services.items() if n != service and set(mine) & set(s.cards))
    if not others:
        return [], {}
    reads: list[Any] = await gather(*(read_ledger(runtime, LedgerRef(service=n, boot=-1)) for n in others),
                                    return_exceptions=True)
    views = headroom_views(service, capacity.ceilings(boot), mine)
    pairs: dict[str, Decimal] = {}
    for name, result in zip(others, reads, strict=True):
        try:
            if isinstance(result, BaseException):
                raise result
            ranks = capacity.ceilings(result)
        except RadianceMCPError as exc:
            raise GuardRailError(
                f"{service} shares {', '.join(sorted(set(mine) & set(fleet.services[name].cards)))} with {name}, "
                f"whose boot gives no ceiling ({exc}): the card's headroom cannot be counted once; read {name}'s "
                "ledger (read_budget_table) and fix its source, or correct the config's cards",
                rule="shared_card") from exc
        views += headroom_views(name, ranks, fleet.services[name].cards)
        pairs[name] = ranks[0].card.pair_mib
    cards = shared_rule.share(views)
    return [cards[p] for p in dict.fromkeys(mine) if p in cards and len({v.service for v in cards[p].views}) > 1], \
        pairs


UNREAD_ENV = "{why}: its pair is counted as its boot's"


def _growth(env: EnvRead, pair_now: Decimal) -> int:
    """A service's planned growth over its pair now: its env file's pair less that (0 without one read here)."""
    if env is None or isinstance(env, str):
        return 0
    return math.ceil(env[1].weights_mib + env[1].pool_mib - pair_now)


async def standing(runtime: Runtime, service: str | None, boot: Boot, ceiling: capacity.Ceiling,
                   model: ModelConstants, spec_line: Line | None) -> rules_plan.Standing:
    """What a plan of service on boot is judged against (rules_plan.judge): its ceiling, its pair now, and
    the physical cards it shares, with each co-tenant's growth as its env file plans it (none: its boot's; an
    env file that cannot be read is said in the standing's notes)."""
    if service is None:
        return rules_plan.Standing(ceiling, ceiling.pair_mib, model, spec_line)
    cards, pairs = await shared_cards(runtime, service, boot)
    envs = dict(zip(pairs, await gather(*(service_env(runtime, other) for other in pairs)), strict=True))
    # The bats gate sources a co-tenant's env file for its pair in MiB: radiance's; another engine's knobs are not
    # a pair the shell can add, so its pair counts as its boot's there (its planned growth is still spent here).
    cotenants = {o: rules_plan.Cotenant(pairs[o], e[0], e[1].prefix) if isinstance(e, tuple) and e[1].kv is None
                 else rules_plan.Cotenant(pairs[o], None, None) for o, e in envs.items()}
    return rules_plan.Standing(
        ceiling, ceiling.pair_mib, model, spec_line, cards, {o: _growth(e, pairs[o]) for o, e in envs.items()},
        service, cotenants, tuple(UNREAD_ENV.format(why=e) for e in envs.values() if isinstance(e, str)))


async def planned_growth(runtime: Runtime, pairs: dict[str, Decimal]) -> tuple[dict[str, int], list[str]]:
    """How much each service's env file grows its pair over its pair now (pairs, by service; 0: no env file read
    here), and a note for each env file that cannot be read."""
    envs = await gather(*(service_env(runtime, name) for name in pairs))
    growth = {name: _growth(env, pair) for (name, pair), env in zip(pairs.items(), envs, strict=True)}
    return growth, [UNREAD_ENV.format(why=env) for env in envs if isinstance(env, str)]


def standing_checks(boot: Boot, model: ModelConstants) -> list[book.Check]:
    """The rule book's rules on the boot as it runs: its pool against its contract (every input read off the
    boot, by its engine's rule), and its sampler rows where it prints a spec."""
    try:
        reading = contract.boot_contract(boot, dict.fromkeys(contract.CONTRACT_INPUTS), model)
    except RadianceMCPError as exc:
        checks = [book.Check("pool_contract", "unchecked", "the boot does not give every input of the contract",
                             remedy=str(exc))]
    else:
        pool_line = reading.inputs_from.get("pool_mib")
        checks = [capacity.contract_check(reading.contract, pool_line) if reading.contract is not None
                  else contract.unpriced_check(reading, boot)]
    spec, line = sampler.boot_spec(boot)
    seqs = boot.flags.get("max-num-seqs")
    if spec is not None and seqs is not None:
        checks.append(sampler.sampler_rows(int(seqs.number("value", boot.where())), spec, line))
    return checks
