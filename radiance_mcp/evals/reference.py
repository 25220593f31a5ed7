"""The reference scripted agent: the suite's own test, driving the server through the SDK's MCP client.

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

The faulty agents are in radiance_mcp.evals.faulty; radiance_mcp.evals.agents names them all.

An agent reads the scenario's ``agent`` plan (task, services, the reserve or text the
question mentions), never its facts: every figure it states comes from a tool result, or, for
a faulty agent, from the wrong place its fault names.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, cast

from mcp import Client

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
        self.at: Result = {"boot": scenario.agent.plan_boot} if scenario.agent.plan_boot is not None else {}
        """The boot the plan reads (task verify: the one planned from), passed to every ledger call of the plan."""

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
        if service is None and len(self.scenario.fleet.logs) == 1 and not self.scenario.fleet.services:
            service = self.scenario.fleet.logs[0].name
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
        await self.resize()

    async def resize(self) -> tuple[str, Result]:
        """Skill step 1 (ceiling, reserves), 2 (pool contract for the new pair) and 4 (the gates): the service and
        the gates rendered."""
        service = self.need(self.plan.service, "service")
        table = await self.call("read_budget_table", service=service, **self.at)
        ceiling, reserves = await self.ceiling(service, table)
        return service, await self.report_ceiling(service, table, ceiling, reserves)

    async def ceiling(self, service: str, table: Result) -> tuple[Result, list[Result]]:
        """compute_ceiling with the question's reserve: cited by its line where the ledger backs it, else
        labelled personal."""
        reserves = self.reserves(table)
        if reserves:
            return await self.call("compute_ceiling", service=service, reserves=reserves, **self.at), reserves
        return await self.call("compute_ceiling", service=service, **self.at), reserves

    def reserves(self, table: Result) -> list[Result]:
        """The question's reserve: the budget table's candidate with its line (reserve_line), or personal."""
        label = self.plan.reserve_label or "a reserve of our own"
        if self.plan.reserve_line:
            candidate = table["reserve_candidates"][0]
            return [{"mib": candidate["mib"], "label": label, "line": _line_number(candidate["line"])}]
        if self.plan.reserve_mib is None:
            return []
        return [{"mib": self.plan.reserve_mib, "label": label, "personal": True}]

    def reserve_mib(self, table: Result) -> float | None:
        """The figure of the reserve the question asks for, if any."""
        reserves = self.reserves(table)
        return float(reserves[0]["mib"]) if reserves else None

    async def report_ceiling(self, service: str, table: Result, ceiling: Result, reserves: list[Result]) -> Result:
        """The ceiling, the pool it buys and the gates rendered for it (their result)."""
        self.say(f"{service}: the engine's ceiling is {ceiling['ceiling_mib']:,} MiB per card: "
                 f"{ceiling['derivation']} (settled free less the engine floor, plus the pair).")
        self.figure("ceiling_mib", ceiling["ceiling_mib"], "MiB")
        if len(ceiling["cards"]) > 1:
            self.say(f"Card {ceiling['binding_card']} binds: the smallest ceiling of {len(ceiling['cards'])} cards.")
        self.say(f"Headroom above the current pair of {ceiling['pair_mib']:,.0f} MiB: {ceiling['headroom_mib']:,} MiB.")
        self.figure("headroom_mib", ceiling["headroom_mib"], "MiB")
        for reserve in ceiling.get("personal_reserves") or []:
            self.say(f"Personal reserve (no ledger line backs it): {reserve}.")
        for reserve in ceiling.get("reserves") or []:
            if reserve.get("line") is not None:
                self.say(f"Reserve traced to ledger line {_line_number(reserve['line'])}: {reserve.get('mib')} MiB.")
        if reserves:
            self.say(f"Less the reserves, the largest pair the gate allows: {ceiling['max_pair_mib']:,} MiB.")
            self.figure("max_pair_mib", ceiling["max_pair_mib"], "MiB")
        flags = table["flags"]
        weights, window, dtype = int(flags["vram-weights-mib"]), int(flags["max-model-len"]), flags["kv-cache-dtype"]
        pool = ceiling["max_pair_mib"] - weights
        probe = await self.call("check_pool_contract", service=service, pool_mib=pool, seqs=1, max_model_len=window,
                                kv_cache_dtype=dtype, **self.at)
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
        return gates

    async def gates(self, service: str, pool: int | None, seats: int, reserves: list[Result], **shape: Any) -> Result:
        extra = {"reserves": reserves} if reserves else {}
        kv = {"vram_kv_mib": pool} if pool is not None else {}
        return await self.call("render_gates", service=service, seqs=seats, **kv, **extra, **shape, **self.at)

    async def task_verify(self) -> None:
        """Skill steps 4 and 5: the plan from the boot it was made from, its gates, then verify_deploy on the
        deploy's boot (the newest): each prediction kept or killed."""
        service, gates = await self.resize()
        await self.verify(service, gates)

    async def verify(self, service: str, gates: Result) -> None:
        checked = await self.call("verify_deploy", service=service, env_text=gates["env_text"])
        for verdict in checked["verdicts"]:
            self.say(f"prediction {verdict['key']} ({verdict['predicted']}): {verdict['verdict']}")
        failed = [c["check"] for c in checked["checks"] if c.get("ok") is False]
        killed = [v["key"] for v in checked["verdicts"] if v["verdict"] == "killed"]
        self.say("The deploy's boot " + (f"killed the predictions {', '.join(killed)}; failed checks: "
                                         f"{', '.join(failed)}." if killed or failed else
                                         "kept every prediction the ledger judges; every check passed."))

    async def task_engine(self) -> None:
        """Another engine's boot (vLLM, SGLang, llama.cpp): its ceiling, the pool contract at the question's seats,
        and the gates for the question's plan, in that engine's own knobs."""
        service = self.need(self.plan.service, "service")
        await self.call("read_budget_table", service=service)
        self.ceiling_answer(service, await self.call("compute_ceiling", service=service))
        seats = self.plan.seqs or 1
        shape = {"max_model_len": self.plan.max_model_len} if self.plan.max_model_len else {}
        pool = {"pool_mib": self.plan.pool_mib} if self.plan.pool_mib is not None else {}
        contract = await self.call("check_pool_contract", service=service, seqs=seats, **pool, **shape)
        self.say(f"Pool contract at {seats} seats: {contract['formula']}; at most {contract['max_seqs_at_window']} "
                 f"sequences at {contract['max_model_len']:,} tokens.")
        self.figure("required_mib", contract["required_mib"], "MiB")
        self.figure("max_seqs_at_window", contract["max_seqs_at_window"], "seqs")
        gates = await self.gates(service, self.plan.pool_mib, seats, [], **shape)
        self.say(f"The plan's pair {gates['pair_mib']:,} MiB against the ceiling {gates['ceiling_mib']:,}: "
                 f"{gates['contract']}.")
        self.figure("pair_mib", gates["pair_mib"], "MiB")
        for line in gates["env_text"].splitlines():
            if "=" in line and not line.startswith("#"):
                self.say(f"env: {line}")
        self.answer["plan"] = {"pair_mib": gates["pair_mib"], "seqs": seats, **pool, **shape}

    def ceiling_answer(self, service: str, ceiling: Result) -> None:
        """A ceiling (compute_ceiling's, or one card's of it), its derivation and headroom, said and stated."""
        self.say(f"{service}: the ceiling is {ceiling['ceiling_mib']:,} MiB per card: {ceiling['derivation']}; "
                 f"headroom {ceiling['headroom_mib']:,} MiB.")
        self.figure("ceiling_mib", ceiling["ceiling_mib"], "MiB")
        self.figure("headroom_mib", ceiling["headroom_mib"], "MiB")

    async def task_free_vram(self) -> None:
        if self.plan.service:
            await self.service_options(self.plan.service)
            return
        plan = await self.call("plan_free_vram")
        for line in plan.get("summary") or []:
            self.say(str(line))
        for card in plan.get("physical_cards") or []:
            self.say(f"{card['card']} ({', '.join(card['services'])}): {card['derivation']}")
            self.figure(f"{card['card']} headroom_mib", card["headroom_mib"], "MiB",
                        service=card["services"][0].split(" card ")[0])
        self.say(f"Fleet headroom, each physical card counted once: {plan['fleet_headroom_mib']:,} MiB.")
        self.figure("fleet_headroom_mib", plan["fleet_headroom_mib"], "MiB")

    async def service_options(self, service: str) -> None:
        """One service's free VRAM: each option's gains and what it takes (the ledger mover's slots among them)."""
        plan = await self.call("plan_free_vram", service=service)
        row = plan["services"][0]
        slope = row["slope"]
        quoted = str(slope.get("text") or row.get("lines", {}).get(str(slope.get("line")), ""))  # cited by number
        self.say(f"{service}: headroom {row['headroom_mib']:,} MiB; slope {slope['value']} slots/MiB "
                 f"({quoted or slope['source']}).")
        self.figure("headroom_mib", row["headroom_mib"], "MiB")
        mover = re.search(r"ledger mover: (\d+) slots", quoted)
        if mover:
            self.figure("mover slots at boot", int(mover.group(1)), "count")
        for option in row["options"]:
            for item in [*option.get("gains", []), *option.get("takes", [])]:
                self.say(f"{option.get('name')}: {item['name']}: {item['value']:,g} {item['unit']} ({item['text']})")
                self.figure(f"{option.get('name')}: {item['name']}", item["value"], "count")
            for shape in option.get("plans", []):
                if shape.get("mover_slots") is not None:
                    self.say(f"{option.get('name')} at {shape['seqs']} seats: the mover lends {shape['mover_slots']:,} "
                             f"slots ({shape['idle_kv_mib']:,} MiB idle)")
                    self.figure(f"mover slots at {shape['seqs']} seats", shape["mover_slots"], "count")
        for note in row.get("notes") or []:
            self.say(str(note))

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
        await self.rate(service)

    async def rate(self, service: str) -> None:
        """The decode rate, measured cold, and what makes a rate noise."""
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
        self.figure("span_pct", result["span_pct"], "%")
        if result.get("claim"):
            judged = result["claim"]
            self.say(f"{judged['claim']}: {judged['verdict']}: {judged['reason']}")
            if judged["verdict"] == "supported":
                self.verdict(judged["claim"])
            elif judged["claim"] == "plateau":
                self.verdict("no_plateau")
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
        if self.plan.service and not self.plan.proven_service:  # two boots of one ledger: the one before, the newest
            proven = candidate = self.plan.service
            audit = await self.call("audit_step_shape", service=proven)
        else:
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
        await self.script_checks(self.need(self.plan.candidate_service, "candidate_service"))
        self.say("Fix: delete the mode's own literal, take the step from the env file, correct its comment, and "
                 "prove with compare_dry_run that the argv matches the proven mode byte for byte.")

    async def script_checks(self, candidate: str) -> None:
        """The skill's order after the audit: check_serve_script, then compare_dry_run."""
        await self.check_script(candidate)
        await self.dry_run(candidate)

    async def check_script(self, candidate: str) -> None:
        check = await self.call("check_serve_script", service=candidate)
        for finding in check["findings"]:
            self.say(f"line {finding['line']} ({finding['mode']}): {finding['text']}: {finding['message']}")
            self.figure(f"{finding['mode']} line", finding["line"], "count")

    async def dry_run(self, candidate: str) -> None:
        dry = await self.call("compare_dry_run", service=candidate, proven_mode="proven", candidate_mode="wide")
        self.say(f"Dry runs: {dry['summary']}")
        for change in dry.get("flag_changes") or []:
            self.say(f"{change['flag']}: proven {change['proven']}, wide {change['candidate']}")


def _line_number(line: int | Result) -> int:
    """A ledger line's number: a result cites a line by its number, or as {"line": n, "text": ...}."""
    return int(line["line"]) if isinstance(line, dict) else int(line)


class FaultyAgent(ReferenceAgent):
    """The reference with one step done wrong; ``breaks`` names the rule that catches it.

    The commonest fault is a call first sent wrong, refused, then sent as the reference sends it: such an agent
    says only what it sends first (``first_try``)."""

    def first_try(self, tool: str, arguments: Result) -> Result | None:
        """The arguments the agent sends first, for the server to refuse, where its fault sends the reference's
        call wrong (None: the call goes as the reference makes it)."""
        return None

    async def call(self, tool: str, **arguments: Any) -> Result:
        first = self.first_try(tool, arguments)
        if first is not None:
            await self.refused(tool, **first)
        return await super().call(tool, **arguments)

    async def refused(self, tool: str, **arguments: Any) -> str:
        """Make a call the fault expects refused; its text (a call that went through is a test bug)."""
        try:
            await super().call(tool, **arguments)
        except ToolRefused as exc:
            return exc.text
        raise EvalError(f"agent {self.name}: {tool} was expected to refuse {arguments}")
