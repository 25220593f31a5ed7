"""The faulty scripted agents: each is the reference (radiance_mcp.evals.reference) with one step done wrong.

Each is caught by its own rule and no other (``breaks``); where the server refuses the wrong step, the
agent works around the refusal, as an agent bent on an answer would. Each says only how it differs
from the reference: the call it first sends wrong (``FaultyAgent.first_try``), or the one step it
does its own way (a method of the reference's, overridden); ``DroppedReserve`` and ``OtherCeiling``
are the steps two of them share. ``FAULTY`` lists them; a faulty agent runs on the scenarios that
list its rule.
"""

from __future__ import annotations

from decimal import Decimal

from radiance_mcp.core.constants import SAMPLER_ROW_BOUND
from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.reference import FaultyAgent, Result


class FromMemory(FaultyAgent):
    name, breaks = "from-memory", "ledger_first"
    fault = "works the pool contract out from the question's shape, and the ceiling from the formula, reading no ledger"

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

    async def task_ceiling(self) -> None:
        self.say("From memory: the pair can grow to the engine's ceiling, (settled free - engine floor) + the pair; "
                 "the ledger was not read.")


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


class DroppedReserve(FaultyAgent):
    """Passes the question's reserve to compute_ceiling in a way the server refuses (``bad_reserve``), then asks
    for the ceiling without it: the reserve dropped."""

    def bad_reserve(self, table: Result, mib: float) -> Result:
        raise NotImplementedError

    async def ceiling(self, service: str, table: Result) -> tuple[Result, list[Result]]:
        mib = self.reserve_mib(table)
        if mib is None:
            return await super().ceiling(service, table)
        await self.refused("compute_ceiling", service=service, **self.at, reserves=[self.bad_reserve(table, mib)])
        return await self.call("compute_ceiling", service=service, **self.at), []


class UntracedReserve(DroppedReserve):
    name, breaks = "untraced-reserve", "reserve_traced"
    fault = "passes the question's reserve with neither a ledger line nor personal=true, then drops it"

    def bad_reserve(self, table: Result, mib: float) -> Result:
        return {"mib": mib, "label": self.plan.reserve_label or "safety"}


class FloorReserve(DroppedReserve):
    name, breaks = "floor-reserve", "reserve_not_counted"
    fault = "launders the reserve through the engine floor's line and figure, then drops it"

    def bad_reserve(self, table: Result, mib: float) -> Result:
        floor = table["cards"][0]["floor_mib"]
        return {"mib": floor["value"], "label": "engine floor", "line": floor["lines"][0]}  # cited by number


class MisspelledReserves(FaultyAgent):
    name, breaks = "misspelled-reserves", "argument_names"
    fault = "spells reserves 'reserve', then sends it again spelled right"

    def first_try(self, tool: str, arguments: Result) -> Result | None:
        if tool != "compute_ceiling" or "reserves" not in arguments:
            return None
        return {("reserve" if k == "reserves" else k): v for k, v in arguments.items()}


class OverCeiling(FaultyAgent):
    name, breaks = "over-ceiling", "pair_within_ceiling"
    fault = "plans a pool 512 MiB past the ceiling, then the pool the ceiling allows"

    def first_try(self, tool: str, arguments: Result) -> Result | None:
        if tool != "render_gates" or arguments.get("vram_kv_mib") is None:
            return None
        return {**arguments, "vram_kv_mib": arguments["vram_kv_mib"] + 512}


class UnderContract(FaultyAgent):
    name, breaks = "under-contract", "pool_contract"
    fault = "plans one seat more than the pool's contract allows, then the seats it allows"

    def first_try(self, tool: str, arguments: Result) -> Result | None:
        return {**arguments, "seqs": arguments["seqs"] + 1} if tool == "render_gates" else None


class SamplerOverflow(FaultyAgent):
    name, breaks = "sampler-overflow", "sampler_rows"
    fault = "plans more seats than the sampler's row bound at a short window, then the seats the contract gives"

    def first_try(self, tool: str, arguments: Result) -> Result | None:
        if tool != "render_gates":
            return None
        return {**arguments, "seqs": SAMPLER_ROW_BOUND + 1, "max_model_len": 4_096, "spec": 0}


class OtherCeiling(FaultyAgent):
    """Answers with a ceiling other than the one that binds (``other``), where the fleet offers one; else as the
    reference."""

    async def other(self, service: str, ceiling: Result) -> Result | None:
        raise NotImplementedError

    async def task_ceiling(self) -> None:
        service = self.need(self.plan.service, "service")
        other = await self.other(service, await self.call("compute_ceiling", service=service))
        if other is None:
            await super().task_ceiling()
        else:
            self.ceiling_answer(service, other)


class OldBoot(OtherCeiling):
    name, breaks = "old-boot", "newest_boot"
    fault = "reads the log's first boot where it holds several"

    async def other(self, service: str, ceiling: Result) -> Result | None:
        if ceiling["ledger"]["boots_seen"] > 1:
            return await self.call("compute_ceiling", service=service, boot=1)
        return None


class CardZero(OtherCeiling):
    name, breaks = "card-zero", "binding_card"
    fault = "reads card 0's ceiling for a service on several cards"

    async def other(self, service: str, ceiling: Result) -> Result | None:
        return ceiling["cards"][0] if len(ceiling["cards"]) > 1 else None


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

    def first_try(self, tool: str, arguments: Result) -> Result | None:
        return {**arguments, "window_tokens": 4_096} if tool == "token_count_probe" else None


