"""What every rank (or service) says alike is said once, as an agent reads it over MCP (issue 26): an agent pays
for every character, so a sentence repeated per row appears once, naming the rows it applies to, and each rank
keeps the figures where they differ. Driven through the SDK's in-memory client; the figures worked by hand from
the logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp import Client

from radiance_mcp.app.server import build_server
from radiance_mcp.models.plan import PlanFreeVramOutput
from radiance_mcp.sources.config import Fleet, ServerSettings, Service
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parent / "fixtures" / "ledgers"
EXAMPLES = Path(__file__).parents[1] / "radiance_mcp" / "examples"


def dumped(value: Any) -> str:
    """The answer as the client's structured content is counted: compact JSON."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def call(tool: str, fleet: Fleet | None = None, **arguments: Any) -> tuple[bool, Any]:
    async with Client(build_server(Runtime(fleet or Fleet(server=ServerSettings())))) as client:
        result = await client.call_tool(tool, arguments)
    return result.is_error, result.content[0].text if result.is_error else result.structured_content  # type: ignore[union-attr]


def log_text(name: str) -> str:
    return (LEDGERS / name).read_text(encoding="utf-8", errors="replace")


async def test_sglang_tp8_says_each_missing_figure_once_naming_its_ranks() -> None:
    error, out = await call("read_budget_table", log_text=log_text("sglang/tp8_pool_80_layers.log"))
    assert not error, out
    # The excerpt prints lines of 7 ranks (none of TP4); 4 of them size their KV cache.
    assert [c["rank"] for c in out["cards"]] == ["TP0", "TP1", "TP2", "TP3", "TP5", "TP6", "TP7"]
    kv = {c["rank"]: (c["kv_mib"]["value"], c["kv_mib"]["lines"]) for c in out["cards"] if c["kv_mib"]}
    # K 53.31 GB + V 53.31 GB = 2 x 53.31 x 1,024 = 109,178.88 MiB, on its rank's own line (named once, not K and V)
    assert kv == {"TP1": (109_178.88, [2]), "TP3": (109_178.88, [3]), "TP5": (109_178.88, [1]),
                  "TP6": (109_178.88, [5])}
    assert out["lines"]["2"].startswith("[2025-10-16 09:06:22 TP1] KV Cache is allocated. #tokens: 2795207")
    missing = {m["figure"]: m["ranks"] for m in out["missing"]}
    assert missing["kv_mib"] == missing["kv_tokens"] == missing["kv_bytes_per_token"] == ["TP0", "TP2", "TP7"]
    assert missing["free_mib"] == missing["weights_mib"] == ["TP0", "TP1", "TP2", "TP3", "TP5", "TP6", "TP7"]
    text = dumped(out)
    for said in [m["why"] for m in out["missing"]] + [out["kv_flag"], out["floor"], *out["lines"].values()]:
        assert text.count(json.dumps(said, ensure_ascii=False)[1:-1]) == 1, said
    assert out["engine"] == "sglang" and "engine" not in out["cards"][0] and "missing" not in out["cards"][0]
    assert len(text) < 8_000  # 20,262 characters when each rank said its own


async def test_sglang_dp4_names_its_ranks_as_the_engine_does() -> None:
    error, out = await call("read_budget_table", log_text=log_text("sglang/dp4_tp4_ep4_pool.log"))
    assert not error, out
    missing = {m["figure"]: m["ranks"] for m in out["missing"]}
    assert missing["kv_mib"] == ["DP0 TP0", "DP1 TP1", "DP3 TP3"]  # DP2 prints 'KV Cache is allocated' (line 2)
    (dp2,) = [c for c in out["cards"] if c["rank"] == "DP2 TP2"]
    assert dp2["kv_mib"]["value"] == 96_501.76 and dp2["kv_mib"]["lines"] == [2]  # 2 x 47.12 GB x 1,024
    assert len(dumped(out)) < 6_000  # 11,298 before


