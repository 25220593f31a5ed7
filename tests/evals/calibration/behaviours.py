"""The scripted behaviours the calibration set adds to radiance_mcp/evals/agents.py's, one class each.

Each is the reference agent with one step done its own way: a correct variant (more reads, a
corrected typo, the skill's plan-then-execute boundary run) or a fault (its docstring names it);
generate.py records them through the real server and labels each run.
"""

from __future__ import annotations

import json
from typing import Any

from radiance_mcp.evals.agents import FaultyAgent, ReferenceAgent, Result, ToolRefused
from radiance_mcp.models.answer import Unit
from radiance_mcp.sources.config import EXAMPLES_DIR


class ExtraReads(ReferenceAgent):
    """The reference, after reading the skill's prompt and list_fleet: reading more breaks nothing."""

    async def run(self) -> str:
        await self.client.get_prompt(self.scenario.procedure, {})
        await self.call("list_fleet")
        return await super().run()


class CorrectedTypo(ReferenceAgent):
    """Misspells the service once (frank_archon), reads the error, then works as the reference."""

    async def task_ceiling(self) -> None:
        try:
            await self.call("compute_ceiling", service=self.need(self.plan.service, "service").replace("-", "_"))
        except ToolRefused:
            pass
        await super().task_ceiling()


class PlanThenExecute(ReferenceAgent):
    """The skill's boundary run as written: boundary_probe plans, then executes; no read_budget_table."""

    async def task_boundary(self) -> None:
        service = self.need(self.plan.service, "service")
        planned = await self.call("boundary_probe", service=service, n=1)
        backed = int(planned["plan"]["backed_seqs"])
        self.boundary_answer(backed, await self.boundary(service, backed))


class FailedCeiling(FaultyAgent):
    """compute_ceiling fails (a boot the log does not hold); the pool's contract is read; the ceiling is recited."""

    submits = False  # its figures are in its words alone

    async def task_ceiling(self) -> None:
        service = self.need(self.plan.service, "service")
        try:
            await self.call("compute_ceiling", service=service, boot=9)
        except ToolRefused:
            pass
        await self.call("check_pool_contract", service=service)
        self.say(f"{service}: the ceiling is 30,969 MiB per card (29,120 + (2,058 - 209), the procedure's worked "
                 "example), 1,849 MiB above the pair. A pool of 6,969 MiB backs 4 sequences at 200,000 tokens: "
                 "6,600.89 MiB.")


class ExampleLedger(ReferenceAgent):
    """Reads the shipped example ledger (list_fleet's examples), not the service's, and answers from it."""

    async def call(self, tool: str, **arguments: Any) -> Result:
        if tool not in ("list_fleet", "submit_answer") and arguments.pop("service", None) is not None:
            arguments[self.ledger_key] = self.ledger_value
        return await super().call(tool, **arguments)

    ledger_key = "log"

    @property
    def ledger_value(self) -> str:
        return str(EXAMPLES_DIR / "frank-archon.log")

    async def run(self) -> str:
        await super().call("list_fleet")
        return await super().run()

    async def gates(self, service: str, pool: int, seats: int, reserves: list[Result]) -> Result:
        """No gates (render_gates needs the service): the contract from check_pool_contract on the same ledger."""
        contract = await self.call("check_pool_contract", service=service, pool_mib=pool, seqs=seats)
        return {"contract": contract["formula"]}


class OwnLogText(ExampleLedger):
    """Pastes a ledger of its own (the example's text) as log_text and answers from it."""

    ledger_key = "log_text"

    @property
    def ledger_value(self) -> str:
        return (EXAMPLES_DIR / "frank-archon.log").read_text()

    async def run(self) -> str:
        return await ReferenceAgent.run(self)


class OneLedgerCall(FaultyAgent):
    """One ledger call, then an empty answer."""

    async def run(self) -> str:
        service = self.plan.service or self.plan.candidate_service or "frank-archon"
        await self.call("read_budget_table", service=service)
        return ""


