"""plan_free_vram: headroom per card, counted once per physical card, and the options it buys, each traced."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from mcp import Client
from shared_server import empty_fleet_server

from radiance_mcp.app.server import build_server
from radiance_mcp.core import planning
from radiance_mcp.core.boot import Figure, Line, Missing, RankView
from radiance_mcp.core.constants import DEFAULT_MODEL, KVDtype, ModelConstants
from radiance_mcp.core.ledger import read_text
from radiance_mcp.core.rules import shared
from radiance_mcp.core.rules.capacity import Reserve
from radiance_mcp.sim import SimFleet
from radiance_mcp.sources.config import load
from radiance_mcp.sources.runtime import Runtime

TINY = ModelConstants("tiny-moe", MappingProxyType({"fp8": 4_096, "bf16": 8_192}), per_seq_mib=12, fixed_mib=64)
SEED_SLOPE = planning.Slope(Decimal(1_300), Decimal(1_792), None)


@pytest.mark.parametrize(
    ("pool", "headroom", "seqs", "window", "dtype", "model", "seats", "longest", "idle_now", "idle_seats"),
    [
        # 5,120 + 1,849 = 6,969; a seat at 200,000 fp8 = 200,000 x 7,488 B = 1,428.22 MiB + 110 = 1,538.22:
        # (6,969 - 448) / 1,538.22 = 4.24 -> 4; window (6,969 - 448 - 220) x 2^20 / (2 x 7,488) = 441,177.2;
        # idle now 5,120 - 3,524.45 = 1,595.55; at 4 seats 6,969 - (4 x 1,538.22 + 448) = 368.11
        (5_120, 1_849, 2, 200_000, "fp8", DEFAULT_MODEL, 4, 441_177, "1595.55", "368.11"),
        # bf16: 200,000 x 14,144 B = 2,697.75 + 110 = 2,807.75 a seat: 6,521 / 2,807.75 = 2.32 -> 2;
        # window 6,301 x 2^20 / (2 x 14,144) = 233,564.9; now 5,120 < 6,063.51 needed: nothing idle;
        # at 2 seats 6,969 - 6,063.51 = 905.49
        (5_120, 1_849, 2, 200_000, "bf16", DEFAULT_MODEL, 2, 233_564, "0", "905.49"),
        # another model: 1,000 + 500 = 1,500; a seat at 8,192 tokens x 4,096 B = 32 MiB + 12 = 44:
        # (1,500 - 64) / 44 = 32.6 -> 32; window (1,500 - 64 - 48) x 2^20 / (4 x 4,096) = 1,388 x 64 = 88,832;
        # idle now 1,000 - (4 x 44 + 64) = 760; at 32 seats 1,500 - (32 x 44 + 64) = 28
        (1_000, 500, 4, 8_192, "fp8", TINY, 32, 88_832, "760", "28"),
    ],
)
def test_more_kv_is_priced_by_the_contract(
    pool: int, headroom: int, seqs: int, window: int, dtype: KVDtype, model: ModelConstants, seats: int,
    longest: int, idle_now: str, idle_seats: str,
) -> None:
    price = planning.price_kv(Decimal(pool), headroom, seqs, window, dtype, model, SEED_SLOPE)
    assert price.pool_mib == pool + headroom
    assert (price.seats_at_window, price.window_at_seats) == (seats, longest)
    assert round(price.idle_now_mib, 2) == Decimal(idle_now)
    assert round(price.idle_seats_mib, 2) == Decimal(idle_seats)
    assert price.idle_window_mib < 1  # the longest window fills the pool to the last token
    assert price.slab_slots_forgone == headroom * 1_300 // 1_792  # e.g. 1,849 x 1,300 / 1,792 = 1,341.3


def test_the_slope_is_the_boots_own_mover_ratio_else_the_constant(example_text: str) -> None:
    boot = read_text(example_text, source="t.log")
    slope = planning.slab_slope(boot)
    assert slope.line is not None and "ledger mover" in slope.line.text
    assert (slope.slots, slope.mib) == (1_300, Decimal("1.75") * 1024)  # 1,300 slots (1.75 GiB = 1,792 MiB)
    other = read_text(example_text.replace("1300 slots", "2600 slots").replace("(1.75 GiB)", "(3.00 GiB)"), source="t")
    assert planning.slab_slope(other).slots_for(Decimal(3_072)) == 2_600  # 3 GiB at 2,600 / 3,072 MiB
    without = read_text("\n".join(x for x in example_text.splitlines() if "ledger mover" not in x), source="t")
    assert planning.slab_slope(without) == SEED_SLOPE


@pytest.mark.parametrize(
    ("host_pool", "gained", "capped"),
    [
        (7_580, 1_341, False),  # 1,849 x 1,300 / 1,792 = 1,341.3 slots, the host pool holds 7,580
        (900, 900, True),  # only 900 slots left on the slow path: past them every expert is resident
    ],
)
def test_more_slab_moves_slots_from_the_host_pool(host_pool: int, gained: int, capped: bool) -> None:
    slab = planning.SlabLine(17_548, host_pool, read_text("I slab slots 1 resident\n", source="t").hits[0].line)
    price = planning.price_slab(Decimal(24_000), 1_849, SEED_SLOPE, slab)
    assert (price.weights_mib, price.slots_gained, price.capped_by_host_pool) == (25_849, gained, capped)


def test_a_shared_card_offers_its_headroom_once_less_the_other_floors() -> None:
    views = [
        shared.CardHeadroom("a", 1, "box:1", 1_787, Decimal("209.19")),
        shared.CardHeadroom("b", 0, "box:1", 3_968, Decimal("150.5")),
        shared.CardHeadroom("a", 0, "box:0", 1_849, Decimal("209.19")),
    ]
    cards = shared.share(views)
    # a reads 1,787 - b's floor 150.5 (whole MiB up: 151) = 1,636; b reads 3,968 - 210 = 3,758: a binds
    assert cards["box:1"].headroom_mib == 1_636 and cards["box:1"].binding.service == "a"
    assert "150.50 (b's floor)" in cards["box:1"].derivation
    assert cards["box:0"].headroom_mib == 1_849  # alone on its card
    # Both services' pairs growing on box:1 spend it once: 1,000 + 700 > 1,636; 1,000 + 600 fits.
    over = shared.shared_card(cards["box:1"], {"a": 1_000, "b": 700})
    assert over.verdict == "fail" and "1,000 (a) + 700 (b) = 1,700 MiB > its headroom counted once 1,636" \
        in over.arithmetic
    assert shared.shared_card(cards["box:1"], {"a": 1_000, "b": 600}).passed


# ---------------------------------------------------------------------------------------
# At the MCP boundary


def traced(node: Any) -> Iterator[dict[str, Any]]:
    """Every traced figure in an output (a card's figure is named by its key, in MiB)."""
    if isinstance(node, dict):
        if "value" in node.keys() and node.keys() & {"line", "text"}:
            yield node
        for value in node.values():
            yield from traced(value)
    elif isinstance(node, list):
        for value in node:
            yield from traced(value)


async def call(runtime: Runtime, **arguments: Any) -> dict[str, Any]:
    async with Client(build_server(runtime)) as client:
        result = await client.call_tool("plan_free_vram", arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def test_one_call_on_the_example_answers_with_every_figure_traced(example_path: Path) -> None:
    out = await call(Runtime(load(None)), log=str(example_path))
    plan = out["services"][0]
    card = plan["cards"][0]
    assert card["ceiling_mib"] == 30_969 and card["headroom_mib"] == plan["usable_mib"] == 1_849
    options = {o["name"]: o for o in plan["options"]}
    assert set(options) == {"more KV, fp8", "more KV, bf16", "more slab"}
    fp8 = {g["name"]: g["value"] for g in options["more KV, fp8"]["gains"]}
    assert fp8 == {"seats at 200,000 tokens": 4, "window at 2 seats": 441_177}
    takes = {t["name"]: t["value"] for t in options["more KV, fp8"]["takes"]}
    # the pool steals twice: 1,341 slots never reach the slab (what more slab gains); the mover's idle KV,
    # 1,595.55 MiB x 1,300 / 1,792 = 1,157 slots with 2 seats full now, falls to 368.11 MiB -> 267 slots with the
    # 4 seats of the first plan full, and to none with 2 seats full at the longest window
    assert takes == {"mover slots now, seats full": 1_157}
    movers = [(p["seqs"], p["max_model_len"], p["idle_kv_mib"], p["mover_slots"])
              for p in options["more KV, fp8"]["plans"]]
    assert movers[0] == (4, 200_000, 368.11, 267) and movers[1][:2] == (2, 441_177) and movers[1][3] == 0
    assert options["more slab"]["flags"] == ["--vram-weights-mib 24,000 -> 25,849"]
    assert {g["name"]: g["value"] for g in options["more slab"]["gains"]} == {
        "resident expert slots gained": 1_341, "resident slots after": 18_889}  # 17,548 + 1,341
    assert "prefill" in options["more slab"]["axis"] and "decode" not in plan  # the tool's description says it
    lines = example_path.read_text().splitlines()
    figures = list(traced(out))
    assert len(figures) > 15
    for figure in figures:  # a ledger figure's line is quoted once, in the plan's lines
        if "line" in figure:
            assert figure["source"] == "ledger" and "text" not in figure, figure
            assert lines[figure["line"] - 1] == plan["lines"][str(figure["line"])], figure
        else:
            assert figure.get("source", "arithmetic") != "ledger" and figure["text"], figure
    assert {int(n) for n in plan["lines"]} == {f["line"] for f in figures if "line" in f} | {
        n for check in plan["checks"] for n in check["lines"]}
    assert out["sharing"] == "unknown" and "upper bound" in out["notes"][0]
    assert "30,969" in out["summary"][0]


async def test_the_whole_fleet_counts_a_shared_card_once(tmp_path: Path) -> None:
    async with SimFleet.start(tmp_path, time_scale=0.0001) as fleet:
        runtime = Runtime(load(fleet.config_path))
        whole, twin, lowpool = await asyncio.gather(call(runtime), call(runtime, service="twin"),
                                                    call(runtime, service="lowpool"))
    # The fleet's answer holds a row per service (its headroom, its options in a line each), not its plan.
    plans = {p["service"]: p for p in whole["rows"]}
    assert set(plans) == {"frank-archon", "qwen38-proven", "twin", "lowpool"}
    assert [u["service"] for u in whole["unreadable"]] == ["qwen38-wide"]  # refused: no settled line
    # its reason is the refused-boot problem's, said there once (with its remedy); its entry names that problem
    (refused,) = whole["unreadable"]
    assert refused["error"] is None and whole["problems"][refused["problem"]]["kind"] == "refused boot"
    assert "read the ceiling from a boot that settled" in whole["problems"][refused["problem"]]["detail"]
    cards = {c["card"]: c for c in whole["physical_cards"]}
    # twin's card 1 reads 30,907 - 29,120 = 1,787 MiB (64 MiB more charged there), less lowpool's 209.19 MiB
    # floor (whole MiB up: 210) = 1,577; lowpool's own boot reads 3,968, but the card's free memory is one
    assert cards["gpubox:1"]["headroom_mib"] == 1_577 and sorted(cards["gpubox:1"]["services"]) == [
        "lowpool card 0", "twin card 1"]
    assert plans["lowpool"]["headroom_mib"] == plans["twin"]["headroom_mib"] == 1_577
    (alone,) = lowpool["services"]
    assert alone["cards"][0]["headroom_mib"] == 3_968 and alone["sharing"] == "known"
    own = {n: p["headroom_mib"] for n, p in plans.items() if n in ("frank-archon", "qwen38-proven")}
    # counted once: gpubox:0 (1,849) + gpubox:1 (1,577) + the two dankserver services, whose cards are not named
    assert whole["fleet_headroom_mib"] == 1_849 + 1_577 + sum(own.values())
    assert whole["sharing"] == "partial" and any("frank-archon, qwen38-proven" in n for n in whole["notes"])
    # asked for twin alone, lowpool is still read: it shares twin's card 1
    assert [p["service"] for p in twin["services"]] == ["twin"]
    # the fleet's answer names its shared cards (the page's); twin's own plan names the shared one of twin's (its
    # card gpubox:0, twin's alone, is twin's card 0)
    assert twin["physical_cards"] == whole["physical_cards"]
    (card,) = [c for c in twin["services"][0]["cards"] if c["shared_with"]]
    assert (card["physical"], card["shared_with"], card["headroom_once_mib"]) == ("gpubox:1", ["lowpool"], 1_577)


async def test_reserves_are_traced_or_personal_and_come_off_the_headroom(example_path: Path) -> None:
    runtime = Runtime(load(None))
    out = await call(runtime, log=str(example_path), reserves=[
        {"mib": 268.11, "label": "unclaimed less the floor", "line": 18},
        {"mib": 300, "label": "my margin for a second model", "personal": True},
    ])
    plan = out["services"][0]
    assert plan["usable_mib"] == 1_280  # 1,849 - 268.11 (477.30 unclaimed less the 209.19 floor) - 300 = 1,280.89
    assert plan["personal_reserves"] == ["my margin for a second model"]
    assert {o["adds_mib"] for o in plan["options"]} == {1_280}
    async with Client(build_server(runtime)) as client:
        untraced = await client.call_tool("plan_free_vram", {"log": str(example_path),
                                                             "reserves": [{"mib": 250, "label": "gut feeling"}]})
        fleetwide = await client.call_tool("plan_free_vram", {"reserves": [{"mib": 1, "label": "x", "personal": True}]})
    assert untraced.is_error and "neither traced nor labelled" in untraced.content[0].text  # type: ignore[union-attr]
    assert fleetwide.is_error and "reserves cite the lines of one ledger" in fleetwide.content[0].text  # type: ignore[union-attr]


BootText = Callable[..., str]


async def test_a_boot_without_a_mover_line_or_seats_says_what_it_cannot_price(boot_text: BootText) -> None:
    flags = {"max-model-len": "131072", "kv-cache-dtype": "bf16", "vram-weights-mib": "20000", "vram-kv-mib": "9000"}
    text = "\n".join(line for line in boot_text(flags=flags).splitlines() if "ledger mover" not in line)
    out = await call(Runtime(load(None)), log_text=text)
    plan = out["services"][0]
    assert plan["slope"]["source"] == "model constant" and "1,300 slots per 1,792 MiB" in plan["slope"]["text"]
    assert [o["name"] for o in plan["options"]] == ["more slab"]
    assert any("does not echo --max-num-seqs" in n for n in plan["notes"])


async def test_a_pair_at_the_ceiling_has_nothing_to_spend(boot_text: BootText, example_text: str) -> None:
    card = {"total": "31.86 GiB", "weights": "25.00 GiB", "kv": "5.00 GiB", "unclaimed": "10.00 MiB",
            "budgets": "30.00 GiB", "unaccounted": "1.86 GiB", "free": "330.00 MiB", "floor": "330.00 MiB",
            "headroom": "96.00 MiB", "static": "234.00 MiB"}
    flags = {"max-num-seqs": "1", "max-model-len": "65536", "kv-cache-dtype": "fp8", "vram-weights-mib": "25600",
             "vram-kv-mib": "5120"}
    out = await call(Runtime(load(None)), log_text=boot_text(flags=flags, cards=[card]))
    plan = out["services"][0]
    assert plan["usable_mib"] == 0 and plan["options"] == []
    assert any("no headroom to spend" in n for n in plan["notes"])


async def test_a_config_whose_cards_do_not_match_the_boot_says_sharing_is_unknown(
    tmp_path: Path, example_path: Path
) -> None:
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f'[services.solo]\nlog = "{example_path}"\ncards = ["rig-a:0", "rig-a:1"]\n', encoding="utf-8")
    out = await call(Runtime(load(fleet)), service="solo")
    assert out["sharing"] == "unknown" and "names 2 card(s) but its boot has 1" in out["notes"][0]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"service": "nope"}, "service 'nope' is not in the fleet"),
        ({"service": "x", "log_text": "y"}, "at most one of service, log, log_text or container"),
        ({"log_text": "I radiance boot: x\nhello\n"}, "settled at"),
        ({"host": "h"}, "host 'h' is not in the fleet config"),
    ],
)
async def test_bad_requests_say_what_to_give(arguments: dict[str, Any], message: str) -> None:
    async with Client(empty_fleet_server()) as client:
        result = await client.call_tool("plan_free_vram", arguments)
    assert result.is_error and message in result.content[0].text  # type: ignore[union-attr]


