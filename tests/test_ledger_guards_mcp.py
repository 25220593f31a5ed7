"""Issue 9's findings 1, 3, 4 and 5 replayed over MCP (the SDK's client, in memory) on unseen ledgers.

An agent that is wrong, lazy or hostile drives the ledger tools: every figure the ceiling
already counts is refused as a reserve with its reason and the figures that can serve;
absurd numbers are refused; caller text is labelled unverified; a pool is checked against
the ceiling too; a refused boot is a finding that names its lines and audit_step_shape.
"""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path
from typing import Any

import pytest
from guard_ledgers import REFUSED, TP2, TWO_BOOTS
from mcp import Client
from mcp.server.mcpserver import MCPServer

from radiance_mcp.app.server import build_server
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet, ServerSettings, Service
from radiance_mcp.sources.runtime import Runtime

EXAMPLE = EXAMPLES_DIR / "frank-archon.log"
BANNED = re.compile(r"PHRASES|ledger\.py|radiance_mcp/|PHRASEBOOK|\bseeds?\b|adapt that|dankserver|FRANK_ARCHON")


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ledgers the fleet's services read, written once for the module (the tools only read them)."""
    directory = tmp_path_factory.mktemp("guarded")
    for name, text in {"twin": TP2, "wide": TWO_BOOTS, "refused": REFUSED}.items():
        (directory / f"{name}.log").write_text(text, encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def server(fleet_dir: Path) -> MCPServer:
    """A fleet of services whose ledgers are files the tests wrote (and the shipped example).

    Built once for the module: each test opens its own session on it, and no call changes it.
    """
    services = {name: Service(log=str(fleet_dir / f"{name}.log")) for name in ("twin", "wide", "refused")}
    services["example"] = Service(log=str(EXAMPLE))
    services["no-ledger"] = Service(endpoint="http://127.0.0.1:9")
    return build_server(Runtime(Fleet(services=services, server=ServerSettings(log_roots=(str(fleet_dir),)))))


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, Any]:
    """(is_error, structured output or the error text)."""
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = result.content[0].text  # type: ignore[union-attr]
        assert not BANNED.search(text), text
        return True, text
    return False, result.structured_content


# ---------------------------------------------------------------------------------------
# Finding 1: a reserve is traced only to memory the ceiling does not already count

# (figure, line of the tp=2 journald ledger, why it is refused)
TP2_REFUSED = [
    (96, 24, "already in the engine floor"),  # --gpu-headroom-mib on card 0's settled line
    (96, 9, "already in the engine floor"),  # the echoed flag
    (113.19, 25, "already in the engine floor"),  # the static region on card 1's settled line
    (7580, 6, "host RAM or disk"),  # --host-pool-mib
    (24000, 7, "part of the pair"),  # --vram-weights-mib
    (504, 10, "charged to the card before claimable"),  # the activation arena
    (31610.88, 11, "a total of the card"),  # claimable 30.87 GiB
    (1597.44, 22, "part of the pair"),  # the ledger mover's 1.56 GiB, lent out of the KV cache
    (520, 21, "counts the engine floor the ceiling already subtracts"),  # card 1's whole unclaimed row
]


@pytest.mark.parametrize(("mib", "line", "reason"), TP2_REFUSED)
async def test_reserves_the_ceiling_already_counts_are_refused(
    mib: float, line: int, reason: str, server: MCPServer
) -> None:
    async with Client(server) as client:
        error, text = await call(client, "compute_ceiling", service="twin",
                                 reserves=[{"mib": mib, "label": "agent's guess", "line": line}])
    assert error and reason in text
    # the refusal lists what can serve: card 0: 477.30 - 209.19 = 268.11; card 1: 520.00 - 209.19 = 310.81
    assert "line 16 (card 0): mib=268.11" in text and "line 21 (card 1): mib=310.81" in text


