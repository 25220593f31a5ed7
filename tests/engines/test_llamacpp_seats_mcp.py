"""A llama.cpp boot's seats are its context line `n_seq_max = S`, for check_pool_contract and boundary_probe alike.

Issue 24, row 8: check_pool_contract without seqs answered "prints no slots; pass seqs" for a boot that prints
`n_seq_max`, which boundary_probe already read as the sequences served at once. Both now read the seats through
one function (core.rules.contract.served_seats), cited with its line. Over the SDK's client, in memory, on public
boot logs of three styles (tests/fixtures/ledgers/README.md names each one's thread): llama.cpp in Ollama of early
2025 (`llama_new_context_with_model`, four sequences of n_ctx / 4), llama.cpp of 2026 through Alpaca (one
sequence) and llama-server of 2026 with a unified cache (four sequences sharing every cell).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client
from mcp_call import call

from radiance_mcp.app.server import build_server
from radiance_mcp.sources.config import Fleet, ServerSettings, Service
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
NOWHERE = "http://127.0.0.1:9"

CASES = [
    # log, seats and their line, window per sequence and its line, the contract's verdict
    # n_seq_max 4 (line 6), n_ctx_per_seq 2,048 = 8,192 / 4 (line 8): 4 x 2,048 = 8,192 <= kv_size 8,192
    ("ollama_2025_four_seqs_n_ctx_per_seq", 4, 6, 2_048, 8, True),
    # n_seq_max 1 (line 2), n_ctx_seq 16,384 (line 4): 1 x 16,384 <= the 16,384 cells of the size line
    ("2026_alpaca_vulkan_n_seq_max_1", 1, 2, 16_384, 4, True),
    # kv_unified: n_seq_max 4 (line 1), n_ctx_seq = n_ctx 32,768 (line 3): 4 x 32,768 = 131,072 > 32,768 cells
    ("2026_server_four_seqs_kv_unified", 4, 1, 32_768, 3, False),
]


@asynccontextmanager
async def served() -> AsyncIterator[Client]:
    services = {name: Service(log=str(LEDGERS / "llamacpp" / f"{name}.log"), endpoint=NOWHERE, engine="llama.cpp")
                for name, *_ in CASES}
    services["no-seats"] = Service(log=str(LEDGERS / "llamacpp" / "heldout_2024_command-r_2gpu_pipeline.log"),
                                   engine="llama.cpp")
    async with Client(build_server(Runtime(Fleet(services=services, server=ServerSettings())))) as client:
        yield client


@pytest.mark.parametrize(("name", "seats", "seats_line", "window", "window_line", "contract_ok"), CASES)
async def test_the_contract_takes_the_seats_and_window_the_probe_plans_with(
    name: str, seats: int, seats_line: int, window: int, window_line: int, contract_ok: bool
) -> None:
    async with served() as client:
        error, out = await call(client, "check_pool_contract", service=name)
        probe_error, probe = await call(client, "boundary_probe", service=name, n=1)
    assert not error, out
    assert (out["seqs"], out["max_model_len"], out["contract_ok"]) == (seats, window, contract_ok)
    seats_from, window_from = out["inputs_from"]["seqs"], out["inputs_from"]["max_model_len"]
    assert seats_from["line"] == seats_line and "n_seq_max" in seats_from["text"]
    assert window_from["line"] == window_line and f"= {window}" in window_from["text"]
    # boundary_probe plans with the same seats off the same line
    assert not probe_error, probe
    plan = probe["plan"]
    assert plan["max_num_seqs"] == seats and plan["max_model_len"] == window
    assert any(cited.endswith(f":{seats_line}: {seats_from['text'].strip()!r}") for cited in plan["ledger_lines"])


async def test_a_boot_that_prints_neither_slots_nor_n_seq_max_asks_for_seqs() -> None:
    async with served() as client:
        error, message = await call(client, "check_pool_contract", service="no-seats", max_model_len=4_096)
    # llama.cpp of 2024 prints n_ctx only: the seats are not guessed
    assert error and "prints no slots or n_seq_max; pass seqs" in message
