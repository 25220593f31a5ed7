"""audit_step_shape on vLLM, SGLang and llama.cpp boots shows the rows either boot prints, and no row of '-' in
both (issue 26, item 3): 12 to 14 of radiance's 20 rows are figures those engines never print. The result says once
which of radiance's rows the engine's ledger leaves out; the CLI draws the same rows. The logs are public
(tests/fixtures/ledgers/README.md names each one's source); each figure below is read off their lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_call import call
from shared_server import empty_fleet_server

from radiance_mcp.core.audit.step_shape import ROWS

LEDGERS = Path(__file__).parents[1] / "fixtures" / "ledgers"
AUDIT_CHARS = 10_000
"""tests/test_result_sizes.py's budget for audit_step_shape."""

CASES = [
    # llama-cpp-python 0.3.36, Gemma 3 270M: n_seq_max 1 (line 5), n_ctx_seq 2048 (7), n_ubatch 512 (9), 'CPU
    # compute buffer size = 514.50 MiB' (33), KV 6.00 MiB; against llama-server of early 2025 with 8 slots:
    # n_seq_max 8 (8), n_ctx_per_seq 2048 (10), n_ubatch 256 (12), no compute buffer line
    ("llamacpp", "recorded_llama-cpp-python-0.3.36_gemma3-270m_server.log", "b45xx_server_8_slots.log",
     {"--max-model-len": ("2048", "2048"), "--max-num-seqs": ("1", "8"), "--max-num-batched-tokens": ("512", "256"),
      "full-length sessions": ("1", "8")},
     {"activation arena", "vram_kv", "weights by tier: VRAM"}),
    # vLLM 0.8: max_model_len 3072, 7.73 GiB of KV (7,915.52 MiB), 47.12x; vLLM 0.24: 131072, 6.01 GiB (6,154.24
    # MiB), 4.34x
    ("vllm", "heldout_v0.8_16gib_47x.log", "v0.24.0_one_gpu_6.01gib.log",
     {"--max-model-len": ("3072", "131072"), "vram_kv": ("7,915.52 MiB", "6,154.24 MiB"),
      "full-length sessions": ("47.12", "4.34")},
     {"activation arena", "weights by tier: VRAM"}),
    # SGLang 0.4.6, one GPU: 'K size: 27.80 GB, V size: 27.80 GB' (56,934.40 MiB) of KV; Xinference's SGLang:
    # 7.00 + 7.00 GB (14,336 MiB); neither prints its context length in these excerpts
    ("sglang", "v0.4.6_one_gpu_pool.log", "heldout_xinference_qwen3-14b_one_gpu.log",
     {"vram_kv": ("56,934.40 MiB", "14,336 MiB")},
     {"weights by tier: VRAM"}),
]


async def _audit(engine: str, proven: str, candidate: str) -> dict[str, Any]:
    async with Client(empty_fleet_server()) as client:
        error, out = await call(client, "audit_step_shape",
                                proven_log_text=(LEDGERS / engine / proven).read_text(encoding="utf-8"),
                                candidate_log_text=(LEDGERS / engine / candidate).read_text(encoding="utf-8"))
    assert not error, out
    return out  # type: ignore[no-any-return]


@pytest.mark.parametrize(("engine", "proven", "candidate", "figures", "also"), CASES)
async def test_a_row_neither_boot_prints_is_left_out(engine: str, proven: str, candidate: str,
                                                     figures: dict[str, tuple[str, str]], also: set[str]) -> None:
    out = await _audit(engine, proven, candidate)
    rows = {row["row"]: row for row in out["rows"]}
    assert all(row["proven"] is not None or row["candidate"] is not None for row in out["rows"])
    assert set(rows) == set(figures) | also, sorted(rows)
    for label, pair in figures.items():
        assert (rows[label]["proven"], rows[label]["candidate"]) == pair, rows[label]
    never = {"--host-pool-mib", "--tp", "--kv-cache-dtype", "--placement", "claimable", "kv cache", "lender"}
    (said,) = [n for n in out["notes"] if "those rows are left out" in n]  # said once
    assert all(label in said for label in never) and not never & set(rows)
    assert len(ROWS) - len(rows) >= 12
    assert len(json.dumps(out, ensure_ascii=False, separators=(",", ":"))) <= AUDIT_CHARS


@pytest.mark.parametrize(("engine", "proven", "candidate", "figures", "also"), CASES)
def test_the_cli_table_draws_the_same_rows(cli: Any, engine: str, proven: str, candidate: str,
                                           figures: dict[str, tuple[str, str]], also: set[str]) -> None:
    ran = cli("audit-step-shape", "--proven-log", str(LEDGERS / engine / proven),
              "--candidate-log", str(LEDGERS / engine / candidate), env={"COLUMNS": "120"})
    assert ran.returncode in (0, 3), ran.stderr  # 3: the shape differs, the answer is not ok
    assert max(len(line) for line in ran.stdout.splitlines()) <= 120
    table = ran.stdout.split("\nrows:\n", 1)[1].split("\n\n", 1)[0]
    for label in [*figures, *also]:
        assert f"\n  {label} " in table or f"\n  {label.split(':')[0]}:" in table, (label, table)
    for label in ("--host-pool-mib", "--tp", "claimable", "kv cache", "lender", "startup stopped"):
        assert f"\n  {label} " not in table, table
    if engine == "llamacpp":  # CUDA2-CUDA7's model buffers, 25,338.47 x 4 + 22,171.16 + 19,728.83
        assert "143,253.87 MiB" in ran.stdout