async def test_candidates_are_listed_and_a_traced_reserve_holds_its_card(server: MCPServer) -> None:
    async with Client(server) as client:
        _, table = await call(client, "read_budget_table", service="twin")
        error, out = await call(client, "compute_ceiling", service="twin",
                                reserves=[{"mib": 310.81, "label": "card 1 unusable", "line": 21}])
    assert [(c["card"], c["line"]["line"], c["mib"]) for c in table["reserve_candidates"]] == [
        (0, 16, 268.11), (1, 21, 310.81)]
    assert not error
    # card 1 binds: 29,120 + (1,800 - 209.19) = 30,710.81 -> 30,710; less 310.81 = 30,399.19 -> 30,399
    assert (out["binding_card"], out["ceiling_mib"], out["max_pair_mib"]) == (1, 30_710, 30_399)
    assert [(c["card"], c["max_pair_mib"]) for c in out["cards"]] == [(0, 30_969), (1, 30_399)]
    assert out["reserves"][0] | {"line": None} == {"mib": 310.81, "label": "card 1 unusable", "kind": "traced",
                                                  "line": None, "card": 1}
    assert out["personal_reserves"] == [] and out["warnings"] == []


async def test_the_reserves_of_the_issue_on_the_example_ledger(server: MCPServer) -> None:
    """The figures the issue saw accepted: headroom, static region, host pool, weights, arena, claimable."""
    async with Client(server) as client:
        for mib, line in ((96, 26), (113.19, 26), (7580, 5), (24000, 9), (504, 12), (31610.88, 13)):
            error, text = await call(client, "compute_ceiling", service="example",
                                     reserves=[{"mib": mib, "label": "x", "line": line}])
            assert error and "cannot back a reserve" in text and "line 18 (card 0): mib=268.11" in text, mib


# ---------------------------------------------------------------------------------------
# Finding 3: sanity on results, and where the figures came from


@pytest.mark.parametrize(
    ("mib", "message"),
    [
        (1e9, "is larger than card 0's ceiling of 30,969 MiB"),  # was max_pair_mib -999,969,031
        (1e308, "reserves[0].mib=1e+308 is out of range: send a finite number from 0 to 1,073,741,824"),
        (30_970, "is larger than card 0's ceiling of 30,969 MiB"),
        (math.inf, "mib"),  # refused wherever it is caught first: never a figure in the output
    ],
)
async def test_absurd_reserves_are_refused(mib: float, message: str, server: MCPServer) -> None:
    async with Client(server) as client:
        error, text = await call(client, "compute_ceiling", service="example",
                                 reserves=[{"mib": mib, "label": "huge", "personal": True}])
    assert error and message in text


async def test_a_max_pair_below_the_current_pair_is_allowed_with_a_warning(server: MCPServer) -> None:
    async with Client(server) as client:
        error, out = await call(client, "compute_ceiling", service="example",
                                reserves=[{"mib": 2000, "label": "second model", "personal": True}])
    assert not error
    assert out["max_pair_mib"] == 28_969  # 30,969 - 2,000, below the 29,120 pair by 151
    assert out["warnings"] == ["max_pair_mib 28,969 is below card 0's current pair of 29,120 MiB by 151 MiB: "
                               "a gate at this bound fails the pair that runs now; shrink the pair by that much, or "
                               "drop a reserve"]


async def test_caller_text_is_labelled_unverified_and_files_are_not(server: MCPServer, fleet_dir: Path) -> None:
    async with Client(server) as client:
        _, pasted = await call(client, "compute_ceiling", log_text=TP2)
        _, from_file = await call(client, "compute_ceiling", service="twin")
        _, by_path = await call(client, "read_budget_table", log=str(fleet_dir / "twin.log"))
    assert (pasted["ledger"]["origin"], pasted["ledger"]["verified"]) == ("caller text", False)
    assert any("caller-supplied text (log_text), unverified" in note for note in pasted["notes"])
    assert pasted["ceiling_mib"] == from_file["ceiling_mib"] == 30_710
    for out in (from_file, by_path):
        assert (out["ledger"]["origin"], out["ledger"]["verified"]) == ("local file", True)
    assert not any("unverified" in note for note in from_file["notes"])


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # pasted text claiming 40 GiB free on a 31.86 GiB card: once a 'traced' ceiling above the card total
        ("settled at 2.01 GiB free", "settled at 40.00 GiB free",
         "log_text (boot 1 of 1, lines 1-26):24: card 0 settled at 40.00 GiB free, more than the card total of "
         "31.86 GiB (line 13)"),
        ("--vram-weights-mib\t24000", "--vram-weights-mib\t34000", "is more than the card total of 31.86 GiB"),
        ("against 209.19 MiB (the 96.00", "against 9.19 MiB (the 96.00",
         "card 0's floor of 9.19 MiB is not its 96.00 MiB headroom plus 113.19 MiB static region"),
    ],
)
async def test_impossible_pasted_boots_are_refused_naming_the_line(
    old: str, new: str, message: str, server: MCPServer
) -> None:
    assert old in TP2
    async with Client(server) as client:
        for tool in ("read_budget_table", "compute_ceiling"):
            error, text = await call(client, tool, log_text=TP2.replace(old, new, 1))
            assert error and message in text, (tool, text)


