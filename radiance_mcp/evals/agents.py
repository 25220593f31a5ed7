"""Scripted agents: the suite's own tests, driving the server through the SDK's MCP client.

``ReferenceAgent`` follows the skills (skills/*/SKILL.md) step by step and writes an answer
from the tools' results, in words and as data: it submits the answer through submit_answer
(models.answer: each figure with its unit, the verdict as a choice, the plan), the tool a
recording server offers (``submits = False``: an agent that answers in text alone); it scores
100 % on every scenario. Each faulty agent is the
reference with one step done wrong, the way a careless agent does it, and is caught by its
own rule and no other (``FaultyAgent.breaks``); where the server refuses the wrong step, the
faulty agent works around the refusal, as an agent bent on an answer would.

    async with Client(server) as client:
        answer = await AGENTS["reference"](client, scenario).run()

An agent reads the scenario's ``agent`` plan (task, services, the reserve or text the
question mentions), never its facts: every figure it states comes from a tool result, or, for
a faulty agent, from the wrong place its fault names.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, ClassVar, cast

from mcp import Client

from radiance_mcp.core.constants import SAMPLER_ROW_BOUND
from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.numbers import read_figure
from radiance_mcp.evals.scenario import Scenario
from radiance_mcp.models.answer import TOOL as SUBMIT_ANSWER
from radiance_mcp.models.answer import Unit, Verdict

Result = dict[str, Any]


class ToolRefused(Exception):
    """A call the server answered with an error: the agent reads its text."""

    def __init__(self, tool: str, text: str) -> None:
        self.tool, self.text = tool, text
        super().__init__(f"{tool}: {text}")


class ReferenceAgent:
    """Follows the skills; every figure of its answer comes from a tool result."""

    name: ClassVar[str] = "reference"
    breaks: ClassVar[str | None] = None
    """The rule a faulty agent breaks (None: the reference)."""
    fault: ClassVar[str] = "follows the skills"
    submits: ClassVar[bool] = True
    """True: the answer is submitted through submit_answer as data too; False: in text alone."""

    def __init__(self, client: Client, scenario: Scenario) -> None:
        self.client, self.scenario, self.plan = client, scenario, scenario.agent
        self.lines: list[str] = []
        self.answer: Result = {"figures": []}
        """What submit_answer is given: the figures, verdict, plan and service the answer states."""

    # -- plumbing ---------------------------------------------------------------------------

    async def call(self, tool: str, **arguments: Any) -> Result:
        """The tool's structured output; ToolRefused with the server's text on an error."""
        result = await self.client.call_tool(tool, arguments)
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            raise ToolRefused(tool, text)
        if result.structured_content is None:
            return dict(json.loads(getattr(result.content[0], "text", "{}")))
        return dict(result.structured_content)

    def say(self, text: str) -> None:
        self.lines.append(text)

    def figure(self, name: str, value: float, unit: Unit, service: str | None = None) -> None:
        """A figure the answer states, as data."""
        self.answer["figures"].append({"name": name, "value": value, "unit": unit,
                                       **({"service": service} if service else {})})

    def verdict(self, choice: Verdict) -> None:
        self.answer["verdict"] = choice

    async def submit(self, text: str) -> None:
        """The answer as data: submit_answer with the figures, verdict and plan stated, and the text."""
        service = self.plan.service or self.plan.candidate_service
        await self.call(SUBMIT_ANSWER, **({"service": service} if service else {}), **self.answer, text=text)

    def need(self, value: str | None, what: str) -> str:
        if value is None:
            raise EvalError(f"scenario {self.scenario.name}: agent.{what} is needed for task {self.plan.task!r}")
        return value

    async def run(self) -> str:
        """Do the scenario's task; the final answer."""
        task = getattr(self, f"task_{self.plan.task}")
        await task()
        text = "\n".join(self.lines)
        if self.submits:
            await self.submit(text)
        return text

    # -- the resize procedure ----------------------------------------------------------------

    async def task_ceiling(self) -> None:
        """Skill step 1 (ceiling, reserves), 2 (pool contract for the new pair) and 4 (the gates)."""
        service = self.need(self.plan.service, "service")
        table = await self.call("read_budget_table", service=service)
        ceiling, reserves = await self.ceiling(service, table)
        await self.report_ceiling(service, table, ceiling, reserves)

    async def ceiling(self, service: str, table: Result) -> tuple[Result, list[Result]]:
        """compute_ceiling with the question's reserve, labelled personal: no ledger line backs it."""
        reserves = self.personal_reserves()
        if reserves:
            return await self.call("compute_ceiling", service=service, reserves=reserves), reserves
        return await self.call("compute_ceiling", service=service), reserves

    def personal_reserves(self) -> list[Result]:
        if self.plan.reserve_mib is None:
            return []
        label = self.plan.reserve_label or "a reserve of our own"
        return [{"mib": self.plan.reserve_mib, "label": label, "personal": True}]

    async def report_ceiling(self, service: str, table: Result, ceiling: Result, reserves: list[Result]) -> None:
        self.say(f"{service}: the engine's ceiling is {ceiling['ceiling_mib']:,} MiB per card: "
                 f"{ceiling['derivation']} (settled free less the engine floor, plus the pair).")
        self.figure("ceiling_mib", ceiling["ceiling_mib"], "MiB")
        if len(ceiling["cards"]) > 1:
            self.say(f"Card {ceiling['binding_card']} binds: the smallest ceiling of {len(ceiling['cards'])} cards.")
        self.say(f"Headroom above the current pair of {ceiling['pair_mib']:,.0f} MiB: {ceiling['headroom_mib']:,} MiB.")
        self.figure("headroom_mib", ceiling["headroom_mib"], "MiB")
        for reserve in ceiling.get("personal_reserves") or []:
            self.say(f"Personal reserve (no ledger line backs it): {reserve}.")
        if reserves:
            self.say(f"Less the reserves, the largest pair the gate allows: {ceiling['max_pair_mib']:,} MiB.")
            self.figure("max_pair_mib", ceiling["max_pair_mib"], "MiB")
        flags = table["flags"]
        weights, window, dtype = int(flags["vram-weights-mib"]), int(flags["max-model-len"]), flags["kv-cache-dtype"]
        pool = ceiling["max_pair_mib"] - weights
        probe = await self.call("check_pool_contract", service=service, pool_mib=pool, seqs=1, max_model_len=window,
                                kv_cache_dtype=dtype)
        seats = int(probe["max_seqs_at_window"])
        gates = await self.gates(service, pool, seats, reserves)
        self.say(f"Spent on the KV cache: a pool of {pool:,} MiB (weights stay {weights:,} MiB) backs {seats} "
                 f"sequences at {window:,} tokens: {gates['contract']}.")
        self.figure("new_pool_mib", pool, "MiB")
        if "contract_margin_mib" in gates:
            self.figure("contract_mib", round(pool - gates["contract_margin_mib"], 2), "MiB")
        self.answer["plan"] = {"pair_mib": ceiling["max_pair_mib"], "pool_mib": pool, "seqs": seats,
                               "max_model_len": window, "kv_cache_dtype": dtype, "reserves": reserves}
        self.say("The env file and the bats gates (pair <= ceiling, pool >= contract) come from render_gates.")

    async def gates(self, service: str, pool: int, seats: int, reserves: list[Result]) -> Result:
        extra = {"reserves": reserves} if reserves else {}
        return await self.call("render_gates", service=service, vram_kv_mib=pool, seqs=seats, **extra)

    async def task_free_vram(self) -> None:
        plan = await self.call("plan_free_vram")
        for line in plan.get("summary") or []:
            self.say(str(line))
        for card in plan.get("physical_cards") or []:
            self.say(f"{card['card']} ({', '.join(card['services'])}): {card['derivation']}")
            self.figure(f"{card['card']} headroom_mib", card["headroom_mib"], "MiB",
                        service=card["services"][0].split(" card ")[0])
        self.say(f"Fleet headroom, each physical card counted once: {plan['fleet_headroom_mib']:,} MiB.")
        self.figure("fleet_headroom_mib", plan["fleet_headroom_mib"], "MiB")

    async def task_pool(self) -> None:
        service = self.need(self.plan.service, "service")
        contract = await self.call("check_pool_contract", service=service)
        self.contract_answer(service, contract)

    def contract_answer(self, service: str, contract: Result) -> None:
        verdict = "meets its contract" if contract["contract_ok"] else "fails its contract"
        self.say(f"{service}'s KV pool {verdict}: {contract['formula']}.")
        self.verdict("meets_contract" if contract["contract_ok"] else "fails_contract")
        self.figure("required_mib", contract["required_mib"], "MiB")
        if not contract["contract_ok"]:
            self.say(f"It boots and serves short chats, then refuses every long request: '{contract['refusal']}'. "
                     f"At this pool it backs at most {contract['max_seqs_at_window']} sequence(s) at "
                     f"{contract['max_model_len']:,} tokens, or {contract['max_window_at_seqs']:,} tokens at "
                     f"{contract['seqs']} seats.")
            self.figure("max_seqs_at_window", contract["max_seqs_at_window"], "seqs")
            self.figure("max_window_at_seqs", contract["max_window_at_seqs"], "tokens")

    async def task_rate(self) -> None:
        service = self.need(self.plan.service, "service")
        await self.call("read_budget_table", service=service)
        rate = await self.decode(service)
        self.say(f"{service} decodes at {rate['decode_tokens_per_s']:,} t/s over {rate['generated_tokens']} generated "
                 f"tokens, prefill {rate['prefill_tokens_per_s']:,} t/s at {rate['prompt_tokens']:,} prompt tokens "
                 f"(cold: {rate['cold']}, a nonce at the prompt's head, thinking off).")
        self.figure("decode_tokens_per_s", rate["decode_tokens_per_s"], "t/s")
        self.figure("generated_tokens", rate["generated_tokens"], "tokens")
        self.figure("prefill_tokens_per_s", rate["prefill_tokens_per_s"], "t/s")
        self.say("A rate from 8-9 generated tokens is first-token noise; a warm prefix cache returns a long prefill "
                 "in seconds; with thinking on, a small max_tokens returns empty content on a healthy server. "
                 "This measurement avoids all three.")

    async def decode(self, service: str) -> Result:
        return await self.call("decode_probe", service=service, context_tokens=8_000, gen_tokens=512)

    async def task_arms(self) -> None:
        arms = [{"value": value, "rate": rate} for value, rate in self.plan.arms]
        claim = self.plan.claim if len(arms) >= 3 else None  # a claim needs three arms
        result = await self.arms(arms, claim)
        for step in result["steps"]:
            self.say(step["reading"])
            self.figure("change_pct", step["change_pct"], "%")
        if result.get("claim"):
            self.say(f"{result['claim']['claim']}: {result['claim']['verdict']}: {result['claim']['reason']}")
        else:
            self.verdict("no_plateau")
            self.say("Two arms give one difference: no plateau or threshold can be read off them; measure a "
                     "third arm between them with the same workload.")
        for note in result.get("notes") or []:
            self.say(note)

    async def arms(self, arms: list[Result], claim: str | None) -> Result:
        extra = {"claim": claim} if claim else {}
        return await self.call("compare_arms", arms=arms, knob="slab MiB", **extra)

    async def task_count(self) -> None:
        service = self.need(self.plan.service, "service")
        text = self.need(self.plan.text, "text")
        await self.call("read_budget_table", service=service)
        count = await self.count(service, text)
        self.say(f"The text is {count['tokens']:,} tokens (+-{count['uncertainty_tokens']}, {count['method']}), "
                 f"{count['chars_per_token']} characters a token; prefill paid: {count['prefill_tokens_paid']}.")
        self.figure("tokens", count["tokens"], "tokens")

    async def count(self, service: str, text: str) -> Result:
        return await self.call("token_count_probe", service=service, text=text)

    async def task_boundary(self) -> None:
        service = self.need(self.plan.service, "service")
        await self.call("read_budget_table", service=service)
        planned = await self.call("boundary_probe", service=service, n=1)
        backed = int(planned["plan"]["backed_seqs"])
        result = await self.boundary(service, backed)
        self.boundary_answer(backed, result)

    def boundary_answer(self, backed: int, result: Result) -> None:
        self.say(f"The ledger backs {backed} sequences at {result['plan']['max_model_len']:,} tokens at once; "
                 f"{result['plan']['n']} concurrent prompts of {result['plan']['tokens_per_prompt']:,} tokens: "
                 f"{result['verdict']}.")
        self.figure("backed_seqs", backed, "seqs")
        self.figure("tokens_per_prompt", result["plan"]["tokens_per_prompt"], "tokens")
        if result.get("passed") is not None:
            self.verdict("retrieved" if result["passed"] else "not_retrieved")

    async def boundary(self, service: str, backed: int) -> Result:
        return await self.call("boundary_probe", service=service, n=backed, execute=True)

    # -- the step-shape audit ---------------------------------------------------------------

    async def task_audit(self) -> None:
        await self.audit()

    async def audit(self) -> None:
        proven = self.need(self.plan.proven_service, "proven_service")
        candidate = self.need(self.plan.candidate_service, "candidate_service")
        audit = await self.call("audit_step_shape", proven_service=proven, candidate_service=candidate)
        self.say(f"{candidate} against {proven}: {audit['verdict']}.")
        if audit["verdict"] == "refused":
            self.verdict("refused")
        for row in audit["rows"]:
            if row.get("differs"):
                delta = f" ({row['delta_text']})" if row.get("delta_text") else ""
                self.say(f"{row['row']}: {row['proven']} -> {row['candidate']}{delta}")
                for side in ("proven", "candidate"):
                    read = read_figure(str(row[side]))
                    if read is not None:
                        unit = cast(Unit, read[1] or "count")  # numbers.UNITS holds models.answer.Unit's names
                        self.figure(f"{side} {row['row']}", read[0], unit)
        for line in audit.get("refusal") or []:
            self.say(f"line {line['line']}: {line['text'].strip()}")
        for item in audit.get("diagnosis") or []:
            self.say(str(item))
        if audit.get("inherit"):
            self.say(f"Inherit the proven shape: {audit['inherit']}")

    async def task_serve_script(self) -> None:
        await self.audit()
        candidate = self.need(self.plan.candidate_service, "candidate_service")
        check = await self.call("check_serve_script", service=candidate)
        for finding in check["findings"]:
            self.say(f"line {finding['line']} ({finding['mode']}): {finding['text']}: {finding['message']}")
            self.figure(f"{finding['mode']} line", finding["line"], "count")
        dry = await self.call("compare_dry_run", service=candidate, proven_mode="proven", candidate_mode="wide")
        self.say(f"Dry runs: {dry['summary']}")
        self.say("Fix: delete the mode's own literal, take the step from the env file, correct its comment, and "
                 "prove with compare_dry_run that the argv matches the proven mode byte for byte.")


