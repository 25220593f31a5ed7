"""render_gates, verify_deploy and audit_step_shape on vLLM, SGLang and llama.cpp boots in each engine's own knobs
(issue 25, item 0), through the SDK's client on recorded public boots (tests/fixtures/ledgers/README.md names each).

vLLM's env file sets --kv-cache-memory-bytes, --max-num-seqs and --max-model-len; SGLang's --max-total-tokens,
--max-running-requests and --context-length; llama.cpp's -c (seats x window cells) and -np. The figures below are
worked from each log's own lines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_call import call
from shared_server import empty_fleet_server

LEDGERS = Path(__file__).parents[1] / "fixtures" / "ledgers"
VLLM = (LEDGERS / "vllm" / "heldout_v0.8_16gib_47x.log").read_text()
SGLANG = (LEDGERS / "sglang" / "heldout_v0.5.10_one_gpu_no_graphs.log").read_text()
PYTHIA = (LEDGERS / "llamacpp" / "heldout_b4641_ci_v100_pythia-2.8b.log").read_text()


async def _call(tool: str, **arguments: Any) -> tuple[bool, Any]:
    async with Client(empty_fleet_server()) as client:
        return await call(client, tool, **arguments)


def _env(text: str) -> dict[str, str]:
    return dict(m.groups() for m in re.finditer(r"^SVC_([A-Z_]+)=(\S+)$", text, re.M))


async def test_vllm_renders_its_kv_bytes_seats_and_window() -> None:
    error, out = await _call("render_gates", log_text=VLLM, vram_kv_mib=7_000, seqs=4, env_prefix="SVC")
    assert not error, out
    # 7,000 MiB x 1,048,576 B; the window 3,072 as the concurrency line prints it (line 6)
    assert _env(out["env_text"]) == {"KV_CACHE_MEMORY_BYTES": "7340032000", "MAX_NUM_SEQS": "4",
                                     "MAX_MODEL_LEN": "3072"}
    # weights 5.2045 GB (line 1) = 5,329.41 MiB, whole MiB up: 5,330 + 7,000
    assert out["pair_mib"] == 12_330 and out["ceiling_mib"] == 13_244
    assert "# Engine: vllm; KV rate 57333." in out["env_text"]
    keys = [p["key"] for p in out["predictions"]]
    assert keys == ["kv_mib", "bytes_per_token", "window", "ceiling", "settled", "contract", "boundary"]
    assert "KV_CACHE_MEMORY_BYTES" in out["bats_text"] and "VRAM_KV_MIB" not in out["bats_text"]


async def test_vllm_without_seats_is_refused_naming_the_engine() -> None:
    error, text = await _call("render_gates", log_text=VLLM, vram_kv_mib=7_000)
    assert error and "seqs was not given" in text and "vLLM: none at INFO" in text, text


async def test_another_engines_knob_it_does_not_have_is_refused() -> None:
    error, text = await _call("render_gates", log_text=VLLM, vram_kv_mib=7_000, seqs=4, vram_weights_mib=5_000)
    assert error and "is a vllm boot, whose weights are the model's" in text, text


async def test_sglang_renders_its_token_pool_and_refuses_a_pool_over_its_ceiling() -> None:
    error, out = await _call("render_gates", log_text=SGLANG, vram_kv_mib=30_000, seqs=64, env_prefix="SVC")
    assert not error, out
    # 30,000 MiB at the pool's own rate: K + V 31,150.08 MiB over 2,658,165 tokens (line 12) = 12,287.9 B a token
    assert _env(out["env_text"]) == {"MAX_TOTAL_TOKENS": "2560022",
                                     "MAX_RUNNING_REQUESTS": "64", "CONTEXT_LENGTH": "32768"}
    error, text = await _call("render_gates", log_text=SGLANG, vram_kv_mib=31_000, seqs=64)
    assert error and "over the ceiling 31,482 MiB/card" in text, text  # 1,004 + 31,000 > 31,482


async def test_every_plan_plan_free_vram_offers_llama_cpp_renders_and_one_step_more_is_refused() -> None:
    error, planned = await _call("plan_free_vram", log_text=PYTHIA)
    assert not error, planned
    plans = planned["services"][0]["options"][0]["plans"]
    assert [(p["seqs"], p["max_model_len"]) for p in plans] == [(20, 2048), (1, 41_472)]
    for plan in plans:
        arguments = {k: v for k, v in plan.items() if k != "checks" and v is not None}
        error, out = await _call("render_gates", log_text=PYTHIA, env_prefix="SVC", **arguments)
        assert not error, out
        assert _env(out["env_text"]) == {"CTX_SIZE": str(plan["seqs"] * plan["max_model_len"]),
                                         "PARALLEL": str(plan["seqs"])}
    error, text = await _call("render_gates", log_text=PYTHIA, seqs=1, max_model_len=41_472 + 256)
    assert error and "is over the ceiling 15,679 MiB/card" in text, text


async def test_llama_cpp_kv_memory_given_otherwise_than_the_cells_take_is_refused() -> None:
    error, text = await _call("render_gates", log_text=PYTHIA, seqs=20, max_model_len=2048, vram_kv_mib=10_000)
    assert error and "follows from the window, 20 x 2,048 cells x 327,680 B = 12,800 MiB" in text, text


START = "INFO 05-19 23:06:00 [llm_engine.py:240] Initializing a V0 LLM engine (v0.8.5) with config: model='m'\n"
"""vLLM's start-up line, which tells one boot from the next in a log of several."""


