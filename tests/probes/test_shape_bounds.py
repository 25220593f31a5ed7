"""Probes bounded by the shape the service's ledger states (issue 9, finding 6).

Over MCP with the SDK client, against the simulator as the real HTTP server, which writes its
boot ledger to the file the fleet config names: boundary_probe refuses n above the backed
sequences (unless over_shape), a window that disagrees with the ledger's (every probe, by one
check), too few generated tokens for a marker, and decode_probe a context above the window, all
before any request goes out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from radiance_mcp.app.server import build_server
from radiance_mcp.core.constants import DEFAULT_MODEL
from radiance_mcp.core.errors import REFUSAL_META, GuardRailError, InputError
from radiance_mcp.core.ledger import read_text
from radiance_mcp.core.rules.probe_shape import checked_window, ledger_shape, predict_boundary
from radiance_mcp.sim import Behaviour, Shape, SimEndpoint
from radiance_mcp.sources.config import Fleet, Service
from radiance_mcp.sources.runtime import Runtime


@asynccontextmanager
async def served(
    tmp_path: Path, shape: Shape, *, ledger: bool = True, behaviour: Behaviour | None = None
) -> AsyncIterator[tuple[Client, SimEndpoint]]:
    log = tmp_path / "svc.log"
    async with SimEndpoint(shape, behaviour=behaviour or Behaviour(), time_scale=0.001, ledger_path=log) as ep:
        service = Service(endpoint=ep.url, log=str(log)) if ledger else Service(endpoint=ep.url)
        runtime = Runtime(Fleet(services={"svc": service}))
        async with Client(build_server(runtime)) as client:
            yield client, ep


async def call(client: Client, tool: str, **args: Any) -> tuple[bool, str, dict[str, Any] | None]:
    result = await client.call_tool(tool, {"service": "svc", **args})
    text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
    return result.is_error, text, result.structured_content


async def refused(client: Client, tool: str, **args: Any) -> tuple[str | None, str]:
    """(the rule a refusal names as data, its message)."""
    result = await client.call_tool(tool, {"service": "svc", **args})
    assert result.is_error, result.structured_content
    return (result.meta or {}).get(REFUSAL_META, {}).get("rule"), result.content[0].text  # type: ignore[union-attr]


async def test_n_above_the_backed_sequences_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    # The finding: n=64 on --max-num-seqs 2 ran 131 requests and 12.8 M prefill tokens and "passed".
    async with served(tmp_path, Shape()) as (client, ep):
        error, text, _ = await call(client, "boundary_probe", n=64, execute=True)
    assert error
    assert "n=64 is above the 2 sequence(s) the ledger backs at once" in text
    assert "backs 2 sequences all at 200000 tokens at once" in text  # the line itself, with its number
    assert "62 wait in its queue" in text and "over_shape=true" in text and "n=2" in text
    assert ep.requests == []


async def test_over_shape_plans_with_the_predicted_verdict_and_its_cost(tmp_path: Path) -> None:
    async with served(tmp_path, Shape()) as (client, ep):
        error, text, out = await call(client, "boundary_probe", n=5, over_shape=True, dialect="radiance")
    assert not error and out is not None
    plan = out["plan"]
    # No max_model_len given: the ledger's --max-model-len 200000 plans it; 5 x (200000 - 64) prefill tokens
    # (radiance refuses only prompt > window, so no edge reserve).
    assert plan["max_model_len"] == 200_000 and plan["window_source"].startswith("ledger ")
    assert plan["checks_not_made"] == []
    assert plan["total_prefill_tokens"] == 5 * (200_000 - 64)
    assert (plan["backed_seqs"], plan["max_num_seqs"], plan["over_shape"]) == (2, 2, True)
    assert "3 wait in its queue" in plan["predicted"] and "nothing about the shape" in plan["predicted"]
    assert any("--max-num-seqs" in line for line in plan["ledger_lines"])
    assert out["executed"] is False and ep.requests == []


async def test_seats_above_the_kv_backing_bound_n_and_predict_the_refusals(tmp_path: Path) -> None:
    # --max-num-seqs 6 but KV for 5.6 sessions at 100,000 tokens: "backs 5 sequences"; the pool
    # fails its contract: 6*100000*7488 B = 4,284.67 MiB + 110*6 + 448 = 5,392.67 MiB > 5,120 MiB,
    # so the engine refuses every full-window request.
    async with served(tmp_path, Shape(seqs=6, max_model_len=100_000)) as (client, ep):
        error, text, _ = await call(client, "boundary_probe", n=6)
        assert error and "above the 5 sequence(s)" in text and "expect refusals, not answers" in text
        assert ep.requests == []
        error, _, out = await call(client, "boundary_probe", n=5, execute=True)
    assert not error and out is not None
    assert out["plan"]["predicted"].startswith(
        "0/5 retrieved: the pool of 5,120 MiB (--vram-kv-mib) fails its contract for 6 seats at 100,000 tokens "
        "(it needs 5,392.67 MiB)"
    )
    assert out["verdict"] == "0/5 retrieved" and out["passed"] is False  # as predicted
    assert {r["verdict"] for r in out["requests"]} == {"pool_contract"}


async def test_within_the_backed_sequences_the_probe_runs_as_predicted(tmp_path: Path) -> None:
    # gather=3: each request waits, seated, for the other two (a 22 ms prefill at this scale could end before a
    # loaded machine sent the third), so 3 in flight at once says the probe sent them together, not the load.
    async with served(tmp_path, Shape(seqs=3, vram_kv_mib=5_120), behaviour=Behaviour(gather=3)) as (client, ep):
        error, _, out = await call(client, "boundary_probe", n=3, execute=True)
    assert not error and out is not None
    assert out["plan"]["predicted"].startswith("3/3 retrieved: the ledger backs 3 sequence(s) at 200,000 tokens")
    assert out["verdict"] == "3/3 retrieved" and out["passed"] is True
    assert ep.peak_in_flight == 3


async def test_a_window_other_than_the_ledgers_is_refused_with_both_values(tmp_path: Path) -> None:
    async with served(tmp_path, Shape()) as (client, ep):
        error, text, _ = await call(client, "boundary_probe", n=2, max_model_len=131_072, execute=True)
        assert error
        assert "max_model_len=131,072 disagrees with the ledger's window of 200,000" in text
        assert "--max-model-len" in text and "200000" in text
        error, text, _ = await call(client, "decode_probe", context_tokens=4_096, max_model_len=32_768)
        assert error and "disagrees with the ledger's window of 200,000" in text
    assert ep.requests == []


@pytest.mark.parametrize(("tool", "argument", "args"), [
    # The finding: token_count_probe sized its filler above the 32,768 given, the 200,000-token service
    # accepted it and prefilled 76,494 prompt tokens, and only then did the probe say so.
    ("token_count_probe", "window_tokens", {"text": "hello world"}),
    ("boundary_probe", "max_model_len", {"n": 2, "execute": True}),
    ("decode_probe", "max_model_len", {"context_tokens": 4_096}),
])
async def test_every_probe_refuses_a_window_the_ledger_contradicts_before_sending(
    tmp_path: Path, tool: str, argument: str, args: dict[str, Any]
) -> None:
    async with served(tmp_path, Shape()) as (client, ep):
        rule, text = await refused(client, tool, **args, **{argument: 32_768})
    assert rule == "window_from_ledger" and ep.requests == []
    assert f"{argument}=32,768 disagrees with the ledger's window of 200,000 tokens (" in text
    assert "svc.log:" in text and "--max-model-len" in text and "200000'" in text  # the ledger's line, quoted
    assert text.endswith(f"nothing was sent. Leave {argument} out (the ledger's is read) or pass {argument}=200000")


async def test_a_token_count_runs_at_the_ledgers_window_and_without_a_ledger_says_it_is_unchecked(
    tmp_path: Path,
) -> None:
    async with served(tmp_path, Shape()) as (client, ep):
        error, _, out = await call(client, "token_count_probe", text="hello world")
    assert not error and out is not None
    assert out["window_tokens"] == 200_000 and out["window_source"].startswith("ledger ")
    assert "--max-model-len" in out["window_source"] and out["prefill_tokens_paid"] == 0
    assert {(r.status, r.prefill_tokens) for r in ep.requests} == {(400, 0)}  # refusals only, no window to learn
    async with served(tmp_path, Shape(), ledger=False) as (client, ep):
        error, _, out = await call(client, "token_count_probe", text="hello world", window_tokens=200_000)
    assert not error and out is not None and out["window_source"] == "input"
    assert "window_tokens=200,000 is used as given, unchecked: the service has no ledger" in " ".join(out["notes"])
    assert {(r.status, r.prefill_tokens) for r in ep.requests} == {(400, 0)}


async def test_too_few_generated_tokens_for_a_marker_are_refused_before_sending(tmp_path: Path) -> None:
    # The finding: gen_tokens=1 paid 2 x 199,984 prefill tokens for "0/2 retrieved", with no warning.
    async with served(tmp_path, Shape()) as (client, ep):
        rule, text = await refused(client, "boundary_probe", n=2, gen_tokens=1, execute=True)
        assert rule == "boundary_tokens" and ep.requests == []
        assert text.startswith("gen_tokens=1: an answer counts as retrieved only when it holds its request's whole "
                               "marker (PROBE-02-XXXXXX, 15 characters)")
        assert "16 generated tokens are certain to hold it" in text and text.endswith("pass gen_tokens=16 or more")
        error, _, out = await call(client, "boundary_probe", n=2, gen_tokens=16, execute=True)
    assert not error and out is not None and out["verdict"] == "2/2 retrieved"


@pytest.mark.parametrize("context", [16_000_000, 199_900])
async def test_decode_refuses_a_context_above_the_ledgers_window_before_sending(tmp_path: Path, context: int) -> None:
    async with served(tmp_path, Shape()) as (client, ep):
        error, text, _ = await call(client, "decode_probe", context_tokens=context, gen_tokens=512)
        # The finding's 1e9 is past the schema's own bound, and refused there, also with nothing sent.
        too_big, _, _ = await call(client, "decode_probe", context_tokens=1_000_000_000)
    assert error and too_big and ep.requests == []
    assert f"context_tokens={context:,} + gen_tokens=512 exceed the window of 200,000" in text
    assert "lower context_tokens to at most 199,488" in text.lower()


async def test_decode_inside_the_window_reports_the_window_it_was_checked_against(tmp_path: Path) -> None:
    async with served(tmp_path, Shape()) as (client, _):
        error, _, out = await call(client, "decode_probe", context_tokens=20_000, gen_tokens=128)
    assert not error and out is not None
    assert out["window_tokens"] == 200_000 and "--max-model-len" in out["window_source"]


async def test_without_a_ledger_the_plan_says_which_checks_were_not_made(tmp_path: Path) -> None:
    async with served(tmp_path, Shape(), ledger=False) as (client, ep):
        error, _, out = await call(client, "boundary_probe", n=3, max_model_len=200_000)
        assert not error and out is not None
        plan = out["plan"]
        assert plan["ledger"] is None and plan["backed_seqs"] is None
        assert plan["predicted"].startswith("no prediction: the service has no ledger")
        assert len(plan["checks_not_made"]) == 2 and all("no ledger" in c for c in plan["checks_not_made"])
        # No window to check against: a context no engine holds is refused, not built and sent.
        error, text, _ = await call(client, "decode_probe", context_tokens=4_000_000)
        assert error and "context_tokens=4,000,000 is above max_window_tokens=1,048,576" in text
        # Below that bound the engine's own refusal names its window, before any prefill.
        error, text, _ = await call(client, "decode_probe", context_tokens=250_000, gen_tokens=128)
        assert error and "window is 200,000 tokens: lower context_tokens to at most 199,872" in text
    assert [(r.status, r.prefill_tokens) for r in ep.requests] == [(400, 0)]


# --- the pure reading, on ledgers written in other styles ---------------------------------

PODMAN_STYLE = """\
2026-11-02T10:00:00.1Z I radiance boot: qwen-long
2026-11-02T10:00:00.2Z I   --max-model-len    65536
2026-11-02T10:00:00.3Z I   --max-num-seqs     12
2026-11-02T10:00:00.4Z I   --kv-cache-dtype   fp8
2026-11-02T10:00:00.5Z I   --vram-kv-mib      6000
2026-11-02T10:00:09.0Z I backs  9 sequences all at 65,536 tokens at once
"""

STOPPED = """\
I radiance boot: wide
I   --max-model-len 32768
I   --max-num-seqs 8
E kv cache 271.25 MiB (fp8, 7488 B/token/rank): 0% backing of the 8 x 32768 worst case: 0.0 full-length sessions
E startup stopped: out of memory
"""


def test_the_shape_is_read_from_the_ledgers_own_lines() -> None:
    shape = ledger_shape(read_text(PODMAN_STYLE, source="x.log"), DEFAULT_MODEL)
    assert shape.backed_seqs is not None and shape.backed_seqs.value == 9 and shape.backed_seqs.line.number == 6
    assert shape.seats is not None and shape.seats.value == 12
    assert shape.window is not None and shape.window.value == 65_536 and shape.missing == ()
    from_ledger = (65_536, f"ledger {shape.cite(shape.window)}")
    assert checked_window(shape, None) == checked_window(shape, 65_536) == from_ledger
    assert checked_window(None, 4_096) == (4_096, "input") and checked_window(None, None) == (None, None)
    with pytest.raises(InputError, match=r"max_model_len=65,537 disagrees .*\(x\.log:2: "):
        checked_window(shape, 65_537)
    # 12 seats at 65,536 fp8: 12*65536*7488 B = 5,616 MiB + 1,320 + 448 = 7,384 MiB > 6,000: even n=9 is refused.
    assert predict_boundary(shape, 9, over_shape=False, no_ledger_reason="-").verdict.startswith(
        "0/9 retrieved: the pool of 6,000 MiB (--vram-kv-mib) fails its contract for 12 seats at 65,536 tokens "
        "(it needs 7,384 MiB)")
    # The same boot without the pool's flag: no contract, and the plan says so.
    bare = ledger_shape(read_text(PODMAN_STYLE.replace("--vram-kv-mib", "--other"), source="y.log"), DEFAULT_MODEL)
    prediction = predict_boundary(bare, 9, over_shape=False, no_ledger_reason="-")
    assert prediction.verdict.startswith("9/9 retrieved: the ledger backs 9 sequence(s) at 65,536 tokens")
    assert any("--vram-kv-mib" in c and "y.log" in c for c in prediction.not_checked)
    with pytest.raises(GuardRailError, match=r"n=10 is above the 9 sequence\(s\)"):
        predict_boundary(shape, 10, over_shape=False, no_ledger_reason="-")


def test_a_boot_that_stopped_is_refused_before_planning_naming_its_refusal_lines() -> None:
    shape = ledger_shape(read_text(STOPPED, source="wide.log"), DEFAULT_MODEL)
    assert shape.backed_seqs is None and shape.seats is not None and shape.seats.value == 8
    assert [line.number for line in shape.refused] == [4, 5]  # the kv cache line that backs 0 sessions, the stop
    for over_shape in (False, True):
        with pytest.raises(GuardRailError, match=r"newest boot refused to start \(wide\.log:4: .*wide\.log:5: "
                           r"'E startup stopped: out of memory'\).*call audit_step_shape"):
            predict_boundary(shape, 2, over_shape=over_shape, no_ledger_reason="-")