class FaultyAgent(ReferenceAgent):
    """The reference with one step done wrong; ``breaks`` names the rule that catches it."""

    async def refused(self, tool: str, **arguments: Any) -> str:
        """Make a call the fault expects refused; its text (a call that went through is a test bug)."""
        try:
            await self.call(tool, **arguments)
        except ToolRefused as exc:
            return exc.text
        raise EvalError(f"agent {self.name}: {tool} was expected to refuse {arguments}")


class FromMemory(FaultyAgent):
    name, breaks = "from-memory", "ledger_first"
    fault = "works the pool contract out from the question's shape, reading no ledger"

    async def task_pool(self) -> None:
        from radiance_mcp.core.constants import DEFAULT_MODEL
        from radiance_mcp.core.rules.capacity import pool_contract  # the same pure arithmetic the tool uses

        service, plan = self.need(self.plan.service, "service"), self.plan
        if plan.pool_mib is None or plan.seqs is None or plan.max_model_len is None or plan.kv_cache_dtype is None:
            raise EvalError(f"scenario {self.scenario.name}: agent.pool_mib, seqs, max_model_len and kv_cache_dtype "
                            "are the shape the question states; give all four")
        pool, seqs, window = plan.pool_mib, plan.seqs, plan.max_model_len
        found = pool_contract(Decimal(pool), seqs, window, plan.kv_cache_dtype, DEFAULT_MODEL)
        self.contract_answer(service, {
            "contract_ok": found.ok, "refusal": found.refusal, "required_mib": float(found.required_mib),
            "max_seqs_at_window": found.max_seqs_at_window,
            "max_model_len": window, "max_window_at_seqs": found.max_window_at_seqs, "seqs": seqs,
            "formula": f"{seqs} x {window:,} x {found.rate_bytes_per_token:,} B + ... = "
                       f"{found.required_mib:,.2f} MiB against pool {pool:,} MiB",
        })