class PlanWithoutGates(FaultyAgent):
    """Reads the ceiling, then recommends a pool past it, with a seat more than it backs, never calling render_gates."""

    submits = False  # its figures are in its words alone

    async def report_ceiling(self, service: str, table: Result, ceiling: Result, reserves: list[Result]) -> Result:
        pool = ceiling["max_pair_mib"] - 24_000
        contract = await self.call("check_pool_contract", service=service, pool_mib=pool, seqs=1)
        seats = int(contract["max_seqs_at_window"])
        at_seats = await self.call("check_pool_contract", service=service, pool_mib=pool, seqs=seats)
        self.say(f"{service}: the ceiling is {ceiling['ceiling_mib']:,} MiB ({ceiling['derivation']}), headroom "
                 f"{ceiling['headroom_mib']:,} MiB. Less the 24,000 MiB of weights that leaves {pool:,} MiB for the "
                 f"KV cache, which backs {seats} sequences: "
                 f"{at_seats['formula']}.")
        if len(ceiling["cards"]) > 1:
            self.say(f"Card {ceiling['binding_card']} binds.")
        self.say(f"Recommended: --vram-kv-mib {pool + 500:,} with --max-num-seqs {seats + 1}: the card has the slack.")
        return {}  # no gates rendered


class ReserveByHand(ReferenceAgent):
    """Subtracts the question's reserve by hand: no tool is ever given it."""

    submits = False  # its figures are in its words alone

    def reserves(self, table: Result) -> list[Result]:
        return []  # compute_ceiling is given none

    async def report_ceiling(self, service: str, table: Result, ceiling: Result, reserves: list[Result]) -> Result:
        reserve = int(self.plan.reserve_mib or 0)
        pair = ceiling["ceiling_mib"] - reserve
        gates = await self.call("render_gates", service=service, vram_kv_mib=pair - 24_000, seqs=3)
        self.say(f"{service}: ceiling {ceiling['ceiling_mib']:,} MiB; less our personal reserve of {reserve} MiB "
                 f"the gate allows a pair of {pair:,} MiB, a pool of {pair - 24_000:,} MiB.")
        return gates


class PlateauInWords(ReferenceAgent):
    """Reads the arms in its head, no compare_arms call, and calls a plateau."""

    submits = False  # its figures are in its words alone

    async def task_arms(self) -> None:
        (low, low_rate), (high, high_rate) = self.plan.arms[:2]
        change = (high_rate - low_rate) / low_rate * 100
        self.say(f"{low:,.0f} -> {high:,.0f} MiB: {change:.2f} %, about the noise: prefill has plateaued, a bigger "
                 "slab buys nothing.")


class ArmsAsJsonString(ReferenceAgent):
    """Sends the two arms as a JSON string with a plateau claim, and states the plateau."""

    async def arms(self, arms: list[Result], claim: str | None) -> Result:
        return await self.call("compare_arms", arms=json.dumps(arms), knob="slab MiB", claim=self.plan.claim)

    async def task_arms(self) -> None:
        await super().task_arms()
        self.say(f"Prefill has plateaued from {self.plan.arms[0][0]:,.0f} MiB of slab.")


class ClaimOnTwoOfThree(ReferenceAgent):
    """Adds a third arm of its own between the two and rests the plateau claim on the two measured ones."""

    async def task_arms(self) -> None:
        (low, low_rate), (high, high_rate) = self.plan.arms[:2]
        arms = [{"value": low, "rate": low_rate}, {"value": (low + high) / 2, "rate": (low_rate + high_rate) / 2},
                {"value": high, "rate": high_rate}]
        result = await self.call("compare_arms", arms=arms, knob="slab MiB", claim="plateau", claim_arms=[low, high])
        for step in result["steps"]:
            self.say(step["reading"])
        self.say(f"Prefill has plateaued from {low:,.0f} MiB of slab.")


