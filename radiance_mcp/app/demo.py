"""The demo: a simulated fleet, and the resize procedure walked end to end through MCP.

``run_demo()`` (``radiance-mcp demo``) starts ``SimFleet`` in a temporary directory, spawns
``python -m radiance_mcp serve --config <fleet.toml>`` and talks to it with the SDK's MCP
client over stdio, printing each step of the resize procedure and its result: read the budget
table, compute the ceiling (the procedure's worked 30,969 MiB), refuse an untraced reserve, check the pool
contract for the seats the new pair can back, deploy the pair (a new boot of the simulated
service), verify from the ledger first, then probe the live endpoint. It ends with the
step-shape audit of the campaign rig's wide mode and its serve script: the mode's private step
found, shown by dry run, fixed, and the fix proven byte for byte. Every step checks its
result; the demo exits 0 only when each came out as the procedures say.

``background_fleet()`` runs a fleet in a thread of its own for ``radiance-mcp serve --demo``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import httpx
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from radiance_mcp.app.tables import width, wrap
from radiance_mcp.core.constants import AT_CEILING_WORST_FREE_MIB, SAMPLER_ROW_BOUND, WORKED_CEILING_MIB
from radiance_mcp.core.errors import RadianceMCPError
from radiance_mcp.sim.fleet import SimFleet
from radiance_mcp.sim.tokenizer import fox_filler
from radiance_mcp.sources import ledger_file

DEMO_TIME_SCALE = 0.01
"""The demo's clock: a 22 s full-window prefill takes 0.22 s."""
SERVICE = "frank-archon"
WIDE = "qwen38-wide"
PRIVATE_STEP = """  # A wider step is free throughput, so this mode takes its own.
  step=65536
"""
INHERITED_STEP = """  # The step comes from the env file, as in every mode: a wider arena costs weights and KV.
  :
"""
"""The demo's fix of the campaign rig's serve script (sim/scripts/qwen38-bf16.sh): the wide mode's body."""


@dataclass
class _Walk:
    out: TextIO
    client: Client
    fleet: SimFleet
    tools: set[str] = field(default_factory=set)
    surprises: list[str] = field(default_factory=list)
    step: int = 0
    gates_dir: Path | None = None
    """Where the gates are written to be kept (demo --gates-dir); else beside the fleet, removed with it."""

    def head(self, title: str) -> None:
        self.step += 1
        print("", *wrap(f"{self.step}. {title}", width(), indent="   "), sep="\n", file=self.out)

    def say(self, text: str, lead: str = "   ") -> None:
        """text under the step's title, wrapped within the terminal's columns (tables.width())."""
        for k, line in enumerate(wrap(text, width() - len(lead), indent="  ")):
            print((" " * len(lead) if k else lead) + line, file=self.out)

    def command(self, text: str) -> None:
        """A shell command on a line of its own, unwrapped, so it copies whole."""
        print(f"     {text}", file=self.out)

    def expect(self, ok: bool, what: str) -> None:
        self.say(("ok: " if ok else "UNEXPECTED: ") + what)
        if not ok:
            self.surprises.append(what)

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any] | str:
        """The tool's structured output, or its error text."""
        shown = ", ".join(f"{k}={_short(v)}" for k, v in arguments.items())
        self.say(f"{tool}({shown})", lead="   > ")
        result = await self.client.call_tool(tool, arguments)
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            return text.removeprefix(f"Error executing tool {tool}: ")
        return dict(result.structured_content or {})

    async def need(self, tool: str, **arguments: Any) -> dict[str, Any]:
        found = await self.call(tool, **arguments)
        if isinstance(found, str):
            raise RadianceMCPError(f"the demo's call to {tool} failed: {found}")
        return found


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 12]}... ({len(text):,} chars)"


def _newest_line(path: Path, key: str) -> str:
    hit = ledger_file.read_file(path, source=str(path)).first(key)
    return hit.line.text.strip() if hit else f"(no {key!r} line)"