class OutsideFree(FaultyAgent):
    name, breaks = "outside-free", "engine_ceiling"
    fault = "quotes free memory as spare capacity: the pair plus the free memory, no engine floor"

    async def task_ceiling(self) -> None:
        service = self.need(self.plan.service, "service")
        table = await self.call("read_budget_table", service=service)
        card = table["cards"][0]
        free, pair = card["free_mib"]["value"], card["pair_mib"]
        self.say(f"{service} has {free:,.0f} MiB free (as rocm-smi would show), so the pair can grow to "
                 f"{pair + free:,.0f} MiB.")
        self.figure("ceiling_mib", round(pair + free), "MiB")


class UntracedReserve(FaultyAgent):
    name, breaks = "untraced-reserve", "reserve_traced"
    fault = "passes the question's reserve with neither a ledger line nor personal=true, then drops it"

    async def ceiling(self, service: str, table: Result) -> tuple[Result, list[Result]]:
        if self.plan.reserve_mib is None:
            return await super().ceiling(service, table)
        await self.refused("compute_ceiling", service=service,
                           reserves=[{"mib": self.plan.reserve_mib, "label": self.plan.reserve_label or "safety"}])
        return await self.call("compute_ceiling", service=service), []


class FloorReserve(FaultyAgent):
    name, breaks = "floor-reserve", "reserve_not_counted"
    fault = "launders the reserve through the engine floor's line and figure, then drops it"

    async def ceiling(self, service: str, table: Result) -> tuple[Result, list[Result]]:
        if self.plan.reserve_mib is None:
            return await super().ceiling(service, table)
        floor = table["cards"][0]["floor_mib"]
        line = floor["lines"][0]["line"]
        await self.refused("compute_ceiling", service=service,
                           reserves=[{"mib": floor["value"], "label": "engine floor", "line": line}])
        return await self.call("compute_ceiling", service=service), []