LINE = Line(1, "a line")
PERSONAL = Reserve(Decimal(100), "desktop", None)
ON_CARD_1 = Reserve(Decimal("250.5"), "traced", LINE, card=1)


@pytest.mark.parametrize(
    ("headrooms", "reserves", "card", "held", "usable"),
    [
        ([(0, 1_000), (1, 900)], (), 1, "0", 900),  # the least headroom binds
        ([(0, 1_000), (1, 1_000)], (), 0, "0", 1_000),  # a tie: the lower card
        # card 0: 1,000 - 100 = 900; card 1: 1,100 - 100 - 250.5 = 749.5 -> card 1 binds, 749 to spend
        ([(0, 1_000), (1, 1_100)], (PERSONAL, ON_CARD_1), 1, "350.5", 749),
        # card 1's reserve moves the binding card: 1,000 - 0 against 1,200 - 250.5 = 949.5
        ([(0, 1_000), (1, 1_200)], (ON_CARD_1,), 1, "250.5", 949),
        ([(0, -672)], (), 0, "0", -672),  # below the floor: nothing to spend, the shortfall kept
    ],
)
def test_spend_binds_the_card_with_least_left_after_its_reserves(
    headrooms: list[tuple[int, int]], reserves: tuple[Reserve, ...], card: int, held: str, usable: int,
) -> None:
    spend = planning.spend(headrooms, reserves)
    assert (spend.card, spend.held_mib, spend.usable_mib) == (card, Decimal(held), usable)
    assert spend.headroom_mib == dict(headrooms)[card]