async def _walk(w: _Walk) -> None:
    """The resize procedure step by step on the simulated fleet, then the step-shape audit."""
    await _fleet(w)
    table, ceiling = await _ceiling(w)
    if "plan_free_vram" in w.tools:
        await _plan(w)
    new_kv, seats = await _seats(w, table, ceiling)
    shipped = await _ship(w, SERVICE, new_kv, seats) if "render_gates" in w.tools else None
    window = int(table["flags"]["max-model-len"])
    await _deploy(w, int(table["flags"]["vram-weights-mib"]), new_kv, seats, window, shipped)

    w.head("Then the live probes, against the deployed endpoint")
    found = await _probes(w, seats, window)
    if shipped is not None:
        w.head("The verdicts: each prediction of the env file, kept or killed")
        final = await w.need("verify_deploy", service=SERVICE, env_text=shipped["env_text"], boundary_found=found)
        for verdict in final["verdicts"]:
            w.say(f"{verdict['key']}: {verdict['verdict']}: {verdict['text']}")
        w.expect(all(v["verdict"] == "kept" for v in final["verdicts"]),
                 "every prediction kept; the env file comes back with its verdicts written")
        await _killed(w)
    await _step_shape(w)


async def _fleet(w: _Walk) -> None:
    fleet = w.fleet
    w.head("The fleet (simulated: every ledger and endpoint below is the simulator's)")
    for name, s in fleet.services.items():
        state = f"serving on {s.url}" if s.endpoint.serving else "boot refused, not serving"
        w.say(f"{name:<14} host {s.host.name:<10} pair {s.shape.pair_mib:>6,} MiB  {state}")
        if fleet.notes.get(name):
            w.say(f"{'':<14} {fleet.notes[name]}")
    if "list_fleet" in w.tools:
        listed = await w.need("list_fleet")
        w.expect({s["name"] for s in listed["services"]} == set(fleet.services),
                 f"list_fleet names the {len(fleet.services)} services, each with its ledger and endpoint")
    w.say(f"config: {fleet.config_path}")
    w.say(f"MCP tools: {', '.join(sorted(w.tools))}")


async def _ceiling(w: _Walk) -> tuple[dict[str, Any], dict[str, Any]]:
    """The budget table and the ceiling it gives (the worked example), and the reserve rule: (table, ceiling)."""
    w.head("Read the engine's own budget table; rocm-smi free memory is not spare capacity")
    table = await w.need("read_budget_table", service=SERVICE)
    card = table["cards"][0]
    w.say(f"card 0: settled {card['free_mib']['printed']} free against a floor of "
          f"{card['floor_mib']['printed']} (line {card['free_mib']['lines'][0]}); pair "
          f"{card['pair_mib']:,.0f} MiB from the {card['pair_source']}")

    w.head("The ceiling: (settled free - floor) + pair, per card")
    ceiling = await w.need("compute_ceiling", service=SERVICE)
    w.say(ceiling["derivation"])
    w.expect(ceiling["ceiling_mib"] == WORKED_CEILING_MIB, f"the worked example, {WORKED_CEILING_MIB:,} MiB")
    twin = await w.need("compute_ceiling", service="twin")
    w.say("twin (--tp 2): " + "; ".join(f"card {c['card']} {c['ceiling_mib']:,}" for c in twin["cards"]))
    w.expect(twin["binding_card"] == 1, "with several cards the smallest ceiling binds (card 1)")

    w.head("A reserve below the ceiling must cite a ledger line, or be labelled personal")
    refused = await w.call("compute_ceiling", service=SERVICE, reserves=[{"mib": 256, "label": "safety"}])
    w.say(f"untraced: {refused if isinstance(refused, str) else 'accepted'}")
    w.expect(isinstance(refused, str), "an untraced, unlabelled reserve is refused")
    personal = await w.need("compute_ceiling", service=SERVICE,
                            reserves=[{"mib": 256, "label": "my margin for a second context", "personal": True}])
    w.say(f"personal: max pair {personal['max_pair_mib']:,} MiB; personal reserves: "
          f"{', '.join(map(str, personal['personal_reserves']))}")
    return table, ceiling


