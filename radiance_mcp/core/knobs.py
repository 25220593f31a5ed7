"""Each engine's env-file knobs: the variables a resize plan sets, their values from the plan, the plan read back
from them, and the shell arithmetic the bats gates check them by (pure).

radiance's env file sets its pair in MiB (--vram-weights-mib, --vram-kv-mib) with its seats, window and KV dtype.
The other engines' weights are the model's and their KV rate is their own KV pair's (KV memory over KV tokens,
read from the boot), so their env files set the flag that sizes the KV cache in the engine's own unit, with the
seats and the window:

- vLLM: --kv-cache-memory-bytes (bytes), --max-num-seqs, --max-model-len;
- SGLang: --max-total-tokens (tokens), --max-running-requests, --context-length;
- llama.cpp: -c / --ctx-size (cells: seats x window, each sequence's window is ctx / seats) and -np / --parallel
  (llama-cpp-python's server: --n_ctx, one sequence).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from radiance_mcp.core.constants import MIB, LedgerEngine

Role = Literal["weights", "kv", "seats", "window", "dtype"]


@dataclass(frozen=True)
class Knob:
    variable: str
    """The env variable's name after the service's prefix (SVC_CTX_SIZE)."""
    flag: str
    """The engine's flag the serve script passes it to."""
    role: Role


@dataclass(frozen=True)
class EngineKnobs:
    engine: LedgerEngine
    knobs: tuple[Knob, ...]
    kv_unit: Literal["MiB", "bytes", "tokens", "cells"]
    """What the kv knob counts: radiance's MiB, vLLM's bytes, SGLang's tokens, llama.cpp's cells (seats x window)."""

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(k.variable for k in self.knobs)

    def variable(self, role: Role) -> str | None:
        return next((k.variable for k in self.knobs if k.role == role), None)


KNOBS: dict[LedgerEngine, EngineKnobs] = {
    "radiance": EngineKnobs("radiance", (
        Knob("VRAM_WEIGHTS_MIB", "--vram-weights-mib", "weights"), Knob("VRAM_KV_MIB", "--vram-kv-mib", "kv"),
        Knob("MAX_SEQS", "--max-num-seqs", "seats"), Knob("MAX_MODEL_LEN", "--max-model-len", "window"),
        Knob("KV_CACHE_DTYPE", "--kv-cache-dtype", "dtype")), "MiB"),
    "vllm": EngineKnobs("vllm", (
        Knob("KV_CACHE_MEMORY_BYTES", "--kv-cache-memory-bytes", "kv"), Knob("MAX_NUM_SEQS", "--max-num-seqs", "seats"),
        Knob("MAX_MODEL_LEN", "--max-model-len", "window")), "bytes"),
    "sglang": EngineKnobs("sglang", (
        Knob("MAX_TOTAL_TOKENS", "--max-total-tokens", "kv"),
        Knob("MAX_RUNNING_REQUESTS", "--max-running-requests", "seats"),
        Knob("CONTEXT_LENGTH", "--context-length", "window")), "tokens"),
    "llama.cpp": EngineKnobs("llama.cpp", (
        Knob("CTX_SIZE", "-c / --ctx-size (llama-cpp-python: --n_ctx)", "kv"),
        Knob("PARALLEL", "-np / --parallel (llama-cpp-python serves one)", "seats")), "cells"),
}
"""Each engine's env-file knobs, radiance's as its env files have always named them."""


def kv_value(engine: LedgerEngine, pool_mib: int | Decimal, seqs: int, window: int, rate: Decimal | None) -> int:
    """The kv knob's value for a pool of pool_mib (llama.cpp: the cells seats x window hold, whatever the pool)."""
    unit = KNOBS[engine].kv_unit
    if unit == "MiB":
        return int(pool_mib)
    if unit == "bytes":
        return int(Decimal(pool_mib) * MIB)
    if unit == "cells":
        return seqs * window
    assert rate is not None
    return int(Decimal(pool_mib) * MIB / rate)


def pool_of(engine: LedgerEngine, kv: int, rate: Decimal | None) -> Decimal:
    """The KV memory, MiB, the kv knob's value funds (radiance's MiB as they are)."""
    unit = KNOBS[engine].kv_unit
    if unit == "MiB":
        return Decimal(kv)
    if unit == "bytes":
        return Decimal(kv) / MIB
    assert rate is not None
    return Decimal(kv) * rate / MIB


def cells_pool_mib(engine: LedgerEngine, seqs: int, window: int, rate: Decimal) -> int | None:
    """The KV memory in whole MiB, rounded up, that seats x window cells take where the engine's KV memory follows
    from its cells (llama.cpp); None where a knob sizes it (radiance, vLLM, SGLang)."""
    if KNOBS[engine].kv_unit != "cells":
        return None
    return math.ceil(Decimal(seqs * window) * rate / MIB)


def values(engine: LedgerEngine, weights: int, pool: int, seqs: int, window: int, dtype: str | None,
           rate: Decimal | None) -> tuple[tuple[str, str], ...]:
    """The env file's assignments (variable after the prefix, value) for a plan, in the knobs' order."""
    by_role: dict[Role, str] = {
        "weights": str(weights), "kv": str(kv_value(engine, pool, seqs, window, rate)), "seats": str(seqs),
        "window": str(window), "dtype": str(dtype),
    }
    return tuple((k.variable, by_role[k.role]) for k in KNOBS[engine].knobs)


def shell_kv_bytes(engine: LedgerEngine, prefix: str, rate: int) -> str:
    """Shell arithmetic for the KV bytes the env file's kv knob funds (rate: whole bytes per token, rounded up)."""
    kv = f"{prefix}_{KNOBS[engine].variable('kv')}"
    return {"MiB": f"{kv} * 1048576", "bytes": kv}.get(KNOBS[engine].kv_unit, f"{kv} * {rate}")


def shell_tokens(engine: LedgerEngine, prefix: str, rate: int) -> str:
    """Shell arithmetic for the KV tokens the env file's kv knob holds."""
    kv = f"{prefix}_{KNOBS[engine].variable('kv')}"
    return f"{kv} / {rate}" if KNOBS[engine].kv_unit == "bytes" else kv


def shell_need(engine: LedgerEngine, prefix: str, window: int) -> str:
    """Shell arithmetic for the tokens the seats take at the window (llama.cpp: the window planned, since its
    env file sets no window of its own: each sequence's is ctx / seats)."""
    seats = f"{prefix}_{KNOBS[engine].variable('seats')}"
    name = KNOBS[engine].variable("window")
    return f"{seats} * {prefix}_{name}" if name else f"{seats} * {window}"
