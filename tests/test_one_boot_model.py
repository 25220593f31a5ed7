"""One boot model: compute_ceiling answers a boot of every engine through one rule, in one form.

Driven through the SDK's in-memory MCP client over every recorded ledger (the shipped radiance
examples and the other engines' public logs in tests/fixtures/ledgers): each ceiling that comes
back holds the same parts, and its derivation is the arithmetic of its own binding card.
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
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet, ServerSettings
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