async def _seats(w: _Walk, table: dict[str, Any], ceiling: dict[str, Any]) -> tuple[int, int]:
    """The ceiling less the weights as KV pool, and the seats its pool contract allows: (pool MiB, seats)."""
    w.head("Spend the headroom on the KV cache: how many seats does the pool contract allow?")
    flags = table["flags"]
    weights_mib = int(flags["vram-weights-mib"])
    new_kv = ceiling["ceiling_mib"] - weights_mib
    window, dtype = int(flags["max-model-len"]), flags["kv-cache-dtype"]
    probe = await w.need("check_pool_contract", pool_mib=new_kv, seqs=1, max_model_len=window, kv_cache_dtype=dtype)
    seats = probe["max_seqs_at_window"]
    w.say(f"pool {new_kv:,} MiB (the ceiling {ceiling['ceiling_mib']:,} less the weights {weights_mib:,}) "
          f"backs at most {seats} sequences at {window:,} tokens")
    fits = await w.need("check_pool_contract", pool_mib=new_kv, seqs=seats, max_model_len=window, kv_cache_dtype=dtype)
    w.say(fits["formula"])
    over = await w.need("check_pool_contract", pool_mib=new_kv, seqs=seats + 1, max_model_len=window,
                        kv_cache_dtype=dtype)
    w.say(f"{seats + 1} seats: {over['formula']}; clients would see: {over['refusal']!r}")
    w.expect(fits["contract_ok"] and not over["contract_ok"], f"{seats} seats fit, {seats + 1} do not")
    spec = w.fleet.services[SERVICE].shape.spec
    rows = seats * (1 + spec)
    w.expect(rows <= SAMPLER_ROW_BOUND,
             f"sampler rows {seats} x (1 + {spec}) = {rows}, inside the {SAMPLER_ROW_BOUND}-row bound")
    lowpool = await w.need("check_pool_contract", service="lowpool")
    w.say(f"lowpool, from its ledger: {lowpool['formula']}")
    w.expect(not lowpool["ok"], "lowpool's pool fails its contract (it booted all the same)")
    return new_kv, seats


async def _deploy(
    w: _Walk, weights_mib: int, new_kv: int, seats: int, window: int, shipped: dict[str, Any] | None
) -> None:
    """The simulator redeploys the new shape; the new boot's ledger is read back and checked."""
    service = w.fleet.services[SERVICE]
    w.head(f"Deploy {weights_mib:,} + {new_kv:,} MiB with --max-num-seqs {seats} (the simulator redeploys)")
    await w.fleet.redeploy(SERVICE, replace(service.shape, vram_kv_mib=new_kv, seqs=seats))
    w.say("the new boot's ledger (each line starts with its level: I info, W warning, E error):")
    w.say("  " + _newest_line(service.log_path, "backs"))
    w.say("  " + _newest_line(service.log_path, "settled"))

    w.head("Verify, ledger first: the new boot's table and the referee (its 'backs' line)")
    after = await w.need("read_budget_table", service=SERVICE)
    card = after["cards"][0]
    free, floor = card["free_mib"]["value"], card["floor_mib"]["value"]
    w.say(f"settled {card['free_mib']['printed']} free against {card['floor_mib']['printed']}; "
          f"pair {card['pair_mib']:,.0f} MiB")
    w.expect(floor <= free <= AT_CEILING_WORST_FREE_MIB + 10,
             f"a pair at the ceiling settles about {AT_CEILING_WORST_FREE_MIB} MiB free at worst, above the floor")
    audit = await w.need("audit_step_shape", service=SERVICE) if "audit_step_shape" in w.tools else None
    if audit is not None:
        for row in audit["rows"]:
            if row.get("differs"):
                w.say(f"{row['row']:<24} {row['proven']} -> {row['candidate']}")
    backs = _newest_line(service.log_path, "backs")
    w.expect(f"backs {seats} sequences all at {window} tokens" in backs, f"the referee: {backs}")
    if shipped is not None:
        verified = await w.need("verify_deploy", service=SERVICE, env_text=shipped["env_text"])
        for check in verified["checks"]:
            w.say(f"{'ok' if check['ok'] else 'FAILED' if check['ok'] is False else 'n/a'}: {check['check']}: "
                  f"{check['found']}")
        w.expect(verified["ok"], "every ledger check of the new boot passes")


