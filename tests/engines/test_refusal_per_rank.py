"""A refusal of many ranks says each thing once, with the ranks that say it (issue 26, item 3).

compute_ceiling on SGLang's TP 8 excerpt wrote one sentence per rank per figure, 24 of them in 5,898
characters, each the same; the ranks are grouped now and every figure's remedy is said once. The logs are
public (tests/fixtures/ledgers/README.md names each one's source); which rank prints what was read off
their lines by hand, as the comments say.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp_call import call

from radiance_mcp.app.server import build_server
from radiance_mcp.core.boot import per_rank, rank_span
from radiance_mcp.sources.config import Fleet, ServerSettings, Service
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
NOT_PRINTED = ": not printed (the engine prints it as"


@pytest.mark.parametrize(
    ("ranks", "said"),
    [
        (["TP0", "TP1", "TP2", "TP3", "TP5", "TP6", "TP7"], "TP0-TP3, TP5-TP7"),  # the TP 8 excerpt has no TP4 line
        (["CUDA0", "CUDA1"], "CUDA0, CUDA1"),  # two are named, not ranged
        (["DP0 TP0", "DP1 TP1"], "DP0 TP0, DP1 TP1"),  # two names, each its own
        (["TP4", "TP10", "TP13", "TP14"], "TP4, TP10, TP13, TP14"),
        (["engine"], "engine"),
    ],
)
def test_ranks_are_counted_as_a_reader_counts_them(ranks: list[str], said: str) -> None:
    assert rank_span(ranks) == said


def test_ranks_that_say_the_same_are_said_once() -> None:
    assert per_rank([("TP0", "a"), ("TP1", "a"), ("TP1", "b"), ("TP2", "a")]) == "TP0-TP2: a. TP1: b"


@pytest.mark.parametrize(
    ("log", "expected", "at_most_chars"),
    [
        # TP0, TP2, TP7 end at 'Capture cuda graph begin' (no 'KV Cache is allocated'); TP1, TP3, TP5, TP6 print
        # the pool; no rank prints its weights, its free memory after start-up or 'Load weight begin'
        ("sglang/tp8_pool_80_layers.log",
         {"free_mib": "TP0-TP3, TP5-TP7", "weights_mib": "TP0-TP3, TP5-TP7", "kv_mib": "TP0, TP2, TP7",
          "floor_mib": "TP0-TP3, TP5-TP7"}, 1_200),  # 5,898 before
        # load_tensors prints CUDA2-CUDA7's model buffers, llama_kv_cache_init CUDA0-CUDA3's KV buffers; no
        # 'MiB free' line (a build of early 2025)
        ("llamacpp/b45xx_server_8_slots.log",
         {"free_mib": "CUDA0-CUDA7", "weights_mib": "CUDA0, CUDA1", "kv_mib": "CUDA4-CUDA7"}, 900),  # 3,306
    ],
)
async def test_the_ceiling_refusal_names_each_figure_once_with_its_ranks(log: str, expected: dict[str, str],
                                                                        at_most_chars: int) -> None:
    fleet = Fleet(services={"svc": Service(log=str(LEDGERS / log))}, server=ServerSettings(log_roots=(str(LEDGERS),)))
    async with Client(build_server(Runtime(fleet))) as client:
        error, message = await call(client, "compute_ceiling", service="svc")
        plan_error, plan = await call(client, "plan_free_vram", service="svc")
    assert error and "nothing is estimated" in message and len(message) <= at_most_chars, (len(message), message)
    for figure, ranks in expected.items():
        assert message.count(f"{figure}{NOT_PRINTED}") == 1, figure  # its remedy said once
        assert f"{ranks}: {figure}{NOT_PRINTED}" in message, (figure, message)
    assert message.count(NOT_PRINTED) == len(expected)
    assert plan_error and plan == message  # the plan stands on the same ceiling: the same words