# ---------------------------------------------------------------------------------------
# Finding 4: the pool contract and the ceiling


async def test_a_pool_above_the_ceiling_is_not_ok(server: MCPServer) -> None:
    async with Client(server) as client:
        error, out = await call(client, "check_pool_contract", service="example", pool_mib=50_000)
    assert not error
    # the contract alone holds: 2 x 200,000 x 7,488 B + 220 + 448 = 3,524.45 <= 50,000
    assert out["contract_ok"] is True and out["required_mib"] == 3_524.45
    # the ceiling does not: 24,000 + 50,000 = 74,000 > 30,969
    ceiling = out["ceiling"]
    assert (ceiling["ok"], ceiling["pair_mib"], ceiling["max_pair_mib"], ceiling["margin_mib"]) == (
        False, 74_000, 30_969, -43_031)
    assert ceiling["weights_from"]["line"] == 9  # --vram-weights-mib 24000
    assert out["ok"] is False and out["boot_status"] == "settled"


async def test_both_checks_pass_on_the_running_shape_and_reserves_count(server: MCPServer) -> None:
    async with Client(server) as client:
        _, fits = await call(client, "check_pool_contract", service="twin")
        _, tight = await call(client, "check_pool_contract", service="twin", pool_mib=6_500,
                              reserves=[{"mib": 310.81, "label": "card 1 unusable", "line": 21}])
    # 24,000 + 5,120 = 29,120 <= card 1's 30,710; 3,524.45 <= 5,120
    assert (fits["ok"], fits["contract_ok"], fits["ceiling"]["ok"], fits["ceiling"]["margin_mib"]) == (
        True, True, True, 1_590)
    # 24,000 + 6,500 = 30,500 > 30,399 (card 1's 30,710 less 310.81): the reserve makes it fail by 101
    assert (tight["contract_ok"], tight["ceiling"]["ok"], tight["ceiling"]["margin_mib"], tight["ok"]) == (
        True, False, -101, False)
    assert tight["ceiling"]["reserves"][0]["kind"] == "traced"


async def test_a_refused_boot_is_read_as_refused(server: MCPServer) -> None:
    async with Client(server) as client:
        error, out = await call(client, "check_pool_contract", service="wide")
        _, earlier = await call(client, "check_pool_contract", service="wide", boot=-2)
    assert not error
    # the funded 271.25 MiB, not --vram-kv-mib 5120: 8 x 32,768 x 14,144 B = 3,536 MiB + 880 + 448 = 4,864
    assert (out["pool_mib"], out["required_mib"], out["contract_ok"]) == (271.25, 4_864, False)
    assert out["inputs_from"]["pool_mib"]["line"] == 35
    assert (out["ok"], out["boot_status"], out["ceiling"]) == (False, "refused", None)
    assert [line["line"] for line in out["refusal_lines"]] == [35, 36, 37]
    assert any("audit_step_shape" in note for note in out["notes"])
    # the boot before it served: 5,120 backs 2 x 200,000 fp8 (3,524.45) and 29,120 <= 30,969
    assert (earlier["ok"], earlier["boot_status"], earlier["ceiling"]["ceiling_mib"]) == (True, "settled", 30_969)