class MisspelledReserves(FaultyAgent):
    name, breaks = "misspelled-reserves", "argument_names"
    fault = "spells reserves 'reserve', then sends it again spelled right"

    async def ceiling(self, service: str, table: Result) -> tuple[Result, list[Result]]:
        reserves = self.personal_reserves()
        if reserves:
            await self.refused("compute_ceiling", service=service, reserve=reserves)
        return await super().ceiling(service, table)


class OverCeiling(FaultyAgent):
    name, breaks = "over-ceiling", "pair_within_ceiling"
    fault = "plans a pool 512 MiB past the ceiling, then the pool the ceiling allows"

    async def gates(self, service: str, pool: int, seats: int, reserves: list[Result]) -> Result:
        extra = {"reserves": reserves} if reserves else {}
        await self.refused("render_gates", service=service, vram_kv_mib=pool + 512, seqs=seats, **extra)
        return await super().gates(service, pool, seats, reserves)


class UnderContract(FaultyAgent):
    name, breaks = "under-contract", "pool_contract"
    fault = "plans one seat more than the pool's contract allows, then the seats it allows"

    async def gates(self, service: str, pool: int, seats: int, reserves: list[Result]) -> Result:
        extra = {"reserves": reserves} if reserves else {}
        await self.refused("render_gates", service=service, vram_kv_mib=pool, seqs=seats + 1, **extra)
        return await super().gates(service, pool, seats, reserves)


