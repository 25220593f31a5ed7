"""plan_free_vram over a fleet of any size answers in at most FLEET_ANSWER_CHARS characters (issue 26 item 1):
the fleet's headroom once per card, the best options, every problem grouped, one page of rows and a cursor to
the next; tested on 206 local services (recorded ledgers under a tmp log root), over the SDK's client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from radiance_mcp.app.server import build_server
from radiance_mcp.sources.config import EXAMPLES_DIR, load
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools.plan_fleet import FLEET_ANSWER_CHARS, PAGE_ROWS

LEDGERS = Path(__file__).parent / "fixtures" / "ledgers"
SETTLED, REFUSED, UNREADABLE, SHARED = 170, 24, 12, 20
"""Settled radiance boots (the first SHARED of them two to a card), refused vLLM boots, files with no boot."""


def fleet(root: Path) -> Path:
    logs = root / "logs"
    logs.mkdir()
    settled = (EXAMPLES_DIR / "frank-archon.log").read_text(encoding="utf-8")
    refused = (LEDGERS / "vllm" / "v0.2.7_alpaca2_refused.log").read_text(encoding="utf-8")
    lines = ["[server]", f"log_roots = {json.dumps([str(logs)])}"]
    kinds = [("ok", settled, SETTLED), ("refused", refused, REFUSED), ("empty", "no ledger here\n", UNREADABLE)]
    for kind, text, count in kinds:
        for i in range(count):
            name = f"{kind}-{i:03d}"
            (logs / f"{name}.log").write_text(text, encoding="utf-8")
            lines += ["", f"[services.{name}]", f"log = {json.dumps(str(logs / f'{name}.log'))}"]
            if kind == "ok" and i < SHARED:
                lines.append(f'cards = ["box{i // 2}:0"]')
    path = root / "fleet.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def size(structured: Any) -> int:
    return len(json.dumps(structured, ensure_ascii=False, separators=(",", ":")))


@pytest.mark.slow  # 206 services planned page by page: about 11 s, so it runs with the slow ones (CI runs it)
async def test_the_whole_fleets_answer_is_bounded_and_pages_by_cursor(tmp_path: Path) -> None:
    total = SETTLED + REFUSED + UNREADABLE
    async with Client(build_server(Runtime(load(fleet(tmp_path))))) as client:
        first = await client.call_tool("plan_free_vram", {})
        assert not first.is_error, first.content
        out: dict[str, Any] = first.structured_content or {}
        print(f"plan_free_vram over {total} services: {size(out):,} characters")
        assert size(out) <= FLEET_ANSWER_CHARS
        assert out["services_total"] == total and out["services"] == []
        # Every problem named, grouped: the refused boots in one group, the files with no boot in another.
        groups = {p["kind"]: p for p in out["problems"]}
        assert groups["refused boot"]["count"] == REFUSED and len(groups["refused boot"]["services"]) < REFUSED
        assert groups["unreadable ledger"]["count"] == UNREADABLE
        # The best options by each measure, most gained first; the shared cards' headroom counted once.
        measures = [b["by"] for b in out["best"]]
        assert {"seats at the window", "window at the seats", "resident slots"} <= set(measures)
        seats = [b["gain"] for b in out["best"] if b["by"] == "seats at the window"]
        assert seats == sorted(seats, reverse=True)
        assert all(len(c["services"]) == 2 for c in out["physical_cards"])
        # The rest, page by page: every service once, each page within the budget.
        seen: list[str] = []
        page = out
        for _ in range(total):  # bounded: a page holds one service at least
            assert len(page["rows"]) <= PAGE_ROWS and size(page) <= FLEET_ANSWER_CHARS
            seen += [r["service"] for r in page["rows"]] + [u["service"] for u in page["unreadable"]]
            if page["next_cursor"] is None:
                break
            nxt = await client.call_tool("plan_free_vram", {"cursor": page["next_cursor"]})
            assert not nxt.is_error, nxt.content
            page = nxt.structured_content or {}
        assert sorted(seen) == sorted(load(tmp_path / "fleet.toml").services)
        # A service's whole plan is one call away, within its own budget; a cursor of nothing is refused.
        one = await client.call_tool("plan_free_vram", {"service": "ok-000"})
        bad = await client.call_tool("plan_free_vram", {"cursor": "bm90IGEgc2VydmljZQ=="})
    assert not one.is_error and [p["service"] for p in (one.structured_content or {})["services"]] == ["ok-000"]
    assert bad.is_error and "cursor" in bad.content[0].text  # type: ignore[union-attr]
