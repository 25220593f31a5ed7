"""check_pool_contract lists every rule it checks, and every one it could not, as data (issue 24, row 7).

Over the SDK's client, in memory. Before, a pool checked without a ledger came back `ok: true` with
`ceiling: null` and a note in words, while render_gates refused the same pool on the service's boot (its pair
over the ceiling): `ok` claimed a check that was never made. Now `checks` holds pool_contract,
pair_within_ceiling and sampler_rows (the rule book's checks), each pass, fail or unchecked with its arithmetic,
lines and remedy, and `ok` is true only when every one passed (null: none failed, one was not checked).
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp_call import call
from shared_server import empty_fleet_server

from radiance_mcp.app.server import build_server
from radiance_mcp.core.errors import REFUSAL_META
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet, ServerSettings, Service
from radiance_mcp.sources.runtime import Runtime

ROW_7 = {"pool_mib": 40_000, "seqs": 2, "max_model_len": 200_000, "kv_cache_dtype": "fp8"}


def by_rule(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["rule"]: check for check in out["checks"]}


def example_server() -> Client:
    """frank-archon.log as a service's ledger: card 0's ceiling 30,969 MiB, weights 24,000, spec 3 (line 25)."""
    services = {"example": Service(log=str(EXAMPLES_DIR / "frank-archon.log"))}
    return Client(build_server(Runtime(Fleet(services=services, server=ServerSettings()))))


async def refused_rule(client: Client, tool: str, **arguments: Any) -> str | None:
    """The rule a refusal names as data; None when the call succeeds."""
    result = await client.call_tool(tool, arguments)
    return (result.meta or {}).get(REFUSAL_META, {}).get("rule", "") if result.is_error else None


async def test_without_a_ledger_ok_claims_no_check_that_was_not_made() -> None:
    async with Client(empty_fleet_server()) as client:
        error, out = await call(client, "check_pool_contract", **ROW_7)
    assert not error, out
    checks = by_rule(out)
    assert list(checks) == ["pool_contract", "pair_within_ceiling", "sampler_rows"]
    assert out["contract_ok"] is True and out["ceiling"] is None
    assert out["ok"] is None  # the contract holds; the ceiling and the sampler rows were not checked
    assert checks["pool_contract"] == {
        "rule": "pool_contract", "verdict": "pass", "lines": [], "remedy": "",
        # 2 x 200,000 x 7,488 B = 2,856.45 MiB + 110 x 2 + 448 = 3,524.45 MiB
        "arithmetic": "2 x 200,000 x 7,488 B = 2,856.45 MiB + 110 x 2 + 448 = 3,524.45 MiB <= pool 40,000 MiB (fp8)",
    }
    for rule in ("pair_within_ceiling", "sampler_rows"):
        check = checks[rule]
        assert (check["verdict"], check["lines"]) == ("unchecked", []), check
        assert "name the service" in check["remedy"] and "log / log_text" in check["remedy"], check
    assert "no ledger named" in checks["pair_within_ceiling"]["remedy"]


async def test_a_failing_contract_is_false_even_without_a_ledger() -> None:
    async with Client(empty_fleet_server()) as client:
        _, out = await call(client, "check_pool_contract", **{**ROW_7, "pool_mib": 3_000})
    checks = by_rule(out)
    # 3,524.45 MiB > 3,000: a rule failed, so the unchecked ones cannot make it pass
    assert out["ok"] is False and checks["pool_contract"]["verdict"] == "fail"
    assert "3,524.45 MiB > pool 3,000 MiB" in checks["pool_contract"]["arithmetic"]
    assert "allows 1 seat at 200,000 tokens" in checks["pool_contract"]["remedy"]


@pytest.mark.parametrize(
    ("pool_mib", "seqs", "failing"),
    [
        (5_120, 2, set()),  # 24,000 + 5,120 = 29,120 <= 30,969; 3,524.45 <= 5,120; 2 x (1 + 3) = 8 rows
        (6_969, 2, set()),  # 24,000 + 6,969 = 30,969: at the ceiling
        (6_970, 2, {"pair_within_ceiling"}),  # 30,970 > 30,969
        (40_000, 2, {"pair_within_ceiling"}),  # row 7's pool: 64,000 > 30,969
        (3_000, 2, {"pool_contract"}),  # 3,524.45 > 3,000
        # 7 x 200,000 x 7,488 B = 9,997.56 MiB + 770 + 448 = 11,215.56 > 6,969; 7 x (1 + 3) = 28 rows > 25
        (6_969, 7, {"pool_contract", "sampler_rows"}),
    ],
)
async def test_the_verdict_agrees_with_render_gates_on_the_same_boot(
    pool_mib: int, seqs: int, failing: set[str]
) -> None:
    async with example_server() as client:
        _, out = await call(client, "check_pool_contract", service="example", pool_mib=pool_mib, seqs=seqs)
        refused = await refused_rule(client, "render_gates", service="example", vram_kv_mib=pool_mib, seqs=seqs)
    checks = by_rule(out)
    assert set(checks) == {"pool_contract", "pair_within_ceiling", "sampler_rows"}
    assert {rule for rule, check in checks.items() if check["verdict"] == "fail"} == failing
    assert all(check["verdict"] != "unchecked" for check in checks.values())
    assert out["ok"] is (not failing)
    # render_gates refuses exactly what check_pool_contract fails, by one of the rules that failed
    assert (refused is not None) is bool(failing) and (refused is None or refused in failing), refused
    assert [line["line"] for line in checks["sampler_rows"]["lines"]] == [25]
    # the ceiling's lines: settled free (26), the pair's echoed flags (9, 10), the weights it keeps (9)
    assert [line["line"] for line in checks["pair_within_ceiling"]["lines"]] == [26, 9, 10]
    assert checks["pair_within_ceiling"]["arithmetic"] == out["ceiling"]["formula"]


async def test_row_7s_pool_on_its_boot_fails_the_pair_with_its_arithmetic() -> None:
    async with example_server() as client:
        _, out = await call(client, "check_pool_contract", service="example", **ROW_7)
    pair = by_rule(out)["pair_within_ceiling"]
    assert out["ok"] is False and pair["verdict"] == "fail"
    assert pair["arithmetic"].startswith(
        "pair 24,000 + 40,000 = 64,000 MiB > 30,969 MiB (card 0's ceiling 29,120 + (2,058")
    assert "33,031 MiB over the 30,969 MiB the ceiling allows on card 0" in pair["remedy"]