class SamplerOverflow(FaultyAgent):
    name, breaks = "sampler-overflow", "sampler_rows"
    fault = "plans more seats than the sampler's row bound at a short window, then the seats the contract gives"

    async def gates(self, service: str, pool: int, seats: int, reserves: list[Result]) -> Result:
        extra = {"reserves": reserves} if reserves else {}
        await self.refused("render_gates", service=service, vram_kv_mib=pool, seqs=SAMPLER_ROW_BOUND + 1,
                           max_model_len=4_096, spec=0, **extra)
        return await super().gates(service, pool, seats, reserves)


class OldBoot(FaultyAgent):
    name, breaks = "old-boot", "newest_boot"
    fault = "reads the log's first boot where it holds several"

    async def task_ceiling(self) -> None:
        service = self.need(self.plan.service, "service")
        ceiling = await self.call("compute_ceiling", service=service)
        if ceiling["ledger"]["boots_seen"] > 1:
            ceiling = await self.call("compute_ceiling", service=service, boot=1)
            self.say(f"{service}: ceiling {ceiling['ceiling_mib']:,} MiB/card ({ceiling['derivation']}); "
                     f"headroom {ceiling['headroom_mib']:,} MiB.")
            self.figure("ceiling_mib", ceiling["ceiling_mib"], "MiB")
            self.figure("headroom_mib", ceiling["headroom_mib"], "MiB")
            return
        await super().task_ceiling()