async def test_without_a_ledger_the_ceiling_is_said_to_be_unchecked(server: MCPServer) -> None:
    async with Client(server) as client:
        _, out = await call(client, "check_pool_contract", service="no-ledger", pool_mib=50_000, seqs=2,
                            max_model_len=200_000, kv_cache_dtype="fp8")
        error, text = await call(client, "check_pool_contract", pool_mib=5120, seqs=2, max_model_len=200_000,
                                 kv_cache_dtype="fp8", reserves=[{"mib": 1, "label": "x", "personal": True}])
    assert (out["ok"], out["contract_ok"], out["ceiling"], out["ledger"]) == (None, True, None, None)
    assert any("the ceiling was not checked (service 'no-ledger' names no ledger" in note for note in out["notes"])
    pair = next(check for check in out["checks"] if check["rule"] == "pair_within_ceiling")
    assert pair["verdict"] == "unchecked" and pair["remedy"].startswith("service 'no-ledger' names no ledger")
    assert error and "reserves and weights_mib are checked against a ceiling" in text


# ---------------------------------------------------------------------------------------
# Finding 5: refused boots are findings, in every ledger tool


@pytest.mark.parametrize("tool", ["read_budget_table", "compute_ceiling"])
async def test_refused_boots_are_findings(tool: str, server: MCPServer) -> None:
    async with Client(server) as client:
        error, text = await call(client, tool, service="wide")
        single_error, single = await call(client, tool, log_text=REFUSED)
    assert error and "(boot 2 of 2, lines 19-37): this boot refused to start (line 35:" in text
    assert "line 37: '2026-11-30T04:12:36.512345678+00:00 E startup stopped: out of memory'" in text
    assert "audit_step_shape (on this ledger, proven_boot=-2 and candidate_boot=-1)" in text
    assert single_error and "this boot refused to start" in single and "audit_step_shape" in single


async def test_the_audit_agrees_the_boot_refused(server: MCPServer) -> None:
    async with Client(server) as client:
        error, out = await call(client, "audit_step_shape", service="wide", proven_boot=-2, candidate_boot=-1)
    assert not error
    assert out["verdict"] == "refused" and out["candidate"]["status"] == "refused"
    assert [line["line"] for line in out["refusal"]] == [35, 37]  # its kv cache and startup stopped lines


async def test_a_refused_boot_is_never_ok_even_for_a_pool_that_fits_its_contract(server: MCPServer) -> None:
    async with Client(server) as client:
        _, out = await call(client, "check_pool_contract", service="refused", pool_mib=5_120)
    # 8 x 32,768 x 14,144 B = 3,536 MiB + 880 + 448 = 4,864 <= 5,120: the contract alone holds
    assert (out["contract_ok"], out["required_mib"]) == (True, 4_864)
    assert (out["ok"], out["boot_status"], out["ceiling"]) == (False, "refused", None)
    assert [line["line"] for line in out["refusal_lines"]] == [17, 18, 19]


async def test_parallel_calls_each_get_their_own_verdict(server: MCPServer) -> None:
    """A careless agent fires the same tools at once on different ledgers: no answer leaks into another."""
    async with Client(server) as client:
        results = await asyncio.gather(*(
            call(client, "compute_ceiling", service=service, reserves=reserves)
            for service, reserves in [
                ("twin", [{"mib": 310.81, "label": "u", "line": 21}]),
                ("example", [{"mib": 96, "label": "h", "line": 26}]),
                ("wide", []),
                ("example", [{"mib": 268.11, "label": "u", "line": 18}]),
            ] * 3
        ))
    for n in range(3):
        twin, headroom, wide, example = results[4 * n: 4 * n + 4]
        assert twin[0] is False and twin[1]["max_pair_mib"] == 30_399  # 30,710 - 310.81
        assert headroom[0] is True and "already in the engine floor" in headroom[1]
        assert wide[0] is True and "refused to start" in wide[1]
        assert example[0] is False and example[1]["max_pair_mib"] == 30_700  # 30,969 - 268.11
