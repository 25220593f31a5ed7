"""Where a whole-fleet plan_free_vram spends its time after the host commands: the plan, then its answer.

bench_fleet.py times the call over MCP stdio; this splits it, in one process, on the same fleet of
asyncssh hosts (bench_fleet.Hosts): the reads alone, the tool's run (the reads, warm by then, and
the plan), then each step the server and the SDK take with the answer (model_dump, the text copy,
the SVG, the SDK's validation of the structured output, the JSON-RPC dump) and the client's
reading of it (parse and CallToolResult validation, the output schema's check), each with its
CPU seconds, and the answer's size on the wire (issue 26 items 1 and 2).

    .venv/bin/python bench/bench_fleet_answer.py [--services 1000] [--logs small|20mib] [--local]
                                                 [--profile 30 [--sort tottime]]

--local reads the same logs as local files (no hosts); --profile N prints the N functions of most
cumulative (or own: --sort tottime) time in a cProfile of the last warm run of the tool (the reads and the plan).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import cProfile
import gc
import json
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_fleet  # noqa: E402


def timed(label: str, step: Callable[[], Any]) -> Any:
    cpu, wall = time.process_time(), time.perf_counter()
    result = step()
    print(f"  {label:50} {time.perf_counter() - wall:6.2f} s wall {time.process_time() - cpu:6.2f} s CPU")
    return result


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--logs", default="small", choices=["small", "20mib"])
    parser.add_argument("--local", action="store_true", help="the logs as local files, no hosts")
    parser.add_argument("--freeze", action="store_true", help="gc.freeze() before the cold run (after start-up)")
    parser.add_argument("--nogc", action="store_true", help="the tool run with the garbage collector off")
    parser.add_argument("--profile", type=int, default=0, help="print the N costliest functions")
    parser.add_argument("--sort", default="cumulative", choices=["cumulative", "tottime"])
    parser.add_argument("--callers", action="append", default=[], help="with --profile: who calls these")
    return parser.parse_args()


class Collections:
    """CPU seconds of the garbage collector, and its full collections, since the last reset."""

    def __init__(self) -> None:
        self.seconds, self.full, self._since = 0.0, 0, 0.0
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._since = time.process_time()
        else:
            self.seconds += time.process_time() - self._since
            self.full += info["generation"] == 2


async def runs(runtime: Any, spec: Any, args: Any, options: argparse.Namespace) -> Any:
    """A cold run and two warm ones: the reads alone, then the tool (the reads again and the plan); the last
    profiled with --profile. The tool's last output."""
    from radiance_mcp.models.ledger_ref import LedgerRef
    from radiance_mcp.sources.engine_logs import read_ledger
    from radiance_mcp.sources.offload import gather

    names = sorted(runtime.fleet.services)
    profile, collections, output = cProfile.Profile(), Collections(), None
    for i, label in enumerate(("cold", "warm", "warm")):
        print(f"{label}, {options.services} services, {options.logs} logs:")
        cpu, wall = time.process_time(), time.perf_counter()
        await gather(*(read_ledger(runtime, LedgerRef(service=n, boot=-1)) for n in names))
        print(f"  {'the reads alone':50} {time.perf_counter() - wall:6.2f} s wall "
              f"{time.process_time() - cpu:6.2f} s CPU")
        if options.freeze and i == 0:
            gc.freeze()
        cpu, wall = time.process_time(), time.perf_counter()
        collections.seconds, collections.full = 0.0, 0
        if options.profile and i == 2:
            profile.enable()
        if options.nogc:
            gc.disable()
        output = await spec.run(runtime, args)
        gc.enable()
        profile.disable()
        print(f"  {'the tool: the reads again (warm) and the plan':50} {time.perf_counter() - wall:6.2f} s wall "
              f"{time.process_time() - cpu:6.2f} s CPU, of which {collections.seconds:.2f} s garbage collection "
              f"({collections.full} full; {len(gc.get_objects()):,} objects tracked after)")
    if options.profile:
        stats = pstats.Stats(profile).sort_stats(options.sort)
        stats.print_stats(options.profile)
        for name in options.callers:
            stats.print_callers(name)
    return output


async def main() -> None:
    import jsonschema
    from mcp import Client
    from mcp.server.mcpserver.utilities.func_metadata import _pydantic_readable_typeddict
    from mcp.types import CallToolResult, ImageContent, TextContent
    from pydantic import TypeAdapter

    from radiance_mcp.app.arguments import parse_arguments
    from radiance_mcp.app.server import build_server
    from radiance_mcp.sources.config import load
    from radiance_mcp.sources.runtime import Runtime
    from radiance_mcp.tools import tool_spec

    options = arguments()
    host_count = (options.services + bench_fleet.PER_HOST - 1) // bench_fleet.PER_HOST
    base = Path(tempfile.mkdtemp(prefix="bench-answer-", dir="/tmp"))
    hosts = None
    try:
        bench_fleet.write_files(base, host_count)
        ports = None
        if not options.local:
            hosts = bench_fleet.Hosts(host_count, base)
            ports = hosts.ports
            key = " ".join((base / "host_key.pub").read_text().split()[:2])
            (base / "known_hosts").write_text("".join(f"[127.0.0.1]:{port} {key}\n" for port in ports))
        runtime = Runtime(load(bench_fleet.fleet_toml(base, options.services, options.logs, ports)))
        async with Client(build_server(runtime)) as client:
            tools = (await client.list_tools()).tools
        schema = next(t for t in tools if t.name == "plan_free_vram").output_schema
        spec = tool_spec("plan_free_vram")
        args = parse_arguments(spec.name, spec.input_model, {})
        output = await runs(runtime, spec, args, options)
        assert output is not None and spec.picture is not None
        picture = spec.picture
        print("the answer of the last:")
        data = timed("server: model_dump", lambda: output.model_dump(mode="json", by_alias=True))
        text = timed("server: the text copy (json.dumps)",
                     lambda: json.dumps(data, ensure_ascii=False, separators=(",", ":")))
        svg = timed("server: the SVG, base64", lambda: base64.b64encode(picture(output).encode()).decode())
        adapter = TypeAdapter(_pydantic_readable_typeddict(spec.output_model))
        timed("server: the SDK's check of the structured output", lambda: adapter.validate_python(data))
        result = CallToolResult(content=[TextContent(type="text", text=text),
                                         ImageContent(type="image", data=svg, mime_type="image/svg+xml")],
                                structured_content=data)
        wire = timed("server: the JSON-RPC dump", lambda: result.model_dump_json(by_alias=True, exclude_unset=True))
        back = timed("client: parse, CallToolResult", lambda: CallToolResult.model_validate_json(wire))
        checker = jsonschema.validators.validator_for(schema)(schema)
        timed("client: the output schema's check", lambda: list(checker.iter_errors(back.structured_content)))
        print(f"  on the wire {len(wire) / 1e6:.1f} MB: structured {len(json.dumps(data)) / 1e6:.1f} MB, "
              f"text {len(text) / 1e6:.1f} MB, SVG {len(svg) / 1e6:.1f} MB")
        await runtime.close()
    finally:
        if hosts is not None:
            hosts.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