async def _step_shape(w: _Walk) -> None:
    w.head("The step-shape audit: a mode that carried its own 65,536-token step")
    if "audit_step_shape" in w.tools:
        wide = await w.need("audit_step_shape", proven_service="qwen38-proven", candidate_service="qwen38-wide")
        inherit = ", ".join(f"{flag} {value}" for flag, value in wide["inherit"].items())
        w.say(f"verdict: {wide['verdict']}; inherit from the proven boot: {inherit}")
        for line in wide["refusal"]:
            w.say(f"line {line['line']}: {line['text'].strip()}")
        w.expect(wide["verdict"] == "refused", "65,536 refuses with out of memory where 1,024 booted")
    else:
        w.say("(audit_step_shape is not a tool of this build)")
    if {"check_serve_script", "compare_dry_run"} <= w.tools:
        await _serve_script(w)


SHARING = {"known": "every service names its cards", "unknown": "no service names its cards",
           "partial": "some services name their cards"}
"""plan_free_vram's sharing, in words: whether the config says which physical cards each service uses."""
SLAB_LAW = ((22_208, 3_397), (24_000, 3_290), (25_600, 3_584), (26_071, 4_379))
"""The seed's measured prefill law (fp8, 43.5k single stream): slab MiB -> t/s."""


async def _plan(w: _Walk) -> None:
    w.head("What can we do with the free VRAM? One call for the whole fleet")
    plan = await w.need("plan_free_vram")
    for line in plan["summary"]:
        w.say(line)
    for card in plan["physical_cards"]:
        w.say(f"{card['card']}: {', '.join(card['services'])}: {card['derivation']}")
    shared = {c["card"]: c for c in plan["physical_cards"]}.get("gpubox:1")
    w.expect(shared is not None and len(shared["services"]) == 2,
             "twin and lowpool share gpubox:1: its headroom is counted once, less the other engine's floor")
    w.say(f"fleet headroom, each card once: {plan['fleet_headroom_mib']:,} MiB ({SHARING[plan['sharing']]}); "
          f"not planned: {', '.join(u['service'] for u in plan['unreadable']) or 'none'}")

    w.head("The slab is a slope: compare the measured arms before reading a law off them")
    arms = [{"value": v, "rate": r} for v, r in SLAB_LAW]
    two = await w.need("compare_arms", arms=arms[:2], knob="slab MiB", claim="plateau")
    w.say(f"{two['steps'][0]['reading']}")
    w.say(f"plateau on two arms: {two['claim']['verdict']}: {two['claim']['remedy']}")
    w.expect(two["claim"]["verdict"] == "refused", "no plateau or threshold is read off two arms")
    every = await w.need("compare_arms", arms=arms, knob="slab MiB", claim="threshold")
    w.say(f"threshold on all four: {every['claim']['verdict']}: {every['claim']['reason']}")