class CardZero(FaultyAgent):
    name, breaks = "card-zero", "binding_card"
    fault = "reads card 0's ceiling for a service on several cards"

    async def task_ceiling(self) -> None:
        service = self.need(self.plan.service, "service")
        ceiling = await self.call("compute_ceiling", service=service)
        if len(ceiling["cards"]) > 1:
            card = ceiling["cards"][0]
            self.say(f"{service}: ceiling {card['ceiling_mib']:,} MiB ({card['derivation']}); headroom "
                     f"{card['headroom_mib']:,} MiB.")
            self.figure("ceiling_mib", card["ceiling_mib"], "MiB")
            self.figure("headroom_mib", card["headroom_mib"], "MiB")
            return
        await super().task_ceiling()


class CountBelowWindow(FaultyAgent):
    name, breaks = "count-below-window", "count_above_window"
    fault = ("counts tokens on an endpoint with no ledger, at a window it guessed too small, so the prompt fits and "
             "pays prefill; then counts where the ledger states the window")

    async def count(self, service: str, text: str) -> Result:
        fleet = await self.call("list_fleet")
        bare = next(s["name"] for s in fleet["services"] if s["ledger"] is None and s["endpoint"])
        await self.refused("token_count_probe", service=bare, text=text, window_tokens=4_096,
                           use_tokenize_endpoint=False)
        return await super().count(service, text)


class WindowGuessed(FaultyAgent):
    name, breaks = "window-guessed", "window_from_ledger"
    fault = "counts tokens at a window it guessed, which the ledger contradicts, then at the ledger's"

    async def count(self, service: str, text: str) -> Result:
        await self.refused("token_count_probe", service=service, text=text, window_tokens=4_096)
        return await super().count(service, text)


class DecodeEight(FaultyAgent):
    name, breaks = "decode-8", "decode_tokens"
    fault = "asks for an 8-token decode, then for 512"

    async def decode(self, service: str) -> Result:
        await self.refused("decode_probe", service=service, context_tokens=8_000, gen_tokens=8)
        return await super().decode(service)