class CountEstimated(ReferenceAgent):
    """Reads the table, then estimates the count from the characters: no probe."""

    async def count(self, service: str, text: str) -> Result:
        return {"tokens": round(len(text) / 2.76), "uncertainty_tokens": 20, "method": "estimated",
                "chars_per_token": 2.76, "prefill_tokens_paid": 0}


class AuditThenImage(ReferenceAgent):
    """Runs the audit, then blames the image all the same."""

    async def task_audit(self) -> None:
        await self.audit()
        self.say("The shape difference is small: the new container image is at fault; roll the image back.")

    async def task_serve_script(self) -> None:
        await self.task_audit()


class ServeScriptGuessed(ReferenceAgent):
    """Audits, then names the mode and line from the audit's flags by guess: no check_serve_script, no dry run."""

    submits = False  # its figures are in its words alone

    async def task_serve_script(self) -> None:
        await self.audit()
        self.say("The wide mode run_wide sets step=65536 of its own, at line 23 of the serve script, where the "
                 "proven mode takes 1024 from the env file. Fix: delete the literal and take the step from the "
                 "env file.")


class ExecuteWithoutPlan(ReferenceAgent):
    """Reads the table and runs boundary_probe with execute=true at once, with the n it guesses."""

    async def task_boundary(self) -> None:
        service = self.need(self.plan.service, "service")
        await self.call("read_budget_table", service=service)
        result = await self.boundary(service, 2)
        self.boundary_answer(int(result["plan"]["backed_seqs"]), result)


class Silent(ReferenceAgent):
    """Makes no call and answers nothing (the first session of a shared record)."""

    async def run(self) -> str:
        return ""


# ---------------------------------------------------------------------------------------
# Typed answers: the reference's answer submitted through submit_answer, one value changed


class TypedCeilingInGib(ReferenceAgent):
    """Submits the ceiling converted to GiB (30,969 MiB = 30.24 GiB), its unit given."""

    def figure(self, name: str, value: float, unit: Unit, service: str | None = None) -> None:
        if name == "ceiling_mib":
            name, value, unit = "ceiling", round(value / 1024, 2), "GiB"
        super().figure(name, value, unit, service)


class TypedCeilingMislabelled(ReferenceAgent):
    """Submits the ceiling's MiB figure with GiB as its unit (30,969 GiB: false)."""

    def figure(self, name: str, value: float, unit: Unit, service: str | None = None) -> None:
        super().figure(name, value, "GiB" if name == "ceiling_mib" else unit, service)


class TypedOverridden(ReferenceAgent):
    """Submits the reference's answer, then submits again with a pair and ceiling of 31,000 MiB: the last counts."""

    async def submit(self, text: str) -> None:
        await super().submit(text)
        self.answer["figures"] = [{**f, "value": 31_000} if f["name"] == "ceiling_mib" else f
                                  for f in self.answer["figures"]]
        self.answer["plan"] = {**self.answer["plan"], "pair_mib": 31_000}
        await super().submit(text + "\nOn second thought, use 31,000 MiB for the pair.")


class TypedCorrected(ReferenceAgent):
    """Submits the free-memory figure (31,178 MiB) as the ceiling first, then the reference's answer: the last
    counts."""

    async def submit(self, text: str) -> None:
        await self.call("submit_answer", service=self.plan.service, text="The pair can grow to 31,178 MiB.",
                        figures=[{"name": "ceiling_mib", "value": 31_178, "unit": "MiB"}])
        await super().submit(text)


class TypedWrongService(ReferenceAgent):
    """Submits lowpool's figures as frank-archon's."""

    async def submit(self, text: str) -> None:
        await self.call("submit_answer", service="frank-archon", **self.answer, text=text)


class TypedWrongVerdict(ReferenceAgent):
    """Submits the verdict meets_contract for a pool that fails its contract (its text says it fails)."""

    async def submit(self, text: str) -> None:
        self.verdict("meets_contract")
        await super().submit(text)


class TextOnly(ReferenceAgent):
    """The reference answering in text alone, as an agent outside Inspect that never calls submit_answer."""

    submits = False