async def _ship(w: _Walk, name: str, kv_mib: int, seats: int) -> dict[str, Any]:
    """render_gates for the plan; its files written beside the fleet (or kept in gates_dir) and, when bats is
    installed, run."""
    w.head("Ship: the env-file pair with its predictions, and the bats gates")
    shipped = await w.need("render_gates", service=name, vram_kv_mib=kv_mib, seqs=seats)
    for prediction in shipped["predictions"]:
        w.say(f"prediction {prediction['key']} = {prediction['value']}")
    ship = w.gates_dir or w.fleet.root / "ship"
    ship.mkdir(parents=True, exist_ok=True)
    env, bats = ship / f"{name}.env", ship / f"{name}.bats"
    env.write_text(shipped["env_text"], encoding="utf-8")
    bats.write_text(shipped["bats_text"], encoding="utf-8")
    if w.gates_dir is not None:
        w.say(f"the gates are kept in {ship}; run them with:")
        w.command(f"ENV_FILE={shlex.quote(str(env))} bats {shlex.quote(str(bats))}")
    runner = shutil.which("bats")
    if runner is None:
        w.say("(bats is not installed" + (")" if w.gates_dir else f": the gates go with the demo's directory; to keep "
              f"them, run the demo with --gates-dir DIR, then: ENV_FILE=DIR/{env.name} bats DIR/{bats.name})"))
        return shipped
    process = await asyncio.create_subprocess_exec(runner, "--tap", str(bats), env={**os.environ, "ENV_FILE": str(env)},
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    output = (await process.communicate())[0].decode(errors="replace")
    for line in output.splitlines():
        if line.startswith(("ok", "not ok")):
            w.say(f"bats: {line}")
    w.expect(process.returncode == 0, "bats runs the gates on the env file: pair <= ceiling, pool >= contract")
    return shipped


async def _killed(w: _Walk) -> None:
    """A deploy that did not take the plan: the env file says 3 seats, the service boots with its old 2."""
    name = "twin"
    w.head(f"A deploy that did not take the plan ({name}: planned 3 seats, booted with its old 2)")
    planned = await w.need("render_gates", service=name, vram_kv_mib=w.fleet.services[name].shape.vram_kv_mib,
                           seqs=3)
    await w.fleet.redeploy(name, w.fleet.services[name].shape)  # the seats change never reached the engine
    result = await w.need("verify_deploy", service=name, env_text=planned["env_text"])
    for verdict in result["verdicts"]:
        if verdict["verdict"] == "killed":
            w.say(f"{verdict['key']}: killed: {verdict['text']}")
    killed = {v["key"] for v in result["verdicts"] if v["verdict"] == "killed"}
    w.expect("referee" in killed and not result["ok"],
             "the referee line kills the prediction, and the verdict is written to the env file all the same")
    w.say(next(line for line in result["env_text"].splitlines() if line.startswith("# verdict referee:")))


async def _serve_script(w: _Walk) -> None:
    """The campaign rig's serve script: find the mode's private step, prove it by dry run, fix it, prove again."""
    wide = w.fleet.services[WIDE]
    w.head("Which mode carries its own step? The serve script against the env file that owns the shape")
    check = await w.need("check_serve_script", service=WIDE)
    for finding in check["findings"]:
        w.say(f"{Path(finding['file']).name}:{finding['line']} ({finding['mode']}): {finding['text']}")
    private = [f for f in check["findings"] if f["flag"] == "max-num-batched-tokens" and f["value"] == "65536"]
    owner = next((o["variable"] for o in check["owned"] if o["flag"] == "max-num-batched-tokens"), "nothing")
    w.expect(not check["ok"] and len(check["findings"]) == 1 and len(private) == 1,
             f"one finding: the wide mode's own 65,536 step, where {owner}, which the proven mode passes, owns it")
    dry = await w.need("compare_dry_run", service=WIDE, proven_mode="proven", candidate_mode="wide")
    w.say(dry["summary"])
    changes = [(c["flag"], c["proven"], c["candidate"]) for c in dry["flag_changes"]]
    w.expect(not dry["ok"] and changes == [("--max-num-batched-tokens", "1024", "65536")],
             "the dry runs differ in the step alone: 1,024 against 65,536")

    w.head("Fix: the mode inherits the step from the env file (the simulator edits the script)")
    script = wide.script_path
    assert script is not None
    text = script.read_text(encoding="utf-8")
    fixed = text.replace(PRIVATE_STEP, INHERITED_STEP)
    w.expect(fixed != text, "the wide mode's own step and its comment are gone from the script")
    script.write_text(fixed, encoding="utf-8")
    again = await w.need("check_serve_script", service=WIDE)
    w.expect(again["ok"] and not again["findings"], "check_serve_script finds no mode with a number of its own")
    proof = await w.need("compare_dry_run", service=WIDE, proven_mode="proven", candidate_mode="wide")
    w.say(proof["summary"])
    w.expect(proof["ok"] and proof["verdict"] == "identical",
             "the wide mode's argv is the proven mode's, byte for byte")


async def _probes(w: _Walk, seats: int, window: int) -> int:
    gen = 64
    if "boundary_probe" in w.tools:
        text = "The resize procedure, in the engine's words. " * 40
        count = await w.need("token_count_probe", service=SERVICE, text=text)
        w.say(f"token count: {count['tokens']} tokens by {count['method']} ({count['requests_sent']} requests, "
              f"{count['prefill_tokens_paid']} prefill tokens paid)")
        w.expect(count["prefill_tokens_paid"] == 0, "the count paid no prefill")
        result = await w.need("boundary_probe", service=SERVICE, n=seats, gen_tokens=gen, execute=True)
        w.say(f"boundary probe: {result['verdict']} ({result['prefill_tokens_paid']:,} prefill tokens paid)")
        w.expect(result["retrieved"] == seats, f"{seats}/{seats} markers retrieved")
        # lowpool's ledger backs 1 sequence of its 2 seats: n=2 would be refused (over the shape).
        low = await w.need("boundary_probe", service="lowpool", n=1, gen_tokens=gen, execute=True)
        w.say(f"lowpool plan predicted: {low['plan']['predicted']}")
        for request in low["requests"]:
            w.say(f"lowpool, {request['count']} request(s): HTTP {request['status']} {request['verdict']}: "
                  f"{request['refusal']!r}")
        w.say(f"lowpool boundary probe: {low['verdict']}")
        w.expect(low["retrieved"] == 0, "a pool below its contract refuses the long requests")
        if "decode_probe" in w.tools:
            rate = await w.need("decode_probe", service=SERVICE, context_tokens=8_000, gen_tokens=256)
            w.say(f"decode probe: {rate['decode_tokens_per_s']:.1f} t/s over {rate['generated_tokens']} tokens "
                  f"({'cold' if rate['cold'] else 'warm: part of the prompt was cached'}), prefill "
                  f"{rate['prefill_tokens_per_s']:,.0f} t/s")
            w.expect(rate["valid"] and rate["cold"] and rate["generated_tokens"] == 256,
                     "a cold decode of 256 tokens, thinking off: a rate, not first-token noise")
        return int(result["retrieved"])
    # This build registers no probe tools: send the boundary probe's requests directly.
    w.say("(no probe tools in this build: the demo sends the boundary probe's requests itself)")
    url = w.fleet.services[SERVICE].url
    async with httpx.AsyncClient(base_url=url, timeout=600) as http:

        async def one(i: int) -> bool:
            marker = f"MARKER-{i}-{id(w) % 9973}"
            body = {
                "messages": [{"role": "user", "content": fox_filler(window - gen, head=f"{marker}\n")}],
                "max_tokens": gen,
                "chat_template_kwargs": {"enable_thinking": False},
            }
            answer = (await http.post("/v1/chat/completions", json=body)).json()
            return marker in answer["choices"][0]["message"]["content"]

        found = await asyncio.gather(*(one(i) for i in range(seats)))
    w.say(f"boundary probe: {sum(found)}/{seats} markers retrieved at {window - gen:,} prompt tokens each")
    w.expect(all(found), f"{seats}/{seats} markers retrieved")
    return sum(found)


async def demo(out: TextIO, root: Path, time_scale: float = DEMO_TIME_SCALE, gates_dir: Path | None = None) -> int:
    """Run the walk-through on a fleet under root, the gates kept in gates_dir if given; 0 when every step came
    out as the procedures say."""
    async with SimFleet.start(root, time_scale=time_scale) as fleet:
        server = StdioServerParameters(
            command=sys.executable, args=["-m", "radiance_mcp", "serve", "--config", str(fleet.config_path)]
        )
        print("radiance-mcp demo: a simulated radiance fleet, the resize procedure through MCP", file=out)
        # The server's own log (its stderr) goes to a file, so it does not interleave with the walk.
        with (root / "mcp-server.log").open("w", encoding="utf-8") as errlog:
            async with Client(stdio_client(server, errlog=errlog)) as client:
                tools = {tool.name for tool in (await client.list_tools()).tools}
                walk = _Walk(out, client, fleet, tools, gates_dir=gates_dir)
                await _walk(walk)
    if walk.surprises:
        print(f"\n{len(walk.surprises)} step(s) did not come out as the procedures say:", file=out)
        for what in walk.surprises:
            print(f"  - {what}", file=out)
        return 1
    print("\nEvery step came out as the procedures say.", file=out)
    return 0


def run_demo(out: TextIO | None = None, gates_dir: Path | None = None) -> int:
    """``radiance-mcp demo [--gates-dir DIR]``: the walk-through in a temporary directory; the exit status.

    The env file and bats gates it renders are kept in gates_dir when given (the rest goes with the directory).

    SIGTERM cancels the walk like Ctrl-C (exit 143): the MCP server, the fleet and the
    directory (its config and ledgers) go with it, where by default the process would end
    on the spot and leave the directory behind.
    """
    stream = out or sys.stdout
    with tempfile.TemporaryDirectory(prefix="radiance-demo-") as tmp:
        try:
            return asyncio.run(_until_sigterm(demo(stream, Path(tmp), gates_dir=gates_dir)))
        except RadianceMCPError as exc:
            print(f"radiance-mcp demo: {exc}", file=sys.stderr)
            return 1


async def _until_sigterm(work: Coroutine[Any, Any, int]) -> int:
    """work's result, or 143 once SIGTERM has cancelled it and every context has unwound."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None
    terminated = asyncio.Event()

    def stop() -> None:
        terminated.set()
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, stop)
    try:
        return await work
    except asyncio.CancelledError:
        if terminated.is_set():
            return 128 + signal.SIGTERM
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


FLEET_STOP_S = 10.0
"""How long leaving ``background_fleet`` waits for the fleet's thread to stop (it takes well under
a second); past it the directory is removed all the same."""


@contextlib.contextmanager
def background_fleet(time_scale: float = DEMO_TIME_SCALE) -> Iterator[SimFleet]:
    """A demo fleet served from a thread of its own (for ``serve --demo``); stopped on exit.

    It prints nothing to stdout, which belongs to the MCP protocol in stdio mode. Its directory
    belongs to the caller's thread, which removes it on exit once the fleet's thread has stopped,
    or after FLEET_STOP_S: an exit on SIGTERM is bounded and leaves nothing behind, even when
    that thread cannot stop (the signal's exception, raised wherever this thread stood, may
    have left a lock held that the thread needs).
    """
    ready = threading.Event()
    state: dict[str, Any] = {}
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def main(root: Path) -> None:
        try:
            async with SimFleet.start(root, time_scale=time_scale) as fleet:
                state["fleet"] = fleet
                ready.set()
                await stop.wait()
        except BaseException as exc:  # handed to the caller's thread
            state["error"] = exc
            ready.set()

    with tempfile.TemporaryDirectory(prefix="radiance-demo-") as tmp:
        thread = threading.Thread(target=loop.run_until_complete, args=(main(Path(tmp)),), name="radiance-sim",
                                  daemon=True)
        thread.start()
        try:
            ready.wait()
            if "error" in state:
                raise RadianceMCPError(f"the simulated fleet did not start: {state['error']}") from state["error"]
            yield state["fleet"]
        finally:
            loop.call_soon_threadsafe(stop.set)
            thread.join(FLEET_STOP_S)
            if not thread.is_alive():
                loop.close()