async def test_llama_cpp_eight_devices_quote_each_line_once_and_the_boots_settings_once() -> None:
    error, out = await call("read_budget_table", log_text=log_text("llamacpp/b45xx_server_8_slots.log"))
    assert not error, out
    assert [c["rank"] for c in out["cards"]] == ["all", *(f"CUDA{i}" for i in range(8))]
    # Every view holds the 16,384 cells of line 17, quoted once in lines (it was quoted 22 times).
    assert {(c["kv_tokens"]["value"], tuple(c["kv_tokens"]["lines"])) for c in out["cards"]} == {(16_384, (17,))}
    assert out["lines"]["17"].startswith("llama_kv_cache_init: kv_size = 16384")
    assert dumped(out).count("llama_kv_cache_init: kv_size = 16384") == 1
    # load_tensors lines 1-6 print CUDA2-CUDA7: 4 x 25,338.47 + 22,171.16 + 19,728.83 = 143,253.87 MiB on 'all'
    assert out["cards"][0]["weights_mib"]["value"] == 143_253.87
    assert out["cards"][0]["weights_mib"]["lines"] == [1, 2, 3, 4, 5, 6]
    assert {m["figure"]: m["ranks"] for m in out["missing"]}["weights_mib"] == ["CUDA0", "CUDA1"]
    # The boot's settings once, beside the cards: n_seq_max = 8 (line 8), n_ctx = 16384 (line 9).
    assert (out["settings"]["n_seq_max"]["value"], out["settings"]["n_seq_max"]["lines"]) == (8, [8])
    assert (out["settings"]["n_ctx"]["value"], out["settings"]["n_ctx"]["lines"]) == (16_384, [9])
    assert len(dumped(out)) < 12_000  # 30,207 before


async def test_the_other_tools_on_multi_rank_logs_name_each_figure_once_with_its_ranks() -> None:
    # compute_ceiling, plan_free_vram: the boot lacks what the ceiling needs; each figure named once, by its ranks.
    for tool in ("compute_ceiling", "plan_free_vram"):
        error, message = await call(tool, log_text=log_text("sglang/tp8_pool_80_layers.log"))
        assert error and "TP0-TP3, TP5-TP7: free_mib: not printed" in message, message
        assert message.count("free_mib: not printed") == 1 and message.count("floor_mib: not printed") == 1
        error, message = await call(tool, log_text=log_text("llamacpp/b45xx_server_8_slots.log"))
        assert error and "CUDA0-CUDA7: free_mib: not printed" in message and "CUDA0, CUDA1: weights_mib" in message
    error, message = await call("check_pool_contract", log_text=log_text("sglang/dp4_tp4_ep4_pool.log"), seqs=1)
    assert error and message.count("window_tokens: not printed") == 1, message


def _fleet(root: Path) -> Fleet:
    """A settled radiance service naming its card, one that does not, and two refused vLLM boots alike."""
    refused = log_text("vllm/v0.2.7_alpaca2_refused.log")
    for name in ("refused-a", "refused-b"):
        (root / f"{name}.log").write_text(refused, encoding="utf-8")
    example = str(EXAMPLES / "frank-archon.log")
    services = {"ok-a": Service(log=example, cards=("box:0",)), "ok-b": Service(log=example),
                "refused-a": Service(log=str(root / "refused-a.log")),
                "refused-b": Service(log=str(root / "refused-b.log"))}
    return Fleet(services=services, server=ServerSettings(log_roots=(str(root), str(EXAMPLES))))


async def test_the_whole_fleet_says_a_refused_boots_reason_once_and_what_partial_means(tmp_path: Path) -> None:
    error, out = await call("plan_free_vram", _fleet(tmp_path))
    assert not error, out
    (refused,) = [p for p in out["problems"] if p["kind"] == "refused boot"]
    at = out["problems"].index(refused)
    assert (refused["count"], refused["services"]) == (2, ["refused-a", "refused-b"])
    # The first's reason whole, its remedy too: an agent reading problems first needs no other field.
    assert refused["detail"].startswith(f"{tmp_path}/refused-a.log (vllm boot 1 of 1, lines 1-3): this boot "
                                        "refused to start")
    assert refused["detail"].endswith("read the ceiling from a boot that served")
    # Each unreadable entry names that problem; the second, whose reason is the first's word for word, its ledger.
    assert out["unreadable"] == [
        {"service": "refused-a", "problem": at, "where": None, "error": None},
        {"service": "refused-b", "problem": at, "where": f"{tmp_path}/refused-b.log (vllm boot 1 of 1, lines 1-3)",
         "error": None}]
    assert dumped(out).count("A refused boot never settles") == 1
    # 'partial' says what it means where the summary shows it, in the words of the field's description.
    assert out["sharing"] == "partial"
    meaning = "some services name their cards, not all (notes names the others)"
    assert out["summary"][0] == (f"4 services, 2 planned: {out['fleet_headroom_mib']:,} MiB of headroom, each "
                                 f"physical card once (sharing partial: {meaning})")
    # tools/list publishes no field's description (it is paid every turn): the summary is where an agent reads it,
    # in the description's words (models.plan.SHARING holds them once).
    assert f"partial: {meaning}" in (PlanFreeVramOutput.model_fields["sharing"].description or "")