def _later_boot(log: str, taken: bool) -> str:
    """The log with a second boot: the plan's (7,000 MiB of KV: vLLM prints 6.84 GiB, 8,001 blocks of 16 tokens,
    128,016 / 3,072 = 41.67x), or the same boot again (the deploy did not take the plan)."""
    later = log
    if taken:
        for old, new in (("KV Cache is 7.73GiB", "KV Cache is 6.84GiB"), ("# cuda blocks: 9048", "# cuda blocks: 8001"),
                         ("request: 47.12x", "request: 41.67x")):
            assert old in later
            later = later.replace(old, new)
    return START + log + START + later


@pytest.mark.parametrize(("taken", "verdict"), [(True, "kept"), (False, "killed")])
async def test_verify_deploy_judges_a_vllm_boot_after_the_plans(taken: bool, verdict: str) -> None:
    _, out = await _call("render_gates", log_text=VLLM, vram_kv_mib=7_000, seqs=4, env_prefix="SVC")
    # the deploy's boot: 7,000 MiB is 6.84 GiB as vLLM prints it; not taken: the same boot again
    later = _later_boot(VLLM, taken)
    env = out["env_text"].replace(f"of {out['ledger']['source']}.", "of log_text.")
    error, checked = await _call("verify_deploy", log_text=later, env_text=env)
    assert not error, checked
    verdicts = {v["key"]: v["verdict"] for v in checked["verdicts"]}
    assert verdicts["kv_mib"] == verdict and verdicts["bytes_per_token"] == "kept"
    assert verdicts["window"] == "kept" and verdicts["boundary"] == "pending"
    assert checked["checks"][0]["check"] == "plan's boot" and checked["checks"][0]["ok"] is taken


async def test_verify_deploy_on_the_boot_planned_from_judges_nothing() -> None:
    _, out = await _call("render_gates", log_text=VLLM, vram_kv_mib=7_000, seqs=4, env_prefix="SVC")
    env = out["env_text"].replace(f"of {out['ledger']['source']}.", "of log_text.")
    error, checked = await _call("verify_deploy", log_text=START + VLLM, env_text=env)
    assert not error and all(v["verdict"] == "pending" for v in checked["verdicts"]), checked


async def test_verify_deploy_refuses_an_env_file_of_another_engine() -> None:
    _, out = await _call("render_gates", log_text=VLLM, vram_kv_mib=7_000, seqs=4, env_prefix="SVC")
    error, text = await _call("verify_deploy", log_text=SGLANG, env_text=out["env_text"])
    assert error and "sets vllm's knobs" in text and "is a sglang boot" in text, text


async def test_audit_step_shape_compares_two_llama_cpp_boots_in_its_own_flags() -> None:
    eight = (LEDGERS / "llamacpp" / "b45xx_server_8_slots.log").read_text()
    one = (LEDGERS / "llamacpp" / "recorded_llama-cpp-python-0.3.36_gemma3-270m_server.log").read_text()
    error, out = await _call("audit_step_shape", proven_log_text=one, candidate_log_text=eight)
    assert not error, out
    changed = {row["flag"]: (row["proven"], row["candidate"]) for row in out["flag_changes"]}
    assert changed == {"--max-num-seqs": ("1", "8"), "--max-num-batched-tokens": ("512", "256")}  # n_seq_max, n_ubatch
    assert any("--max-num-batched-tokens is -ub / --ubatch-size" in n for n in out["notes"])
    error, text = await _call("audit_step_shape", proven_log_text=one, candidate_log_text=VLLM)
    assert error and "the audit compares two boots of one engine" in text, text
