"""One boot model: compute_ceiling and plan_free_vram answer a boot of every engine through one rule, in one form.

Driven through the SDK's in-memory MCP client over every recorded ledger (the shipped radiance
examples and the other engines' public logs in tests/fixtures/ledgers): each ceiling that comes
back holds the same parts, and its derivation is the arithmetic of its own binding card; each plan
stands on those ceilings, spends its binding card's headroom once, and holds the same parts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from radiance_mcp.app.server import build_server
from radiance_mcp.core.boot import Boot
from radiance_mcp.core.engines import read_engine_boot
from radiance_mcp.core.ledger import read_text
from radiance_mcp.core.rules import capacity
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet, ServerSettings, Service
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parent / "fixtures" / "ledgers"
LOGS = [*sorted(EXAMPLES_DIR.glob("*.log")), *sorted(LEDGERS.glob("*/*.log"))]


def boot_of(log: Path) -> Boot:
    text = log.read_text(encoding="utf-8", errors="replace")
    # source "log_text": the name the tool gives text passed inline, so the rule's refusal reads alike
    if log.parent == EXAMPLES_DIR:
        return read_text(text, source="log_text")
    return read_engine_boot(text, source="log_text")


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_compute_ceiling_answers_every_engine_in_one_form(log: Path) -> None:
    boot = boot_of(log)
    async with Client(build_server(Runtime(Fleet(server=ServerSettings())))) as client:
        result = await client.call_tool("compute_ceiling", {"log_text": log.read_text(errors="replace")})
    if result.is_error:
        # The same refusal the rule gives the boot: not settled, or a figure the log lacks, named.
        with pytest.raises(Exception) as caught:  # noqa: PT011 - any error of the rule
            capacity.ceilings(boot)
        assert str(caught.value) in result.content[0].text  # type: ignore[union-attr]
        return
    out: dict[str, Any] = result.structured_content or {}
    ranks = capacity.ceilings(boot)
    binding = next(r for r in ranks if r.card.card == out["binding_card"])
    # The ceiling is the binding card's (free - floor) + pair, for every engine alike.
    assert out["ceiling_mib"] == min(r.card.ceiling_mib for r in ranks) == binding.card.ceiling_mib
    assert out["derivation"].endswith(binding.card.derivation)
    assert [c["derivation"] for c in out["cards"] if c["card"] == out["binding_card"]] == [out["derivation"]]
    assert {ref["line"] for ref in out["sources"]} == {line.number for line in binding.lines}
    notes = out["notes"]
    assert f"the pair comes from the {binding.pair_from}" in notes
    assert f"the floor: {binding.floor_note}" in notes
    assert any(note.startswith("the KV memory moves with ") for note in notes)
    if boot.engine == "radiance":
        assert out["derivation"] == binding.card.derivation  # radiance's cards are their own numbers
    else:
        assert out["derivation"] == f"{binding.rank}: {binding.card.derivation}"
        assert notes[-1].startswith("cards are numbered in rank order")


CARD_FIGURES = ("vram_weights", "vram_kv", "engine_floor", "settled_free")
"""Each card figure a plan publishes of its binding card, named by its key, for every engine."""


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_plan_free_vram_answers_every_engine_in_one_form(log: Path) -> None:
    text = log.read_text(errors="replace")
    async with Client(build_server(Runtime(Fleet(server=ServerSettings())))) as client:
        ceiling = await client.call_tool("compute_ceiling", {"log_text": text})
        result = await client.call_tool("plan_free_vram", {"log_text": text})
        held = await client.call_tool("plan_free_vram", {"log_text": text, "reserves": [
            {"mib": 1, "label": "one MiB", "personal": True}]})
    # The plan stands on the same ceiling: the same refusal where there is none.
    assert result.is_error == ceiling.is_error
    if result.is_error:
        assert result.content[0].text == ceiling.content[0].text  # type: ignore[union-attr]
        return
    (plan,) = (result.structured_content or {})["services"]
    (held_plan,) = (held.structured_content or {})["services"]
    out: dict[str, Any] = ceiling.structured_content or {}
    # Every card plan is compute_ceiling's card: its ceiling, its derivation, its headroom.
    assert {c["card"]: (c["ceiling_mib"], c["derivation"], c["headroom_mib"]) for c in plan["cards"]} == {
        c["card"]: (c["ceiling_mib"], c["derivation"], c["headroom_mib"]) for c in out["cards"]}
    # The binding card in full, its figures in one form for every engine: {value, line} read off a ledger line
    # (the plan's lines quote it) or {value, text}, its arithmetic; each other card a short row without them.
    binding = next(c for c in plan["cards"] if c["card"] == plan["binding_card"])
    assert binding["settled_free"]["value"] == next(c["settled_free_mib"] for c in out["cards"]
                                                    if c["card"] == binding["card"])
    for field in CARD_FIGURES:
        figure = binding[field]
        assert set(figure) in ({"value", "line", "source"}, {"value", "text"}), (field, figure)
        assert "line" not in figure or str(figure["line"]) in plan["lines"], (field, figure)
    assert all(not set(CARD_FIGURES) & set(c) for c in plan["cards"] if c is not binding)
    # The binding card has the least headroom, spent once; each option spends what the reserves leave.
    assert binding["headroom_once_mib"] == min(c["headroom_once_mib"] for c in plan["cards"]) == plan["headroom_mib"]
    assert plan["usable_mib"] == plan["headroom_mib"]
    assert held_plan["usable_mib"] == plan["usable_mib"] - 1 and held_plan["personal_reserves"] == ["one MiB"]
    for option in plan["options"]:
        assert option["adds_mib"] == plan["usable_mib"] <= binding["headroom_once_mib"]
    notes = plan["notes"]
    spent = plan["usable_mib"] <= 0  # nothing to spend: one note says so, and no option is offered
    assert len([n for n in notes if n.startswith("no headroom to spend: ")]) == spent
    assert (plan["options"] == []) == spent
    assert (f"card {binding['card']} has the least headroom and binds every card (the pair is per card)" in notes) \
        == (len(plan["cards"]) > 1)
    # The summary's first line is the binding card's, for every engine.
    assert result.structured_content["summary"][0].startswith(  # type: ignore[index]
        f"log_text: card {binding['card']} ceiling {binding['derivation']}; headroom {binding['headroom_mib']:,} MiB")
    # The options follow what the boot prints: a pair it sets in MiB prices KV per dtype and the slab (with its
    # slope); another engine's KV memory is priced once, at its own bytes per token (no slope, no slab).
    names = [o["name"] for o in plan["options"]]
    if plan["slope"] is not None:
        assert names in ([], ["more slab"], ["more KV, fp8", "more KV, bf16", "more slab"])
    else:
        assert names in ([], ["more KV"]) and plan["slab"] is None and plan["model"] == boot_of(log).engine


async def test_the_config_card_count_note_holds_for_every_engine() -> None:
    """A config naming 2 physical cards for a boot of 1 (llama.cpp's CUDA0) says so, and maps none: before,
    only radiance's boots had the note, and another engine's took the first name silently."""
    pythia = LEDGERS / "llamacpp" / "heldout_b4641_ci_v100_pythia-2.8b.log"
    services = {"pythia": Service(log=str(pythia), cards=("box:0", "box:1"))}
    fleet = Fleet(services=services, server=ServerSettings(log_roots=(str(LEDGERS),)))
    async with Client(build_server(Runtime(fleet))) as client:
        result = await client.call_tool("plan_free_vram", {"service": "pythia"})
    assert not result.is_error, result.content
    out: dict[str, Any] = result.structured_content or {}
    assert "pythia: the config names 2 card(s) but its boot has 1; its sharing is unknown until cards lists one " \
        "physical card per engine card" in out["notes"]
    (plan,) = out["services"]
    assert [c["physical"] for c in plan["cards"]] == [None] and out["sharing"] == "unknown"
    assert out["physical_cards"] == []


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_check_pool_contract_answers_every_engine_in_one_form(log: Path) -> None:
    """One path: the boot's state and refusal lines, its ceiling check worded alike, the same provenance."""
    boot = boot_of(log)
    async with Client(build_server(Runtime(Fleet(server=ServerSettings())))) as client:
        result = await client.call_tool("check_pool_contract", {"log_text": log.read_text(errors="replace"), "seqs": 1})
    if result.is_error:
        return  # an input the boot neither gives nor prints is named (the snapshots keep each message)
    out: dict[str, Any] = result.structured_content or {}
    assert out["boot_status"] == boot.state.status
    assert [ref["line"] for ref in out["refusal_lines"]] == (
        [] if boot.state.status == "settled" else [line.number for line in boot.state.lines])
    verdicts = {check["rule"]: check["verdict"] for check in out["checks"]}
    assert verdicts["pool_contract"] == ("pass" if out["contract_ok"] else "fail")
    assert verdicts["pair_within_ceiling"] == (
        "unchecked" if out["ceiling"] is None else "pass" if out["ceiling"]["ok"] else "fail")
    # ok is true only if every rule passed; null if none failed but one was not checked
    expected = (False if "fail" in verdicts.values() or boot.state.status != "settled"
                else None if "unchecked" in verdicts.values() else True)
    assert out["ok"] is expected
    if out["ceiling"] is not None:
        card = out["ceiling"]["binding_card"]  # no reserves: the card that binds is the tightest
        assert f"(card {card}'s ceiling " in out["ceiling"]["formula"]
        assert f"= {out['ceiling']['ceiling_mib']:,} MiB/card" in out["ceiling"]["formula"]
    elif boot.state.status == "settled":
        assert any(note.startswith("the ceiling was not checked: ") for note in out["notes"])
    assert any(note.startswith("figures from caller-supplied text (log_text), unverified: they were not read")
               for note in out["notes"])
    assert out["inputs_from"]["seqs"] == "argument"