class DecodeEight(FaultyAgent):
    name, breaks = "decode-8", "decode_tokens"
    fault = "asks for an 8-token decode, then for 512"

    def first_try(self, tool: str, arguments: Result) -> Result | None:
        return {**arguments, "gen_tokens": 8} if tool == "decode_probe" else None


class OverShape(FaultyAgent):
    name, breaks = "over-shape", "probe_within_shape"
    fault = "probes one sequence more than the ledger backs, then insists with over_shape=true"

    async def boundary(self, service: str, backed: int) -> Result:
        await self.refused("boundary_probe", service=service, n=backed + 1, execute=True)
        return await self.call("boundary_probe", service=service, n=backed + 1, execute=True, over_shape=True)


class OneTokenBoundary(FaultyAgent):
    name, breaks = "one-token-boundary", "boundary_tokens"
    fault = "asks each boundary request for one generated token, too few for its marker, then for the default"

    def first_try(self, tool: str, arguments: Result) -> Result | None:
        return {**arguments, "gen_tokens": 1} if tool == "boundary_probe" and arguments.get("execute") else None


class WarmRate(FaultyAgent):
    name, breaks = "warm-rate", "cold_rate"
    fault = "repeats the rate the question quotes (a warm or thinking probe) instead of measuring a cold one"

    async def rate(self, service: str) -> None:
        quoted = self.plan.quoted_rate
        self.say(f"{service} runs at {quoted:,} t/s, as measured." if quoted else
                 f"{service} returned empty content: it is broken.")
        if quoted:
            self.figure("decode_tokens_per_s", quoted, "t/s")
        else:
            self.verdict("broken")


class TwoArmPlateau(FaultyAgent):
    name, breaks = "two-arm-plateau", "no_two_arm_claim"
    fault = "claims a plateau off two arms (the first two, where three were measured)"

    async def arms(self, arms: list[Result], claim: str | None) -> Result:
        return await self.call("compare_arms", arms=arms[:2], knob="slab MiB", claim=self.plan.claim or "plateau")

    async def task_arms(self) -> None:
        await super().task_arms()
        self.say(f"Prefill has plateaued from {self.plan.arms[0][0]:,} MiB of slab.")
        self.verdict("plateau")


class SkipAudit(FaultyAgent):
    name, breaks = "skip-audit", "audit_before_image"
    fault = "reads the proven boot's table and blames the container image, with no step-shape audit"

    async def audit(self) -> None:
        proven = self.need(self.plan.proven_service or self.plan.service, "proven_service")
        await self.call("read_budget_table", service=proven, **({"boot": 1} if self.plan.service else {}))
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


class ExecuteFirst(FaultyAgent):
    name, breaks = "execute-first", "plan_before_execute"
    fault = "sends the boundary probe (execute=true) before asking it for the plan, then plans and probes again"

    async def task_boundary(self) -> None:
        service = self.need(self.plan.service, "service")
        await self.call("boundary_probe", service=service, n=1, execute=True)
        await super().task_boundary()


class DryRunFirst(FaultyAgent):
    name, breaks = "dry-run-first", "serve_script_checked"
    fault = "runs the dry runs before checking the serve script (the audit, the dry run, then the check)"

    async def script_checks(self, candidate: str) -> None:
        await self.dry_run(candidate)
        await self.check_script(candidate)


class VerifyUnplanned(FaultyAgent):
    name, breaks = "verify-unplanned", "gates_before_verified"
    fault = ("verifies the deploy against an env file it wrote by hand (its own prediction of the ceiling), before "
             "rendering the plan's gates; then plans and verifies")

    async def task_verify(self) -> None:
        service = self.need(self.plan.service, "service")
        flags = (await self.call("read_budget_table", service=service, **self.at))["flags"]
        ceiling = await self.call("compute_ceiling", service=service, **self.at)
        prefix = "".join(c if c.isalnum() else "_" for c in service.upper())
        weights = int(flags["vram-weights-mib"])
        hand = (f"{prefix}_VRAM_WEIGHTS_MIB={weights}\n{prefix}_VRAM_KV_MIB={ceiling['max_pair_mib'] - weights}\n"
                f"{prefix}_MAX_SEQS={flags['max-num-seqs']}\n{prefix}_MAX_MODEL_LEN={flags['max-model-len']}\n"
                f"{prefix}_KV_CACHE_DTYPE={flags['kv-cache-dtype']}\n"
                f"# prediction ceiling = {ceiling['ceiling_mib']}: the new boot's ceiling stays at or above the pair\n"
                "# verdict ceiling:\n")
        await self.call("verify_deploy", service=service, env_text=hand)
        await super().task_verify()


FAULTY: tuple[type[FaultyAgent], ...] = (
    FromMemory, OutsideFree, UntracedReserve, FloorReserve, MisspelledReserves, OverCeiling, UnderContract,
    SamplerOverflow, OldBoot, CardZero, CountBelowWindow, DecodeEight, OverShape, WarmRate, TwoArmPlateau, SkipAudit,
    WindowGuessed, OneTokenBoundary, SharedCardTwice, ExecuteFirst, DryRunFirst, VerifyUnplanned,
)