def _figure(value: str, unit: str) -> Figure:
    return Figure(Decimal(value), unit, (LINE,))


def test_more_kv_at_the_engines_own_rate() -> None:
    # 2,048 tokens + 12,354 MiB x 2^20 B / 327,680 B = 39,532.8 -> 39,532 more: 41,580 tokens, / 2,048 = 20.30
    rank = RankView("CUDA0", kv_tokens=_figure("2048", "tokens"), kv_bytes_per_token=_figure("327680", "B/token"),
                    window_tokens=_figure("2048", "tokens"))
    price = planning.price_engine_kv(rank, 12_354)
    assert (price.tokens_now, price.tokens_after, price.sequences_after) == (2_048, 41_580, Decimal("20.30"))
    assert price.gaps == ()
    # without a window: tokens only
    assert planning.price_engine_kv(RankView("engine", kv_tokens=rank.kv_tokens,
                                             kv_bytes_per_token=rank.kv_bytes_per_token), 1).sequences_after is None


def test_more_kv_unpriced_names_what_the_rank_lacks() -> None:
    gap = Missing("kv_tokens", "the KV cache line", "raise the log level")
    price = planning.price_engine_kv(RankView("TP0", missing=(gap,)), 500)
    assert price.tokens_after is None and price.gaps == (str(gap),)


def test_a_pair_set_in_mib_prices_the_pool_and_the_slab() -> None:
    pair = _figure("29120", "MiB")
    assert planning.sets_pair_in_mib(RankView("0", pair=pair, pair_source="echoed flags"))
    assert not planning.sets_pair_in_mib(RankView("TP0", weights_mib=pair, kv_mib=pair))