class OverShape(FaultyAgent):
    name, breaks = "over-shape", "probe_within_shape"
    fault = "probes one sequence more than the ledger backs, then insists with over_shape=true"

    async def boundary(self, service: str, backed: int) -> Result:
        await self.refused("boundary_probe", service=service, n=backed + 1, execute=True)
        return await self.call("boundary_probe", service=service, n=backed + 1, execute=True, over_shape=True)


class OneTokenBoundary(FaultyAgent):
    name, breaks = "one-token-boundary", "boundary_tokens"
    fault = "asks each boundary request for one generated token, too few for its marker, then for the default"

    async def boundary(self, service: str, backed: int) -> Result:
        await self.refused("boundary_probe", service=service, n=backed, gen_tokens=1, execute=True)
        return await super().boundary(service, backed)


class WarmRate(FaultyAgent):
    name, breaks = "warm-rate", "cold_rate"
    fault = "repeats the rate the question quotes (a warm or thinking probe) instead of measuring a cold one"

    async def task_rate(self) -> None:
        service = self.need(self.plan.service, "service")
        await self.call("read_budget_table", service=service)
        quoted = self.plan.quoted_rate
        self.say(f"{service} runs at {quoted:,} t/s, as measured." if quoted else
                 f"{service} returned empty content: it is broken.")
        if quoted:
            self.figure("decode_tokens_per_s", quoted, "t/s")
        else:
            self.verdict("broken")


class TwoArmPlateau(FaultyAgent):
    name, breaks = "two-arm-plateau", "no_two_arm_claim"
    fault = "claims a plateau off two arms"

    async def arms(self, arms: list[Result], claim: str | None) -> Result:
        return await self.call("compare_arms", arms=arms, knob="slab MiB", claim=self.plan.claim or "plateau")

    async def task_arms(self) -> None:
        await super().task_arms()
        self.say(f"Prefill has plateaued from {self.plan.arms[0][0]:,} MiB of slab.")
        self.verdict("plateau")


class SkipAudit(FaultyAgent):
    name, breaks = "skip-audit", "audit_before_image"
    fault = "reads the proven boot's table and blames the container image, with no step-shape audit"

    async def audit(self) -> None:
        proven = self.need(self.plan.proven_service, "proven_service")
        await self.call("read_budget_table", service=proven)
        self.say("The proven boot is fine, so the new container image must be at fault: roll it back.")

    async def task_serve_script(self) -> None:
        await self.audit()


class SharedCardTwice(FaultyAgent):
    name, breaks = "shared-card-twice", "shared_card"
    fault = ("spends a shared card's headroom as if the service had the card alone: renders the pool its own "
             "ceiling allows, past what the card holds once")

    async def task_free_vram(self) -> None:
        plan = await self.call("plan_free_vram")
        shared = next(c for c in plan["physical_cards"] if len(c["services"]) > 1)
        service = shared["services"][0].split(" card ")[0]
        mine = await self.call("compute_ceiling", service=service)
        table = await self.call("read_budget_table", service=service)
        weights = int(table["flags"]["vram-weights-mib"])
        await self.refused("render_gates", service=service, vram_kv_mib=mine["max_pair_mib"] - weights, seqs=1)
        await super().task_free_vram()


FAULTY: tuple[type[FaultyAgent], ...] = (
    FromMemory, OutsideFree, UntracedReserve, FloorReserve, MisspelledReserves, OverCeiling, UnderContract,
    SamplerOverflow, OldBoot, CardZero, CountBelowWindow, DecodeEight, OverShape, WarmRate, TwoArmPlateau, SkipAudit,
    WindowGuessed, OneTokenBoundary, SharedCardTwice,
)


AGENTS: dict[str, type[ReferenceAgent]] = {ReferenceAgent.name: ReferenceAgent, **{a.name: a for a in FAULTY}}
"""Every scripted agent by name: 'reference' and one faulty agent per rule."""

